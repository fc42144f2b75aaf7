//! What a provider must answer: the JSON schema it is given, and its answer decoded
//! into the body or the problems sent back to it.

use super::*;

/// `value` as a `T`, or the problem with the path of the field at fault.
pub(super) fn parse<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, Vec<Problem>> {
    serde_path_to_error::deserialize::<_, T>(value).map_err(|error| {
        let path = error.path().to_string();
        let field = (path != ".").then_some(path);
        vec![Problem::validation(field, error.inner().to_string())]
    })
}

/// A refusal of the validation as a problem of the answer.
pub(super) fn problem_of(error: ServiceError) -> Problem {
    match error {
        ServiceError::Invalid { field, message } => {
            Problem::validation(Some(field.to_owned()), message)
        }
        other => Problem::validation(None, other.to_string()),
    }
}

/// The JSON Schema of the body a kind answers, derived from the type a create
/// parses (its components under `$defs`), and its text for the instructions; made
/// once.
pub(super) fn schema_of(kind: Kind) -> &'static (Value, String) {
    static PIPELINE: OnceLock<(Value, String)> = OnceLock::new();
    static PLUGIN: OnceLock<(Value, String)> = OnceLock::new();
    let (cell, make): (_, fn() -> Value) = match kind {
        Kind::Pipeline => (&PIPELINE, json_schema::<PipelineInput>),
        Kind::Plugin => (&PLUGIN, json_schema::<GeneratedPlugin>),
    };
    cell.get_or_init(|| {
        let schema = make();
        let text = schema.to_string();
        (schema, text)
    })
}

pub(super) fn json_schema<T: utoipa::ToSchema>() -> Value {
    let mut needed = Vec::new();
    T::schemas(&mut needed);
    let mut defs = Map::new();
    for (name, schema) in needed {
        defs.insert(name, serde_json::to_value(schema).unwrap_or(Value::Null));
    }
    let mut root = serde_json::to_value(T::schema()).unwrap_or(Value::Null);
    if !defs.is_empty() {
        if let Some(object) = root.as_object_mut() {
            object.insert("$defs".to_owned(), Value::Object(defs));
        }
    }
    rewrite_refs(&mut root);
    root
}

/// `#/components/schemas/X` (OpenAPI) becomes `#/$defs/X` (a standalone schema).
pub(super) fn rewrite_refs(value: &mut Value) {
    match value {
        Value::Object(object) => {
            for (key, inner) in object.iter_mut() {
                if key == "$ref" {
                    if let Some(name) = inner
                        .as_str()
                        .and_then(|r| r.strip_prefix("#/components/schemas/"))
                    {
                        *inner = Value::String(format!("#/$defs/{name}"));
                    }
                } else {
                    rewrite_refs(inner);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_stand_alone() {
        let pipeline = &schema_of(Kind::Pipeline).0;
        let text = pipeline.to_string();
        assert!(!text.contains("#/components/"), "{text}");
        assert!(text.contains("#/$defs/PipelineProps"), "{text}");
        assert!(pipeline["$defs"]["PipelineProps"].is_object(), "{text}");
        assert_eq!(
            pipeline["required"],
            serde_json::json!([
                "project",
                "organization",
                "pipelineName",
                "accessModifier",
                "props"
            ])
        );
        let plugin = &schema_of(Kind::Plugin).0;
        assert!(plugin["properties"]["dockerfile"].is_object(), "{plugin}");
    }

    #[test]
    fn references_are_names_not_options() {
        for good in ["main", "release/1.2", "v1.0.0", "feature_x-y"] {
            assert!(check_reference(good).is_ok(), "{good}");
        }
        for bad in [
            "-c",
            "--upload-pack=x",
            "a..b",
            "/x",
            "x/",
            "a b",
            "x.lock",
            "",
            "ref\n",
        ] {
            assert!(check_reference(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn prompts_are_bounded_and_printable() {
        assert!(check_prompt("build\ta Rust service\n", 100).is_ok());
        assert!(check_prompt("  ", 100).is_err());
        assert!(check_prompt(&"x".repeat(101), 100).is_err());
        assert!(check_prompt("nul\u{0}byte", 100).is_err());
    }
}
