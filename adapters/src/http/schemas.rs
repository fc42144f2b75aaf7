//! The envelopes of document 2 around the typed bodies and answers (success, page,
//! error, pagination) and the schemas of path, query and header parameters. Every
//! body and answer schema is derived from its type (`http/openapi.rs`); enums come
//! from the domain types through [`schema_value`]. Schemathesis checks, in the test
//! suite, that the server answers what the document says.

use serde_json::{json, Map, Value};

/// A string.
pub(crate) fn string() -> Value {
    json!({"type": "string"})
}

/// A non-empty string of at most `max` characters.
pub(crate) fn text(max: u32) -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": max})
}

/// A string or null.
pub(crate) fn nullable(schema: Value) -> Value {
    json!({"anyOf": [schema, {"type": "null"}]})
}

/// An integer.
pub(crate) fn integer() -> Value {
    json!({"type": "integer"})
}

/// A boolean.
pub(crate) fn boolean() -> Value {
    json!({"type": "boolean"})
}

/// Any JSON value.
pub(crate) fn any() -> Value {
    json!({})
}

/// One of the strings.
pub(crate) fn one_of(values: &[&str]) -> Value {
    json!({"type": "string", "enum": values})
}

/// An array of `items`.
pub(crate) fn array(items: Value) -> Value {
    json!({"type": "array", "items": items})
}

/// A reference to a component.
pub(crate) fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// An object with `properties`, the `required` ones named; other properties allowed
/// (answers may grow fields).
pub(crate) fn object(properties: &[(&str, Value)], required: &[&str]) -> Value {
    let properties: Map<String, Value> = properties
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    json!({"type": "object", "properties": properties, "required": required})
}

/// The success envelope around `data`.
pub(crate) fn envelope(data: Value) -> Value {
    object(
        &[
            ("success", json!({"const": true})),
            ("statusCode", integer()),
            ("data", data),
        ],
        &["success", "statusCode", "data"],
    )
}

/// The paginated envelope with its list under `key`.
pub(crate) fn page(key: &str, item: Value) -> Value {
    page_with(key, item, &[])
}

/// [`page`] with more top-level fields.
pub(crate) fn page_with(key: &str, item: Value, extra: &[(&str, Value)]) -> Value {
    let mut properties = vec![
        ("success", json!({"const": true})),
        ("statusCode", integer()),
        (key, array(item)),
        ("pagination", reference("Pagination")),
    ];
    properties.extend(extra.iter().cloned());
    object(&properties, &["success", "statusCode", key, "pagination"])
}

/// A query or header parameter.
pub(crate) fn parameter(name: &str, place: &str, required: bool, schema: Value) -> Value {
    json!({"name": name, "in": place, "required": required, "schema": schema})
}

/// An optional query parameter.
pub(crate) fn query(name: &str, schema: Value) -> Value {
    parameter(name, "query", false, schema)
}

/// The common list parameters of document 2.
pub(crate) fn paging(sortable: &[&str]) -> Vec<Value> {
    vec![
        query(
            "limit",
            json!({"type": "integer", "minimum": 1, "maximum": 100}),
        ),
        query("offset", json!({"type": "integer", "minimum": 0})),
        query("sortBy", one_of(sortable)),
        query("sortOrder", one_of(&["asc", "desc"])),
    ]
}

/// The named schemas written by hand (the ones not derived from a type yet).
pub(crate) fn components() -> Value {
    let pagination = object(
        &[
            ("total", json!({"type": "integer", "minimum": 0})),
            ("limit", json!({"type": "integer", "minimum": 1})),
            ("offset", json!({"type": "integer", "minimum": 0})),
            ("hasMore", boolean()),
        ],
        &["total", "limit", "offset", "hasMore"],
    );
    let error = object(
        &[
            ("success", json!({"const": false})),
            (
                "statusCode",
                json!({"type": "integer", "minimum": 400, "maximum": 599}),
            ),
            (
                "code",
                json!({"type": "string", "pattern": "^[A-Z][A-Z_]*$"}),
            ),
            ("message", string()),
            ("details", any()),
        ],
        &["success", "statusCode", "code", "message"],
    );
    let schemas = json!({
        "Pagination": pagination,
        "Error": error,
    });
    schemas
}

/// The inline schema of a domain type (a query parameter's, say).
pub(crate) fn schema_value<T: utoipa::PartialSchema>() -> Value {
    super::openapi::json(T::schema())
}

/// A target: `plugin` or `pipeline` (compliance-core's [`compliance_core::Target`]).
pub(crate) fn target() -> Value {
    schema_value::<compliance_core::Target>()
}
