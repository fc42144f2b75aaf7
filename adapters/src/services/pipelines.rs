//! Pipelines (document 2's Pipeline service): the inventory of an organization, with
//! compliance and quota enforced at the door. A create or update is checked by
//! [`checks::check_entity`] (the same function as validation: check log, snapshot,
//! notification) within the 5-second budget: a block answers
//! [`ServiceError::Blocked`] and nothing is stored; a check that cannot be made in
//! time is [`ServiceError::Unavailable`] and nothing is stored. A create charges the
//! pipelines quota of the organization's root pool in the transaction of the insert.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use compliance_core::Target;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tenancy::{Authored, Permission};

use super::checks;
use super::{ServiceError, ServiceResult};
use crate::config::Config;
use crate::inventory::{AccessModifier, Name};
use crate::replica::allowance::Allowances;
use crate::services::context::{event, AppState, Caller};
use crate::storage::{new_id, unit_of_work, Charge, OrgRecord, PipelineFields, Store};
/// What the pipeline workflows take and answer.
pub use crate::storage::{PipelineFilter, PipelineRecord, RegistryEntry};

/// A pipeline as a create or update gives it (document 2's Pipeline create body),
/// every value parsed; also what a generation answers (the body a client may then
/// create).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = PipelineBody)]
pub struct PipelineInput {
    /// The project name.
    pub project: Name,
    /// The organization name.
    pub organization: Name,
    /// The pipeline's name.
    pub pipeline_name: Name,
    /// Who may see it.
    pub access_modifier: AccessModifier,
    /// Its properties.
    pub props: PipelineProps,
}

/// A pipeline's properties: `synth` and `stages` (each step names a plugin with a
/// version; env values are strings), and whatever else the client keeps there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineProps {
    /// How the pipeline is synthesized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synth: Option<Synth>,
    /// The stages, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<Stage>>,
    /// Other properties, kept as given.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// The synth step: its source and the plugin that synthesizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Synth {
    /// The plugin that synthesizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<PluginRef>,
    /// Other properties (the source, say), kept as given.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A stage: a name and its steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    /// The stage's name.
    pub stage_name: Name,
    /// Its steps, in order.
    pub steps: Vec<Step>,
    /// Other properties, kept as given.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A step: a name, the plugin it runs, its environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// The step's name.
    pub name: Name,
    /// The plugin it runs.
    pub plugin: PluginRef,
    /// Its environment: names to strings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// Other properties, kept as given.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A plugin by name and version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginRef {
    /// The plugin's name.
    pub name: Name,
    /// Its version.
    pub version: Name,
    /// Other properties, kept as given.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// The members of the document a pipeline is judged on (those of [`attributes`]),
/// which its answer carries under the same names.
pub const JUDGED_FIELDS: [&str; 5] = [
    "project",
    "organization",
    "pipelineName",
    "accessModifier",
    "props",
];

/// The document a pipeline is judged on: its create body; and its properties as
/// stored.
pub(crate) fn attributes(input: &PipelineInput) -> ServiceResult<(Value, Value)> {
    let props = serde_json::to_value(&input.props)
        .map_err(|e| ServiceError::Broken(format!("pipeline properties do not serialize: {e}")))?;
    let document = json!({
        "project": input.project,
        "organization": input.organization,
        "pipelineName": input.pipeline_name,
        "accessModifier": input.access_modifier,
        "props": props,
    });
    Ok((document, props))
}

/// The root whose pool an organization draws from, its entitlement synchronized
/// (so that the charge's statement finds the limit in the pool row).
pub async fn pool(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    org: &OrgRecord,
) -> ServiceResult<OrgRecord> {
    let root = super::entitlement::root_of(store, org).await?;
    super::entitlement::ensure_synced(store, config, allowances, &root).await?;
    Ok(root)
}

/// Creates a pipeline: validated, judged, then stored with its quota charge, its
/// re-evaluation event and its audit event in one transaction.
pub async fn create(
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    input: PipelineInput,
    now: DateTime<Utc>,
) -> ServiceResult<PipelineRecord> {
    let id = new_id();
    let (document, props) = attributes(&input)?;
    let admitted = checks::at_the_door(state, org, Target::Pipeline, &id, document).await?;
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
        dimension: "pipelines",
        period: "",
        amount: 1,
    };
    let audit = [event(
        caller,
        "pipeline.create",
        &org.id,
        "pipeline",
        &id,
        json!({"pipelineName": input.pipeline_name, "project": input.project}),
    )];
    let fields = PipelineFields {
        project: input.project.as_str(),
        organization: input.organization.as_str(),
        pipeline_name: input.pipeline_name.as_str(),
        access_modifier: input.access_modifier,
        props: &props,
        compliance: &admitted.compliance,
        judgement: &admitted.judgement,
        snapshot: admitted.snapshot.as_ref(),
    };
    unit_of_work!(&state.infra.store, |tx| {
        let charged = tx.charge(&charge).await?;
        super::entitlement::taken(charged, "pipelines")?;
        let record = tx
            .insert_pipeline((&id, &org.id, &caller.user_id), &fields, now)
            .await?;
        tx.keep_door_judgement(
            (&org.id, "pipeline", &id),
            (fields.compliance, fields.judgement),
            fields.snapshot,
            now,
        )
        .await?;
        tx.enqueue_reevaluation((&org.id, "pipeline", &id), "pipeline.create", now)
            .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(record)
    })
}

/// Replaces a pipeline: validated and judged again like a create. A caller changes
/// the pipelines they created, or anyone's with `pipelines:publish`
/// ([`tenancy::may_change`]).
pub async fn update(
    state: &AppState,
    caller: &Caller,
    (org, permissions): (&OrgRecord, &BTreeSet<Permission>),
    id: &str,
    input: PipelineInput,
    now: DateTime<Utc>,
) -> ServiceResult<PipelineRecord> {
    let pipeline = get(&state.infra.store, org, id).await?;
    may_change(caller, &pipeline.created_by, permissions)?;
    let (document, props) = attributes(&input)?;
    let admitted = checks::at_the_door(state, org, Target::Pipeline, id, document).await?;
    let audit = [event(
        caller,
        "pipeline.update",
        &org.id,
        "pipeline",
        id,
        json!({"pipelineName": input.pipeline_name, "project": input.project}),
    )];
    let fields = PipelineFields {
        project: input.project.as_str(),
        organization: input.organization.as_str(),
        pipeline_name: input.pipeline_name.as_str(),
        access_modifier: input.access_modifier,
        props: &props,
        compliance: &admitted.compliance,
        judgement: &admitted.judgement,
        snapshot: admitted.snapshot.as_ref(),
    };
    unit_of_work!(&state.infra.store, |tx| {
        tx.update_pipeline((&org.id, id), &fields, now).await?;
        tx.keep_door_judgement(
            (&org.id, "pipeline", id),
            (fields.compliance, fields.judgement),
            fields.snapshot,
            now,
        )
        .await?;
        tx.enqueue_reevaluation((&org.id, "pipeline", id), "pipeline.update", now)
            .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(tx.pipeline(&org.id, id).await?)
    })
}

/// Deletes a pipeline, freeing its quota (the creator's, or anyone's with
/// `pipelines:publish`).
pub async fn delete(
    store: &Store,
    caller: &Caller,
    (org, permissions): (&OrgRecord, &BTreeSet<Permission>),
    id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let pipeline = get(store, org, id).await?;
    may_change(caller, &pipeline.created_by, permissions)?;
    let release = Charge {
        org_id: &org.id,
        root_id: super::entitlement::root_id(org),
        dimension: "pipelines",
        period: "",
        amount: 1,
    };
    let audit = [event(
        caller,
        "pipeline.delete",
        &org.id,
        "pipeline",
        id,
        json!({"pipelineName": pipeline.pipeline_name, "project": pipeline.project}),
    )];
    unit_of_work!(store, |tx| {
        tx.delete_pipeline((&org.id, id)).await?;
        tx.release(&release).await?;
        tx.enqueue_reevaluation((&org.id, "pipeline", id), "pipeline.delete", now)
            .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })
}

/// 403 unless the caller created the pipeline or may change anyone's.
fn may_change(
    caller: &Caller,
    author: &str,
    permissions: &BTreeSet<Permission>,
) -> ServiceResult<()> {
    if tenancy::may_change(&caller.user_id, author, permissions, Authored::Pipeline) {
        Ok(())
    } else {
        Err(ServiceError::Forbidden(
            "a member changes only the pipelines they created; changing anyone's takes `pipelines:publish`",
        ))
    }
}

/// One pipeline of the organization.
pub async fn get(store: &Store, org: &OrgRecord, id: &str) -> ServiceResult<PipelineRecord> {
    store
        .pipeline(&org.id, id)
        .await?
        .ok_or(ServiceError::NotFound("pipeline".into()))
}

/// A page of the organization's pipelines: (pipelines, total).
pub async fn list(
    store: &Store,
    org: &OrgRecord,
    filter: &PipelineFilter,
    order: (&str, bool),
    (limit, offset): (u32, u64),
) -> ServiceResult<(Vec<PipelineRecord>, u64)> {
    Ok(store
        .pipelines(&org.id, filter, order, limit, offset)
        .await?)
}

/// The newest pipeline matching the filter.
pub async fn find(
    store: &Store,
    org: &OrgRecord,
    filter: &PipelineFilter,
) -> ServiceResult<PipelineRecord> {
    let (found, _) = store
        .pipelines(&org.id, filter, ("createdAt", false), 1, 0)
        .await?;
    found
        .into_iter()
        .next()
        .ok_or(ServiceError::NotFound("pipeline".into()))
}

/// A page of the organization's registry: (entries, total).
pub async fn registry(
    store: &Store,
    org: &OrgRecord,
    limit: u32,
    offset: u64,
) -> ServiceResult<(Vec<RegistryEntry>, u64)> {
    Ok(store.registry(&org.id, limit, offset).await?)
}

/// Maps a cloud pipeline resource name to a pipeline of the organization (a
/// pipeline of another organization is not found).
pub async fn register(
    store: &Store,
    caller: &Caller,
    (org, super_admin): (&OrgRecord, bool),
    (arn, pipeline_id, take_over): (&str, &str, bool),
    now: DateTime<Utc>,
) -> ServiceResult<RegistryEntry> {
    get(store, org, pipeline_id).await?;
    let holder = store
        .registry_owner(arn)
        .await?
        .filter(|holder| *holder != org.id);
    if take_over && !super_admin {
        return Err(ServiceError::Forbidden(
            "only a super-admin may move a resource name from another organization",
        ));
    }
    if holder.is_some() && !take_over {
        return Err(ServiceError::Conflict(
            "this resource name is registered by another organization (a super-admin may move it with takeOver)"
                .to_owned(),
        ));
    }
    let mut audit = vec![event(
        caller,
        "pipeline.registry.register",
        &org.id,
        "pipeline",
        pipeline_id,
        json!({"arn": arn, "movedFrom": holder}),
    )];
    if let Some(holder) = &holder {
        // The organization it is taken from sees the move in its own chain.
        audit.push(event(
            caller,
            "pipeline.registry.deregister",
            holder,
            "registry",
            arn,
            json!({"arn": arn, "movedTo": org.id}),
        ));
    }
    let entry = unit_of_work!(store, |tx| {
        let entry = tx
            .register_pipeline(&org.id, (arn, pipeline_id), (now, take_over))
            .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(entry)
    })?;
    // The resource's executions kept aside are attributed now (the reports worker
    // does it otherwise, after a crash).
    super::reports::derive_pending(store, 1000).await?;
    Ok(entry)
}

/// Removes a registry entry of the organization.
pub async fn deregister(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    arn: &str,
) -> ServiceResult<()> {
    let audit = [event(
        caller,
        "pipeline.registry.deregister",
        &org.id,
        "registry",
        arn,
        json!({"arn": arn}),
    )];
    unit_of_work!(store, |tx| {
        tx.deregister_pipeline(&org.id, arn).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judged_fields_are_the_documents_members() {
        let input: PipelineInput = serde_json::from_value(json!({
            "project": "web", "organization": "acme", "pipelineName": "app",
            "accessModifier": "private", "props": {}
        }))
        .unwrap();
        let (document, _) = attributes(&input).unwrap();
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
