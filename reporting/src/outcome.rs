//! What an execution's state counts as, and why a failed one failed.
//!
//! - A success: `SUCCEEDED`. A failure: `FAILED` and `STOPPED` (someone stopped it:
//!   it did not deliver). Neither: `CANCELED`, `SUPERSEDED` (a newer execution took
//!   its place) and `ABANDONED`, left out of rates; still running: `STARTED`,
//!   `RESUMED`, `STOPPING`, left out too. A success rate is successes over
//!   successes and failures (none when both are zero).
//! - The error category of a failed execution: the category of its latest failed
//!   action (`source`, `build`, `test`, `deploy`, `approval`, `invoke`, or `action`
//!   for another), else `stage` (a stage failed and no action said why), else
//!   `pipeline`; a stopped execution is `stopped`.

use serde::{Deserialize, Serialize};

use crate::event::State;

/// What a state counts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Counted as a success.
    Success,
    /// Counted as a failure.
    Failure,
    /// Ended, but neither (cancelled, superseded, abandoned).
    Excluded,
    /// Not ended.
    Running,
}

impl State {
    /// What the state counts as.
    pub fn outcome(self) -> Outcome {
        match self {
            State::Succeeded => Outcome::Success,
            State::Failed | State::Stopped => Outcome::Failure,
            State::Canceled | State::Superseded | State::Abandoned => Outcome::Excluded,
            State::Started | State::Resumed | State::Stopping => Outcome::Running,
        }
    }
}

/// Why a failed execution failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ErrorCategory {
    /// A source action failed.
    Source,
    /// A build action failed.
    Build,
    /// A test action failed.
    Test,
    /// A deploy action failed.
    Deploy,
    /// An approval was rejected or timed out.
    Approval,
    /// An invoked function failed.
    Invoke,
    /// An action of another category failed.
    Action,
    /// A stage failed and no action said why.
    Stage,
    /// The execution failed and no stage said why.
    Pipeline,
    /// Someone stopped it.
    Stopped,
}

impl ErrorCategory {
    /// Its name on the wire and in storage.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCategory::Source => "source",
            ErrorCategory::Build => "build",
            ErrorCategory::Test => "test",
            ErrorCategory::Deploy => "deploy",
            ErrorCategory::Approval => "approval",
            ErrorCategory::Invoke => "invoke",
            ErrorCategory::Action => "action",
            ErrorCategory::Stage => "stage",
            ErrorCategory::Pipeline => "pipeline",
            ErrorCategory::Stopped => "stopped",
        }
    }

    /// Reads a stored name.
    pub fn parse(name: &str) -> Option<ErrorCategory> {
        [
            ErrorCategory::Source,
            ErrorCategory::Build,
            ErrorCategory::Test,
            ErrorCategory::Deploy,
            ErrorCategory::Approval,
            ErrorCategory::Invoke,
            ErrorCategory::Action,
            ErrorCategory::Stage,
            ErrorCategory::Pipeline,
            ErrorCategory::Stopped,
        ]
        .into_iter()
        .find(|c| c.name() == name)
    }
}

/// The category of a failed action's `type.category`.
pub fn category_of(action_category: Option<&str>) -> ErrorCategory {
    match action_category.map(str::to_ascii_lowercase).as_deref() {
        Some("source") => ErrorCategory::Source,
        Some("build") => ErrorCategory::Build,
        Some("test") => ErrorCategory::Test,
        Some("deploy") => ErrorCategory::Deploy,
        Some("approval") => ErrorCategory::Approval,
        Some("invoke") => ErrorCategory::Invoke,
        _ => ErrorCategory::Action,
    }
}

/// Successes over successes and failures; `None` when there are neither.
pub fn rate(successes: u64, failures: u64) -> Option<f64> {
    let finished = successes.checked_add(failures)?;
    (finished > 0).then(|| successes as f64 / finished as f64)
}

/// The longest failure reason kept, in characters.
pub const MAX_REASON: usize = 200;

/// Why a plugin build attempt failed, as the build failure report groups it:
/// `timed out` for a timeout, else the last non-empty line of the builder's output
/// (where builders say what went wrong), trimmed and bounded; none for a success.
pub fn failure_reason(outcome: &str, output: Option<&str>) -> Option<String> {
    match outcome {
        "succeeded" => None,
        "timed_out" => Some("timed out".to_owned()),
        _ => Some(
            output
                .and_then(|text| text.lines().rev().map(str::trim).find(|l| !l.is_empty()))
                .map_or_else(
                    || "failed without output".to_owned(),
                    |line| {
                        line.chars()
                            .filter(|c| !c.is_control())
                            .take(MAX_REASON)
                            .collect()
                    },
                ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_count_as_the_readme_says() {
        assert_eq!(State::Succeeded.outcome(), Outcome::Success);
        assert_eq!(State::Stopped.outcome(), Outcome::Failure);
        assert_eq!(State::Superseded.outcome(), Outcome::Excluded);
        assert_eq!(State::Resumed.outcome(), Outcome::Running);
        assert_eq!(rate(3, 1), Some(0.75));
        assert_eq!(rate(0, 0), None);
        assert_eq!(category_of(Some("Build")), ErrorCategory::Build);
        assert_eq!(category_of(Some("Compute")), ErrorCategory::Action);
        assert_eq!(ErrorCategory::parse("deploy"), Some(ErrorCategory::Deploy));
        assert_eq!(failure_reason("succeeded", Some("x")), None);
        assert_eq!(
            failure_reason("timed_out", None).as_deref(),
            Some("timed out")
        );
        assert_eq!(
            failure_reason("failed", Some("step 1\nERROR: no space left\n\n")).as_deref(),
            Some("ERROR: no space left")
        );
        assert_eq!(
            failure_reason("failed", Some("  ")).as_deref(),
            Some("failed without output")
        );
    }
}
