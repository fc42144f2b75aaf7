//! The Kubernetes `PolicyReport` (wgpolicyk8s.io/v1alpha2) as types: the format
//! report tooling made for Kyverno and its peers reads, with the schema
//! `/openapi.json` documents (fields as the CRD names them).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// A `PolicyReport` of one namespace (here: one organization and one target).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyReport {
    /// `wgpolicyk8s.io/v1alpha2`.
    pub api_version: ReportApiVersion,
    /// `PolicyReport`.
    pub kind: ReportKind,
    /// Its name, namespace, creation and annotations.
    pub metadata: ReportMetadata,
    /// Results by outcome, over every entity.
    pub summary: ReportSummary,
    /// The results of a page of entities.
    pub results: Vec<ReportResult>,
}

/// The one `apiVersion` this server writes.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, utoipa::ToSchema)]
pub enum ReportApiVersion {
    /// wgpolicyk8s.io/v1alpha2.
    #[serde(rename = "wgpolicyk8s.io/v1alpha2")]
    V1alpha2,
}

/// The one `kind` this server writes.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, utoipa::ToSchema)]
pub enum ReportKind {
    /// The namespaced report.
    PolicyReport,
}

/// A report's metadata.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReportMetadata {
    /// `compliance-<orgId>-<target>`.
    pub name: String,
    /// The organization.
    pub namespace: String,
    /// When the report was made.
    pub creation_timestamp: DateTime<Utc>,
    /// The page (annotations are strings).
    pub annotations: BTreeMap<String, String>,
}

/// How many results stand at each outcome.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReportSummary {
    /// Passed.
    pub pass: u64,
    /// Failed (blocking severities).
    pub fail: u64,
    /// Warnings.
    pub warn: u64,
    /// Could not be judged.
    pub error: u64,
    /// Skipped.
    pub skip: u64,
}

/// One policy result for some resources.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReportResult {
    /// `compliance`.
    pub source: Cow<'static, str>,
    /// `compliance-<target>`.
    pub policy: String,
    /// The rule's name (`all` for an entity's overall pass or error).
    pub rule: String,
    /// `pass`, `fail`, `warn`, `error` or `skip`.
    pub result: ReportOutcome,
    /// `high`, `medium` or `low`, for a rule's result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub severity: Option<ReportSeverity>,
    /// What happened.
    pub message: String,
    /// Counted in the summary.
    pub scored: bool,
    /// The rule's id, the field and the rule's own severity, for a rule's result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub properties: Option<BTreeMap<String, String>>,
    /// The entity.
    pub resources: Vec<ReportResource>,
    /// When.
    pub timestamp: ReportTimestamp,
}

/// A result's outcome, in the CRD's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReportOutcome {
    /// Passed.
    Pass,
    /// Failed.
    Fail,
    /// A warning.
    Warn,
    /// Could not be judged.
    Error,
    /// Skipped.
    Skip,
}

/// A result's severity, in the CRD's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReportSeverity {
    /// Blocking.
    High,
    /// A warning.
    Medium,
    /// Informational.
    Low,
}

/// The resource a result is about.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReportResource {
    /// `compliance/v1`.
    pub api_version: Cow<'static, str>,
    /// `Plugin` or `Pipeline`.
    pub kind: Cow<'static, str>,
    /// The entity's name.
    pub name: String,
    /// The entity's id.
    pub uid: String,
}

/// A protobuf-style timestamp, as the CRD has it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReportTimestamp {
    /// Seconds since the epoch.
    pub seconds: i64,
    /// Always 0.
    pub nanos: i32,
}

impl ReportOutcome {
    /// The outcome and severity of a violation of a rule of `severity`, as
    /// compliance-core's [`Severity::policy_report`] decides them.
    ///
    /// [`Severity::policy_report`]: compliance_core::Severity::policy_report
    pub fn of(severity: compliance_core::Severity) -> (ReportOutcome, ReportSeverity) {
        let (outcome, level) = severity.policy_report();
        let outcome = match outcome {
            "fail" => ReportOutcome::Fail,
            _ => ReportOutcome::Warn,
        };
        let level = match level {
            "high" => ReportSeverity::High,
            "low" => ReportSeverity::Low,
            _ => ReportSeverity::Medium,
        };
        (outcome, level)
    }
}
