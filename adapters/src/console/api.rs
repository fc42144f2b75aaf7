//! The console's way to the API: every read and action is a request to the API's
//! own router, in the process, with an access token minted for the console session.
//! So a page passes exactly the API's gate (permissions, tenancy, features, quotas,
//! step-up), calls exactly its service functions, and shows exactly its refusals.

use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderMap, HeaderValue, Method, Request, StatusCode};
use axum::Router;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tower::ServiceExt;

use crate::code::ErrorCode;
use crate::http::listener::PeerAddr;
mod naming;
pub use naming::*;

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

    /// A form the console itself refuses before asking the API: 400
    /// `VALIDATION_ERROR` with `message`.
    pub(crate) fn invalid(message: impl Into<String>) -> Refusal {
        Refusal {
            status: StatusCode::BAD_REQUEST,
            code: ErrorCode::ValidationError,
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
    /// A body that is not JSON: its media type and its bytes (an upload).
    pub raw: Option<(String, Bytes)>,
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
        let (parts, body) = self.open(call).await?.into_parts();
        let bytes = axum::body::to_bytes(body, MAX_ANSWER)
            .await
            .map_err(|e| Refusal::internal(format!("an answer of the API: {e}")))?;
        Ok((parts.status, parts.headers, bytes))
    }

    /// Sends a request and hands a success's answer on as it streams (an event
    /// stream); a refusal as the API's envelope states it.
    pub async fn stream(&self, call: Call<'_>) -> Result<axum::response::Response, Refusal> {
        let response = self.open(call).await?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), MAX_ANSWER)
            .await
            .map_err(|e| Refusal::internal(format!("an answer of the API: {e}")))?;
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Err(Refusal::answered(status, &value))
    }

    /// Sends a request; the API's answer, its body not yet read.
    async fn open(&self, call: Call<'_>) -> Result<axum::response::Response, Refusal> {
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
        let body = match (call.body, call.raw) {
            (Some(value), _) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Body::from(value.to_string())
            }
            (None, Some((media, bytes))) => {
                request = request.header(header::CONTENT_TYPE, media);
                Body::from(bytes)
            }
            (None, None) => Body::empty(),
        };
        let mut request = request
            .body(body)
            .map_err(|e| Refusal::internal(format!("a request the console made: {e}")))?;
        if let Some(peer) = self.peer {
            request.extensions_mut().insert(ConnectInfo(PeerAddr(peer)));
        }
        self.router
            .clone()
            .oneshot(request)
            .await
            .map_err(|e| Refusal::internal(e.to_string()))
    }

    /// Sends a request; a success's JSON (the envelope's `data` when it has one, else
    /// the whole body: pages keep their list and `pagination`), or the refusal. Only
    /// the typed readers below hand it on, decoded.
    async fn json(&self, call: Call<'_>) -> Result<Value, Refusal> {
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

    /// Sends a request; a success's data decoded into the API's own type `T`, or the
    /// refusal.
    pub async fn data<T: DeserializeOwned>(&self, call: Call<'_>) -> Result<T, Refusal> {
        decode(self.json(call).await?)
    }

    /// `GET uri` in `org`, decoded into the API's own type `T`.
    pub async fn get<T: DeserializeOwned>(
        &self,
        uri: &str,
        org: Option<&str>,
    ) -> Result<T, Refusal> {
        decode(
            self.json(Call {
                uri,
                org,
                ..Call::default()
            })
            .await?,
        )
    }

    /// A step-up with the visitor's password (`POST /api/auth/step-up`): the proof
    /// an action that needs one carries as `X-Step-Up-Token`.
    pub async fn step_up(&self, password: &str) -> Result<String, Refusal> {
        let proof: crate::services::accounts::StepUpProof = self
            .data(Call {
                method: Some(Method::POST),
                uri: "/api/auth/step-up",
                body: Some(serde_json::json!({ "password": password })),
                ..Call::default()
            })
            .await?;
        Ok(proof.step_up_token)
    }

    /// `GET uri` in `org`: a page whose items, under `key`, are the API's own `T`s.
    pub async fn list<T: DeserializeOwned>(
        &self,
        uri: &str,
        org: Option<&str>,
        key: &str,
    ) -> Result<Listed<T>, Refusal> {
        listed(self.get(uri, org).await?, key)
    }
}

/// A page of an answer: its items, decoded into the API's own type, and its total.
#[derive(Debug)]
pub struct Listed<T> {
    /// The items of the page.
    pub items: Vec<T>,
    /// How many there are in all.
    pub total: u64,
}

impl<T> Default for Listed<T> {
    fn default() -> Self {
        Listed {
            items: Vec::new(),
            total: 0,
        }
    }
}

/// An answer of the API decoded into the API's own type `T` (the type its handler
/// answers with): a missing or renamed member is an error of the console, shown as
/// one, never an empty cell.
pub fn decode<T: DeserializeOwned>(value: Value) -> Result<T, Refusal> {
    serde_json::from_value(value).map_err(|error| {
        Refusal::internal(format!(
            "an answer of the API is not the {} the console reads: {error}",
            std::any::type_name::<T>()
        ))
    })
}

/// A paginated answer's items under `key` and its `pagination.total`: a page
/// without either is an error of the console.
pub fn listed<T: DeserializeOwned>(page: Value, key: &str) -> Result<Listed<T>, Refusal> {
    #[derive(serde::Deserialize)]
    struct Pagination {
        total: u64,
    }
    let Value::Object(mut members) = page else {
        return Err(Refusal::internal("an answer of the API is not a page"));
    };
    let items = members
        .remove(key)
        .ok_or_else(|| Refusal::internal(format!("a page of the API without `{key}`")))?;
    let pagination = members
        .remove("pagination")
        .ok_or_else(|| Refusal::internal("a page of the API without `pagination`"))?;
    Ok(Listed {
        items: decode(items)?,
        total: decode::<Pagination>(pagination)?.total,
    })
}

/// A value as the API writes it, as text (a string without its quotes).
pub fn wire(value: &impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(text)) => text,
        Ok(Value::Null) | Err(_) => String::new(),
        Ok(other) => other.to_string(),
    }
}

/// An instant as the API writes it (RFC 3339, UTC, `Z`).
pub fn instant(at: &chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
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

/// Sends an action: `method uri` in `org` with `body`; the success's data, decoded
/// into the API's own type `T` (`serde::de::IgnoredAny` where the page only
/// confirms).
pub async fn act<T: DeserializeOwned>(
    api: &Api,
    (method, uri): (Method, &str),
    org: &str,
    body: Option<Value>,
) -> Result<T, Refusal> {
    decode(
        api.json(Call {
            method: Some(method),
            uri,
            org: Some(org),
            body,
            ..Call::default()
        })
        .await?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::organizations::MyOrganization;
    use serde_json::json;

    fn organization() -> Value {
        json!({
            "id": "org-1", "name": "Acme", "parentOrgId": null, "isSystem": false,
            "role": "owner", "active": true, "roles": ["Owner"]
        })
    }

    #[test]
    fn an_answer_reads_into_the_apis_own_type() {
        let page = json!({"success": true, "statusCode": 200,
            "organizations": [organization()],
            "pagination": {"total": 7, "limit": 1, "offset": 0, "hasMore": true}});
        let listed: Listed<MyOrganization> = listed(page, "organizations").unwrap();
        assert_eq!(listed.total, 7);
        assert_eq!(listed.items.len(), 1);
        assert_eq!(listed.items[0].name, "Acme");
        assert_eq!(listed.items[0].parent_org_id, None);
    }

    #[test]
    fn a_missing_or_renamed_member_is_an_error_of_the_console_not_an_empty_cell() {
        let mut renamed = organization();
        let name = renamed.as_object_mut().unwrap().remove("name").unwrap();
        renamed["displayName"] = name;
        let refusal = decode::<MyOrganization>(renamed).unwrap_err();
        assert_eq!(refusal.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(refusal.code, ErrorCode::InternalError);
        assert!(refusal.message.contains("`name`"), "{}", refusal.message);

        let mut mistyped = organization();
        mistyped["active"] = json!("yes");
        assert!(decode::<MyOrganization>(mistyped).is_err());
    }

    #[test]
    fn a_page_without_its_list_or_its_pagination_is_an_error() {
        let pagination = json!({"total": 1, "limit": 1, "offset": 0, "hasMore": false});
        let renamed = json!({"orgs": [organization()], "pagination": pagination});
        let refusal = listed::<MyOrganization>(renamed, "organizations").unwrap_err();
        assert!(
            refusal.message.contains("`organizations`"),
            "{}",
            refusal.message
        );
        let unpaged = json!({"organizations": [organization()]});
        assert!(listed::<MyOrganization>(unpaged, "organizations").is_err());
        assert!(listed::<MyOrganization>(json!([organization()]), "organizations").is_err());
    }

    #[test]
    fn a_refusal_keeps_the_fields_it_names() {
        let many = json!({"code": "VALIDATION_ERROR", "message": "m", "details": {"problems": [
            {"field": "value", "message": "not a regex"},
            {"rule": "r", "field": "conditions[0].field", "message": "empty"}]}});
        assert_eq!(
            named_fields(&many),
            vec![
                ("value".to_owned(), "not a regex".to_owned()),
                ("conditions[0].field".to_owned(), "empty".to_owned())
            ]
        );
        let one = json!({"details": {"field": "name", "problem": "taken"}});
        assert_eq!(
            named_fields(&one),
            vec![("name".to_owned(), "taken".to_owned())]
        );
        assert!(named_fields(&json!({"details": {"limit": 3}})).is_empty());
        assert!(named_fields(&json!({"message": "m"})).is_empty());
    }

    #[test]
    fn a_value_reads_as_the_api_writes_it() {
        assert_eq!(wire(&entitlements::Tier::Enterprise), "enterprise");
        assert_eq!(wire(&-1i64), "-1");
        assert_eq!(wire(&Value::Null), "");
        assert_eq!(wire(&json!({"a": 1})), r#"{"a":1}"#);
    }
}
