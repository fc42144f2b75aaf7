//! Schemas derived from the wire types: a body or an answer is a Rust type deriving
//! `utoipa::ToSchema`, and its JSON Schema in `/openapi.json` is read from that type
//! (named types become `components`, referred to by `$ref`). The domain's enums
//! (targets, severities, operators, tiers, permissions...) carry their schemas in
//! their own crates (feature `schema`), so no list of values is spelled twice.

use serde_json::Value;
use utoipa::openapi::schema::Schema;
use utoipa::openapi::RefOr;

/// The named schemas a type needs, as `(name, schema)` pairs.
pub(crate) type Components = Vec<(String, Value)>;

fn json(schema: RefOr<Schema>) -> Value {
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
