//! Validation of one rule as it is saved, producing its compiled form. Every
//! problem is collected (not just the first) and names the field it concerns.

use std::sync::Arc;

use serde_json::Value;

use crate::bounded::Failures;
use crate::error::{Error, Problem};
use crate::limits::shape;
use crate::operator::{holds, Expected, Operator, RegexLimits};
use crate::path::{Anchor, FieldExpr, Resolver};
use crate::rule::{Rule, PRIORITY_RANGE};
use crate::violation::Facts;

/// The most conditions one rule may carry.
pub const MAX_CONDITIONS: usize = 50;
/// The longest rule name, in characters.
pub const MAX_NAME_LENGTH: usize = 200;
/// The most tags one rule may carry.
pub const MAX_TAGS: usize = 50;
/// The deepest an expected `value` may nest (same counting as attribute depth).
pub const MAX_VALUE_DEPTH: usize = 32;

/// A field, operator and expected value, parsed and compiled.
#[derive(Debug, Clone)]
pub(crate) struct Predicate {
    pub field: FieldExpr,
    /// Set when the rule set is built; the default walks from the root.
    pub anchor: Anchor,
    pub operator: Operator,
    pub expected: Expected,
    /// What its violations share (rule, field, expected value, the start of the
    /// message); set when the rule set is built.
    pub facts: Arc<Facts>,
}

impl Predicate {
    /// Whether the predicate holds for the document: for every resolved value, or
    /// by the operator's rule for a missing field. Allocates nothing.
    pub fn holds(&self, resolver: &mut Resolver<'_, '_>) -> bool {
        let mut present = false;
        let mut all = true;
        let _ = self.field.visit_anchored(resolver, self.anchor, &mut |v| {
            present = true;
            if holds(self.operator, &self.expected, v) {
                std::ops::ControlFlow::Continue(())
            } else {
                all = false;
                std::ops::ControlFlow::Break(())
            }
        });
        if present {
            all
        } else {
            self.operator.holds_when_missing()
        }
    }

    /// Like [`Predicate::holds`], leaving the failing values in `failures` (borrowed
    /// from the document, the first few and their count) instead of stopping at the
    /// first: one walk both checks the predicate and finds what to report.
    pub fn holds_collecting<'a>(
        &self,
        resolver: &mut Resolver<'_, 'a>,
        failures: &mut Failures<'a>,
    ) -> bool {
        failures.clear();
        let mut present = false;
        let _ = self.field.visit_anchored(resolver, self.anchor, &mut |v| {
            present = true;
            if !holds(self.operator, &self.expected, v) {
                failures.push(v);
            }
            std::ops::ControlFlow::Continue(())
        });
        if present {
            failures.is_empty()
        } else {
            self.operator.holds_when_missing()
        }
    }
}

/// A condition, compiled; `depends_on` still names a rule by key.
#[derive(Debug, Clone)]
pub(crate) struct CompiledCondition {
    pub predicate: Predicate,
    pub depends_on: Option<String>,
}

/// A rule with its predicates compiled.
#[derive(Debug, Clone)]
pub(crate) struct CompiledRule {
    pub rule: Rule,
    pub own: Predicate,
    pub conditions: Vec<CompiledCondition>,
}

fn compile_predicate(
    rule: &Rule,
    prefix: &str,
    field: &str,
    operator: Operator,
    value: &Value,
    regex: RegexLimits,
    problems: &mut Vec<Problem>,
) -> Option<Predicate> {
    let parsed_field = FieldExpr::parse(field)
        .map_err(|e| problems.push(Problem::new(format!("{prefix}field"), e.to_string())))
        .ok();
    if shape(value).depth > MAX_VALUE_DEPTH {
        problems.push(Problem::new(
            format!("{prefix}value"),
            format!("the value nests deeper than {MAX_VALUE_DEPTH} levels"),
        ));
        return None;
    }
    let expected = Expected::compile(operator, value, regex)
        .map_err(|message| problems.push(Problem::new(format!("{prefix}value"), message)))
        .ok();
    let (field_expr, expected) = (parsed_field?, expected?);
    let facts = Facts::new(
        rule.key(),
        &rule.name,
        rule.severity,
        field,
        operator,
        value,
    );
    Some(Predicate {
        field: field_expr,
        anchor: Anchor::default(),
        operator,
        expected,
        facts: Arc::new(facts),
    })
}

pub(crate) fn compile_rule(rule: Rule, regex: RegexLimits) -> Result<CompiledRule, Vec<Problem>> {
    let mut problems = Vec::new();
    let name_length = rule.name.chars().count();
    if rule.name.trim().is_empty() {
        problems.push(Problem::new("name", "the name is empty"));
    } else if name_length > MAX_NAME_LENGTH {
        problems.push(Problem::new(
            "name",
            format!(
                "the name is {name_length} characters long; at most {MAX_NAME_LENGTH} are allowed"
            ),
        ));
    }
    if !PRIORITY_RANGE.contains(&rule.priority) {
        problems.push(Problem::new(
            "priority",
            format!("priority `{}` is outside 0..=10000", rule.priority),
        ));
    }
    if rule.tags.len() > MAX_TAGS {
        problems.push(Problem::new(
            "tags",
            format!("at most {MAX_TAGS} tags are allowed"),
        ));
    }
    for (i, tag) in rule.tags.iter().enumerate() {
        if tag.trim().is_empty() {
            problems.push(Problem::new(format!("tags[{i}]"), "a tag is empty"));
        }
    }
    if rule.conditions.len() > MAX_CONDITIONS {
        problems.push(Problem::new(
            "conditions",
            format!("at most {MAX_CONDITIONS} conditions are allowed"),
        ));
    }
    let own = compile_predicate(
        &rule,
        "",
        &rule.field,
        rule.operator,
        &rule.value,
        regex,
        &mut problems,
    );
    let mut conditions = Vec::with_capacity(rule.conditions.len());
    for (i, condition) in rule.conditions.iter().enumerate().take(MAX_CONDITIONS) {
        let prefix = format!("conditions[{i}].");
        let predicate = compile_predicate(
            &rule,
            &prefix,
            &condition.field,
            condition.operator,
            &condition.value,
            regex,
            &mut problems,
        );
        if let Some(dep) = &condition.depends_on_rule {
            if dep.trim().is_empty() {
                problems.push(Problem::new(
                    format!("{prefix}dependsOnRule"),
                    "the rule id is empty",
                ));
            } else if dep == rule.key() || (!rule.id.is_empty() && dep == &rule.id) {
                problems.push(Problem::new(
                    format!("{prefix}dependsOnRule"),
                    "a rule cannot depend on itself",
                ));
            }
        }
        if let Some(predicate) = predicate {
            conditions.push(CompiledCondition {
                predicate,
                depends_on: condition.depends_on_rule.clone(),
            });
        }
    }
    match own {
        Some(own) if problems.is_empty() => Ok(CompiledRule {
            rule,
            own,
            conditions,
        }),
        _ => Err(problems),
    }
}

impl Rule {
    /// Validates the rule alone, as it is saved: names, paths, each operator's value,
    /// the regex caps, priority, conditions. References to other rules are checked
    /// when a [`RuleSet`](crate::RuleSet) is compiled.
    ///
    /// ```
    /// use compliance_core::{Rule, RegexLimits};
    /// let rule: Rule = serde_json::from_value(serde_json::json!({
    ///     "name": "semver", "target": "plugin", "severity": "error",
    ///     "field": "version", "operator": "regex", "value": "(",
    /// })).unwrap();
    /// let err = rule.validate(&RegexLimits::default()).unwrap_err();
    /// assert!(err.to_string().contains("value"));
    /// ```
    pub fn validate(&self, regex: &RegexLimits) -> Result<(), Error> {
        compile_rule(self.clone(), *regex)
            .map(|_| ())
            .map_err(|problems| Error::InvalidRules { problems })
    }
}
