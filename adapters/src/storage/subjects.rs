//! Entities as a judge reads them: the document each is judged on, read by a column
//! list that leaves its compliance out (a scan's sweep and the re-evaluation queue
//! never read what the entity was last judged).

use serde_json::{json, Value};

use super::decode::Decoder;
use super::{entity_table, StoreResult};
use crate::inventory::AccessModifier;

/// An entity to judge: its id, its name (a plugin's `name@version`) and the document
/// it is judged on (as its create body or upload was).
#[derive(Debug, Clone, PartialEq)]
pub struct Subject {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// The document it is judged on.
    pub document: Value,
}

/// The columns a [`Subject`] of `target` is read from.
pub(crate) fn subject_columns(target: &str) -> StoreResult<&'static str> {
    Ok(match entity_table(target)? {
        "plugins" => "id, name, version, description, plugin_type, compute_type, commands, install_commands, access_modifier, dockerfile",
        _ => "id, project, organization, pipeline_name, access_modifier, props",
    })
}

/// A [`Subject`] of `target` from a row of [`subject_columns`].
pub(crate) fn subject_from_row(target: &str, row: &sqlx::any::AnyRow) -> StoreResult<Subject> {
    let table = entity_table(target)?;
    let d = Decoder::new(row, table, &["id"]);
    let access: AccessModifier = d.named("access_modifier", AccessModifier::parse)?;
    if table == "plugins" {
        let (name, version): (String, String) = (d.get("name")?, d.get("version")?);
        let document = json!({
            "name": name,
            "version": version,
            "description": d.get::<Option<String>>("description")?,
            "pluginType": d.get::<Option<String>>("plugin_type")?,
            "computeType": d.get::<Option<String>>("compute_type")?,
            "commands": d.json::<Vec<String>>("commands")?,
            "installCommands": d.json::<Vec<String>>("install_commands")?,
            "accessModifier": access,
            "dockerfile": d.get::<Option<String>>("dockerfile")?,
        });
        return Ok(Subject {
            id: d.get("id")?,
            name: format!("{name}@{version}"),
            document,
        });
    }
    let name: String = d.get("pipeline_name")?;
    let document = json!({
        "project": d.get::<String>("project")?,
        "organization": d.get::<String>("organization")?,
        "pipelineName": name,
        "accessModifier": access,
        "props": d.json::<Value>("props")?,
    });
    Ok(Subject {
        id: d.get("id")?,
        name,
        document,
    })
}
