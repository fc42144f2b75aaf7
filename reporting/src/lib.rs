//! Pipeline execution analytics, pure: no I/O, no clock.
//!
//! - `event`: CodePipeline's "Pipeline / Stage / Action Execution State Change"
//!   events as an event bus (AWS EventBridge) delivers them, checked field by field.
//! - `execution`: an execution folded from its events. The events are sorted
//!   first (by time, then a fixed order of states, then id), so the same events give
//!   the same execution whatever order they arrived in, duplicates included.
//! - `outcome`: which states count as a success, a failure, or neither, and the
//!   error categories.
//! - `stats`: the summary of a sample of durations (min, mean, median, p95, max),
//!   the percentile by linear interpolation between closest ranks.
//! - `range`: a report's time range (default the last 30 days, at most 366) and
//!   its buckets (hour, day, week; UTC, weeks from Monday), empty ones included.
//! - `alert`: alert rules over the reports: metrics, comparisons, the states and
//!   their transitions (`step`), and the replay a backtest runs.

pub mod alert;
pub mod event;
pub mod execution;
pub mod outcome;
pub mod range;
pub mod stats;

pub use event::{EventError, EventKind, ExecutionEvent, State};
pub use execution::{fold, Execution, StageRun};
pub use outcome::{category_of, failure_reason, rate, ErrorCategory, Outcome, MAX_REASON};
pub use range::{Granularity, RangeError, TimeRange, DEFAULT_DAYS, MAX_BUCKETS, MAX_DAYS};
pub use stats::{percentile, Summary};
