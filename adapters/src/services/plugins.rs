//! Plugins (document 2's Plugin service): uploads and generated deploys checked at the
//! door like pipelines (compliance through [`checks::check_entity`], the plugins
//! quota of the root's pool), each stored with its archive and a build job; reads,
//! updates of a whitelist of fields, deletes, and per-name usage by pipelines.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use compliance_core::Target;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tenancy::{Authored, Permission};

use super::checks;
use super::pipelines::pool;
use super::{ServiceError, ServiceResult};
use crate::archive::{self, Manifest};
use crate::services::context::{event, AppState, Caller};
use crate::storage::{new_id, unit_of_work, Charge, NewPlugin, OrgRecord, Store};
/// What the plugin workflows take and answer.
pub use crate::storage::{PluginChange, PluginFilter, PluginRecord};

/// The members of the document a plugin is judged on (those of [`attributes`]),
/// which its answer carries under the same names.
pub const JUDGED_FIELDS: [&str; 9] = [
    "name",
    "version",
    "description",
    "pluginType",
    "computeType",
    "commands",
    "installCommands",
    "accessModifier",
    "dockerfile",
];

/// The document a plugin is judged on: its manifest's fields, its visibility and its
/// Dockerfile.
fn attributes(manifest: &Manifest, access_modifier: &str, dockerfile: Option<&str>) -> Value {
    json!({
        "name": manifest.name,
        "version": manifest.version,
        "description": manifest.description,
        "pluginType": manifest.plugin_type,
        "computeType": manifest.compute_type,
        "commands": manifest.commands,
        "installCommands": manifest.install_commands,
        "accessModifier": access_modifier,
        "dockerfile": dockerfile,
    })
}

/// `public` or `private`.
pub fn access_modifier(value: &str) -> ServiceResult<()> {
    crate::inventory::AccessModifier::parse(value)
        .map(|_| ())
        .ok_or_else(|| ServiceError::invalid("accessModifier", "must be public or private"))
}

/// The image a plugin's build makes: `<organization>/<name>:<version>`, lowercase.
fn image(org: &OrgRecord, manifest: &Manifest) -> String {
    format!(
        "{}/{}:{}",
        org.id,
        manifest.name.to_lowercase(),
        manifest.version
    )
}

/// Judges, charges and stores a plugin made from `manifest` and `archive`.
async fn admit(
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    (manifest, dockerfile, archive): (&Manifest, Option<&str>, &[u8]),
    (access, action): (&str, &'static str),
    now: DateTime<Utc>,
) -> ServiceResult<PluginRecord> {
    let id = new_id();
    let document = attributes(manifest, access, dockerfile);
    let admitted = checks::at_the_door(state, org, Target::Plugin, &id, document).await?;
    let root = pool(
        &state.infra.store,
        &state.config,
        &state.replica.allowances,
        org,
    )
    .await?;
    let charge = Charge {
        org_id: &org.id,
        root_id: &root.id,
        dimension: "plugins",
        period: "",
        amount: 1,
    };
    let image = image(org, manifest);
    let audit = [event(
        caller,
        action,
        &org.id,
        "plugin",
        &id,
        json!({"name": manifest.name, "version": manifest.version}),
    )];
    let plugin = NewPlugin {
        id: &id,
        org_id: &org.id,
        manifest,
        dockerfile,
        access_modifier: access,
        compliance: &admitted.compliance,
        judgement: &admitted.judgement,
        snapshot: admitted.snapshot.as_ref(),
        archive,
        image: &image,
        created_by: &caller.user_id,
    };
    unit_of_work!(&state.infra.store, |tx| {
        let charged = tx.charge(&charge).await?;
        super::entitlement::taken(charged, "plugins")?;
        tx.insert_plugin(&plugin, now).await?;
        tx.keep_door_judgement(
            (&org.id, "plugin", &id),
            (plugin.compliance, plugin.judgement),
            plugin.snapshot,
            now,
        )
        .await?;
        tx.enqueue_reevaluation((&org.id, "plugin", &id), "plugin.create", now)
            .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(tx.plugin(&org.id, &id).await?)
    })
}

/// An uploaded archive: inspected (on the CPU pool: it is hostile input), judged,
/// charged, stored with a build job.
pub async fn upload(
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    archive: Vec<u8>,
    access: &str,
    now: DateTime<Utc>,
) -> ServiceResult<PluginRecord> {
    access_modifier(access)?;
    let (archive, inspected) = state
        .infra
        .cpu
        .run(move || {
            let inspected = archive::inspect(&archive);
            (archive, inspected)
        })
        .await
        .map_err(|_| ServiceError::Unavailable)?;
    let inspected = inspected.map_err(|e| ServiceError::invalid("plugin", e.to_string()))?;
    admit(
        state,
        caller,
        org,
        (
            &inspected.manifest,
            inspected.dockerfile.as_deref(),
            &archive,
        ),
        (access, "plugin.upload"),
        now,
    )
    .await
}

/// A generated plugin (the body of `POST /plugins/deploy-generated`, and what a
/// generation answers): its manifest's fields and its Dockerfile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GeneratedPlugin {
    /// The plugin's name.
    #[schema(min_length = 1, max_length = 100)]
    pub name: String,
    /// Its version.
    #[schema(min_length = 1, max_length = 64)]
    pub version: String,
    /// The commands its step runs.
    pub commands: Vec<String>,
    /// The commands that install its tools.
    pub install_commands: Vec<String>,
    /// Its image's Dockerfile.
    #[schema(min_length = 1, max_length = 262_144)]
    pub dockerfile: String,
}

impl GeneratedPlugin {
    /// Checked as an upload's manifest and Dockerfile are: the manifest it makes.
    pub fn manifest(&self) -> ServiceResult<Manifest> {
        let manifest = Manifest {
            name: self.name.clone(),
            version: self.version.clone(),
            description: None,
            plugin_type: None,
            compute_type: None,
            commands: self.commands.clone(),
            install_commands: self.install_commands.clone(),
        };
        manifest
            .check()
            .map_err(|e| ServiceError::invalid("body", e.to_string()))?;
        if self.dockerfile.trim().is_empty()
            || self.dockerfile.len() as u64 > archive::MAX_DESCRIPTOR_BYTES
        {
            return Err(ServiceError::invalid(
                "dockerfile",
                format!("must be 1 to {} bytes", archive::MAX_DESCRIPTOR_BYTES),
            ));
        }
        Ok(manifest)
    }

    /// The document it is judged on, as its deploy would be (private).
    pub fn document(&self, manifest: &Manifest) -> Value {
        attributes(manifest, "private", Some(&self.dockerfile))
    }
}

/// A generated plugin: its manifest and Dockerfile packed into an archive, then
/// admitted like an upload (private).
pub async fn deploy_generated(
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    generated: GeneratedPlugin,
    now: DateTime<Utc>,
) -> ServiceResult<PluginRecord> {
    let manifest = generated.manifest()?;
    let packed = archive::pack(&manifest, Some(&generated.dockerfile))
        .map_err(|e| ServiceError::Broken(e.to_string()))?;
    admit(
        state,
        caller,
        org,
        (&manifest, Some(&generated.dockerfile), &packed),
        ("private", "plugin.deploy"),
        now,
    )
    .await
}

/// 403 unless the caller created the plugin or may change anyone's.
fn may_change(
    caller: &Caller,
    author: &str,
    permissions: &BTreeSet<Permission>,
) -> ServiceResult<()> {
    if tenancy::may_change(&caller.user_id, author, permissions, Authored::Plugin) {
        Ok(())
    } else {
        Err(ServiceError::Forbidden(
            "a member changes only the plugins they created; changing anyone's takes `plugins:publish`",
        ))
    }
}

/// One plugin of the organization.
pub async fn get(store: &Store, org: &OrgRecord, id: &str) -> ServiceResult<PluginRecord> {
    store
        .plugin(&org.id, id)
        .await?
        .ok_or(ServiceError::NotFound("plugin".into()))
}

/// A page of the organization's plugins: (plugins, total).
pub async fn list(
    store: &Store,
    org: &OrgRecord,
    filter: &PluginFilter,
    order: (&str, bool),
    (limit, offset): (u32, u64),
) -> ServiceResult<(Vec<PluginRecord>, u64)> {
    Ok(store.plugins(&org.id, filter, order, limit, offset).await?)
}

/// The newest plugin matching the filter.
pub async fn find(
    store: &Store,
    org: &OrgRecord,
    filter: &PluginFilter,
) -> ServiceResult<PluginRecord> {
    let (found, _) = store
        .plugins(&org.id, filter, ("createdAt", false), 1, 0)
        .await?;
    found
        .into_iter()
        .next()
        .ok_or(ServiceError::NotFound("plugin".into()))
}

/// Changes plugins of the organization, all or nothing, audited as `action`
/// (`plugin.bulk.update`, which document 3 also uses for a single plugin).
///
/// A caller changes the plugins they created, or anyone's with `plugins:publish`
/// ([`tenancy::may_change`]); one plugin that is not theirs refuses the whole change.
pub async fn update(
    store: &Store,
    caller: &Caller,
    (org, permissions): (&OrgRecord, &BTreeSet<Permission>),
    changes: Vec<(String, PluginChange)>,
    (action, now): (&'static str, DateTime<Utc>),
) -> ServiceResult<Vec<PluginRecord>> {
    for (_, change) in &changes {
        if let Some(access) = &change.access_modifier {
            access_modifier(access)?;
        }
    }
    if !permissions.contains(&Authored::Plugin.anyones()) {
        for (id, _) in &changes {
            let plugin = get(store, org, id).await?;
            may_change(caller, &plugin.created_by, permissions)?;
        }
    }
    let ids: Vec<&str> = changes.iter().map(|(id, _)| id.as_str()).collect();
    let audit = [event(
        caller,
        action,
        &org.id,
        "plugin",
        ids.first().copied().unwrap_or_default(),
        json!({"ids": ids}),
    )];
    unit_of_work!(store, |tx| {
        for (id, change) in &changes {
            tx.update_plugin(&org.id, (id, change), now).await?;
            tx.enqueue_reevaluation((&org.id, "plugin", id), "plugin.update", now)
                .await?;
        }
        tx.enqueue_audit(&audit).await?;
        let mut changed = Vec::with_capacity(changes.len());
        for (id, _) in &changes {
            changed.push(tx.plugin(&org.id, id).await?);
        }
        Ok(changed)
    })
}

/// Deletes a plugin, freeing its quota (the creator's, or anyone's with
/// `plugins:publish`).
pub async fn delete(
    store: &Store,
    caller: &Caller,
    (org, permissions): (&OrgRecord, &BTreeSet<Permission>),
    id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let plugin = get(store, org, id).await?;
    may_change(caller, &plugin.created_by, permissions)?;
    let release = Charge {
        org_id: &org.id,
        root_id: super::entitlement::root_id(org),
        dimension: "plugins",
        period: "",
        amount: 1,
    };
    let audit = [event(
        caller,
        "plugin.delete",
        &org.id,
        "plugin",
        id,
        json!({"name": plugin.name, "version": plugin.version}),
    )];
    unit_of_work!(store, |tx| {
        tx.delete_plugin((&org.id, id)).await?;
        tx.release(&release).await?;
        tx.enqueue_reevaluation((&org.id, "plugin", id), "plugin.delete", now)
            .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })
}

/// The plugin names referenced by a pipeline's properties (the synth plugin and every
/// step's), each once.
fn referenced(props: &Value) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let mut add = |plugin: Option<&Value>| {
        if let Some(name) = plugin.and_then(|p| p.get("name")).and_then(Value::as_str) {
            names.insert(name.to_owned());
        }
    };
    add(props.pointer("/synth/plugin"));
    for stage in props
        .get("stages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for step in stage
            .get("steps")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            add(step.get("plugin"));
        }
    }
    names
}

/// Per plugin name, how many of the organization's pipelines reference it.
pub async fn usage(store: &Store, org: &OrgRecord) -> ServiceResult<BTreeMap<String, u64>> {
    let all = store.pipeline_props(&org.id).await?;
    let mut counts = BTreeMap::new();
    for props in &all {
        for name in referenced(props) {
            *counts.entry(name).or_insert(0) += 1;
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judged_fields_are_the_documents_members() {
        let manifest: Manifest =
            serde_json::from_value(json!({"name": "lint", "version": "1.0.0"})).unwrap();
        let document = attributes(&manifest, "private", None);
        let mut members: Vec<&str> = document
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        members.sort_unstable();
        let mut judged = JUDGED_FIELDS.to_vec();
        judged.sort_unstable();
        assert_eq!(members, judged);
    }
}
