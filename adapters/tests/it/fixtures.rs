//! One helper per fixture the tests share: the bodies of the entities they create.

use serde_json::{json, Value};

/// A pipeline create body: `name` in project `web` of `acme`, private, no properties.
pub fn pipeline(name: &str) -> Value {
    pipeline_as(name, "private")
}

/// [`pipeline`] with the access modifier `access`.
pub fn pipeline_as(name: &str, access: &str) -> Value {
    json!({"project": "web", "organization": "acme", "pipelineName": name,
           "accessModifier": access, "props": {}})
}

/// [`pipeline`] with a synth step and a stage whose step runs a pinned plugin.
pub fn staged_pipeline(name: &str) -> Value {
    let mut body = pipeline(name);
    body["props"] = json!({
        "project": "web",
        "organization": "acme",
        "synth": {
            "source": {"type": "github", "options": {"repo": "acme/web", "branch": "main"}},
            "plugin": {"name": "cdk-synth", "version": "1.2.0"}
        },
        "stages": [{
            "stageName": "build",
            "steps": [{"name": "lint", "plugin": {"name": "eslint", "version": "8.1.0"}, "env": {"CI": "1"}}]
        }]
    });
    body
}
