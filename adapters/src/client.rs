//! `ComplianceClient`: what a plugin or pipeline service embeds to ask the compliance
//! service whether an upload may proceed (document 1: validation at the door), failing
//! closed. Built with the `client` feature alone (no axum, no sqlx).
//!
//! The answer is either a pass (with the warnings, if any) or a [`Refusal`] that the
//! calling service returns as it is, in the documents' error envelope:
//! - the compliance service cannot be reached, errs, or does not answer within the
//!   budget (5 seconds by default): 503 `COMPLIANCE_UNAVAILABLE`;
//! - the document is blocked: 403 `COMPLIANCE_VIOLATION` with `details.violations`;
//! - the document itself is refused (400, 413, 422): that answer, passed on.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::code::ErrorCode;

/// The validation budget of document 1.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(5);

/// What is being validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Entity {
    /// A plugin upload.
    Plugin,
    /// A pipeline creation.
    Pipeline,
}

impl Entity {
    fn path(self) -> &'static str {
        match self {
            Entity::Plugin => "plugin",
            Entity::Pipeline => "pipeline",
        }
    }
}

/// A document that may proceed, with the warnings it raised.
#[derive(Debug, Clone, PartialEq)]
pub struct Passed {
    /// Violations that do not block (warnings), as the service reported them.
    pub warnings: Vec<Value>,
}

/// A refusal to pass on to the caller, in the error envelope.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{status} {code}: {message}")]
pub struct Refusal {
    /// The HTTP status to answer with.
    pub status: u16,
    /// The error code.
    pub code: ErrorCode,
    /// A sentence for a person.
    pub message: String,
    /// `{violations}` for a block; what the service said otherwise.
    pub details: Option<Value>,
}

impl Refusal {
    fn unavailable(why: impl std::fmt::Display) -> Self {
        Refusal {
            status: 503,
            code: ErrorCode::ComplianceUnavailable,
            message: format!("the compliance check could not be made: {why}"),
            details: None,
        }
    }

    /// Whether the service's compliance rules block the entity (its answer names the
    /// violations), rather than the check not being made.
    pub fn blocks(&self) -> bool {
        self.code == ErrorCode::ComplianceViolation
    }

    /// The error envelope of the documents.
    pub fn envelope(&self) -> Value {
        let mut body = json!({
            "success": false,
            "statusCode": self.status,
            "code": self.code,
            "message": self.message,
        });
        if let (Some(details), Some(object)) = (&self.details, body.as_object_mut()) {
            object.insert("details".to_owned(), details.clone());
        }
        body
    }
}

/// A client of `POST /api/compliance/validate/{plugin|pipeline}`, with a service token.
#[derive(Debug, Clone)]
pub struct ComplianceClient {
    base: String,
    token: String,
    budget: Duration,
    http: reqwest::Client,
}

impl ComplianceClient {
    /// A client of the service at `base` (for example `http://compliance:3000`) using
    /// the service token `token`, with the 5-second budget.
    pub fn new(base: &str, token: &str) -> Self {
        ComplianceClient {
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            budget: DEFAULT_BUDGET,
            http: reqwest::Client::new(),
        }
    }

    /// The same client with another budget.
    pub fn with_budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// Validates `attributes` of an entity of organization `org_id` (the check is
    /// recorded in the check log; `entity_id` lets exemptions apply). Fails closed.
    pub async fn validate(
        &self,
        org_id: &str,
        entity: Entity,
        attributes: &Value,
        entity_id: Option<&str>,
    ) -> Result<Passed, Refusal> {
        let mut body = json!({"attributes": attributes});
        if let (Some(id), Some(object)) = (entity_id, body.as_object_mut()) {
            object.insert("entityId".to_owned(), Value::from(id));
        }
        // One budget for the whole exchange: the request, the wait and the body.
        let exchange = async {
            let response = self
                .http
                .post(format!(
                    "{}/api/compliance/validate/{}",
                    self.base,
                    entity.path()
                ))
                .bearer_auth(&self.token)
                .header("x-org-id", org_id)
                .json(&body)
                .send()
                .await?;
            let status = response.status().as_u16();
            Ok::<_, reqwest::Error>((status, response.json::<Value>().await?))
        };
        let (status, answer) = match tokio::time::timeout(self.budget, exchange).await {
            Ok(Ok(done)) => done,
            Ok(Err(error)) => return Err(Refusal::unavailable(error)),
            Err(_) => return Err(Refusal::unavailable("no answer within the budget")),
        };
        match status {
            200 => {
                let data = answer.get("data").cloned().unwrap_or(Value::Null);
                let Some(blocked) = data.get("blocked").and_then(Value::as_bool) else {
                    return Err(Refusal::unavailable("the answer has no verdict"));
                };
                let violations = data.get("violations").cloned().unwrap_or(json!([]));
                if blocked {
                    Err(Refusal {
                        status: 403,
                        code: ErrorCode::ComplianceViolation,
                        message: "the entity breaks compliance rules".to_owned(),
                        details: Some(json!({"violations": violations})),
                    })
                } else {
                    Ok(Passed {
                        warnings: violations.as_array().cloned().unwrap_or_default(),
                    })
                }
            }
            // The document itself is at fault: its refusal is the caller's answer.
            400 | 413 | 422 => Err(Refusal {
                status,
                // Its own code when it is one of ours, else the document's fault.
                code: answer
                    .get("code")
                    .and_then(Value::as_str)
                    .and_then(ErrorCode::parse)
                    .unwrap_or(ErrorCode::ValidationError),
                message: answer
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the attributes were refused")
                    .to_owned(),
                details: answer.get("details").cloned(),
            }),
            // Anything else (a bad token, a missing organization, a failure) means the
            // check was not made: fail closed.
            other => Err(Refusal::unavailable(format!(
                "the compliance service answered {other}"
            ))),
        }
    }
}
