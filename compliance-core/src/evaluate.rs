//! Evaluating a compiled rule set against an attribute document.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::exemption::Waivers;
use crate::limits::Attributes;
use crate::operator::Operator;
use crate::path::Resolver;
use crate::rule::{ConditionMode, Severity, Target};
use crate::ruleset::{Gate, ReadyRule, RuleSet};
use crate::validate::Predicate;

/// The longest rendering of a value inside a violation message, in characters.
const MESSAGE_VALUE_CHARS: usize = 120;

/// One rule the entity did not satisfy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Violation {
    /// The rule's id (its name when it has none).
    pub rule_id: String,
    /// The rule's name.
    pub rule_name: String,
    /// The rule's severity.
    pub severity: Severity,
    /// The field of the predicate that failed.
    pub field: String,
    /// The operator of the predicate that failed.
    pub operator: Operator,
    /// The expected value of the predicate that failed.
    pub value: Value,
    /// The value that failed, or an array of them when the field resolved to
    /// several; absent when the field is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual: Option<Value>,
    /// One line for a human.
    pub message: String,
}

/// The outcome of evaluating one entity.
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
    /// assert_eq!(result.violations[0].actual, Some(json!("public")));
    /// ```
    pub fn evaluate(
        &self,
        target: Target,
        attributes: &Attributes<'_>,
        waivers: &Waivers,
    ) -> Evaluation {
        let mut resolver = Resolver::new(&self.prefixes, attributes.root());
        let order = self.order(target);
        // One allocation per evaluation, and only when some rule depends on another.
        let mut passed: Vec<bool> = if self.has_dependencies {
            vec![false; self.rules.len()]
        } else {
            Vec::new()
        };
        let mut result = Evaluation::pass();
        for &i in order {
            let Some(rule) = self.rules.get(i) else {
                continue;
            };
            result.rules_evaluated += 1;
            match check(rule, &mut resolver, &passed) {
                None => {
                    if let Some(slot) = passed.get_mut(i) {
                        *slot = true;
                    }
                }
                Some(failed) => {
                    let violation = violation(rule, failed, resolver.root());
                    if waivers.waives(&violation.rule_id) {
                        result.exempted.push(violation);
                    } else {
                        result.blocked |= violation.severity.blocks();
                        result.violations.push(violation);
                    }
                }
            }
        }
        result
    }
}

/// `None` when the rule passes; otherwise the predicate to report.
fn check<'r>(
    rule: &'r ReadyRule,
    resolver: &mut Resolver<'_, '_>,
    passed: &[bool],
) -> Option<&'r Predicate> {
    let counted = rule.conditions.iter().filter(|c| match c.gate {
        Gate::Always => true,
        Gate::OnPass(dep) => passed.get(dep).copied().unwrap_or(false),
        Gate::Never => false,
    });
    match rule.rule.condition_mode {
        ConditionMode::All => {
            if !rule.own.holds(resolver) {
                return Some(&rule.own);
            }
            for condition in counted {
                if !condition.predicate.holds(resolver) {
                    return Some(&condition.predicate);
                }
            }
            None
        }
        ConditionMode::Any => {
            if rule.own.holds(resolver) {
                return None;
            }
            for condition in counted {
                if condition.predicate.holds(resolver) {
                    return None;
                }
            }
            Some(&rule.own)
        }
    }
}

fn violation(rule: &ReadyRule, failed: &Predicate, root: &Value) -> Violation {
    let mut failing = failed.failing_values(root);
    let actual = match failing.len() {
        0 => None,
        1 => failing.pop(),
        _ => Some(Value::Array(failing)),
    };
    let message = message(&rule.rule.name, failed, actual.as_ref());
    Violation {
        rule_id: rule.rule.key().to_owned(),
        rule_name: rule.rule.name.clone(),
        severity: rule.rule.severity,
        field: failed.field_text.clone(),
        operator: failed.operator,
        value: failed.value.clone(),
        actual,
        message,
    }
}

fn message(rule_name: &str, failed: &Predicate, actual: Option<&Value>) -> String {
    let expectation = match failed.operator {
        op if op.ignores_value() => op.phrase().to_owned(),
        Operator::CountGt | Operator::CountLt => {
            format!("{} {}", failed.operator.phrase(), short(&failed.value))
        }
        Operator::LengthGt | Operator::LengthLt => format!(
            "{} {} characters",
            failed.operator.phrase(),
            short(&failed.value)
        ),
        op => format!("{} {}", op.phrase(), short(&failed.value)),
    };
    let observed = match actual {
        Some(value) => format!("found {}", short(value)),
        None => "the field is missing".to_owned(),
    };
    format!(
        "{rule_name}: `{}` {expectation}; {observed}",
        failed.field_text
    )
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= MESSAGE_VALUE_CHARS {
        text
    } else {
        let cut: String = text.chars().take(MESSAGE_VALUE_CHARS).collect();
        format!("{cut}…")
    }
}
