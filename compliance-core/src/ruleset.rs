//! A compiled rule set: every rule parsed once, regexes compiled once, ordered by
//! priority (ties by name, then id) with each rule's dependencies first.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::error::{Error, Problem};
use crate::operator::{Expected, RegexLimits};
use crate::path::PrefixTable;
use crate::rule::{Rule, Target};
use crate::validate::{compile_rule, CompiledRule, Predicate};

/// What to do with `dependsOnRule` references that cannot be honoured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Dependencies {
    /// Every reference must name a rule of the set with the same target, and no
    /// cycle may exist: the check made when an organization saves its rules.
    #[default]
    Strict,
    /// For a merged effective set: a condition whose rule is absent, has another
    /// target, or lies on a cycle is skipped (SEMANTICS.md 1.4).
    Lenient,
}

/// How a rule set is compiled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompileOptions {
    /// Caps on regex patterns.
    pub regex: RegexLimits,
    /// How `dependsOnRule` references are treated.
    pub dependencies: Dependencies,
}

/// Where a condition's dependency points, once resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// No dependency: always counts.
    Always,
    /// Counts only if the rule at this index passed.
    OnPass(usize),
    /// The dependency cannot pass: the condition is always skipped.
    Never,
}

/// A compiled condition with its dependency resolved.
#[derive(Debug, Clone)]
pub(crate) struct Gated {
    pub predicate: Predicate,
    pub gate: Gate,
}

/// A rule ready to evaluate.
#[derive(Debug, Clone)]
pub(crate) struct ReadyRule {
    pub rule: Rule,
    /// The rule's key, as waivers name it.
    pub id: Box<str>,
    pub own: Predicate,
    pub conditions: Vec<Gated>,
}

/// Rules compiled for evaluation. Building one is the only place where rules are
/// parsed and regexes compiled; evaluation re-parses nothing.
///
/// ```
/// use compliance_core::{CompileOptions, Rule, RuleSet};
/// let rules: Vec<Rule> = serde_json::from_str(r#"[
///   {"name": "a", "target": "plugin", "severity": "error",
///    "field": "name", "operator": "exists", "priority": 5},
///   {"name": "b", "target": "plugin", "severity": "error",
///    "field": "name", "operator": "exists", "priority": 50}
/// ]"#).unwrap();
/// let set = RuleSet::compile(rules, &CompileOptions::default()).unwrap();
/// let order: Vec<&str> = set.rules(compliance_core::Target::Plugin).map(|r| r.name.as_str()).collect();
/// assert_eq!(order, ["b", "a"]);
/// ```
#[derive(Debug, Clone)]
pub struct RuleSet {
    pub(crate) rules: Vec<ReadyRule>,
    pub(crate) plugin_order: Vec<usize>,
    pub(crate) pipeline_order: Vec<usize>,
    /// Whether any condition depends on another rule, so passes must be recorded.
    pub(crate) has_dependencies: bool,
    /// The path prefixes of every predicate, memoized per evaluation.
    pub(crate) prefixes: PrefixTable,
}

impl RuleSet {
    /// Compiles rules; every problem of every rule is reported at once.
    pub fn compile(
        rules: impl IntoIterator<Item = Rule>,
        options: &CompileOptions,
    ) -> Result<RuleSet, Error> {
        let mut problems = Vec::new();
        let mut compiled: Vec<CompiledRule> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for rule in rules {
            let key = rule.key().to_owned();
            if index.contains_key(&key) {
                if options.dependencies == Dependencies::Strict {
                    problems.push(
                        Problem::new("id", "another rule of the set has the same id").in_rule(&key),
                    );
                }
                continue;
            }
            match compile_rule(rule, options.regex) {
                Ok(rule) => {
                    index.insert(key, compiled.len());
                    compiled.push(rule);
                }
                Err(found) => problems.extend(found.into_iter().map(|p| p.in_rule(&key))),
            }
        }

        let targets: Vec<Target> = compiled.iter().map(|r| r.rule.target).collect();
        let mut ready: Vec<ReadyRule> = Vec::with_capacity(compiled.len());
        for rule in compiled {
            let key = rule.rule.key().to_owned();
            let target = rule.rule.target;
            let mut conditions = Vec::with_capacity(rule.conditions.len());
            for (i, condition) in rule.conditions.into_iter().enumerate() {
                let gate = match &condition.depends_on {
                    None => Gate::Always,
                    Some(dep) => match index.get(dep) {
                        Some(&at) if targets.get(at) == Some(&target) => Gate::OnPass(at),
                        found => {
                            let message = match found {
                                Some(_) => format!("rule `{dep}` has another target"),
                                None => format!("no rule `{dep}` in the set"),
                            };
                            if options.dependencies == Dependencies::Strict {
                                problems.push(
                                    Problem::new(format!("conditions[{i}].dependsOnRule"), message)
                                        .in_rule(&key),
                                );
                            }
                            Gate::Never
                        }
                    },
                };
                conditions.push(Gated {
                    predicate: condition.predicate,
                    gate,
                });
            }
            ready.push(ReadyRule {
                id: rule.rule.key().into(),
                rule: rule.rule,
                own: rule.own,
                conditions,
            });
        }
        let plugin_order = order(
            &mut ready,
            Target::Plugin,
            options.dependencies,
            &mut problems,
        );
        let pipeline_order = order(
            &mut ready,
            Target::Pipeline,
            options.dependencies,
            &mut problems,
        );
        if !problems.is_empty() {
            return Err(Error::InvalidRules { problems });
        }
        let mut prefixes = PrefixTable::default();
        let mut patterns: HashMap<String, regex::Regex> = HashMap::new();
        for rule in &mut ready {
            let predicates = std::iter::once(&mut rule.own)
                .chain(rule.conditions.iter_mut().map(|c| &mut c.predicate));
            for predicate in predicates {
                predicate.anchor = prefixes.intern(predicate.field.path());
                // Identical patterns share one compiled regex and its caches.
                if let Expected::Pattern(re) = &mut predicate.expected {
                    let shared = patterns
                        .entry(re.as_str().to_owned())
                        .or_insert_with(|| re.clone());
                    *re = shared.clone();
                }
            }
        }
        let has_dependencies = ready.iter().any(|r| {
            r.conditions
                .iter()
                .any(|c| matches!(c.gate, Gate::OnPass(_)))
        });
        Ok(RuleSet {
            rules: ready,
            plugin_order,
            pipeline_order,
            has_dependencies,
            prefixes,
        })
    }

    /// The rules that apply to `target`, in evaluation order.
    pub fn rules(&self, target: Target) -> impl Iterator<Item = &Rule> {
        self.order(target)
            .iter()
            .filter_map(|&i| self.rules.get(i).map(|r| &r.rule))
    }

    /// How many rules the set holds, over both targets.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the set holds no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub(crate) fn order(&self, target: Target) -> &[usize] {
        match target {
            Target::Plugin => &self.plugin_order,
            Target::Pipeline => &self.pipeline_order,
        }
    }
}

/// Orders the rules of one target: highest priority first, ties by name then key,
/// each rule after the rules its conditions depend on (Kahn's algorithm with a
/// priority queue). Edges on a cycle are reported (strict) or their conditions
/// skipped (lenient).
fn order(
    rules: &mut [ReadyRule],
    target: Target,
    dependencies: Dependencies,
    problems: &mut Vec<Problem>,
) -> Vec<usize> {
    let mut members: Vec<usize> = (0..rules.len())
        .filter(|&i| rules.get(i).is_some_and(|r| r.rule.target == target))
        .collect();
    members.sort_by(|&a, &b| match (rules.get(a), rules.get(b)) {
        (Some(a), Some(b)) => b
            .rule
            .priority
            .cmp(&a.rule.priority)
            .then_with(|| a.rule.name.cmp(&b.rule.name))
            .then_with(|| a.rule.key().cmp(b.rule.key())),
        _ => std::cmp::Ordering::Equal,
    });
    let mut rank = vec![usize::MAX; rules.len()];
    for (r, &i) in members.iter().enumerate() {
        if let Some(slot) = rank.get_mut(i) {
            *slot = r;
        }
    }

    let attempt = kahn(rules, &members, &rank);
    if attempt.len() == members.len() {
        return attempt;
    }
    // Some rules lie on or behind a cycle. An edge `dependant -> dependency` lies on a
    // cycle exactly when the dependency can reach the dependant back.
    let placed: Vec<bool> = {
        let mut placed = vec![false; rules.len()];
        for &i in &attempt {
            if let Some(p) = placed.get_mut(i) {
                *p = true;
            }
        }
        placed
    };
    let mut cyclic_edges: Vec<(usize, usize)> = Vec::new();
    for &dependant in members
        .iter()
        .filter(|&&i| !placed.get(i).copied().unwrap_or(true))
    {
        let Some(rule) = rules.get(dependant) else {
            continue;
        };
        for (c, condition) in rule.conditions.iter().enumerate() {
            if let Gate::OnPass(dependency) = condition.gate {
                if reaches(rules, dependency, dependant) {
                    cyclic_edges.push((dependant, c));
                }
            }
        }
    }
    for (dependant, c) in cyclic_edges {
        let Some(rule) = rules.get_mut(dependant) else {
            continue;
        };
        let key = rule.rule.key().to_owned();
        if let Some(condition) = rule.conditions.get_mut(c) {
            condition.gate = Gate::Never;
        }
        if dependencies == Dependencies::Strict {
            problems.push(
                Problem::new(
                    format!("conditions[{c}].dependsOnRule"),
                    "this dependency closes a cycle of rules",
                )
                .in_rule(&key),
            );
        }
    }
    kahn(rules, &members, &rank)
}

fn kahn(rules: &[ReadyRule], members: &[usize], rank: &[usize]) -> Vec<usize> {
    let mut indegree: HashMap<usize, usize> = members.iter().map(|&i| (i, 0)).collect();
    let mut dependants: HashMap<usize, Vec<usize>> = HashMap::new();
    for &i in members {
        let Some(rule) = rules.get(i) else { continue };
        for condition in &rule.conditions {
            if let Gate::OnPass(dep) = condition.gate {
                if let Some(d) = indegree.get_mut(&i) {
                    *d += 1;
                }
                dependants.entry(dep).or_default().push(i);
            }
        }
    }
    let rank_of = |i: usize| rank.get(i).copied().unwrap_or(usize::MAX);
    let mut ready: BinaryHeap<Reverse<(usize, usize)>> = indegree
        .iter()
        .filter(|(_, &d)| d == 0)
        .map(|(&i, _)| Reverse((rank_of(i), i)))
        .collect();
    let mut out = Vec::with_capacity(members.len());
    while let Some(Reverse((_, i))) = ready.pop() {
        out.push(i);
        for &next in dependants.get(&i).map(Vec::as_slice).unwrap_or_default() {
            if let Some(d) = indegree.get_mut(&next) {
                *d = d.saturating_sub(1);
                if *d == 0 {
                    ready.push(Reverse((rank_of(next), next)));
                }
            }
        }
    }
    out
}

/// Whether `to` is reachable from `from` following dependency edges
/// (rule -> the rules its conditions depend on). Iterative.
fn reaches(rules: &[ReadyRule], from: usize, to: usize) -> bool {
    let mut seen = vec![false; rules.len()];
    let mut stack = vec![from];
    while let Some(i) = stack.pop() {
        if i == to {
            return true;
        }
        match seen.get_mut(i) {
            Some(s) if !*s => *s = true,
            _ => continue,
        }
        if let Some(rule) = rules.get(i) {
            stack.extend(rule.conditions.iter().filter_map(|c| match c.gate {
                Gate::OnPass(dep) => Some(dep),
                _ => None,
            }));
        }
    }
    false
}
