//! Schemas derived from the wire types: a body or an answer is a Rust type deriving
//! `utoipa::ToSchema`, and its JSON Schema in `/openapi.json` is read from that type
//! (named types become `components`, referred to by `$ref`). The domain's enums
//! (targets, severities, operators, tiers, permissions...) carry their schemas in
//! their own crates (feature `schema`), so no list of values is spelled twice.

use serde_json::{json, Map, Value};

use super::routes::routes;
use super::schemas::*;
use utoipa::openapi::schema::Schema;
use utoipa::openapi::RefOr;

/// The named schemas a type needs, as `(name, schema)` pairs.
pub(crate) type Components = Vec<(String, Value)>;

/// A utoipa schema as the document's JSON.
pub(crate) fn json(schema: RefOr<Schema>) -> Value {
    serde_json::to_value(schema).unwrap_or(Value::Null)
}

/// The schema of `T` as a route refers to it: a `$ref` to its component for a named
/// type; `T`'s own schema and every schema it refers to go to `components`.
pub(crate) fn schema_of<T: utoipa::ToSchema>(components: &mut Components) -> Value {
    let mut needed = Vec::new();
    T::schemas(&mut needed);
    components.extend(
        needed
            .into_iter()
            .map(|(name, schema)| (name, json(schema))),
    );
    let name = T::name().into_owned();
    components.push((name.clone(), json(T::schema())));
    super::schemas::reference(&name)
}

/// The OpenAPI 3.1 document of the table.
pub fn document() -> Value {
    let mut paths: Map<String, Value> = Map::new();
    let mut schemas = match components() {
        Value::Object(hand) => hand,
        _ => Map::new(),
    };
    for route in routes() {
        for (name, schema) in &route.components {
            schemas.insert(name.clone(), schema.clone());
        }
        let mut parameters: Vec<Value> = route
            .path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| {
                let schema = match name {
                    "target" => target(),
                    "type" => schema_value::<crate::http::quotas::QuotaType>(),
                    "bundleId" => schema_value::<entitlements::BundleId>(),
                    _ => text(200),
                };
                parameter(name, "path", true, schema)
            })
            .collect();
        if route.access.needs_org_header() {
            parameters.push(parameter("x-org-id", "header", true, text(200)));
        }
        if let Some(name) = route.access.org_query() {
            parameters.push(parameter(name, "query", true, text(200)));
        }
        parameters.extend(route.query.iter().cloned());
        let (status, schema) = &route.ok;
        let content_type = route.media;
        let security = if route.access.authenticated() {
            json!([{"bearer": []}])
        } else {
            json!([])
        };
        let mut operation = Map::new();
        operation.insert("operationId".into(), json!(route.operation));
        operation.insert("summary".into(), json!(route.summary));
        let feature = route.feature.map_or_else(String::new, |f| {
            format!(
                " Needs the `{}` feature in the account (its tier, a bundle or a grant; a super-admin and the system organization have every feature), else 403 FEATURE_NOT_AVAILABLE.",
                f.name()
            )
        });
        operation.insert(
            "description".into(),
            json!(format!(
                "{}{feature} Errors answer in the envelope {{success: false, statusCode, code, message, details?}}.",
                route.access.describe()
            )),
        );
        if let Some(feature) = route.feature {
            operation.insert("x-feature".into(), json!(feature.name()));
        }
        operation.insert("security".into(), security);
        operation.insert("parameters".into(), Value::Array(parameters));
        if let Some((body, required)) = &route.body {
            operation.insert(
                "requestBody".into(),
                json!({"required": required, "content": {route.body_media: {"schema": body}}}),
            );
        }
        operation.insert(
            "responses".into(),
            json!({
                status.to_string(): {
                    "description": "Success",
                    "content": {content_type: {"schema": schema}},
                },
                "default": {
                    "description": "An error, in the envelope",
                    "content": {"application/json": {"schema": reference("Error")}},
                },
            }),
        );
        if let Value::Object(methods) = paths
            .entry(route.path.to_owned())
            .or_insert_with(|| json!({}))
        {
            methods.insert(route.method.to_lowercase(), Value::Object(operation));
        }
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "compliance",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The governance core of a multi-tenant CI/CD platform: the reference server.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_enum_is_its_crates_list_and_a_struct_names_its_parts() {
        let mut components = Components::new();
        let schema = schema_of::<compliance_core::Compliance>(&mut components);
        assert_eq!(schema["$ref"], "#/components/schemas/Compliance");
        let named = |name: &str| {
            components
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, s)| s.clone())
                .unwrap_or_else(|| panic!("{name} is not among {components:?}"))
        };
        assert_eq!(
            named("Outcome")["enum"],
            serde_json::json!(["pass", "warn", "block"])
        );
        let violation = named("Violation");
        let required = violation["required"].as_array().unwrap();
        for field in [
            "ruleId", "ruleName", "severity", "field", "operator", "message",
        ] {
            assert!(required.iter().any(|r| r == field), "{field}: {violation}");
        }
        assert!(!required.iter().any(|r| r == "actual"));
        assert_eq!(named("Operator")["enum"].as_array().unwrap().len(), 18);
        assert_eq!(
            named("Cut")["properties"]["keyBytes"]["type"],
            serde_json::json!(["integer", "null"])
        );
    }
}
