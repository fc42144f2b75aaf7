//! The success and paginated envelopes of document 2.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

use crate::http::extract::Page;

/// The success envelope, written straight from `T` (no intermediate JSON value).
#[derive(Serialize)]
struct Envelope<T> {
    data: T,
    #[serde(rename = "statusCode")]
    status_code: u16,
    success: bool,
}

/// `{success: true, statusCode, data}`; an answer that does not serialize is a 500,
/// never an empty `data`.
fn ok<T: Serialize>(status: StatusCode, data: T) -> Response {
    let envelope = Envelope {
        data,
        status_code: status.as_u16(),
        success: true,
    };
    json_response(status, &envelope)
}

/// `{success: true, statusCode: 200, <listKey>: [...], pagination: {total, limit, offset, hasMore}}`,
/// with more top-level fields beside the list, written straight from the items; a
/// page that does not serialize is a 500, never an empty list.
fn paginated_with<T: Serialize>(
    list_key: &str,
    items: Vec<T>,
    total: u64,
    page: &Page,
    extra: Vec<(&str, Value)>,
) -> Response {
    let returned = items.len() as u64;
    let body = PagedBody {
        list_key,
        items: &items,
        pagination: Pagination {
            total,
            limit: page.limit,
            offset: page.offset,
            has_more: page.offset.saturating_add(returned) < total,
        },
        extra: &extra,
    };
    json_response(StatusCode::OK, &body)
}

/// Where a page sits in the whole list: the paginated envelope's `pagination` (its
/// members in the order the page has always written them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pagination {
    /// True when items follow this page.
    pub has_more: bool,
    /// Page size.
    pub limit: u32,
    /// Items skipped.
    pub offset: u64,
    /// Items in the whole list.
    pub total: u64,
}

/// The paginated envelope's members.
struct PagedBody<'a, T> {
    list_key: &'a str,
    items: &'a [T],
    pagination: Pagination,
    extra: &'a [(&'a str, Value)],
}

impl<T: Serialize> Serialize for PagedBody<'_, T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(4 + self.extra.len()))?;
        map.serialize_entry("success", &true)?;
        map.serialize_entry("statusCode", &200)?;
        map.serialize_entry("pagination", &self.pagination)?;
        map.serialize_entry(self.list_key, self.items)?;
        for (key, value) in self.extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// `body` as a JSON answer with `status`; a body that does not serialize is a 500.
fn json_response(status: StatusCode, body: &impl Serialize) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => (
            status,
            [(
                axum::http::header::CONTENT_TYPE,
                axum::http::HeaderValue::from_static("application/json"),
            )],
            bytes,
        )
            .into_response(),
        Err(error) => crate::http::error::ApiError::internal(format!(
            "the answer does not serialize: {error}"
        ))
        .into_response(),
    }
}

/// A typed success: `{success: true, statusCode, data}` around a `T`, whose schema
/// the route table documents from the same type ([`Route::answers`]).
///
/// [`Route::answers`]: crate::http::routes::Route
#[derive(Debug)]
pub struct Answer<T> {
    status: StatusCode,
    data: T,
}

impl<T> Answer<T> {
    /// 200.
    pub fn ok(data: T) -> Self {
        Answer {
            status: StatusCode::OK,
            data,
        }
    }

    /// 202: accepted, done later.
    pub fn accepted(data: T) -> Self {
        Answer {
            status: StatusCode::ACCEPTED,
            data,
        }
    }

    /// 201.
    pub fn created(data: T) -> Self {
        Answer {
            status: StatusCode::CREATED,
            data,
        }
    }
}

impl<T: Serialize> IntoResponse for Answer<T> {
    fn into_response(self) -> Response {
        ok(self.status, self.data)
    }
}

/// A typed page: the paginated envelope with its `T`s under `key`.
#[derive(Debug)]
pub struct Paged<T> {
    key: &'static str,
    items: Vec<T>,
    total: u64,
    page: Page,
    beside: Vec<(&'static str, Value)>,
    /// A value beside the list that did not serialize: the page is a 500, never a
    /// `null` in its place.
    broken: Option<String>,
}

impl<T> Paged<T> {
    /// `items`, one page of `total`, under `key`.
    pub fn new(key: &'static str, items: Vec<T>, total: u64, page: Page) -> Self {
        Paged {
            key,
            items,
            total,
            page,
            beside: Vec::new(),
            broken: None,
        }
    }

    /// With `value` under `key` beside the list (documented by the route's
    /// `pages_beside`).
    pub fn beside(mut self, key: &'static str, value: impl Serialize) -> Self {
        match serde_json::to_value(value) {
            Ok(value) => self.beside.push((key, value)),
            Err(error) => self.broken = Some(format!("`{key}` beside a page: {error}")),
        }
        self
    }
}

impl<T: Serialize> IntoResponse for Paged<T> {
    fn into_response(self) -> Response {
        if let Some(cause) = self.broken {
            return crate::http::error::ApiError::internal(cause).into_response();
        }
        paginated_with(self.key, self.items, self.total, &self.page, self.beside)
    }
}

/// `{id, deleted: true}`: what a delete answers.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Deleted {
    pub id: String,
    pub deleted: bool,
}

impl Deleted {
    /// `id` is deleted.
    pub fn new(id: impl Into<String>) -> Self {
        Deleted {
            id: id.into(),
            deleted: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::extract::SortOrder;

    #[test]
    fn a_value_beside_a_page_that_does_not_serialize_is_a_500_not_a_null() {
        let page = || Page {
            limit: 10,
            offset: 0,
            sort_by: "createdAt".to_owned(),
            sort_order: SortOrder::Desc,
        };
        // JSON objects have text keys: a map keyed by pairs does not serialize.
        let unserializable: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        let broken = Paged::new("items", vec![1u8], 1, page())
            .beside("latest", unserializable)
            .into_response();
        assert_eq!(broken.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let fine = Paged::new("items", vec![1u8], 1, page())
            .beside("latest", 7)
            .into_response();
        assert_eq!(fine.status(), StatusCode::OK);
    }

    #[test]
    fn the_pagination_is_written_as_it_always_was() {
        let pagination = Pagination {
            has_more: true,
            limit: 10,
            offset: 0,
            total: 15,
        };
        assert_eq!(
            serde_json::to_string(&pagination).ok().as_deref(),
            Some(r#"{"hasMore":true,"limit":10,"offset":0,"total":15}"#)
        );
    }
}
