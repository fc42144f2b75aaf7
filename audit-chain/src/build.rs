//! The terminal outcome of a plugin build (documents 2 and 3): exactly one of
//! `plugin.build.completed`, `plugin.build.failed` or `plugin.build.timeout` per build,
//! and failed or timeout only once the dead letter queue is exhausted.

/// Where a build job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildState {
    /// In its tier queue.
    TierQueue,
    /// Moved to the dead letter queue after failing its tier queue's final attempt.
    DeadLetterQueue,
    /// Succeeded (in either queue).
    Completed,
    /// Failed in the dead letter queue with no retry left.
    Failed,
    /// Timed out in the dead letter queue with no retry left.
    TimedOut,
}

/// What happened to one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// The build succeeded.
    Succeeded,
    /// The build failed; `final_attempt` when its queue has no retry left.
    Failed {
        /// No retry left in the current queue.
        final_attempt: bool,
    },
    /// The build timed out; `final_attempt` when its queue has no retry left.
    TimedOut {
        /// No retry left in the current queue.
        final_attempt: bool,
    },
}

/// A build already has its terminal outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the build already ended ({0:?}); no further attempt is recorded")]
pub struct AlreadyEnded(pub BuildState);

/// Tracks one build and says which audit action, if any, each attempt emits.
///
/// ```
/// use audit_chain::{Attempt, BuildOutcome};
/// let mut build = BuildOutcome::new();
/// // The tier queue's final attempt fails: no terminal action yet.
/// assert_eq!(build.record(Attempt::Failed { final_attempt: true }), Ok(None));
/// // The dead letter queue succeeds: only `completed` is ever emitted.
/// assert_eq!(build.record(Attempt::Succeeded), Ok(Some("plugin.build.completed")));
/// assert!(build.record(Attempt::Succeeded).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildOutcome {
    state: BuildState,
}

impl Default for BuildOutcome {
    fn default() -> Self {
        BuildOutcome::new()
    }
}

impl BuildOutcome {
    /// A build in its tier queue.
    pub fn new() -> Self {
        BuildOutcome {
            state: BuildState::TierQueue,
        }
    }

    /// A build resumed where a stored job stands (`TierQueue` or `DeadLetterQueue`
    /// for a job still waiting; a finished one records nothing more).
    ///
    /// ```
    /// use audit_chain::{Attempt, BuildOutcome, BuildState};
    /// let mut outcome = BuildOutcome::resume(BuildState::DeadLetterQueue);
    /// assert_eq!(outcome.record(Attempt::Succeeded), Ok(Some("plugin.build.completed")));
    /// assert!(BuildOutcome::resume(BuildState::Failed).record(Attempt::Succeeded).is_err());
    /// ```
    pub fn resume(state: BuildState) -> Self {
        BuildOutcome { state }
    }

    /// Where the build stands.
    pub fn state(&self) -> BuildState {
        self.state
    }

    /// Records an attempt; returns the terminal audit action it emits, if any.
    pub fn record(&mut self, attempt: Attempt) -> Result<Option<&'static str>, AlreadyEnded> {
        use BuildState::*;
        let (next, action) = match (self.state, attempt) {
            (Completed | Failed | TimedOut, _) => return Err(AlreadyEnded(self.state)),
            (TierQueue | DeadLetterQueue, Attempt::Succeeded) => {
                (Completed, Some("plugin.build.completed"))
            }
            (
                TierQueue,
                Attempt::Failed {
                    final_attempt: true,
                },
            )
            | (
                TierQueue,
                Attempt::TimedOut {
                    final_attempt: true,
                },
            ) => (DeadLetterQueue, None),
            (
                state,
                Attempt::Failed {
                    final_attempt: false,
                },
            )
            | (
                state,
                Attempt::TimedOut {
                    final_attempt: false,
                },
            ) => (state, None),
            (
                DeadLetterQueue,
                Attempt::Failed {
                    final_attempt: true,
                },
            ) => (Failed, Some("plugin.build.failed")),
            (
                DeadLetterQueue,
                Attempt::TimedOut {
                    final_attempt: true,
                },
            ) => (TimedOut, Some("plugin.build.timeout")),
        };
        self.state = next;
        Ok(action)
    }
}
