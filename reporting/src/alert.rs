//! Alert rules over the reports, pure: what a rule says (`Spec`), what it
//! remembers between evaluations (`Tracker`), and `step`, the one function that
//! moves a rule from one evaluation to the next. The states and transitions are
//! Grafana alerting's: `ok` (Normal), `pending`, `firing` (Alerting), `nodata`,
//! `error`. A notice is owed only on a transition to firing and on the way back to
//! ok after one (resolved), and again every `repeat` while firing; the tracker
//! remembers whether a firing notice went out, so a resolve is never lost (a rule
//! that went `firing -> error -> ok` still resolves) and never sent without its
//! trigger (`pending -> ok` is silent). Backtests replay observations through the
//! same `step`.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

/// The query errors in a row that make `error`.
pub const ERRORS_FOR_ERROR: u32 = 3;

/// What a rule measures, each a projection of a report's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Failures over successes and failures (the success-rate report's complement).
    FailureRate,
    /// The success-rate report's overall rate.
    SuccessRate,
    /// Executions (the count report's total).
    RunCount,
    /// Failed and stopped executions (the success-rate report's failures).
    FailureCount,
    /// The duration report's overall p95, in milliseconds.
    P95DurationMs,
    /// Finished executions that failed, newest first, before the newest success.
    ConsecutiveFailures,
    /// A stage's failures (the stage-failures report).
    StageFailureCount,
    /// Failed executions of one error category (the errors report).
    ErrorCategoryCount,
    /// Build attempts that failed over those that ended (the build-success-rate
    /// report's complement).
    PluginBuildFailureRate,
    /// Entities the organization's rules block now (the compliance posture).
    BlockedEntities,
}

impl Metric {
    /// Every metric.
    pub const ALL: [Metric; 10] = [
        Metric::FailureRate,
        Metric::SuccessRate,
        Metric::RunCount,
        Metric::FailureCount,
        Metric::P95DurationMs,
        Metric::ConsecutiveFailures,
        Metric::StageFailureCount,
        Metric::ErrorCategoryCount,
        Metric::PluginBuildFailureRate,
        Metric::BlockedEntities,
    ];

    /// Its name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Metric::FailureRate => "failure_rate",
            Metric::SuccessRate => "success_rate",
            Metric::RunCount => "run_count",
            Metric::FailureCount => "failure_count",
            Metric::P95DurationMs => "p95_duration_ms",
            Metric::ConsecutiveFailures => "consecutive_failures",
            Metric::StageFailureCount => "stage_failure_count",
            Metric::ErrorCategoryCount => "error_category_count",
            Metric::PluginBuildFailureRate => "plugin_build_failure_rate",
            Metric::BlockedEntities => "blocked_entities",
        }
    }

    /// Reads a metric's name.
    pub fn parse(text: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == text)
    }

    /// Whether its value is a ratio from 0 to 1.
    pub fn is_ratio(self) -> bool {
        matches!(
            self,
            Metric::FailureRate | Metric::SuccessRate | Metric::PluginBuildFailureRate
        )
    }
}

/// How a value is compared with the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Comparison {
    /// `value > threshold`.
    Gt,
    /// `value >= threshold`.
    Gte,
    /// `value < threshold`.
    Lt,
    /// `value <= threshold`.
    Lte,
}

impl Comparison {
    /// Whether `value` is on the alerting side of `threshold`.
    pub fn holds(self, value: f64, threshold: f64) -> bool {
        match self {
            Comparison::Gt => value > threshold,
            Comparison::Gte => value >= threshold,
            Comparison::Lt => value < threshold,
            Comparison::Lte => value <= threshold,
        }
    }

    /// Whether a recovery threshold sits on the clear side of the threshold (a
    /// rule firing above 0.5 recovers at or below something no higher than 0.5).
    pub fn recovers_inside(self, threshold: f64, recovery: f64) -> bool {
        match self {
            Comparison::Gt | Comparison::Gte => recovery <= threshold,
            Comparison::Lt | Comparison::Lte => recovery >= threshold,
        }
    }
}

/// What an evaluation without data means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum NoData {
    /// As if the value were clear.
    Ok,
    /// The `nodata` state (default).
    #[default]
    Nodata,
    /// As if the value breached.
    Alerting,
    /// Nothing changes.
    KeepLast,
}

/// A rule's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AlertState {
    /// Normal.
    #[default]
    Ok,
    /// Breaching, for less than `for`.
    Pending,
    /// Firing.
    Firing,
    /// No data, and the rule says that is a state.
    Nodata,
    /// The query failed [`ERRORS_FOR_ERROR`] times in a row.
    Error,
}

impl AlertState {
    /// Its name on the wire and in storage.
    pub fn name(self) -> &'static str {
        match self {
            AlertState::Ok => "ok",
            AlertState::Pending => "pending",
            AlertState::Firing => "firing",
            AlertState::Nodata => "nodata",
            AlertState::Error => "error",
        }
    }

    /// Reads a state's name.
    pub fn parse(text: &str) -> Option<AlertState> {
        [
            AlertState::Ok,
            AlertState::Pending,
            AlertState::Firing,
            AlertState::Nodata,
            AlertState::Error,
        ]
        .into_iter()
        .find(|s| s.name() == text)
    }
}

/// The part of a rule `step` needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spec {
    /// How the value is compared.
    pub comparison: Comparison,
    /// The threshold.
    pub threshold: f64,
    /// While firing, the threshold the value must clear to resolve (hysteresis).
    pub recovery: Option<f64>,
    /// How long a breach lasts before firing (0: at once).
    pub for_: Duration,
    /// How long a firing rule stays firing after its last breach.
    pub keep_firing_for: Duration,
    /// What no data means.
    pub no_data: NoData,
    /// How often a firing rule notifies again (`None`: never).
    pub repeat: Option<Duration>,
}

/// What one evaluation observed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Observation {
    /// A value (with at least the rule's `minSamples`).
    Value(f64),
    /// Nothing to judge (too few samples in the window).
    NoData,
    /// The query failed.
    Error,
}

/// What a rule remembers between evaluations.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tracker {
    /// The state.
    pub state: AlertState,
    /// When it entered the state.
    pub since: Option<DateTime<Utc>>,
    /// When the current breach began (pending and firing).
    pub breach_began: Option<DateTime<Utc>>,
    /// The last evaluation that breached.
    pub last_breach: Option<DateTime<Utc>>,
    /// Query errors in a row.
    pub errors: u32,
    /// A firing notice went out and its resolve has not.
    pub firing_notified: bool,
    /// When the last notice (firing or repeat) went out.
    pub last_notice: Option<DateTime<Utc>>,
    /// The last value observed.
    pub value: Option<f64>,
}

/// A notice owed by a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Notice {
    /// The rule started firing.
    Firing,
    /// Still firing, `repeat` after the last notice.
    Repeat,
    /// The rule is back to ok after a firing notice.
    Resolved,
}

impl Notice {
    /// Its name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Notice::Firing => "firing",
            Notice::Repeat => "repeat",
            Notice::Resolved => "resolved",
        }
    }
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// The tracker after it.
    pub tracker: Tracker,
    /// `(from, to)` when the state changed.
    pub transition: Option<(AlertState, AlertState)>,
    /// The notice owed.
    pub notice: Option<Notice>,
}

enum Condition {
    Breach,
    Clear,
    Keep,
    Nodata,
}

/// Moves a rule by one evaluation at `now`.
///
/// ```
/// use chrono::{Duration, TimeZone, Utc};
/// use reporting::alert::*;
/// let spec = Spec { comparison: Comparison::Gt, threshold: 0.5, recovery: None,
///     for_: Duration::minutes(5), keep_firing_for: Duration::zero(),
///     no_data: NoData::Nodata, repeat: None };
/// let t0 = Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap();
/// let a = step(&spec, &Tracker::default(), Observation::Value(0.9), t0);
/// assert_eq!(a.tracker.state, AlertState::Pending);
/// let b = step(&spec, &a.tracker, Observation::Value(0.9), t0 + Duration::minutes(5));
/// assert_eq!((b.tracker.state, b.notice), (AlertState::Firing, Some(Notice::Firing)));
/// let c = step(&spec, &b.tracker, Observation::Value(0.1), t0 + Duration::minutes(6));
/// assert_eq!((c.tracker.state, c.notice), (AlertState::Ok, Some(Notice::Resolved)));
/// ```
pub fn step(spec: &Spec, before: &Tracker, observation: Observation, now: DateTime<Utc>) -> Step {
    let mut t = *before;
    let from = t.state;
    let mut notice = None;
    if observation == Observation::Error {
        t.errors = t.errors.saturating_add(1);
        if t.errors >= ERRORS_FOR_ERROR {
            enter(&mut t, AlertState::Error, now);
        }
        return finish(t, from, notice);
    }
    t.errors = 0;
    let condition = match observation {
        Observation::Value(value) => {
            t.value = Some(value);
            let threshold = match (t.state, spec.recovery) {
                (AlertState::Firing, Some(recovery)) => recovery,
                _ => spec.threshold,
            };
            if spec.comparison.holds(value, threshold) {
                Condition::Breach
            } else {
                Condition::Clear
            }
        }
        _ => match spec.no_data {
            NoData::Ok => Condition::Clear,
            NoData::Alerting => Condition::Breach,
            NoData::KeepLast => Condition::Keep,
            NoData::Nodata => Condition::Nodata,
        },
    };
    match condition {
        Condition::Keep => {}
        Condition::Nodata => enter(&mut t, AlertState::Nodata, now),
        Condition::Breach => {
            t.last_breach = Some(now);
            if t.state == AlertState::Firing {
                if let (Some(repeat), Some(last)) = (spec.repeat, t.last_notice) {
                    if t.firing_notified && now - last >= repeat {
                        notice = Some(Notice::Repeat);
                        t.last_notice = Some(now);
                    }
                }
            } else {
                if t.state != AlertState::Pending {
                    t.breach_began = Some(now);
                }
                let began = t.breach_began.unwrap_or(now);
                // A rule whose firing notice is still unresolved goes back to firing
                // without a second notice (no flapping after nodata or an error).
                if t.firing_notified || now - began >= spec.for_ {
                    enter(&mut t, AlertState::Firing, now);
                    if !t.firing_notified {
                        notice = Some(Notice::Firing);
                        t.firing_notified = true;
                        t.last_notice = Some(now);
                    }
                } else {
                    enter(&mut t, AlertState::Pending, now);
                }
            }
        }
        Condition::Clear => {
            let kept = t.state == AlertState::Firing
                && t.last_breach
                    .is_some_and(|last| now - last < spec.keep_firing_for);
            if !kept {
                enter(&mut t, AlertState::Ok, now);
                t.breach_began = None;
                if t.firing_notified {
                    notice = Some(Notice::Resolved);
                    t.firing_notified = false;
                }
            }
        }
    }
    finish(t, from, notice)
}

fn enter(t: &mut Tracker, state: AlertState, now: DateTime<Utc>) {
    if t.state != state {
        t.state = state;
        t.since = Some(now);
    }
}

fn finish(tracker: Tracker, from: AlertState, notice: Option<Notice>) -> Step {
    Step {
        transition: (tracker.state != from).then_some((from, tracker.state)),
        tracker,
        notice,
    }
}

/// One step of a replay: when, what was observed, and what it did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Replayed {
    /// The evaluation's instant.
    pub at: DateTime<Utc>,
    /// What it observed.
    pub observation: Observation,
    /// What it did.
    pub step: Step,
}

/// Replays observations from a fresh rule, keeping the steps that changed the
/// state or owed a notice (a backtest).
pub fn replay(spec: &Spec, observations: &[(DateTime<Utc>, Observation)]) -> Vec<Replayed> {
    let mut tracker = Tracker::default();
    let mut out = Vec::new();
    for (at, observation) in observations {
        let step = step(spec, &tracker, *observation, *at);
        tracker = step.tracker;
        if step.transition.is_some() || step.notice.is_some() {
            out.push(Replayed {
                at: *at,
                observation: *observation,
                step,
            });
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn spec() -> Spec {
        Spec {
            comparison: Comparison::Gt,
            threshold: 0.5,
            recovery: None,
            for_: Duration::minutes(2),
            keep_firing_for: Duration::zero(),
            no_data: NoData::Nodata,
            repeat: None,
        }
    }

    fn at(minute: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap() + Duration::minutes(minute)
    }

    fn run(spec: &Spec, values: &[Observation]) -> Vec<(AlertState, Option<Notice>)> {
        let mut t = Tracker::default();
        values
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let s = step(spec, &t, *o, at(i64::try_from(i).unwrap()));
                t = s.tracker;
                (s.tracker.state, s.notice)
            })
            .collect()
    }

    use AlertState::*;
    use Observation::{Error as E, NoData as N, Value as V};

    #[test]
    fn a_breach_fires_after_for_and_resolves_once() {
        let got = run(&spec(), &[V(0.9), V(0.9), V(0.9), V(0.9), V(0.1), V(0.1)]);
        assert_eq!(
            got,
            [
                (Pending, None),
                (Pending, None),
                (Firing, Some(Notice::Firing)),
                (Firing, None),
                (Ok, Some(Notice::Resolved)),
                (Ok, None),
            ]
        );
    }

    #[test]
    fn pending_that_clears_is_silent() {
        let got = run(&spec(), &[V(0.9), V(0.1), V(0.9)]);
        assert_eq!(got, [(Pending, None), (Ok, None), (Pending, None)]);
    }

    #[test]
    fn errors_make_error_after_three_and_never_resolve_silently() {
        let s = Spec {
            for_: Duration::zero(),
            ..spec()
        };
        let got = run(&s, &[V(0.9), E, E, E, V(0.1)]);
        assert_eq!(
            got,
            [
                (Firing, Some(Notice::Firing)),
                (Firing, None),
                (Firing, None),
                (Error, None),
                (Ok, Some(Notice::Resolved)),
            ]
        );
        // Back to breaching after the error: firing again, without a second notice.
        let got = run(&s, &[V(0.9), E, E, E, V(0.9)]);
        assert_eq!(got[4], (Firing, None));
    }

    #[test]
    fn no_data_follows_the_rule() {
        let s = |no_data| Spec { no_data, ..spec() };
        assert_eq!(run(&s(NoData::Nodata), &[N])[0], (Nodata, None));
        assert_eq!(run(&s(NoData::Ok), &[V(0.9), N])[1], (Ok, None));
        assert_eq!(run(&s(NoData::KeepLast), &[V(0.9), N])[1], (Pending, None));
        assert_eq!(
            run(&s(NoData::Alerting), &[N, N, N])[2],
            (Firing, Some(Notice::Firing))
        );
    }

    #[test]
    fn recovery_threshold_and_keep_firing_for_hold_a_firing_rule() {
        let s = Spec {
            for_: Duration::zero(),
            recovery: Some(0.3),
            ..spec()
        };
        let got = run(&s, &[V(0.9), V(0.4), V(0.2)]);
        assert_eq!(got[1], (Firing, None));
        assert_eq!(got[2], (Ok, Some(Notice::Resolved)));
        let s = Spec {
            for_: Duration::zero(),
            keep_firing_for: Duration::minutes(2),
            ..spec()
        };
        let got = run(&s, &[V(0.9), V(0.1), V(0.1), V(0.1)]);
        assert_eq!(
            got,
            [
                (Firing, Some(Notice::Firing)),
                (Firing, None),
                (Ok, Some(Notice::Resolved)),
                (Ok, None)
            ]
        );
    }

    #[test]
    fn repeat_notifies_again_while_firing() {
        let s = Spec {
            for_: Duration::zero(),
            repeat: Some(Duration::minutes(2)),
            ..spec()
        };
        let got = run(&s, &[V(0.9), V(0.9), V(0.9), V(0.9), V(0.9)]);
        let notices: Vec<_> = got.iter().map(|g| g.1).collect();
        assert_eq!(
            notices,
            [
                Some(Notice::Firing),
                None,
                Some(Notice::Repeat),
                None,
                Some(Notice::Repeat)
            ]
        );
    }

    proptest! {
        /// Whatever is observed, resolves follow firings one for one: never a
        /// resolve without its trigger, never two triggers without a resolve.
        #[test]
        fn notices_alternate(observations in proptest::collection::vec(
            prop_oneof![
                (0.0f64..1.0).prop_map(Observation::Value),
                Just(Observation::NoData),
                Just(Observation::Error),
            ], 0..60),
            no_data in prop_oneof![Just(NoData::Ok), Just(NoData::Nodata), Just(NoData::Alerting), Just(NoData::KeepLast)],
            for_minutes in 0i64..4, keep in 0i64..3) {
            let s = Spec { no_data, for_: Duration::minutes(for_minutes), keep_firing_for: Duration::minutes(keep), ..spec() };
            let mut open = false;
            for (state, notice) in run(&s, &observations) {
                match notice {
                    Some(Notice::Firing) => { prop_assert!(!open); open = true; prop_assert_eq!(state, Firing) }
                    Some(Notice::Resolved) => { prop_assert!(open); open = false; prop_assert_eq!(state, Ok) }
                    Some(Notice::Repeat) => prop_assert!(open),
                    None => {}
                }
            }
        }
    }
}
