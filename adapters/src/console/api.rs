//! The console's way to the API: every read and action is a request to the API's
//! own router, in the process, with an access token minted for the console session.
//! So a page passes exactly the API's gate (permissions, tenancy, features, quotas,
//! step-up), calls exactly its service functions, and shows exactly its refusals.

use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderMap, HeaderValue, Method, Request, StatusCode};
use axum::Router;
use serde_json::Value;
use tower::ServiceExt;

use crate::code::ErrorCode;
use crate::http::listener::PeerAddr;

/// The most the console reads of one API answer (an export streams past it).
const MAX_ANSWER: usize = 16 * 1024 * 1024;

/// A refusal, as the API's error envelope states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Its status.
    pub status: StatusCode,
    /// Its code.
    pub code: ErrorCode,
    /// Its message, shown as is.
    pub message: String,
}

impl Refusal {
    pub(crate) fn internal(message: impl Into<String>) -> Refusal {
        Refusal {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: ErrorCode::InternalError,
            message: message.into(),
        }
    }

    /// The refusal an answer of the API states in its envelope: a code that is not
    /// one of the API's is an error of the console, not a refusal to show.
    fn answered(status: StatusCode, envelope: &Value) -> Refusal {
        #[derive(serde::Deserialize)]
        struct Envelope {
            code: ErrorCode,
            message: String,
        }
        match serde_json::from_value::<Envelope>(envelope.clone()) {
            Ok(Envelope { code, message }) => Refusal {
                status,
                code,
                message,
            },
            Err(error) => Refusal::internal(format!(
                "an answer of the API ({status}) is not its error envelope: {error}"
            )),
        }
    }

    /// Whether the session no longer authenticates (the page signs in again); a
    /// wrong password at a step-up is a refusal to show, not a signed-out session.
    pub fn signed_out(&self) -> bool {
        self.code == ErrorCode::Unauthorized
    }
}

/// One request to the API.
#[derive(Debug, Default)]
pub struct Call<'a> {
    /// `GET` when left out.
    pub method: Option<Method>,
    /// The path and query.
    pub uri: &'a str,
    /// `x-org-id`.
    pub org: Option<&'a str>,
    /// A JSON body.
    pub body: Option<Value>,
    /// `X-Step-Up-Token`.
    pub step_up: Option<&'a str>,
}

/// The API, as one console request reaches it.
#[derive(Clone)]
pub struct Api {
    router: Router,
    bearer: Option<String>,
    peer: Option<std::net::SocketAddr>,
    forwarded: Option<HeaderValue>,
}

impl Api {
    /// The API with the caller's token (none for sign-in), the connection's peer and
    /// its `X-Forwarded-For` (the sign-in throttle reads them as the API would).
    pub fn new(
        router: Router,
        bearer: Option<String>,
        peer: Option<std::net::SocketAddr>,
        headers: &HeaderMap,
    ) -> Api {
        Api {
            router,
            bearer,
            peer,
            forwarded: headers.get("x-forwarded-for").cloned(),
        }
    }

    /// Sends a request; the answer's status, headers and body, whatever the status.
    pub async fn send(&self, call: Call<'_>) -> Result<(StatusCode, HeaderMap, Bytes), Refusal> {
        let mut request = Request::builder()
            .method(call.method.unwrap_or(Method::GET))
            .uri(call.uri);
        if let Some(bearer) = &self.bearer {
            request = request.header(header::AUTHORIZATION, format!("Bearer {bearer}"));
        }
        if let Some(org) = call.org {
            // A page's `org` is the visitor's text: one no header can carry is a bad
            // request, not a failure of ours.
            let value = HeaderValue::from_str(org).map_err(|_| Refusal {
                status: StatusCode::BAD_REQUEST,
                code: ErrorCode::ValidationError,
                message: "org: not an organization id".to_owned(),
            })?;
            request = request.header("x-org-id", value);
        }
        if let Some(step_up) = call.step_up {
            request = request.header("x-step-up-token", step_up);
        }
        if let Some(forwarded) = &self.forwarded {
            request = request.header("x-forwarded-for", forwarded.clone());
        }
        let body = match call.body {
            Some(value) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Body::from(value.to_string())
            }
            None => Body::empty(),
        };
        let mut request = request
            .body(body)
            .map_err(|e| Refusal::internal(format!("a request the console made: {e}")))?;
        if let Some(peer) = self.peer {
            request.extensions_mut().insert(ConnectInfo(PeerAddr(peer)));
        }
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .map_err(|e| Refusal::internal(e.to_string()))?;
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, MAX_ANSWER)
            .await
            .map_err(|e| Refusal::internal(format!("an answer of the API: {e}")))?;
        Ok((parts.status, parts.headers, bytes))
    }

    /// Sends a request; a success's JSON (the envelope's `data` when it has one, else
    /// the whole body: pages keep their list and `pagination`), or the refusal.
    pub async fn json(&self, call: Call<'_>) -> Result<Value, Refusal> {
        let (status, _, body) = self.send(call).await?;
        let value: Value = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&body)
                .map_err(|e| Refusal::internal(format!("an answer of the API: {e}")))?
        };
        if !status.is_success() {
            return Err(Refusal::answered(status, &value));
        }
        Ok(match value {
            Value::Object(mut map) if map.contains_key("data") && map.contains_key("success") => {
                map.remove("data").unwrap_or(Value::Null)
            }
            other => other,
        })
    }

    /// Sends a request and hands its success on as it came (its media type, its
    /// bytes), named `filename` for a download when given; a refusal as the API's
    /// envelope states it.
    pub async fn forward(
        &self,
        call: Call<'_>,
        filename: Option<&'static str>,
    ) -> Result<axum::response::Response, Refusal> {
        use axum::response::IntoResponse;
        let (status, headers, body) = self.send(call).await?;
        if !status.is_success() {
            let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            return Err(Refusal::answered(status, &value));
        }
        let mut response = body.into_response();
        if let Some(media) = headers.get(header::CONTENT_TYPE) {
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, media.clone());
        }
        if let Some(name) = filename {
            let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{name}\""))
                .map_err(|e| Refusal::internal(e.to_string()))?;
            response
                .headers_mut()
                .insert(header::CONTENT_DISPOSITION, disposition);
        }
        Ok(response)
    }

    /// `GET uri` in `org`.
    pub async fn get(&self, uri: &str, org: Option<&str>) -> Result<Value, Refusal> {
        self.json(Call {
            uri,
            org,
            ..Call::default()
        })
        .await
    }
}

/// A string member (empty when missing or not a string).
pub fn text(value: &Value, key: &str) -> String {
    match value.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// A whole-number member (0 when missing).
pub fn number(value: &Value, key: &str) -> i64 {
    value.get(key).and_then(Value::as_i64).unwrap_or(0)
}

/// A page's items: the answer's list member.
pub fn items(page: &Value) -> Vec<Value> {
    page.as_object()
        .into_iter()
        .flat_map(|map| map.iter())
        .find_map(|(key, value)| match value {
            Value::Array(list) if key != "pagination" => Some(list.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// A page's total.
pub fn total(page: &Value) -> i64 {
    page.get("pagination").map_or(0, |p| number(p, "total"))
}

/// A query string of `pairs` (values left out when empty).
pub fn query(pairs: &[(&str, &str)]) -> String {
    let kept: Vec<(&str, &str)> = pairs
        .iter()
        .copied()
        .filter(|(_, v)| !v.is_empty())
        .collect();
    serde_urlencoded::to_string(kept).unwrap_or_default()
}

impl From<crate::services::ServiceError> for Refusal {
    fn from(error: crate::services::ServiceError) -> Refusal {
        let error = crate::http::error::ApiError::from(error);
        Refusal {
            status: error.status(),
            code: error.code,
            message: error.message,
        }
    }
}

/// An id as a path segment: refused unless it is made of the characters ids are
/// made of, so that a form's value can never reach another path.
pub fn segment(id: &str) -> Result<&str, Refusal> {
    let fits = !id.is_empty()
        && id.len() <= 200
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    if fits {
        Ok(id)
    } else {
        Err(Refusal {
            status: StatusCode::BAD_REQUEST,
            code: ErrorCode::ValidationError,
            message: "not an id".to_owned(),
        })
    }
}

/// Sends an action: `method uri` in `org` with `body`; the success's data.
pub async fn act(
    api: &Api,
    (method, uri): (Method, &str),
    org: &str,
    body: Option<Value>,
) -> Result<Value, Refusal> {
    api.json(Call {
        method: Some(method),
        uri,
        org: Some(org),
        body,
        step_up: None,
    })
    .await
}
