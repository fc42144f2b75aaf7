//! Evaluating a compiled rule set against an attribute document.

use serde::{Deserialize, Serialize};

use crate::bounded::Failures;
use crate::exemption::Waivers;
use crate::limits::Attributes;
use crate::path::Resolver;
use crate::rule::{ConditionMode, Target};
use crate::ruleset::{Gate, ReadyRule, RuleSet};
use crate::validate::Predicate;
use crate::violation::Violation;

/// Room made for violations when the first one is found.
const FIRST_CAPACITY: usize = 16;

/// How many copied failing values one evaluation remembers for sharing.
const MAX_SHARED_COPIES: usize = 32;

/// The failing values one evaluation has copied into its violations, remembered (by
/// where the copy went) so that values failing several rules are copied once.
#[derive(Default)]
struct Copies<'a> {
    /// The values, whether their violation went to `exempted`, and its index there.
    made: Vec<(Failures<'a>, bool, usize)>,
}

impl<'a> Copies<'a> {
    /// The violation of `failed` over `failures`, about to be pushed to `result`'s
    /// `exempted` (when `waived`) or `violations`: inline values as they are, values
    /// already copied in this evaluation shared, others copied once.
    fn violation(
        &mut self,
        failed: &Predicate,
        failures: &Failures<'a>,
        waived: bool,
        result: &Evaluation,
    ) -> Violation {
        if let Some(actual) = failures.inline() {
            return Violation::new(&failed.facts, actual, Vec::new());
        }
        let earlier = self
            .made
            .iter()
            .find(|(values, ..)| values.same_as(failures))
            .and_then(|&(_, exempted, at)| match exempted {
                true => result.exempted.get(at),
                false => result.violations.get(at),
            });
        if let Some(earlier) = earlier {
            return Violation::sharing(&failed.facts, earlier);
        }
        if self.made.len() < MAX_SHARED_COPIES {
            if self.made.capacity() == 0 {
                self.made.reserve(MAX_SHARED_COPIES / 4);
            }
            let at = match waived {
                true => result.exempted.len(),
                false => result.violations.len(),
            };
            self.made.push((*failures, waived, at));
        }
        let mut truncated = Vec::new();
        let actual = failures.copy(&mut truncated);
        Violation::new(&failed.facts, actual, truncated)
    }
}

/// The outcome of evaluating one entity.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Evaluation {
    /// True when a violation that is not waived has severity error or critical.
    pub blocked: bool,
    /// Violations not waived, in evaluation order.
    pub violations: Vec<Violation>,
    /// Violations waived by an approved, unexpired exemption; they never block.
    pub exempted: Vec<Violation>,
    /// How many rules applied to the entity and were evaluated.
    pub rules_evaluated: usize,
}

impl Evaluation {
    /// The result for an entity that no rule applies to, such as one of the system
    /// organization's own.
    pub fn pass() -> Self {
        Evaluation {
            blocked: false,
            violations: Vec::new(),
            exempted: Vec::new(),
            rules_evaluated: 0,
        }
    }

    /// Applies waivers after the fact: the violations they waive move to `exempted`
    /// (in order) and `blocked` is decided again. The same result as evaluating with
    /// those waivers, for a caller that learns them only after evaluating (for example
    /// when the entity id and the rules come from different places).
    ///
    /// ```
    /// use compliance_core::*;
    /// use serde_json::json;
    /// let rules: Vec<Rule> = serde_json::from_value(json!([{"id": "pin", "name": "pinned",
    ///     "target": "plugin", "severity": "error", "field": "version", "operator": "neq",
    ///     "value": "latest"}])).unwrap();
    /// let set = RuleSet::compile(rules, &CompileOptions::default()).unwrap();
    /// let doc = json!({"version": "latest"});
    /// let attrs = Attributes::new(&doc, &AttributeLimits::default()).unwrap();
    /// let mut later = set.evaluate(Target::Plugin, &attrs, &Waivers::none());
    /// later.waive(&Waivers::for_rules(["pin"]));
    /// assert_eq!(later, set.evaluate(Target::Plugin, &attrs, &Waivers::for_rules(["pin"])));
    /// ```
    pub fn waive(&mut self, waivers: &Waivers) {
        if waivers.is_empty() {
            return;
        }
        let (waived, kept): (Vec<Violation>, Vec<Violation>) = std::mem::take(&mut self.violations)
            .into_iter()
            .partition(|v| waivers.waives(v.rule_id()));
        self.violations = kept;
        self.exempted.extend(waived);
        self.blocked = self.violations.iter().any(|v| v.severity().blocks());
    }

    /// Empties the result, keeping the memory of its lists for the next evaluation.
    pub fn clear(&mut self) {
        self.blocked = false;
        self.violations.clear();
        self.exempted.clear();
        self.rules_evaluated = 0;
    }
}

/// The verdict alone: what [`RuleSet::verdict`] answers without building violations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// True when a rule that is not waived, of severity error or critical, failed.
    pub blocked: bool,
    /// How many rules failed and were not waived.
    pub violations: usize,
    /// How many rules failed and were waived.
    pub exempted: usize,
    /// How many rules applied to the entity and were evaluated.
    pub rules_evaluated: usize,
}

impl RuleSet {
    /// Evaluates every rule of `target` against the document, highest priority first.
    ///
    /// A passing document costs no allocation per rule: paths are walked in place,
    /// each shared path prefix is looked up once per evaluation (one scratch
    /// allocation for the whole evaluation), regexes were compiled when the set was
    /// built, and only a failed rule builds its violation.
    ///
    /// ```
    /// use compliance_core::*;
    /// use serde_json::json;
    ///
    /// let rules: Vec<Rule> = serde_json::from_value(json!([{
    ///     "name": "No public plugins", "target": "plugin", "severity": "error",
    ///     "field": "accessModifier", "operator": "neq", "value": "public"
    /// }])).unwrap();
    /// let set = RuleSet::compile(rules, &CompileOptions::default()).unwrap();
    /// let doc = json!({"name": "eslint", "accessModifier": "public"});
    /// let attrs = Attributes::new(&doc, &AttributeLimits::default()).unwrap();
    /// let result = set.evaluate(Target::Plugin, &attrs, &Waivers::none());
    /// assert!(result.blocked);
    /// assert_eq!(result.violations[0].actual(), Some(json!("public")));
    /// ```
    pub fn evaluate(
        &self,
        target: Target,
        attributes: &Attributes<'_>,
        waivers: &Waivers,
    ) -> Evaluation {
        let mut result = Evaluation::pass();
        self.evaluate_into(target, attributes, waivers, &mut result);
        result
    }

    /// Like [`RuleSet::evaluate`], into a result whose memory is reused: a service
    /// that evaluates many documents keeps one [`Evaluation`] and clears nothing
    /// itself (this does).
    ///
    /// ```
    /// use compliance_core::*;
    /// use serde_json::json;
    ///
    /// let rules: Vec<Rule> = serde_json::from_value(json!([{
    ///     "name": "Versions are pinned", "target": "plugin", "severity": "error",
    ///     "field": "version", "operator": "neq", "value": "latest"
    /// }])).unwrap();
    /// let set = RuleSet::compile(rules, &CompileOptions::default()).unwrap();
    /// let mut result = Evaluation::pass();
    /// for version in ["1.0.0", "latest", "2.0.0"] {
    ///     let doc = json!({"name": "eslint", "version": version});
    ///     let attrs = Attributes::new(&doc, &AttributeLimits::default()).unwrap();
    ///     set.evaluate_into(Target::Plugin, &attrs, &Waivers::none(), &mut result);
    ///     assert_eq!(result.blocked, version == "latest");
    /// }
    /// ```
    pub fn evaluate_into(
        &self,
        target: Target,
        attributes: &Attributes<'_>,
        waivers: &Waivers,
        result: &mut Evaluation,
    ) {
        result.clear();
        let mut failures = Failures::new();
        let mut copies = Copies::default();
        self.run(
            target,
            attributes,
            Some(&mut failures),
            |rule, failed, failures| {
                result.rules_evaluated += 1;
                let Some((failed, failures)) = failed.zip(failures) else {
                    return;
                };
                let waived = waivers.waives(&rule.id);
                let violation = copies.violation(failed, failures, waived, result);
                let list = if waived {
                    &mut result.exempted
                } else {
                    result.blocked |= violation.severity().blocks();
                    &mut result.violations
                };
                // One allocation for the first violations, rather than growing from 4.
                if list.capacity() == 0 {
                    list.reserve(FIRST_CAPACITY);
                }
                list.push(violation);
            },
        );
    }

    /// Whether the document is blocked, and how many rules failed, without building
    /// a single violation: for a caller that needs the verdict only (a gate, a
    /// pre-check). Same rules, same order, same answer as [`RuleSet::evaluate`].
    ///
    /// ```
    /// use compliance_core::*;
    /// use serde_json::json;
    ///
    /// let rules: Vec<Rule> = serde_json::from_value(json!([{
    ///     "name": "No public plugins", "target": "plugin", "severity": "warning",
    ///     "field": "accessModifier", "operator": "neq", "value": "public"
    /// }])).unwrap();
    /// let set = RuleSet::compile(rules, &CompileOptions::default()).unwrap();
    /// let doc = json!({"accessModifier": "public"});
    /// let attrs = Attributes::new(&doc, &AttributeLimits::default()).unwrap();
    /// let verdict = set.verdict(Target::Plugin, &attrs, &Waivers::none());
    /// assert!(!verdict.blocked); // a warning never blocks
    /// assert_eq!(verdict.violations, 1);
    /// ```
    pub fn verdict(
        &self,
        target: Target,
        attributes: &Attributes<'_>,
        waivers: &Waivers,
    ) -> Verdict {
        let mut verdict = Verdict {
            blocked: false,
            violations: 0,
            exempted: 0,
            rules_evaluated: 0,
        };
        self.run(target, attributes, None, |rule, failed, _| {
            verdict.rules_evaluated += 1;
            if failed.is_none() {
                return;
            }
            if waivers.waives(&rule.id) {
                verdict.exempted += 1;
            } else {
                verdict.blocked |= rule.rule.severity.blocks();
                verdict.violations += 1;
            }
        });
        verdict
    }

    /// Runs every rule of `target` in order and tells `outcome` how each went: the
    /// predicate that failed (with its failing values when `failures` is given), or
    /// `None` when the rule passed.
    fn run<'a>(
        &self,
        target: Target,
        attributes: &Attributes<'a>,
        mut failures: Option<&mut Failures<'a>>,
        mut outcome: impl FnMut(&ReadyRule, Option<&Predicate>, Option<&Failures<'a>>),
    ) {
        let mut resolver = Resolver::new(&self.prefixes, attributes.root());
        // One allocation per evaluation, and only when some rule depends on another.
        let mut passed: Vec<bool> = if self.has_dependencies {
            vec![false; self.rules.len()]
        } else {
            Vec::new()
        };
        for &i in self.order(target) {
            let Some(rule) = self.rules.get(i) else {
                continue;
            };
            let failed = check(rule, &mut resolver, &passed, failures.as_deref_mut());
            if failed.is_none() {
                if let Some(slot) = passed.get_mut(i) {
                    *slot = true;
                }
            }
            outcome(rule, failed, failures.as_deref());
        }
    }
}

/// `None` when the rule passes; otherwise the predicate to report. With `failures`,
/// the failing values of that predicate are left there, found by the same walk that
/// checked it (never resolved a second time).
fn check<'r, 'a>(
    rule: &'r ReadyRule,
    resolver: &mut Resolver<'_, 'a>,
    passed: &[bool],
    mut failures: Option<&mut Failures<'a>>,
) -> Option<&'r Predicate> {
    let counted = rule.conditions.iter().filter(|c| match c.gate {
        Gate::Always => true,
        Gate::OnPass(dep) => passed.get(dep).copied().unwrap_or(false),
        Gate::Never => false,
    });
    let mut holds = |predicate: &Predicate, collect: bool| match failures.as_deref_mut() {
        Some(failures) if collect => predicate.holds_collecting(resolver, failures),
        _ => predicate.holds(resolver),
    };
    match rule.rule.condition_mode {
        ConditionMode::All => {
            if !holds(&rule.own, true) {
                return Some(&rule.own);
            }
            for condition in counted {
                if !holds(&condition.predicate, true) {
                    return Some(&condition.predicate);
                }
            }
            None
        }
        ConditionMode::Any => {
            // The own predicate is the one reported: its failures are kept while the
            // conditions are tried without collecting.
            if holds(&rule.own, true) {
                return None;
            }
            for condition in counted {
                if holds(&condition.predicate, false) {
                    return None;
                }
            }
            Some(&rule.own)
        }
    }
}
