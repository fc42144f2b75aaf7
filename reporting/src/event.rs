//! CodePipeline execution events as an event bus delivers them: the EventBridge
//! envelope (`id`, `detail-type`, `source`, `time`, `resources`, `detail`) of a
//! "Pipeline", "Stage" or "Action Execution State Change". Each field is checked;
//! an error names where it is (`detail.execution-id`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest id, name or execution id accepted, in characters.
pub const MAX_TEXT: usize = 512;
/// The longest resource name accepted.
pub const MAX_RESOURCE: usize = 2048;

/// The state an event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum State {
    /// Began.
    Started,
    /// Began again after a failure (a retried stage, a resumed execution).
    Resumed,
    /// Being stopped.
    Stopping,
    /// Ended well.
    Succeeded,
    /// Ended badly.
    Failed,
    /// Stopped by someone.
    Stopped,
    /// Cancelled (CodePipeline spells it `CANCELED`; `CANCELLED` is read too).
    Canceled,
    /// Replaced by a newer execution.
    Superseded,
    /// An action given up (its stage's execution moved on).
    Abandoned,
}

impl State {
    /// Reads a state as CodePipeline writes it.
    pub fn parse(text: &str) -> Option<State> {
        Some(match text.trim().to_ascii_uppercase().as_str() {
            "STARTED" => State::Started,
            "RESUMED" => State::Resumed,
            "STOPPING" => State::Stopping,
            "SUCCEEDED" => State::Succeeded,
            "FAILED" => State::Failed,
            "STOPPED" => State::Stopped,
            "CANCELED" | "CANCELLED" => State::Canceled,
            "SUPERSEDED" => State::Superseded,
            "ABANDONED" => State::Abandoned,
            _ => return None,
        })
    }

    /// Whether the state ends what it is about.
    pub fn is_terminal(self) -> bool {
        !matches!(self, State::Started | State::Resumed | State::Stopping)
    }

    /// As CodePipeline writes it.
    pub fn name(self) -> &'static str {
        match self {
            State::Started => "STARTED",
            State::Resumed => "RESUMED",
            State::Stopping => "STOPPING",
            State::Succeeded => "SUCCEEDED",
            State::Failed => "FAILED",
            State::Stopped => "STOPPED",
            State::Canceled => "CANCELED",
            State::Superseded => "SUPERSEDED",
            State::Abandoned => "ABANDONED",
        }
    }
}

/// What an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// The whole execution.
    Pipeline,
    /// One stage of it.
    Stage,
    /// One action of a stage.
    Action,
}

impl EventKind {
    fn from_detail_type(text: &str) -> Option<EventKind> {
        match text.trim() {
            "CodePipeline Pipeline Execution State Change" => Some(EventKind::Pipeline),
            "CodePipeline Stage Execution State Change" => Some(EventKind::Stage),
            "CodePipeline Action Execution State Change" => Some(EventKind::Action),
            _ => None,
        }
    }
}

/// One execution event, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionEvent {
    /// The envelope's id: an event is stored once by it.
    pub id: String,
    /// What it is about.
    pub kind: EventKind,
    /// When it happened (the envelope's `time`).
    pub time: DateTime<Utc>,
    /// The pipeline's resource name (the envelope's first `resources` entry).
    pub resource: String,
    /// The pipeline's name.
    pub pipeline: String,
    /// The execution.
    pub execution_id: String,
    /// The state reported.
    pub state: State,
    /// The stage (stage and action events).
    pub stage: Option<String>,
    /// The action (action events).
    pub action: Option<String>,
    /// The action's category (`type.category`: Source, Build, Test, Deploy...).
    pub category: Option<String>,
}

/// Why an event is refused, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct EventError {
    /// Where (`detail.execution-id`).
    pub field: String,
    /// What is wrong.
    pub problem: String,
}

fn fail(field: &str, problem: impl Into<String>) -> EventError {
    EventError {
        field: field.to_owned(),
        problem: problem.into(),
    }
}

fn text(value: &Value, field: &str, max: usize) -> Result<String, EventError> {
    let text = value
        .as_str()
        .ok_or_else(|| fail(field, "must be a string"))?
        .trim();
    if text.is_empty() {
        return Err(fail(field, "must not be empty"));
    }
    if text.chars().count() > max {
        return Err(fail(field, format!("must be at most {max} characters")));
    }
    if text.chars().any(char::is_control) {
        return Err(fail(field, "must not contain control characters"));
    }
    Ok(text.to_owned())
}

fn field<'a>(object: &'a Value, name: &str, path: &str) -> Result<&'a Value, EventError> {
    object
        .get(name)
        .filter(|v| !v.is_null())
        .ok_or_else(|| fail(path, "is required"))
}

impl ExecutionEvent {
    /// Reads one envelope.
    pub fn parse(envelope: &Value) -> Result<ExecutionEvent, EventError> {
        if !envelope.is_object() {
            return Err(fail("", "an event must be a JSON object"));
        }
        let id = text(field(envelope, "id", "id")?, "id", MAX_TEXT)?;
        let detail_type = text(
            field(envelope, "detail-type", "detail-type")?,
            "detail-type",
            MAX_TEXT,
        )?;
        let kind = EventKind::from_detail_type(&detail_type).ok_or_else(|| {
            fail(
                "detail-type",
                "must be a CodePipeline Pipeline, Stage or Action Execution State Change",
            )
        })?;
        let source = text(field(envelope, "source", "source")?, "source", MAX_TEXT)?;
        if source != "aws.codepipeline" {
            return Err(fail("source", "must be aws.codepipeline"));
        }
        let time = text(field(envelope, "time", "time")?, "time", 64)?;
        let time = DateTime::parse_from_rfc3339(&time)
            .map_err(|_| fail("time", "must be an RFC 3339 instant"))?
            .with_timezone(&Utc);
        let resources = field(envelope, "resources", "resources")?
            .as_array()
            .ok_or_else(|| fail("resources", "must be an array"))?;
        let resource = text(
            resources
                .first()
                .ok_or_else(|| fail("resources", "must name the pipeline"))?,
            "resources[0]",
            MAX_RESOURCE,
        )?;
        if !resource.starts_with("arn:") {
            return Err(fail("resources[0]", "must be a resource name (arn:...)"));
        }
        let detail = field(envelope, "detail", "detail")?;
        if !detail.is_object() {
            return Err(fail("detail", "must be an object"));
        }
        let pipeline = text(
            field(detail, "pipeline", "detail.pipeline")?,
            "detail.pipeline",
            MAX_TEXT,
        )?;
        let execution_id = text(
            field(detail, "execution-id", "detail.execution-id")?,
            "detail.execution-id",
            MAX_TEXT,
        )?;
        let state_text = text(field(detail, "state", "detail.state")?, "detail.state", 64)?;
        let state = State::parse(&state_text)
            .ok_or_else(|| fail("detail.state", format!("`{state_text}` is not a state")))?;
        // `version` is a number or a string of one; anything else is malformed.
        if let Some(version) = detail.get("version").filter(|v| !v.is_null()) {
            let numeric = version.as_f64().is_some()
                || version
                    .as_str()
                    .is_some_and(|s| s.trim().parse::<f64>().is_ok());
            if !numeric {
                return Err(fail(
                    "detail.version",
                    "must be a number or a string of one",
                ));
            }
        }
        let stage = match kind {
            EventKind::Pipeline => None,
            _ => Some(text(
                field(detail, "stage", "detail.stage")?,
                "detail.stage",
                MAX_TEXT,
            )?),
        };
        let (action, category) = match kind {
            EventKind::Action => {
                let action = text(
                    field(detail, "action", "detail.action")?,
                    "detail.action",
                    MAX_TEXT,
                )?;
                let category = match detail.get("type").filter(|v| !v.is_null()) {
                    None => None,
                    Some(kind) => match kind.get("category").filter(|v| !v.is_null()) {
                        None => None,
                        Some(c) => Some(text(c, "detail.type.category", 64)?),
                    },
                };
                (Some(action), category)
            }
            _ => (None, None),
        };
        Ok(ExecutionEvent {
            id,
            kind,
            time,
            resource,
            pipeline,
            execution_id,
            state,
            stage,
            action,
            category,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn envelope() -> Value {
        json!({
            "version": "0",
            "id": "e-1",
            "detail-type": "CodePipeline Action Execution State Change",
            "source": "aws.codepipeline",
            "account": "123456789012",
            "time": "2026-11-20T10:00:05Z",
            "region": "us-east-1",
            "resources": ["arn:aws:codepipeline:us-east-1:123456789012:web"],
            "detail": {
                "pipeline": "web",
                "execution-id": "x-1",
                "stage": "Build",
                "action": "Compile",
                "state": "FAILED",
                "type": {"owner": "AWS", "provider": "CodeBuild", "category": "Build", "version": "1"},
                "version": 3
            }
        })
    }

    #[test]
    fn an_action_event_is_read_whole() {
        let event = ExecutionEvent::parse(&envelope()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(event.kind, EventKind::Action);
        assert_eq!(event.state, State::Failed);
        assert_eq!(event.stage.as_deref(), Some("Build"));
        assert_eq!(event.category.as_deref(), Some("Build"));
        assert_eq!(
            event.resource,
            "arn:aws:codepipeline:us-east-1:123456789012:web"
        );
    }

    #[test]
    fn the_version_may_be_a_string_or_a_number() {
        let mut e = envelope();
        e["detail"]["version"] = json!("3");
        assert!(ExecutionEvent::parse(&e).is_ok());
        e["detail"]["version"] = json!({"major": 3});
        assert_eq!(
            ExecutionEvent::parse(&e).map_err(|e| e.field),
            Err("detail.version".to_owned())
        );
    }

    #[test]
    fn every_problem_names_its_field() {
        let cases: [(&str, Value, &str); 8] = [
            ("/id", json!(null), "id"),
            ("/detail-type", json!("Something Else"), "detail-type"),
            ("/source", json!("aws.ec2"), "source"),
            ("/time", json!("yesterday"), "time"),
            ("/resources", json!([]), "resources"),
            ("/detail/execution-id", json!(""), "detail.execution-id"),
            ("/detail/state", json!("EXPLODED"), "detail.state"),
            ("/detail/stage", json!(7), "detail.stage"),
        ];
        for (pointer, value, field) in cases {
            let mut e = envelope();
            if let Some(slot) = e.pointer_mut(pointer) {
                *slot = value;
            }
            assert_eq!(
                ExecutionEvent::parse(&e).map_err(|e| e.field),
                Err(field.to_owned()),
                "{pointer}"
            );
        }
        assert!(ExecutionEvent::parse(&json!([1])).is_err());
    }
}
