//! Pipelines (document 2's Pipeline service): the inventory of an organization, with
//! compliance and quota enforced at the door. A create or update is checked by
//! [`checks::check_entity`] (the same function as validation: check log, snapshot,
//! notification) within the 5-second budget: a block answers
//! [`ServiceError::Blocked`] and nothing is stored; a check that cannot be made in
//! time is [`ServiceError::Unavailable`] and nothing is stored. A create charges the
//! pipelines quota of the organization's root pool in the transaction of the insert.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use compliance_core::Target;
use serde_json::{json, Value};
use tenancy::{Authored, Permission};

use super::checks;
use super::{ServiceError, ServiceResult};
use crate::services::context::{event, AppState, Caller};
use crate::storage::{
    new_id, Charge, OrgRecord, PipelineFields, PipelineFilter, PipelineRecord, RegistryEntry,
};

/// A pipeline as a create or update gives it (document 2's Pipeline create body).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PipelineInput {
    /// The project name.
    pub project: String,
    /// The organization name.
    pub organization: String,
    /// The pipeline's name.
    pub pipeline_name: String,
    /// `public` or `private`.
    pub access_modifier: String,
    /// The pipeline properties: `synth` and `stages`.
    pub props: Value,
}

/// The longest name, project or organization a pipeline takes.
pub const MAX_NAME: usize = 200;

fn text(field: &'static str, value: &str) -> ServiceResult<()> {
    let trimmed = value.trim();
    if trimmed.is_empty() || value.chars().count() > MAX_NAME || value.chars().any(char::is_control)
    {
        return Err(ServiceError::invalid(
            field,
            format!("must be 1 to {MAX_NAME} characters, without control characters"),
        ));
    }
    Ok(())
}

/// A plugin reference `{name, version}` at `at`.
fn plugin_ref(at: &str, value: Option<&Value>) -> ServiceResult<()> {
    let named = |key: &str| {
        value
            .and_then(|p| p.get(key))
            .and_then(Value::as_str)
            .is_some_and(|s| !s.trim().is_empty())
    };
    if value.is_some_and(Value::is_object) && named("name") && named("version") {
        Ok(())
    } else {
        Err(ServiceError::invalid(
            "props",
            format!("{at}: a plugin {{name, version}} is required"),
        ))
    }
}

/// Checks a create or update body: the names, the visibility, and the shape of the
/// properties (every step names a plugin with a version; env values are strings).
pub fn validate(input: &PipelineInput) -> ServiceResult<()> {
    text("project", &input.project)?;
    text("organization", &input.organization)?;
    text("pipelineName", &input.pipeline_name)?;
    if !["public", "private"].contains(&input.access_modifier.as_str()) {
        return Err(ServiceError::invalid(
            "accessModifier",
            "must be public or private",
        ));
    }
    let Some(props) = input.props.as_object() else {
        return Err(ServiceError::invalid("props", "must be an object"));
    };
    if let Some(synth) = props.get("synth") {
        if !synth.is_object() {
            return Err(ServiceError::invalid(
                "props",
                "props.synth: must be an object",
            ));
        }
        if let Some(plugin) = synth.get("plugin") {
            plugin_ref("props.synth.plugin", Some(plugin))?;
        }
    }
    let stages = match props.get("stages") {
        None => return Ok(()),
        Some(Value::Array(stages)) => stages,
        Some(_) => {
            return Err(ServiceError::invalid(
                "props",
                "props.stages: must be an array",
            ))
        }
    };
    for (i, stage) in stages.iter().enumerate() {
        let at = format!("props.stages[{i}]");
        let named = stage
            .get("stageName")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.trim().is_empty());
        if !named {
            return Err(ServiceError::invalid(
                "props",
                format!("{at}.stageName: is required"),
            ));
        }
        let Some(steps) = stage.get("steps").and_then(Value::as_array) else {
            return Err(ServiceError::invalid(
                "props",
                format!("{at}.steps: must be an array"),
            ));
        };
        for (j, step) in steps.iter().enumerate() {
            let at = format!("{at}.steps[{j}]");
            if step
                .get("name")
                .and_then(Value::as_str)
                .is_none_or(|s| s.trim().is_empty())
            {
                return Err(ServiceError::invalid(
                    "props",
                    format!("{at}.name: is required"),
                ));
            }
            plugin_ref(&format!("{at}.plugin"), step.get("plugin"))?;
            match step.get("env") {
                None => {}
                Some(Value::Object(env)) if env.values().all(Value::is_string) => {}
                Some(_) => {
                    return Err(ServiceError::invalid(
                        "props",
                        format!("{at}.env: must map names to strings"),
                    ))
                }
            }
        }
    }
    Ok(())
}

/// The document a stored pipeline is judged on (as its create body was).
pub fn document(pipeline: &PipelineRecord) -> Value {
    json!({
        "project": pipeline.project,
        "organization": pipeline.organization,
        "pipelineName": pipeline.pipeline_name,
        "accessModifier": pipeline.access_modifier,
        "props": pipeline.props,
    })
}

/// The document a pipeline is judged on: its create body.
fn attributes(input: &PipelineInput) -> Value {
    json!({
        "project": input.project,
        "organization": input.organization,
        "pipelineName": input.pipeline_name,
        "accessModifier": input.access_modifier,
        "props": input.props,
    })
}

/// The root whose pool an organization draws from, its entitlement synchronized
/// (so that the charge's statement finds the limit in the pool row).
pub async fn pool(state: &AppState, org: &OrgRecord) -> ServiceResult<OrgRecord> {
    let root = super::entitlement::root_of(state, org).await?;
    super::entitlement::ensure_synced(state, &root).await?;
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
    validate(&input)?;
    let id = new_id();
    let admitted =
        checks::at_the_door(state, org, Target::Pipeline, &id, attributes(&input)).await?;
    let root = pool(state, org).await?;
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
        project: &input.project,
        organization: &input.organization,
        pipeline_name: &input.pipeline_name,
        access_modifier: &input.access_modifier,
        props: &input.props,
        compliance: &admitted.compliance,
        snapshot: admitted.snapshot.as_ref(),
    };
    state
        .store
        .create_pipeline(
            (&id, &org.id, &caller.user_id),
            &fields,
            &charge,
            now,
            &audit,
        )
        .await?
        .map_err(|refusal| ServiceError::Quota {
            dimension: "pipelines",
            refusal,
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
    validate(&input)?;
    let pipeline = get(state, org, id).await?;
    may_change(caller, &pipeline.created_by, permissions)?;
    let admitted =
        checks::at_the_door(state, org, Target::Pipeline, id, attributes(&input)).await?;
    let audit = [event(
        caller,
        "pipeline.update",
        &org.id,
        "pipeline",
        id,
        json!({"pipelineName": input.pipeline_name, "project": input.project}),
    )];
    let fields = PipelineFields {
        project: &input.project,
        organization: &input.organization,
        pipeline_name: &input.pipeline_name,
        access_modifier: &input.access_modifier,
        props: &input.props,
        compliance: &admitted.compliance,
        snapshot: admitted.snapshot.as_ref(),
    };
    Ok(state
        .store
        .update_pipeline((&org.id, id), &fields, now, &audit)
        .await?)
}

/// Deletes a pipeline, freeing its quota (the creator's, or anyone's with
/// `pipelines:publish`).
pub async fn delete(
    state: &AppState,
    caller: &Caller,
    (org, permissions): (&OrgRecord, &BTreeSet<Permission>),
    id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let pipeline = get(state, org, id).await?;
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
    Ok(state
        .store
        .delete_pipeline((&org.id, id), &release, now, &audit)
        .await?)
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
pub async fn get(state: &AppState, org: &OrgRecord, id: &str) -> ServiceResult<PipelineRecord> {
    state
        .store
        .pipeline(&org.id, id)
        .await?
        .ok_or(ServiceError::NotFound("pipeline"))
}

/// A page of the organization's pipelines: (pipelines, total).
pub async fn list(
    state: &AppState,
    org: &OrgRecord,
    filter: &PipelineFilter,
    order: (&str, bool),
    (limit, offset): (u32, u64),
) -> ServiceResult<(Vec<PipelineRecord>, u64)> {
    Ok(state
        .store
        .pipelines(&org.id, filter, order, limit, offset)
        .await?)
}

/// The newest pipeline matching the filter.
pub async fn find(
    state: &AppState,
    org: &OrgRecord,
    filter: &PipelineFilter,
) -> ServiceResult<PipelineRecord> {
    let (found, _) = state
        .store
        .pipelines(&org.id, filter, ("createdAt", false), 1, 0)
        .await?;
    found
        .into_iter()
        .next()
        .ok_or(ServiceError::NotFound("pipeline"))
}

/// A page of the organization's registry: (entries, total).
pub async fn registry(
    state: &AppState,
    org: &OrgRecord,
    limit: u32,
    offset: u64,
) -> ServiceResult<(Vec<RegistryEntry>, u64)> {
    Ok(state.store.registry(&org.id, limit, offset).await?)
}

/// Maps a cloud pipeline resource name to a pipeline of the organization (a
/// pipeline of another organization is not found).
pub async fn register(
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    (arn, pipeline_id): (&str, &str),
    now: DateTime<Utc>,
) -> ServiceResult<RegistryEntry> {
    get(state, org, pipeline_id).await?;
    let audit = [event(
        caller,
        "pipeline.registry.register",
        &org.id,
        "pipeline",
        pipeline_id,
        json!({"arn": arn}),
    )];
    Ok(state
        .store
        .register_pipeline(&org.id, (arn, pipeline_id), now, &audit)
        .await?)
}

/// Removes a registry entry of the organization.
pub async fn deregister(
    state: &AppState,
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
    Ok(state
        .store
        .deregister_pipeline(&org.id, arn, &audit)
        .await?)
}
