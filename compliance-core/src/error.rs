//! The crate's one error type, and the `Problem` that names the rule field at fault.

use serde::Serialize;

use crate::cron::CronError;
use crate::limits::LimitExceeded;

/// One thing wrong with a rule, reported against the field it concerns so that an
/// API can answer 400 with useful details.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// The rule's id (or name when it has no id); absent for a single rule being saved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The rule field at fault, for example `value` or `conditions[1].field`.
    pub field: String,
    /// What is wrong, in the user's words.
    pub message: String,
}

impl Problem {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            rule: None,
            field: field.into(),
            message: message.into(),
        }
    }

    pub(crate) fn in_rule(mut self, rule: &str) -> Self {
        self.rule = Some(rule.to_owned());
        self
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.rule {
            Some(rule) => write!(f, "rule `{rule}`: {}: {}", self.field, self.message),
            None => write!(f, "{}: {}", self.field, self.message),
        }
    }
}

/// Everything that can go wrong in this crate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// One or more rules failed validation; every problem found is listed.
    #[error("invalid rules: {}", join(problems))]
    InvalidRules {
        /// Each problem, with the field it concerns.
        problems: Vec<Problem>,
    },
    /// The attribute document is not a JSON object.
    #[error("attributes must be a JSON object")]
    AttributesNotObject,
    /// The attribute document is over a limit; nothing was evaluated.
    #[error("{0}")]
    AttributeLimitExceeded(LimitExceeded),
    /// A cron expression did not parse.
    #[error("{0}")]
    InvalidCron(#[from] CronError),
}

impl From<LimitExceeded> for Error {
    fn from(value: LimitExceeded) -> Self {
        Error::AttributeLimitExceeded(value)
    }
}

fn join(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(Problem::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
