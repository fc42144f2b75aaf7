//! Extractors whose rejections answer in the error envelope (never axum's plain text).

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::http::error::ApiError;

/// A JSON body, deserialized into its type (which parses the domain's values); a
/// malformed one is 400 `VALIDATION_ERROR` naming the field at fault (`details.field`,
/// the top-level field; `details.path`, where inside it), an oversized one 413.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<S, T> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !json_content_type(req.headers()) {
            return Err(ApiError::validation(
                "expected a JSON body (Content-Type: application/json)",
            ));
        }
        let RawBody(bytes) = RawBody::from_request(req, state).await?;
        body_of(&bytes).map(Json)
    }
}

/// Deserializes a JSON body, the error naming where it went wrong.
pub(crate) fn body_of<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut reader).map_err(|error| {
        let path = error.path().to_string();
        (path, error.into_inner())
    });
    let value =
        value.and_then(|value: T| reader.end().map(|()| value).map_err(|e| (String::new(), e)));
    value.map_err(|(path, inner)| {
        let root = path.is_empty() || path == ".";
        // A value of the wrong kind (`null` for an enum is a syntax error to serde_json)
        // names its field; a body cut short or unreadable does not.
        let placed = matches!(
            inner.classify(),
            serde_json::error::Category::Data | serde_json::error::Category::Syntax
        );
        if root || !placed {
            return ApiError::validation(format!("the JSON body is not acceptable: {inner}"));
        }
        let field = path.split(['.', '[']).next().unwrap_or_default().to_owned();
        ApiError::validation(format!("{path}: {inner}")).with_details(
            serde_json::json!({"field": field, "path": path, "problem": inner.to_string()}),
        )
    })
}

/// Whether the request says its body is JSON (`application/json`, or `+json`), as
/// axum's own extractor decides.
fn json_content_type(headers: &axum::http::HeaderMap) -> bool {
    let Some(value) = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    kind == "application" && (subtype == "json" || subtype.ends_with("+json"))
}

/// A body field that may be left out, set, or set to `null`: `None` when left out,
/// `Some(None)` for `null`, `Some(Some(value))` for a value (with
/// `#[serde(default, deserialize_with = "nullable")]`). A `null` is never ignored.
pub fn nullable<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// A body field that may be left out but, when sent, is a value: `null` is refused
/// (400) rather than taken for "left out" (with
/// `#[serde(default, deserialize_with = "not_null")]`).
pub fn not_null<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// The `Idempotency-Key` header, when sent: 1 to 200 visible characters, trimmed
/// (anything else is 400 naming the header).
pub fn idempotency_key(headers: &axum::http::HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .map(str::trim)
        .filter(|k| !k.is_empty() && k.len() <= 200)
        .map(|k| Some(k.to_owned()))
        .ok_or_else(|| ApiError::invalid_field("Idempotency-Key", "must be 1 to 200 characters"))
}

/// The raw bytes of a body; one over the limit is 413 `PAYLOAD_TOO_LARGE` in the
/// envelope (axum's own `Bytes` answers plain text), one that holds a NUL (raw, or
/// as a JSON escape in a string or key) 400 `VALIDATION_ERROR`.
#[derive(Debug, Clone, Default)]
pub struct RawBody(pub Bytes);

impl<S> FromRequest<S> for RawBody
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Bytes::from_request(req, state).await {
            Ok(bytes) if crate::http::text::json_holds_nul(&bytes) => Err(ApiError::validation(
                "the body holds a NUL character, which no field may contain",
            )),
            Ok(bytes) => Ok(RawBody(bytes)),
            Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Err(ApiError::payload_too_large())
            }
            Err(rejection) => Err(ApiError::validation(rejection.body_text())),
        }
    }
}

/// Query parameters; a bad one is 400 `VALIDATION_ERROR`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Query<T>(pub T);

impl<S, T> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(value)| Query(value))
            .map_err(|rejection: QueryRejection| ApiError::validation(rejection.body_text()))
    }
}

/// The common list parameters of document 2, before they are checked.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageParams {
    limit: Option<String>,
    offset: Option<String>,
    sort_by: Option<String>,
    sort_order: Option<String>,
}

/// The direction of a sort.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortOrder {
    /// Ascending.
    Asc,
    /// Descending (the default).
    Desc,
}

/// Checked pagination: limit 1..=MAX_PAGE_LIMIT (default 10), offset (default 0),
/// sortBy among the fields the endpoint allows (default createdAt), sortOrder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// Page size.
    pub limit: u32,
    /// Rows skipped.
    pub offset: u64,
    /// Sort field.
    pub sort_by: String,
    /// Sort direction.
    pub sort_order: SortOrder,
}

impl PageParams {
    /// Checks the parameters; `sortable` lists the allowed `sortBy` values.
    pub fn check(&self, max_limit: u32, sortable: &[&str]) -> Result<Page, ApiError> {
        self.check_sorted(max_limit, sortable, "createdAt")
    }

    /// [`check`](Self::check) for a list whose default order is `default`.
    pub fn check_sorted(
        &self,
        max_limit: u32,
        sortable: &[&str],
        default: &str,
    ) -> Result<Page, ApiError> {
        let limit = match self.limit.as_deref() {
            None => 10,
            Some(text) => text
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=max_limit).contains(n))
                .ok_or_else(|| {
                    ApiError::invalid_field(
                        "limit",
                        format!("must be an integer from 1 to {max_limit}"),
                    )
                })?,
        };
        let offset = match self.offset.as_deref() {
            None => 0,
            Some(text) => text
                .parse::<u64>()
                .map_err(|_| ApiError::invalid_field("offset", "must be a non-negative integer"))?,
        };
        let sort_by = self.sort_by.clone().unwrap_or_else(|| default.to_owned());
        if !sortable.contains(&sort_by.as_str()) {
            return Err(ApiError::invalid_field(
                "sortBy",
                format!("must be one of {}", sortable.join(", ")),
            ));
        }
        let sort_order = match self.sort_order.as_deref() {
            None | Some("desc") => SortOrder::Desc,
            Some("asc") => SortOrder::Asc,
            Some(_) => return Err(ApiError::invalid_field("sortOrder", "must be asc or desc")),
        };
        Ok(Page {
            limit,
            offset,
            sort_by,
            sort_order,
        })
    }
}
