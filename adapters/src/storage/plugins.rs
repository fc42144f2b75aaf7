//! Plugins and their archives. An upload or deploy charges the organization's plugins
//! quota, stores the plugin, its archive and its build job, enqueues its
//! re-evaluation and writes its audit events, all in one transaction.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::{AnyConnection, Row};

use super::decode::Decoder;
use super::judgements::{entity_compliance, judged_select};
use super::{stamp, taken, Store, StoreError, StoreResult, Transaction};

/// A stored plugin.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginRecord {
    /// Its id.
    pub id: String,
    /// The organization that owns it.
    pub org_id: String,
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// What it does.
    pub description: Option<String>,
    /// Who may see it.
    pub access_modifier: crate::inventory::AccessModifier,
    /// The build compute size.
    pub compute_type: Option<String>,
    /// A default plugin.
    pub is_default: bool,
    /// Active.
    pub is_active: bool,
    /// The kind of step it implements.
    pub plugin_type: Option<String>,
    /// Build commands.
    pub commands: Vec<String>,
    /// Install commands.
    pub install_commands: Vec<String>,
    /// The image build definition, when it has one.
    pub dockerfile: Option<String>,
    /// The last compliance result.
    pub compliance: crate::inventory::EntityCompliance,
    /// Where its image build stands.
    pub build_status: crate::inventory::BuildStatus,
    /// Who uploaded it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// A new plugin, as an upload or a deploy makes it.
#[derive(Debug, Clone)]
pub struct NewPlugin<'a> {
    /// Its id (made by the caller, who judged it under that id).
    pub id: &'a str,
    /// The organization.
    pub org_id: &'a str,
    /// From the manifest.
    pub manifest: &'a crate::archive::Manifest,
    /// The Dockerfile.
    pub dockerfile: Option<&'a str>,
    /// `public` or `private`.
    pub access_modifier: &'a str,
    /// The compliance result to keep with it.
    pub compliance: &'a compliance_core::Compliance,
    /// The judgement it refers to.
    pub judgement: &'a super::DoorJudgement,
    /// The attributes it was judged on, kept for the impact preview (when this server
    /// judged it).
    pub snapshot: Option<&'a Value>,
    /// The archive.
    pub archive: &'a [u8],
    /// The image its build makes.
    pub image: &'a str,
    /// Who.
    pub created_by: &'a str,
}

/// What a list of plugins is narrowed to.
#[derive(Debug, Clone, Default)]
pub struct PluginFilter {
    /// One name.
    pub name: Option<String>,
    /// One version.
    pub version: Option<String>,
    /// `public` or `private`.
    pub access_modifier: Option<String>,
    /// Active or not.
    pub is_active: Option<bool>,
    /// Default or not.
    pub is_default: Option<bool>,
    /// One plugin type.
    pub plugin_type: Option<String>,
}

/// The fields an update may change (each left out stays).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginChange {
    /// What it does.
    pub description: Option<String>,
    /// The build compute size.
    pub compute_type: Option<String>,
    /// A default plugin.
    pub is_default: Option<bool>,
    /// Active.
    pub is_active: Option<bool>,
    /// `public` or `private`.
    pub access_modifier: Option<String>,
}

pub(super) fn plugin_from_row(row: &sqlx::any::AnyRow) -> StoreResult<PluginRecord> {
    let d = Decoder::new(row, "plugins", &["id"]);
    Ok(PluginRecord {
        id: d.get("id")?,
        org_id: d.get("org_id")?,
        name: d.get("name")?,
        version: d.get("version")?,
        description: d.get("description")?,
        access_modifier: d.named("access_modifier", crate::inventory::AccessModifier::parse)?,
        compute_type: d.get("compute_type")?,
        is_default: d.flag("is_default")?,
        is_active: d.flag("is_active")?,
        plugin_type: d.get("plugin_type")?,
        commands: d.json("commands")?,
        install_commands: d.json("install_commands")?,
        dockerfile: d.get("dockerfile")?,
        compliance: entity_compliance(&d)?,
        build_status: d.named("build_status", crate::inventory::BuildStatus::parse)?,
        created_by: d.get("created_by")?,
        created_at: d.stamp("created_at")?,
        updated_at: d.stamp("updated_at")?,
    })
}

fn flag(value: Option<bool>) -> Option<String> {
    value.map(|v| if v { "1" } else { "0" }.to_owned())
}

impl Store {
    /// One plugin of an organization.
    pub async fn plugin(&self, org_id: &str, id: &str) -> StoreResult<Option<PluginRecord>> {
        let mut conn = self.connection().await?;
        let plugin = self.plugin_in(&mut conn, org_id, id).await?;
        conn.finish().await?;
        Ok(plugin)
    }

    /// [`Store::plugin`] on a connection (inside a transaction: what it wrote).
    async fn plugin_in(
        &self,
        conn: &mut AnyConnection,
        org_id: &str,
        id: &str,
    ) -> StoreResult<Option<PluginRecord>> {
        let row = sqlx::query(&self.sql(&format!(
            "SELECT {} FROM plugins WHERE org_id = $1 AND id = $2",
            judged_select(self.dialect(), "plugins")
        )))
        .bind(org_id)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
        row.as_ref().map(plugin_from_row).transpose()
    }

    /// A plugin's archive.
    pub async fn plugin_archive(&self, plugin_id: &str) -> StoreResult<Option<Vec<u8>>> {
        let row = sqlx::query(&self.sql("SELECT bytes FROM plugin_archives WHERE plugin_id = $1"))
            .bind(plugin_id)
            .fetch_optional(self.pool())
            .await?;
        row.map(|row| row.try_get::<Vec<u8>, _>("bytes"))
            .transpose()
            .map_err(StoreError::from)
    }

    /// A page of an organization's plugins: (plugins, total).
    pub async fn plugins(
        &self,
        org_id: &str,
        filter: &PluginFilter,
        (order_by, ascending): (&str, bool),
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<PluginRecord>, u64)> {
        let column = match order_by {
            "name" => "name",
            "version" => "version",
            "updatedAt" => "updated_at",
            _ => "created_at",
        };
        let direction = if ascending { "ASC" } else { "DESC" };
        let order = format!("{column} {direction}, id {direction}");
        let condition = "org_id = $1 AND ($2 IS NULL OR name = $2) AND ($3 IS NULL OR version = $3) AND ($4 IS NULL OR access_modifier = $4) \
             AND ($5 IS NULL OR is_active = CAST($5 AS INTEGER)) AND ($6 IS NULL OR is_default = CAST($6 AS INTEGER)) AND ($7 IS NULL OR plugin_type = $7)";
        let binds = [
            Some(org_id.to_owned()),
            filter.name.clone(),
            filter.version.clone(),
            filter.access_modifier.clone(),
            flag(filter.is_active),
            flag(filter.is_default),
            filter.plugin_type.clone(),
        ];
        let select = judged_select(self.dialect(), "plugins");
        let (rows, total) = self
            .page(
                (&select, "plugins", condition, &order),
                &binds,
                limit,
                offset,
            )
            .await?;
        let items = rows
            .iter()
            .map(plugin_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }
}

impl Transaction<'_> {
    /// Inserts a new plugin with its archive and its build job (a name and version
    /// taken in the organization is a conflict).
    pub async fn insert_plugin(
        &mut self,
        plugin: &NewPlugin<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let manifest = plugin.manifest;
        sqlx::query(&self.store.sql(
            "INSERT INTO plugins (id, org_id, name, version, description, access_modifier, compute_type, is_default, is_active, plugin_type, commands, install_commands, dockerfile, compliance, compliance_result, judgement_check, judgement_digest, build_status, created_by, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 0, 1, $8, $9, $10, $11, '', $15, $12, $16, 'queued', $13, $14, $14)",
        ))
        .bind(plugin.id)
        .bind(plugin.org_id)
        .bind(&manifest.name)
        .bind(&manifest.version)
        .bind(manifest.description.as_deref())
        .bind(plugin.access_modifier)
        .bind(manifest.compute_type.as_deref())
        .bind(manifest.plugin_type.as_deref())
        .bind(serde_json::to_string(&manifest.commands).unwrap_or_default())
        .bind(serde_json::to_string(&manifest.install_commands).unwrap_or_default())
        .bind(plugin.dockerfile)
        .bind(plugin.judgement.check_id.as_str())
        .bind(plugin.created_by)
        .bind(stamp(now))
        .bind(plugin.compliance.result.as_str())
        .bind(plugin.judgement.digest.as_str())
        .execute(&mut *self.tx)
        .await
        .map_err(taken(|| format!(
                "the plugin `{}` version `{}` already exists",
                manifest.name, manifest.version
            )))?;
        sqlx::query(
            &self
                .store
                .sql("INSERT INTO plugin_archives (plugin_id, bytes) VALUES ($1, $2)"),
        )
        .bind(plugin.id)
        .bind(plugin.archive.to_vec())
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(&self.store.sql(
            "INSERT INTO plugin_builds (id, org_id, plugin_id, image, queue, status, attempts, run_after, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, 'tier', 'queued', 0, $5, $5, $5)",
        ))
        .bind(super::new_id())
        .bind(plugin.org_id)
        .bind(plugin.id)
        .bind(plugin.image)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// One plugin of an organization, as the unit sees it (what it wrote);
    /// `NotFound` when there is none.
    pub async fn plugin(&mut self, org_id: &str, id: &str) -> StoreResult<PluginRecord> {
        self.store
            .plugin_in(&mut self.tx, org_id, id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("plugin `{id}`")))
    }

    /// Applies a change to a plugin of the organization (`NotFound` naming the id
    /// when it is not the organization's).
    pub async fn update_plugin(
        &mut self,
        org_id: &str,
        (id, change): (&str, &PluginChange),
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE plugins SET description = COALESCE($3, description), compute_type = COALESCE($4, compute_type), \
             is_default = COALESCE(CAST($5 AS INTEGER), is_default), is_active = COALESCE(CAST($6 AS INTEGER), is_active), \
             access_modifier = COALESCE($7, access_modifier), updated_at = $8 WHERE org_id = $1 AND id = $2",
        ))
        .bind(org_id)
        .bind(id)
        .bind(change.description.as_deref())
        .bind(change.compute_type.as_deref())
        .bind(flag(change.is_default))
        .bind(flag(change.is_active))
        .bind(change.access_modifier.as_deref())
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("plugin `{id}`")));
        }
        Ok(())
    }

    /// Deletes a plugin, its archive and its pending builds; `NotFound` when it is
    /// not the organization's.
    pub async fn delete_plugin(&mut self, (org_id, id): (&str, &str)) -> StoreResult<()> {
        let done = sqlx::query(
            &self
                .store
                .sql("DELETE FROM plugins WHERE org_id = $1 AND id = $2"),
        )
        .bind(org_id)
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("plugin".to_owned()));
        }
        sqlx::query(
            &self
                .store
                .sql("DELETE FROM plugin_archives WHERE plugin_id = $1"),
        )
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(&self.store.sql(
            "DELETE FROM plugin_builds WHERE plugin_id = $1 AND status IN ('queued', 'running')",
        ))
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }
}
