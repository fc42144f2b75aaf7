//! The image registry (document 3): `POST /api/images/copy` and
//! `DELETE /api/images/{name}/manifests/{reference}`, by a system admin.

use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};

use crate::http::error::ApiError;
use crate::http::extract::{Json, Query};
use crate::http::response::Answer;
use crate::http::state::{AppState, Caller};
use crate::services::images::{self, Copied, Deleted};

/// A cross-repository tag copy: each side `<repo>:<ref>` (a tag or a digest;
/// `<repo>@<digest>` too), the repository without a registry host.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CopyBody {
    /// What is copied, e.g. `org-a/plugin:1.0.0`.
    #[schema(
        max_length = 400,
        pattern = r"^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9._-]{0,127}|[:@]sha256:[a-f0-9]{64})$",
        example = "org-a/plugin:1.0.0"
    )]
    source: String,
    /// Where it is put, e.g. `system/plugin:1.0.0`.
    #[schema(
        max_length = 400,
        pattern = r"^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9._-]{0,127}|[:@]sha256:[a-f0-9]{64})$",
        example = "system/plugin:1.0.0"
    )]
    target: String,
}

/// What a copy put.
#[derive(Debug, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct MountedCount {
    /// Manifests put (the children of an index the target lacked, then the top one).
    pub manifests: u64,
    /// Unique blob digests brought into the target (mounted, or uploaded when the
    /// registry could not mount); blobs it already held are not counted.
    pub blobs: u64,
}

/// A finished copy: the `registry.tag.copy` event's fields.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageCopy {
    /// `registry.tag.copy`.
    pub event: String,
    /// The token subject of the system admin who copied.
    pub actor: String,
    /// `<repo>:<ref>`.
    pub source: String,
    /// `<repo>:<ref>`.
    pub target: String,
    pub source_digest: String,
    pub target_digest: String,
    /// True when the target repository starts with `system/` (visible to every
    /// authenticated user).
    pub is_promotion_to_system: bool,
    pub mounted: MountedCount,
}

impl From<Copied> for ImageCopy {
    fn from(c: Copied) -> Self {
        ImageCopy {
            event: "registry.tag.copy".to_owned(),
            is_promotion_to_system: c.is_promotion_to_system(),
            actor: c.actor,
            source: c.source,
            target: c.target,
            source_digest: c.source_digest,
            target_digest: c.target_digest,
            mounted: MountedCount {
                manifests: c.mounted.manifests,
                blobs: c.mounted.blobs,
            },
        }
    }
}

/// A finished delete: the `registry.tag.delete` event's fields.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ImageDelete {
    /// `registry.tag.delete`.
    pub event: String,
    /// The token subject of the system admin.
    pub actor: String,
    /// The repository.
    pub repo: String,
    /// The tag or digest passed.
    #[serde(rename = "ref")]
    pub reference: String,
    /// The manifest digest actually deleted.
    pub digest: String,
}

impl From<Deleted> for ImageDelete {
    fn from(d: Deleted) -> Self {
        ImageDelete {
            event: "registry.tag.delete".to_owned(),
            actor: d.actor,
            repo: d.repo,
            reference: d.reference,
            digest: d.digest,
        }
    }
}

/// The delete's options.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct DeleteParams {
    /// Delete the manifest even when other tags name it (they all go with it).
    force: Option<bool>,
}

fn reference(field: &'static str, text: &str) -> Result<oci::Reference, ApiError> {
    oci::Reference::parse(text).map_err(|e| ApiError::invalid_field(field, e.to_string()))
}

/// `POST /api/images/copy`.
pub(crate) async fn copy(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<CopyBody>,
) -> Result<Answer<ImageCopy>, ApiError> {
    let source = reference("source", &body.source)?;
    let target = reference("target", &body.target)?;
    if source == target {
        return Err(ApiError::invalid_field("target", "is the source itself"));
    }
    Ok(Answer::ok(
        images::copy(
            &state.infra.store,
            &state.outbound.registry,
            &caller,
            source,
            target,
        )
        .await?
        .into(),
    ))
}

/// `DELETE /api/images/{name}/manifests/{reference}`: `name` may hold slashes, so
/// the route takes the rest of the path and splits it at its last `/manifests/`.
pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(rest): Path<String>,
    Query(params): Query<DeleteParams>,
) -> Result<Answer<ImageDelete>, ApiError> {
    let (name, target) = rest.rsplit_once("/manifests/").ok_or_else(|| {
        ApiError::invalid_field(
            "name",
            "the path is /api/images/{name}/manifests/{reference}",
        )
    })?;
    let repository =
        oci::Repository::parse(name).map_err(|e| ApiError::invalid_field("name", e.to_string()))?;
    let target = oci::Target::parse(target)
        .map_err(|e| ApiError::invalid_field("reference", e.to_string()))?;
    let reference = oci::Reference { repository, target };
    let deleted = images::delete(
        &state.infra.store,
        &state.outbound.registry,
        &caller,
        reference,
        params.force.unwrap_or(false),
    )
    .await?;
    Ok(Answer::ok(deleted.into()))
}
