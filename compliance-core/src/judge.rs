//! Judging one entity: the one function every caller uses (the inventory's door,
//! validation, scans, the re-evaluation queue, the catalog's previews, the CLI).
//!
//! [`judge`] checks the document against the attribute limits (every document, with
//! rules or without), evaluates the effective rules, and applies the entity's waivers
//! (its approved exemptions at the instant). The [`Outcome`] of the result is the
//! decision at the door (pass, warn, block), and [`Compliance`] the form kept with an
//! entity.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{AttributeLimits, Attributes, Error, Evaluation, RuleSet, Target, Violation, Waivers};

/// What a judgement decides for an entity.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// No violation is left.
    Pass,
    /// Violations are left, none of them blocking.
    Warn,
    /// A violation of severity error or critical is left: the entity is refused.
    Block,
}

impl Outcome {
    /// Every outcome, in the order of their gravity.
    pub const ALL: [Outcome; 3] = [Outcome::Pass, Outcome::Warn, Outcome::Block];

    /// The outcome of an evaluation.
    pub fn of(evaluation: &Evaluation) -> Outcome {
        if evaluation.blocked {
            Outcome::Block
        } else if evaluation.violations.is_empty() {
            Outcome::Pass
        } else {
            Outcome::Warn
        }
    }

    /// The wire name: `pass`, `warn` or `block`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Warn => "warn",
            Outcome::Block => "block",
        }
    }
}

impl std::str::FromStr for Outcome {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Outcome::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| format!("`{s}` is not pass, warn or block"))
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An entity's compliance as it is kept with the entity: `{result, violations}`.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compliance {
    /// The outcome.
    pub result: Outcome,
    /// The violations not waived, in evaluation order.
    pub violations: Vec<Violation>,
}

impl Evaluation {
    /// The outcome of this evaluation.
    pub fn outcome(&self) -> Outcome {
        Outcome::of(self)
    }

    /// The form kept with the entity.
    pub fn compliance(&self) -> Compliance {
        Compliance {
            result: self.outcome(),
            violations: self.violations.clone(),
        }
    }
}

/// Judges one document of `target`: the attribute limits first (they hold for every
/// document, judged by rules or not), then `rules` (none for an entity no rule applies
/// to, such as one of the system organization's own), with `waivers` applied.
///
/// A document that is not an object, or is over a limit, is an [`Error`]
/// (`AttributesNotObject`, `AttributeLimitExceeded`); nothing is evaluated then.
pub fn judge(
    rules: Option<&RuleSet>,
    target: Target,
    document: &Value,
    limits: &AttributeLimits,
    waivers: &Waivers,
) -> Result<Evaluation, Error> {
    let attributes = Attributes::new(document, limits)?;
    Ok(match rules {
        None => Evaluation::pass(),
        Some(set) => set.evaluate(target, &attributes, waivers),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CompileOptions, Rule};
    use serde_json::json;

    fn set() -> RuleSet {
        let rules: Vec<Rule> = serde_json::from_value(json!([
            {"id": "r1", "name": "no latest", "target": "pipeline", "severity": "error",
             "field": "version", "operator": "neq", "value": "latest"},
            {"id": "r2", "name": "described", "target": "pipeline", "severity": "warning",
             "field": "description", "operator": "exists"},
        ]))
        .unwrap();
        RuleSet::compile(rules, &CompileOptions::default()).unwrap()
    }

    #[test]
    fn the_outcome_is_block_warn_or_pass() {
        let set = set();
        let limits = AttributeLimits::default();
        let none = Waivers::none();
        let judged = |doc: Value, waivers: &Waivers| {
            judge(Some(&set), Target::Pipeline, &doc, &limits, waivers).unwrap()
        };
        let blocked = judged(json!({"version": "latest"}), &none);
        assert_eq!(blocked.outcome(), Outcome::Block);
        assert_eq!(blocked.violations.len(), 2);
        let warned = judged(json!({"version": "1"}), &none);
        assert_eq!(warned.outcome(), Outcome::Warn);
        let passed = judged(json!({"version": "1", "description": "d"}), &none);
        assert_eq!(passed.outcome(), Outcome::Pass);
        // A waiver moves the blocking violation to the exempted ones.
        let waived = judged(json!({"version": "latest"}), &Waivers::for_rules(["r1"]));
        assert_eq!(waived.outcome(), Outcome::Warn);
        assert_eq!(waived.exempted.len(), 1);
        let kept = waived.compliance();
        let text = serde_json::to_value(&kept).unwrap();
        assert_eq!(text["result"], "warn");
        assert_eq!(text["violations"][0]["ruleId"], "r2");
        assert_eq!(serde_json::from_value::<Compliance>(text).unwrap(), kept);
    }

    #[test]
    fn limits_hold_with_rules_or_without() {
        let limits = AttributeLimits {
            max_depth: 2,
            max_keys: 10,
        };
        let deep = json!({"a": {"b": {"c": 1}}});
        let none = Waivers::none();
        assert!(judge(None, Target::Plugin, &deep, &limits, &none).is_err());
        assert!(judge(Some(&set()), Target::Pipeline, &deep, &limits, &none).is_err());
        assert!(judge(None, Target::Plugin, &json!([1]), &limits, &none).is_err());
        let fine = judge(None, Target::Plugin, &json!({"a": 1}), &limits, &none).unwrap();
        assert_eq!(fine.outcome(), Outcome::Pass);
        assert_eq!(fine.rules_evaluated, 0);
    }
}
