//! An execution folded from its events. The events are deduplicated by id and
//! sorted by time, then by a fixed order of states (a start before a resume before
//! a stop before an end), then by id, before anything is read from them: the same
//! events give the same execution whatever order, and however often, they arrived.
//!
//! - The execution's state is its latest pipeline-level event's (`STARTED` while it
//!   has none); it starts at its first `STARTED` (else its first event) and, once in
//!   a terminal state, ends at the event that put it there: a resumed execution runs
//!   from its first start to its last end.
//! - Each stage is folded the same way from its own events.
//! - A failed execution's error category: see [`crate::outcome`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::event::{EventKind, ExecutionEvent, State};
use crate::outcome::{category_of, ErrorCategory};

/// One stage's run within an execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageRun {
    /// The stage.
    pub name: String,
    /// Its latest state.
    pub state: State,
    /// Its first start.
    pub started_at: DateTime<Utc>,
    /// When it ended, once terminal.
    pub ended_at: Option<DateTime<Utc>>,
    /// `ended_at - started_at`, in milliseconds.
    pub duration_ms: Option<i64>,
}

/// An execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Execution {
    /// Its id.
    pub execution_id: String,
    /// The pipeline's resource name.
    pub resource: String,
    /// The pipeline's name.
    pub pipeline: String,
    /// Its latest state.
    pub state: State,
    /// Its first start.
    pub started_at: DateTime<Utc>,
    /// When it ended, once terminal.
    pub ended_at: Option<DateTime<Utc>>,
    /// `ended_at - started_at`, in milliseconds.
    pub duration_ms: Option<i64>,
    /// Its stages, by first start then name.
    pub stages: Vec<StageRun>,
    /// Why it failed (failed and stopped executions only).
    pub error: Option<ErrorCategory>,
}

fn state_order(state: State) -> u8 {
    match state {
        State::Started => 0,
        State::Resumed => 1,
        State::Stopping => 2,
        _ => 3,
    }
}

/// The fold of one subject's (sorted) events: latest state, first start, end.
fn span(events: &[&ExecutionEvent]) -> Option<(State, DateTime<Utc>, Option<DateTime<Utc>>)> {
    let last = events.last()?;
    let first = events.first()?;
    let started = events
        .iter()
        .find(|e| e.state == State::Started)
        .map_or(first.time, |e| e.time);
    let ended = last.state.is_terminal().then_some(last.time);
    Some((last.state, started, ended))
}

fn millis(started: DateTime<Utc>, ended: Option<DateTime<Utc>>) -> Option<i64> {
    ended.map(|end| (end - started).num_milliseconds().max(0))
}

/// Folds the events of one execution (all with its execution id); `None` for none.
pub fn fold(events: &[ExecutionEvent]) -> Option<Execution> {
    let mut sorted: Vec<&ExecutionEvent> = events.iter().collect();
    sorted.sort_by(|a, b| {
        (a.time, state_order(a.state), a.kind, &a.id).cmp(&(
            b.time,
            state_order(b.state),
            b.kind,
            &b.id,
        ))
    });
    sorted.dedup_by(|a, b| a.id == b.id);
    let first = *sorted.first()?;
    let pipeline_level: Vec<&ExecutionEvent> = sorted
        .iter()
        .copied()
        .filter(|e| e.kind == EventKind::Pipeline)
        .collect();
    let (state, started_at, ended_at) = match span(&pipeline_level) {
        Some((state, _, ended)) => {
            let started = pipeline_level
                .iter()
                .find(|e| e.state == State::Started)
                .map_or(first.time, |e| e.time);
            (state, started, ended)
        }
        None => (State::Started, first.time, None),
    };
    let mut names: Vec<&str> = sorted
        .iter()
        .filter(|e| e.kind == EventKind::Stage)
        .filter_map(|e| e.stage.as_deref())
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut stages: Vec<StageRun> = names
        .into_iter()
        .filter_map(|name| {
            let own: Vec<&ExecutionEvent> = sorted
                .iter()
                .copied()
                .filter(|e| e.kind == EventKind::Stage && e.stage.as_deref() == Some(name))
                .collect();
            let (state, started, ended) = span(&own)?;
            Some(StageRun {
                name: name.to_owned(),
                state,
                started_at: started,
                ended_at: ended,
                duration_ms: millis(started, ended),
            })
        })
        .collect();
    stages.sort_by(|a, b| (a.started_at, &a.name).cmp(&(b.started_at, &b.name)));
    let error = match state {
        State::Stopped => Some(ErrorCategory::Stopped),
        State::Failed => Some(
            match sorted
                .iter()
                .rev()
                .find(|e| e.kind == EventKind::Action && e.state == State::Failed)
            {
                Some(action) => category_of(action.category.as_deref()),
                None if stages.iter().any(|s| s.state == State::Failed) => ErrorCategory::Stage,
                None => ErrorCategory::Pipeline,
            },
        ),
        _ => None,
    };
    Some(Execution {
        execution_id: first.execution_id.clone(),
        resource: first.resource.clone(),
        pipeline: first.pipeline.clone(),
        state,
        started_at,
        ended_at,
        duration_ms: millis(started_at, ended_at),
        stages,
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn event(
        id: &str,
        kind: EventKind,
        seconds: i64,
        state: State,
        stage: Option<&str>,
    ) -> ExecutionEvent {
        ExecutionEvent {
            id: id.to_owned(),
            kind,
            time: DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap(),
            resource: "arn:aws:codepipeline:us-east-1:1:web".to_owned(),
            pipeline: "web".to_owned(),
            execution_id: "x".to_owned(),
            state,
            stage: stage.map(str::to_owned),
            action: (kind == EventKind::Action).then(|| "Compile".to_owned()),
            category: (kind == EventKind::Action).then(|| "Test".to_owned()),
        }
    }

    /// A run that fails in Test, is resumed, and succeeds.
    fn resumed() -> Vec<ExecutionEvent> {
        use EventKind::*;
        vec![
            event("1", Pipeline, 0, State::Started, None),
            event("2", Stage, 0, State::Started, Some("Build")),
            event("3", Stage, 60, State::Succeeded, Some("Build")),
            event("4", Stage, 60, State::Started, Some("Test")),
            event("5", Action, 90, State::Failed, Some("Test")),
            event("6", Stage, 90, State::Failed, Some("Test")),
            event("7", Pipeline, 90, State::Failed, None),
            event("8", Pipeline, 300, State::Resumed, None),
            event("9", Stage, 300, State::Resumed, Some("Test")),
            event("10", Stage, 400, State::Succeeded, Some("Test")),
            event("11", Pipeline, 400, State::Succeeded, None),
        ]
    }

    #[test]
    fn a_resumed_execution_runs_from_its_first_start_to_its_last_end() {
        let e = fold(&resumed()).unwrap();
        assert_eq!(e.state, State::Succeeded);
        assert_eq!(e.duration_ms, Some(400_000));
        assert_eq!(e.error, None);
        assert_eq!(e.stages.len(), 2);
        assert_eq!(e.stages[1].name, "Test");
        assert_eq!(e.stages[1].state, State::Succeeded);
        assert_eq!(e.stages[1].duration_ms, Some(340_000));
    }

    #[test]
    fn a_failure_is_categorized_by_its_failed_action() {
        let mut events = resumed();
        events.truncate(7);
        let e = fold(&events).unwrap();
        assert_eq!(
            (e.state, e.error),
            (State::Failed, Some(ErrorCategory::Test))
        );
        events.retain(|e| e.kind != EventKind::Action);
        assert_eq!(fold(&events).unwrap().error, Some(ErrorCategory::Stage));
        assert_eq!(fold(&[]), None);
    }

    proptest! {
        #[test]
        fn any_order_and_any_duplicates_give_the_same_execution(
            order in Just(resumed()).prop_shuffle(),
            again in proptest::collection::vec(0usize..11, 0..6),
        ) {
            let mut events = order;
            for i in again {
                let copy = events[i].clone();
                events.push(copy);
            }
            prop_assert_eq!(fold(&events), fold(&resumed()));
        }
    }
}
