//! Pipelines and the pipeline registry. A create or delete charges or frees the
//! organization's pipelines quota, enqueues the entity's re-evaluation and writes its
//! audit events, all in the transaction of the change.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::AnyConnection;

use super::decode::Decoder;
use super::judgements::{entity_compliance, judged_select, DoorJudgement};
use super::{stamp, taken, Store, StoreError, StoreResult, Transaction};
use crate::inventory::{AccessModifier, EntityCompliance};

/// A stored pipeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PipelineRecord {
    /// Its id.
    pub id: String,
    /// The organization that owns it.
    pub org_id: String,
    /// The project name.
    pub project: String,
    /// The organization name as the body gave it.
    pub organization: String,
    /// The pipeline's name (unique per organization and project).
    pub pipeline_name: String,
    /// Who may see it.
    pub access_modifier: AccessModifier,
    /// The pipeline properties.
    pub props: Value,
    /// The last compliance result.
    pub compliance: EntityCompliance,
    /// Who created it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// The fields of a pipeline as a create or update gives them.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineFields<'a> {
    /// The project name.
    pub project: &'a str,
    /// The organization name.
    pub organization: &'a str,
    /// The pipeline's name.
    pub pipeline_name: &'a str,
    /// Who may see it.
    pub access_modifier: AccessModifier,
    /// The properties.
    pub props: &'a Value,
    /// The compliance result to keep with it.
    pub compliance: &'a compliance_core::Compliance,
    /// The judgement it refers to.
    pub judgement: &'a DoorJudgement,
    /// The attributes it was judged on, kept for the impact preview (when this server
    /// judged it).
    pub snapshot: Option<&'a Value>,
}

/// What a list of pipelines is narrowed to.
#[derive(Debug, Clone, Default)]
pub struct PipelineFilter {
    /// One project.
    pub project: Option<String>,
    /// One organization name.
    pub organization: Option<String>,
    /// One pipeline name.
    pub pipeline_name: Option<String>,
    /// `public` or `private`.
    pub access_modifier: Option<String>,
}

/// One registry entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistryEntry {
    /// The cloud pipeline resource name.
    pub arn: String,
    /// The pipeline it maps to.
    pub pipeline_id: String,
    /// The organization.
    pub org_id: String,
    /// First registered.
    pub created_at: DateTime<Utc>,
    /// Last registered.
    pub updated_at: DateTime<Utc>,
}

pub(super) fn pipeline_from_row(row: &sqlx::any::AnyRow) -> StoreResult<PipelineRecord> {
    let d = Decoder::new(row, "pipelines", &["id"]);
    Ok(PipelineRecord {
        id: d.get("id")?,
        org_id: d.get("org_id")?,
        project: d.get("project")?,
        organization: d.get("organization")?,
        pipeline_name: d.get("pipeline_name")?,
        access_modifier: d.named("access_modifier", AccessModifier::parse)?,
        props: d.json("props")?,
        compliance: entity_compliance(&d)?,
        created_by: d.get("created_by")?,
        created_at: d.stamp("created_at")?,
        updated_at: d.stamp("updated_at")?,
    })
}

fn entry_from_row(row: &sqlx::any::AnyRow) -> StoreResult<RegistryEntry> {
    let d = Decoder::new(row, "pipeline_registry", &["org_id", "arn"]);
    Ok(RegistryEntry {
        arn: d.get("arn")?,
        pipeline_id: d.get("pipeline_id")?,
        org_id: d.get("org_id")?,
        created_at: d.stamp("created_at")?,
        updated_at: d.stamp("updated_at")?,
    })
}

fn duplicate<'a>(fields: &'a PipelineFields<'_>) -> impl Fn(sqlx::Error) -> StoreError + 'a {
    move |e| match StoreError::from(e) {
        StoreError::Conflict(_) => StoreError::Conflict(format!(
            "a pipeline named `{}` already exists in project `{}`",
            fields.pipeline_name, fields.project
        )),
        other => other,
    }
}

impl Transaction<'_> {
    /// Inserts a new pipeline (a name taken in its project is a conflict); answers
    /// it as written.
    pub async fn insert_pipeline(
        &mut self,
        (id, org_id, created_by): (&str, &str, &str),
        fields: &PipelineFields<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<PipelineRecord> {
        sqlx::query(&self.store.sql(
            "INSERT INTO pipelines (id, org_id, project, organization, pipeline_name, access_modifier, props, compliance, compliance_result, judgement_check, judgement_digest, created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, '', $11, $8, $12, $9, $10, $10)",
        ))
        .bind(id)
        .bind(org_id)
        .bind(fields.project)
        .bind(fields.organization)
        .bind(fields.pipeline_name)
        .bind(fields.access_modifier.as_str())
        .bind(fields.props.to_string())
        .bind(fields.judgement.check_id.as_str())
        .bind(created_by)
        .bind(stamp(now))
        .bind(fields.compliance.result.as_str())
        .bind(fields.judgement.digest.as_str())
        .execute(&mut *self.tx)
        .await
        .map_err(duplicate(fields))?;
        // What was inserted, at the precision it is stored with.
        let at = chrono::SubsecRound::trunc_subsecs(now, 6);
        Ok(PipelineRecord {
            id: id.to_owned(),
            org_id: org_id.to_owned(),
            project: fields.project.to_owned(),
            organization: fields.organization.to_owned(),
            pipeline_name: fields.pipeline_name.to_owned(),
            access_modifier: fields.access_modifier,
            props: fields.props.clone(),
            compliance: EntityCompliance::from(fields.compliance.clone()),
            created_by: created_by.to_owned(),
            created_at: at,
            updated_at: at,
        })
    }

    /// Replaces a pipeline's fields; `NotFound` when it is not the organization's.
    pub async fn update_pipeline(
        &mut self,
        (org_id, id): (&str, &str),
        fields: &PipelineFields<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE pipelines SET project = $3, organization = $4, pipeline_name = $5, access_modifier = $6, props = $7, compliance = '', compliance_result = $10, judgement_check = $8, judgement_scan = NULL, judgement_digest = $11, updated_at = $9 WHERE org_id = $1 AND id = $2",
        ))
        .bind(org_id)
        .bind(id)
        .bind(fields.project)
        .bind(fields.organization)
        .bind(fields.pipeline_name)
        .bind(fields.access_modifier.as_str())
        .bind(fields.props.to_string())
        .bind(fields.judgement.check_id.as_str())
        .bind(stamp(now))
        .bind(fields.compliance.result.as_str())
        .bind(fields.judgement.digest.as_str())
        .execute(&mut *self.tx)
        .await
        .map_err(duplicate(fields))?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("pipeline".to_owned()));
        }
        Ok(())
    }

    /// One pipeline of an organization, as the unit sees it (what it wrote);
    /// `NotFound` when there is none.
    pub async fn pipeline(&mut self, org_id: &str, id: &str) -> StoreResult<PipelineRecord> {
        self.store
            .pipeline_in(&mut self.tx, org_id, id)
            .await?
            .ok_or_else(|| StoreError::NotFound("pipeline".to_owned()))
    }

    /// Deletes a pipeline and its registry entries; `NotFound` when it is not the
    /// organization's.
    pub async fn delete_pipeline(&mut self, (org_id, id): (&str, &str)) -> StoreResult<()> {
        let done = sqlx::query(
            &self
                .store
                .sql("DELETE FROM pipelines WHERE org_id = $1 AND id = $2"),
        )
        .bind(org_id)
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("pipeline".to_owned()));
        }
        sqlx::query(
            &self
                .store
                .sql("DELETE FROM pipeline_registry WHERE org_id = $1 AND pipeline_id = $2"),
        )
        .bind(org_id)
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// Maps `arn` to a pipeline of the organization (insert or replace). A name held
    /// by another organization is a conflict (one owner per name: a unique index
    /// decides, so two registrations at once cannot both win), unless `take_over`,
    /// which moves it here (a super-admin's move): its earlier executions stay
    /// attributed to the organization they were attributed to.
    pub async fn register_pipeline(
        &mut self,
        org_id: &str,
        (arn, pipeline_id): (&str, &str),
        (now, take_over): (DateTime<Utc>, bool),
    ) -> StoreResult<RegistryEntry> {
        if take_over {
            sqlx::query(
                &self
                    .store
                    .sql("DELETE FROM pipeline_registry WHERE arn = $1 AND org_id <> $2"),
            )
            .bind(arn)
            .bind(org_id)
            .execute(&mut *self.tx)
            .await?;
        }
        sqlx::query(&self.store.sql(
            "INSERT INTO pipeline_registry (org_id, arn, pipeline_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $4) \
             ON CONFLICT (org_id, arn) DO UPDATE SET pipeline_id = $3, updated_at = $4",
        ))
        .bind(org_id)
        .bind(arn)
        .bind(pipeline_id)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await
        .map_err(taken(|| "this resource name is registered by another organization"))?;
        // The resource's reported executions, kept aside until now, are derived
        // again under the new mapping.
        self.store
            .rederive_resource_in(&mut self.tx, arn, now)
            .await?;
        let row = sqlx::query(
            &self
                .store
                .sql("SELECT * FROM pipeline_registry WHERE org_id = $1 AND arn = $2"),
        )
        .bind(org_id)
        .bind(arn)
        .fetch_one(&mut *self.tx)
        .await?;
        entry_from_row(&row)
    }

    /// Removes a registry entry; `NotFound` when the organization has none for `arn`.
    pub async fn deregister_pipeline(&mut self, org_id: &str, arn: &str) -> StoreResult<()> {
        let done = sqlx::query(
            &self
                .store
                .sql("DELETE FROM pipeline_registry WHERE org_id = $1 AND arn = $2"),
        )
        .bind(org_id)
        .bind(arn)
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("registry entry".to_owned()));
        }
        Ok(())
    }
}

impl Store {
    /// One pipeline of an organization.
    pub async fn pipeline(&self, org_id: &str, id: &str) -> StoreResult<Option<PipelineRecord>> {
        let mut conn = self.connection().await?;
        let pipeline = self.pipeline_in(&mut conn, org_id, id).await?;
        conn.finish().await?;
        Ok(pipeline)
    }

    /// [`Store::pipeline`] on a connection (inside a transaction: what it wrote).
    async fn pipeline_in(
        &self,
        conn: &mut AnyConnection,
        org_id: &str,
        id: &str,
    ) -> StoreResult<Option<PipelineRecord>> {
        let row = sqlx::query(&self.sql(&format!(
            "SELECT {} FROM pipelines WHERE org_id = $1 AND id = $2",
            judged_select(self.dialect(), "pipelines")
        )))
        .bind(org_id)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
        row.as_ref().map(pipeline_from_row).transpose()
    }

    /// A page of an organization's pipelines: (pipelines, total). `order_by` is a
    /// column the caller chose from a fixed list.
    pub async fn pipelines(
        &self,
        org_id: &str,
        filter: &PipelineFilter,
        (order_by, ascending): (&str, bool),
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<PipelineRecord>, u64)> {
        let column = match order_by {
            "pipelineName" => "pipeline_name",
            "project" => "project",
            "updatedAt" => "updated_at",
            _ => "created_at",
        };
        let direction = if ascending { "ASC" } else { "DESC" };
        let order = format!("{column} {direction}, id {direction}");
        let condition = "org_id = $1 AND ($2 IS NULL OR project = $2) AND ($3 IS NULL OR organization = $3) AND ($4 IS NULL OR pipeline_name = $4) AND ($5 IS NULL OR access_modifier = $5)";
        let binds = [
            Some(org_id.to_owned()),
            filter.project.clone(),
            filter.organization.clone(),
            filter.pipeline_name.clone(),
            filter.access_modifier.clone(),
        ];
        let select = judged_select(self.dialect(), "pipelines");
        let (rows, total) = self
            .page(
                (&select, "pipelines", condition, &order),
                &binds,
                limit,
                offset,
            )
            .await?;
        let items = rows
            .iter()
            .map(pipeline_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }

    /// How many of the organization's pipelines reference each plugin name (in the
    /// synth step or any stage's steps).
    pub async fn pipeline_props(&self, org_id: &str) -> StoreResult<Vec<Value>> {
        let rows = sqlx::query(&self.sql("SELECT id, props FROM pipelines WHERE org_id = $1"))
            .bind(org_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| Decoder::new(row, "pipelines", &["id"]).json("props"))
            .collect()
    }

    /// The organization's registry entries, newest first: (entries, total).
    pub async fn registry(
        &self,
        org_id: &str,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<RegistryEntry>, u64)> {
        let (rows, total) = self
            .page(
                (
                    "*",
                    "pipeline_registry",
                    "org_id = $1",
                    "created_at DESC, arn DESC",
                ),
                &[Some(org_id.to_owned())],
                limit,
                offset,
            )
            .await?;
        let items = rows
            .iter()
            .map(entry_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }

    /// The organization that holds `arn`, if any (live, or deleted and not purged).
    pub async fn registry_owner(&self, arn: &str) -> StoreResult<Option<String>> {
        let row = sqlx::query(&self.sql("SELECT org_id FROM pipeline_registry WHERE arn = $1"))
            .bind(arn)
            .fetch_optional(self.pool())
            .await?;
        row.map(|row| Decoder::new(&row, "pipeline_registry", &["arn"]).get("org_id"))
            .transpose()
    }
}
