//! Per-organization compliance rules over the attributes of plugins and pipelines.
//!
//! Rules are parsed and validated as they are saved ([`Rule::validate`]), compiled
//! once into a [`RuleSet`] (paths parsed, regexes compiled, order fixed), and
//! evaluated against an attribute document that passed the limits
//! ([`Attributes::new`]). Evaluation is pure and allocates nothing for a passing
//! rule. Operator semantics follow `SEMANTICS.md` section 1.
//!
//! This crate does no I/O: no files, no network, no clock, no environment. Time
//! (for exemptions and cron) and configuration (limits) come in as arguments.
//!
//! ```
//! use compliance_core::{AttributeLimits, Attributes, CompileOptions, Rule, RuleSet, Target, Waivers};
//! use serde_json::json;
//!
//! let rules: Vec<Rule> = serde_json::from_value(json!([
//!   {"id": "semver", "name": "Plugin version is semver", "target": "plugin",
//!    "severity": "error", "field": "version", "operator": "regex",
//!    "value": "^\\d+\\.\\d+\\.\\d+$", "priority": 100},
//!   {"id": "dockerfile", "name": "Dockerfile present", "target": "plugin",
//!    "severity": "warning", "field": "dockerfile", "operator": "exists"}
//! ])).unwrap();
//! let set = RuleSet::compile(rules, &CompileOptions::default()).unwrap();
//!
//! let doc = json!({"name": "eslint", "version": "latest"});
//! let attrs = Attributes::new(&doc, &AttributeLimits::default()).unwrap();
//! let result = set.evaluate(Target::Plugin, &attrs, &Waivers::none());
//! assert!(result.blocked);
//! assert_eq!(result.violations.len(), 2);
//! assert_eq!(result.violations[0].rule_id(), "semver");
//! ```

mod bounded;
mod cron;
mod effective;
mod error;
mod evaluate;
mod exemption;
mod judge;
mod limits;
mod operator;
mod path;
mod rule;
mod ruleset;
mod validate;
mod violation;

pub use bounded::{
    Cut, MAX_ACTUAL_CHARS, MAX_ACTUAL_ITEMS, MAX_ACTUAL_NODES, MAX_MESSAGE_VALUE_BYTES,
};
pub use cron::{CronError, CronField, CronSchedule};
pub use effective::{effective_rules, OrganizationKind, RuleSources, Subscription};
pub use error::{Error, Problem};
pub use evaluate::{Evaluation, Verdict};
pub use exemption::{Exemption, ExemptionAction, ExemptionRefusal, ExemptionStatus, Waivers};
pub use judge::{judge, Compliance, Outcome};
pub use limits::{
    json_text_depth, shape, AttributeLimits, Attributes, DocumentShape, LimitExceeded, LimitKind,
    DEFAULT_MAX_DEPTH, DEFAULT_MAX_KEYS,
};
pub use operator::{
    json_eq, Operator, RegexLimits, DEFAULT_MAX_REGEX_LENGTH, DEFAULT_REGEX_SIZE_LIMIT,
};
pub use path::{
    Computed, FieldExpr, FieldPath, PathError, Resolved, MAX_FIELD_LENGTH, MAX_PATH_SEGMENTS,
};
pub use rule::{Condition, ConditionMode, Rule, Scope, Severity, Target, PRIORITY_RANGE};
pub use ruleset::{CompileOptions, Dependencies, RuleSet};
pub use validate::{MAX_CONDITIONS, MAX_NAME_LENGTH, MAX_TAGS, MAX_VALUE_DEPTH};
pub use violation::{StoredViolations, Violation};
