//! What was wrong with a model's answer: the next attempt is told, and the final
//! error carries the last attempt's problems.

use serde::{Deserialize, Serialize};

/// The kind of a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum ProblemKind {
    /// The answer holds no readable JSON document (none, invalid, or cut off).
    Json,
    /// The document is not a valid body: the API's validation refuses a value.
    Validation,
    /// The organization's compliance rules block the body.
    Compliance,
}

/// One problem of an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// Its kind.
    pub kind: ProblemKind,
    /// What is wrong, in words.
    pub message: String,
    /// Where: the body's field (`props.stages[0].stageName`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The compliance rule that blocks, for a compliance problem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
    /// The rule's severity, for a compliance problem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
}

impl Problem {
    /// A problem of reading the JSON.
    pub fn json(message: impl Into<String>) -> Problem {
        Problem {
            kind: ProblemKind::Json,
            message: message.into(),
            field: None,
            rule_id: None,
            severity: None,
        }
    }

    /// A value the validation refuses, at `field` when known.
    pub fn validation(field: Option<String>, message: impl Into<String>) -> Problem {
        Problem {
            kind: ProblemKind::Validation,
            message: message.into(),
            field,
            rule_id: None,
            severity: None,
        }
    }

    /// A compliance rule that blocks.
    pub fn compliance(
        rule_id: impl Into<String>,
        severity: impl Into<String>,
        field: Option<String>,
        message: impl Into<String>,
    ) -> Problem {
        Problem {
            kind: ProblemKind::Compliance,
            message: message.into(),
            field,
            rule_id: Some(rule_id.into()),
            severity: Some(severity.into()),
        }
    }

    /// The problem as one line for the model.
    pub fn line(&self) -> String {
        let mut line = match self.kind {
            ProblemKind::Json => "JSON: ".to_owned(),
            ProblemKind::Validation => "invalid: ".to_owned(),
            ProblemKind::Compliance => "blocked by a compliance rule: ".to_owned(),
        };
        if let Some(field) = &self.field {
            line.push_str(field);
            line.push_str(": ");
        }
        line.push_str(&self.message);
        if let (Some(rule), Some(severity)) = (&self.rule_id, &self.severity) {
            line.push_str(&format!(" (rule {rule}, {severity})"));
        }
        line
    }
}
