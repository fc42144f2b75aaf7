//! `/plugins`: the organization's plugins (uploads, generated deploys, reads, the
//! update whitelist, usage by pipelines).

use axum::extract::multipart::{Multipart, MultipartError, MultipartRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query, SortOrder};
use crate::http::gate::Granted;
use crate::http::response::{Answer, Deleted, Paged};
use crate::http::state::{AppState, Caller};
use crate::inventory::{AccessModifier, BuildStatus, EntityCompliance};
use crate::services::plugins::{self, PluginChange, PluginFilter, PluginRecord};

/// A plugin as the API answers it.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Plugin {
    pub id: String,
    pub org_id: String,
    pub name: String,
    pub version: String,
    pub description: Option<String>,
    pub access_modifier: AccessModifier,
    pub compute_type: Option<String>,
    pub is_default: bool,
    pub is_active: bool,
    pub plugin_type: Option<String>,
    pub commands: Vec<String>,
    pub install_commands: Vec<String>,
    pub dockerfile: Option<String>,
    pub compliance: EntityCompliance,
    pub build_status: BuildStatus,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<PluginRecord> for Plugin {
    fn from(p: PluginRecord) -> Self {
        Plugin {
            id: p.id,
            org_id: p.org_id,
            name: p.name,
            version: p.version,
            description: p.description,
            access_modifier: p.access_modifier,
            compute_type: p.compute_type,
            is_default: p.is_default,
            is_active: p.is_active,
            plugin_type: p.plugin_type,
            commands: p.commands,
            install_commands: p.install_commands,
            dockerfile: p.dockerfile,
            compliance: p.compliance,
            build_status: p.build_status,
            created_by: p.created_by,
            created_at: p.created_at,
            updated_at: p.updated_at,
        }
    }
}

/// The plugins a bulk update changed.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Changed {
    pub plugins: Vec<Plugin>,
}

/// The fields a plugin list sorts by.
pub(crate) const SORTABLE: [&str; 4] = ["createdAt", "updatedAt", "name", "version"];

/// The largest upload (the whole multipart body).
pub const MAX_UPLOAD_BYTES: usize = 20 * 1024 * 1024;

/// The upload form (`multipart/form-data`), as `/openapi.json` documents it; the
/// handler reads the parts one by one as they stream in, so nothing builds this.
#[derive(utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub(crate) struct PluginUpload {
    /// The ZIP archive.
    #[schema(value_type = String, content_media_type = "application/zip")]
    plugin: Vec<u8>,
    /// Private when left out.
    access_modifier: Option<AccessModifier>,
}

/// The filters of the plugin list and find.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct PluginQuery {
    name: Option<String>,
    version: Option<String>,
    #[param(value_type = Option<AccessModifier>, inline)]
    access_modifier: Option<String>,
    is_active: Option<bool>,
    is_default: Option<bool>,
    plugin_type: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

/// A lookup's filter (POST, so that long values fit).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Lookup {
    #[schema(max_length = 200)]
    name: Option<String>,
    #[schema(max_length = 200)]
    version: Option<String>,
    #[schema(value_type = Option<AccessModifier>)]
    access_modifier: Option<String>,
    is_active: Option<bool>,
    is_default: Option<bool>,
    #[schema(max_length = 200)]
    plugin_type: Option<String>,
}

fn filter(lookup: Lookup) -> Result<PluginFilter, ApiError> {
    if let Some(access) = &lookup.access_modifier {
        plugins::access_modifier(access)?;
    }
    for (field, value) in [
        ("name", &lookup.name),
        ("version", &lookup.version),
        ("pluginType", &lookup.plugin_type),
    ] {
        if value.as_ref().is_some_and(|v| v.len() > 200) {
            return Err(ApiError::invalid_field(
                field,
                "must be at most 200 characters",
            ));
        }
    }
    let given = |v: Option<String>| v.filter(|s| !s.is_empty());
    Ok(PluginFilter {
        name: given(lookup.name),
        version: given(lookup.version),
        access_modifier: given(lookup.access_modifier),
        is_active: lookup.is_active,
        is_default: lookup.is_default,
        plugin_type: given(lookup.plugin_type),
    })
}

impl PluginQuery {
    fn split(self) -> (Lookup, PageParams) {
        (
            Lookup {
                name: self.name,
                version: self.version,
                access_modifier: self.access_modifier,
                is_active: self.is_active,
                is_default: self.is_default,
                plugin_type: self.plugin_type,
            },
            self.page,
        )
    }
}

/// `GET /plugins`.
pub(crate) async fn list(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<PluginQuery>,
) -> Result<Paged<Plugin>, ApiError> {
    let (lookup, page) = q.split();
    let page = page.check(state.config.http.max_page_limit, &SORTABLE)?;
    let filter = filter(lookup)?;
    let order = (page.sort_by.as_str(), page.sort_order == SortOrder::Asc);
    let (items, total) = plugins::list(
        &state.infra.store,
        &granted.org,
        &filter,
        order,
        (page.limit, page.offset),
    )
    .await?;
    let items = items.into_iter().map(Plugin::from).collect();
    Ok(Paged::new("plugins", items, total, page))
}

/// `GET /plugins/find?name=&version=`: the newest plugin of that name (and version).
pub(crate) async fn find(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<PluginQuery>,
) -> Result<Answer<Plugin>, ApiError> {
    let (lookup, _) = q.split();
    let filter = filter(lookup)?;
    if filter.name.is_none() {
        return Err(ApiError::invalid_field("name", "is required"));
    }
    let plugin = plugins::find(&state.infra.store, &granted.org, &filter).await?;
    Ok(Answer::ok(plugin.into()))
}

/// `POST /plugins/lookup`: the newest plugin matching a filter body (one field at
/// least).
pub(crate) async fn lookup(
    State(state): State<AppState>,
    granted: Granted,
    Json(body): Json<Lookup>,
) -> Result<Answer<Plugin>, ApiError> {
    let filter = filter(body)?;
    let empty = filter.name.is_none()
        && filter.version.is_none()
        && filter.access_modifier.is_none()
        && filter.is_active.is_none()
        && filter.is_default.is_none()
        && filter.plugin_type.is_none();
    if empty {
        return Err(ApiError::validation("the filter names no field"));
    }
    let plugin = plugins::find(&state.infra.store, &granted.org, &filter).await?;
    Ok(Answer::ok(plugin.into()))
}

/// `GET /plugins/:id`.
pub(crate) async fn get(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Plugin>, ApiError> {
    let plugin = plugins::get(&state.infra.store, &granted.org, &id).await?;
    Ok(Answer::ok(plugin.into()))
}

fn multipart_error(error: &MultipartError) -> ApiError {
    if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::payload_too_large()
    } else {
        ApiError::validation(format!(
            "the multipart body cannot be read: {}",
            error.body_text()
        ))
    }
}

/// `POST /plugins` (`plugins:write`): `multipart/form-data` with a file part `plugin`
/// (a ZIP) and a text part `accessModifier`; compliance and quota at the door.
pub(crate) async fn upload(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Answer<Plugin>, ApiError> {
    let mut multipart = multipart.map_err(|e| {
        ApiError::validation(format!(
            "expected multipart/form-data with parts `plugin` and `accessModifier`: {}",
            e.body_text()
        ))
    })?;
    let mut archive = None;
    let mut access = None;
    while let Some(field) = multipart
        .next_field()
        .await
        .map_err(|e| multipart_error(&e))?
    {
        match field.name() {
            Some("plugin") => {
                archive = Some(field.bytes().await.map_err(|e| multipart_error(&e))?);
            }
            Some("accessModifier") => {
                access = Some(field.text().await.map_err(|e| multipart_error(&e))?);
            }
            other => {
                return Err(ApiError::validation(format!(
                    "unexpected part `{}`; the parts are `plugin` and `accessModifier`",
                    other.unwrap_or_default()
                )))
            }
        }
    }
    let archive = archive
        .ok_or_else(|| ApiError::invalid_field("plugin", "the ZIP file part is required"))?;
    let access = access.unwrap_or_else(|| "private".to_owned());
    let plugin = plugins::upload(
        &state,
        &caller,
        &granted.org,
        archive.to_vec(),
        access.trim(),
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(plugin.into()))
}

/// `POST /plugins/deploy-generated` (`plugins:write`): a generated plugin, built and
/// deployed like an upload.
pub(crate) async fn deploy_generated(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<plugins::GeneratedPlugin>,
) -> Result<Answer<Plugin>, ApiError> {
    let plugin = plugins::deploy_generated(&state, &caller, &granted.org, body, Utc::now()).await?;
    Ok(Answer::created(plugin.into()))
}

/// The fields `PUT /plugins/:id` may change.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Update {
    description: Option<String>,
    compute_type: Option<String>,
    is_default: Option<bool>,
}

fn bounded(field: &str, value: &Option<String>, max: usize) -> Result<(), ApiError> {
    match value {
        Some(v) if v.chars().count() > max || v.chars().any(|c| c.is_control() && c != '\n') => {
            Err(ApiError::invalid_field(
                field,
                format!("must be at most {max} characters, without control characters"),
            ))
        }
        _ => Ok(()),
    }
}

/// `PUT /plugins/:id` (`plugins:write`): description, computeType, isDefault only.
pub(crate) async fn update(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<Update>,
) -> Result<Answer<Plugin>, ApiError> {
    bounded("description", &body.description, 2000)?;
    bounded("computeType", &body.compute_type, 100)?;
    let change = PluginChange {
        description: body.description,
        compute_type: body.compute_type,
        is_default: body.is_default,
        ..PluginChange::default()
    };
    let updated = plugins::update(
        &state.infra.store,
        &caller,
        (&granted.org, &granted.permissions),
        vec![(id, change)],
        ("plugin.bulk.update", Utc::now()),
    )
    .await?;
    updated
        .into_iter()
        .next()
        .map(|plugin| Answer::ok(plugin.into()))
        .ok_or_else(|| ApiError::not_found("plugin"))
}

/// One plugin's change in a bulk update: the whitelist of mutable fields.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct BulkItem {
    #[schema(min_length = 1, max_length = 200)]
    id: String,
    description: Option<String>,
    compute_type: Option<String>,
    is_default: Option<bool>,
    is_active: Option<bool>,
    #[schema(value_type = Option<AccessModifier>)]
    access_modifier: Option<String>,
}

/// The body of `PUT /plugins/bulk/update`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Bulk {
    #[schema(min_items = 1, max_items = 100)]
    plugins: Vec<BulkItem>,
}

/// How many plugins one bulk update changes at most.
pub const BULK_LIMIT: usize = 100;

/// `PUT /plugins/bulk/update` (`plugins:write`): several plugins, all or nothing; a
/// field outside the whitelist is 400 and nothing changes.
pub(crate) async fn bulk_update(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<Bulk>,
) -> Result<Answer<Changed>, ApiError> {
    if body.plugins.is_empty() || body.plugins.len() > BULK_LIMIT {
        return Err(ApiError::invalid_field(
            "plugins",
            format!("must list 1 to {BULK_LIMIT} plugins"),
        ));
    }
    let mut changes = Vec::with_capacity(body.plugins.len());
    for item in body.plugins {
        bounded("description", &item.description, 2000)?;
        bounded("computeType", &item.compute_type, 100)?;
        changes.push((
            item.id,
            PluginChange {
                description: item.description,
                compute_type: item.compute_type,
                is_default: item.is_default,
                is_active: item.is_active,
                access_modifier: item.access_modifier,
            },
        ));
    }
    let updated = plugins::update(
        &state.infra.store,
        &caller,
        (&granted.org, &granted.permissions),
        changes,
        ("plugin.bulk.update", Utc::now()),
    )
    .await?;
    Ok(Answer::ok(Changed {
        plugins: updated.into_iter().map(Plugin::from).collect(),
    }))
}

/// `DELETE /plugins/:id` (`plugins:write`): frees its quota.
pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Deleted>, ApiError> {
    plugins::delete(
        &state.infra.store,
        &caller,
        (&granted.org, &granted.permissions),
        &id,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(Deleted::new(id)))
}

/// How many of the organization's pipelines reference a plugin name.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct PluginUsage {
    pub name: String,
    pub pipelines: u64,
}

/// `GET /plugins/plugin-usage`: per plugin name, how many of the organization's
/// pipelines reference it.
pub(crate) async fn usage(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<Vec<PluginUsage>>, ApiError> {
    let counts = plugins::usage(&state.infra.store, &granted.org).await?;
    let items = counts
        .into_iter()
        .map(|(name, pipelines)| PluginUsage { name, pipelines })
        .collect();
    Ok(Answer::ok(items))
}
