//! The rule model of document 1, in the API's camelCase JSON form.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::operator::Operator;

/// The lowest and highest priority a rule may have; higher runs first.
pub const PRIORITY_RANGE: std::ops::RangeInclusive<i64> = 0..=10_000;

/// The kind of entity a rule applies to.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// A plugin (an uploaded, versioned build unit).
    Plugin,
    /// A pipeline.
    Pipeline,
}

impl Target {
    /// The wire name: `plugin` or `pipeline`.
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Plugin => "plugin",
            Target::Pipeline => "pipeline",
        }
    }
}

impl std::str::FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "plugin" => Ok(Target::Plugin),
            "pipeline" => Ok(Target::Pipeline),
            other => Err(format!(
                "unknown target `{other}`: expected plugin or pipeline"
            )),
        }
    }
}

/// How bad a violation is. `warning` never blocks; `error` and `critical` block.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Reported, never blocks.
    Warning,
    /// Blocks.
    Error,
    /// Blocks.
    Critical,
}

impl Severity {
    /// The wire name: `warning`, `error` or `critical`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
            Severity::Critical => "critical",
        }
    }

    /// Whether a violation of this severity blocks the operation.
    pub fn blocks(self) -> bool {
        !matches!(self, Severity::Warning)
    }

    /// The result and severity a Kubernetes `PolicyReport` (wgpolicyk8s.io
    /// v1alpha2) gives a violation of this severity: a blocking one fails (`high`), a
    /// warning warns (`medium`). The CRD's severity enum is `high`, `medium`, `low`
    /// (later copies add `critical` and `info`, which the first refuses), so
    /// `critical` reports as `high`; the report keeps the rule's own severity in the
    /// result's properties.
    ///
    /// ```
    /// use compliance_core::Severity;
    /// assert_eq!(Severity::Critical.policy_report(), ("fail", "high"));
    /// assert_eq!(Severity::Warning.policy_report(), ("warn", "medium"));
    /// ```
    pub fn policy_report(self) -> (&'static str, &'static str) {
        match self {
            Severity::Warning => ("warn", "medium"),
            Severity::Error | Severity::Critical => ("fail", "high"),
        }
    }
}

impl std::str::FromStr for Severity {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "warning" => Ok(Severity::Warning),
            "error" => Ok(Severity::Error),
            "critical" => Ok(Severity::Critical),
            other => Err(format!(
                "unknown severity `{other}`: expected warning, error or critical"
            )),
        }
    }
}

/// Who sees a rule: the owning organization only, or the published catalog.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Private to the owning organization (the default).
    #[default]
    Org,
    /// In the catalog for subscription; only the system organization creates these.
    Published,
}

/// Whether all predicates of a rule must hold, or at least one.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConditionMode {
    /// Every predicate must hold (the default).
    #[default]
    All,
    /// At least one predicate must hold; expresses implications.
    Any,
}

/// One extra predicate of a multi-field rule.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The attribute to check: a dot path or a computed field.
    pub field: String,
    /// The operator.
    pub operator: Operator,
    /// The expected value.
    #[serde(default)]
    pub value: Value,
    /// The id of another rule of the same effective set; when present, this condition
    /// counts only if that rule passed for the entity, and is skipped otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_on_rule: Option<String>,
}

/// A compliance rule as the API stores and returns it.
///
/// `id` may be left empty when rules come from a file: the rule's name then serves
/// as its id. `priority` is kept as a wide integer so that an out-of-range value is
/// reported as a problem of the `priority` field rather than as a parse failure.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// The rule's identifier.
    #[serde(default)]
    pub id: String,
    /// Unique within the organization.
    #[cfg_attr(feature = "schema", schema(max_length = 200))]
    pub name: String,
    /// The kind of entity the rule applies to.
    pub target: Target,
    /// How bad a violation is.
    pub severity: Severity,
    /// The attribute to check: a dot path or a computed field.
    pub field: String,
    /// One of the 18 operators.
    pub operator: Operator,
    /// The expected value; its type depends on the operator.
    #[serde(default)]
    pub value: Value,
    /// 0 to 10000; higher runs first. Defaults to 0.
    #[serde(default)]
    pub priority: i64,
    /// `org` (the default) or `published`.
    #[serde(default)]
    pub scope: Scope,
    /// Categorization labels.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schema(max_items = 50))]
    pub tags: Vec<String>,
    /// Further predicates.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schema(max_items = 50))]
    pub conditions: Vec<Condition>,
    /// How the rule's predicates combine.
    #[serde(default)]
    pub condition_mode: ConditionMode,
    /// True on shared template rules of the system organization.
    #[serde(default)]
    pub is_template: bool,
    /// When true on a parent organization's rule, its teams inherit and enforce it.
    #[serde(default)]
    pub propagate_to_children: bool,
    /// The rule's version; every change bumps it.
    #[serde(default = "first_version")]
    pub version: u32,
}

fn first_version() -> u32 {
    1
}

impl Rule {
    /// The identifier a rule set knows this rule by: its id, or its name when the id is empty.
    pub fn key(&self) -> &str {
        if self.id.is_empty() {
            &self.name
        } else {
            &self.id
        }
    }
}
