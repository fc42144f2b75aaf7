//! Platform administration: who is a super-admin. The stored flag is the only source
//! (a token's claim is ignored); it is set when a bootstrap identifier creates the
//! system organization, and changed here, by a super-admin with a fresh step-up.
//!
//! - `GET /admin/super-admins`: the super-admins (super-admin).
//! - `PUT /admin/super-admins/{userId}`: grant (super-admin, step-up), audited
//!   `admin.superadmin.grant` in the system organization's chain.
//! - `DELETE /admin/super-admins/{userId}`: revoke (super-admin, step-up), audited
//!   `admin.superadmin.revoke`; the last super-admin cannot be revoked.
//! - `/admin/users`: accounts (list, create, change, disable, delete), and a user's
//!   own feature flags.
//! - `GET /admin/organizations/{id}/namespace`: the build namespace's manifests.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query};
use crate::http::organizations::text;
use crate::http::response::{Answer, Deleted, Paged};
use crate::http::state::{AppState, Caller};
use crate::services::admin;
use crate::services::admin::users::{AdminUser, NewUser, UserChange, UserSearch};

/// The super-admins, by user id.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuperAdmins {
    pub super_admins: Vec<String>,
}

/// Whether a user is a super-admin now.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuperAdmin {
    pub user_id: String,
    pub super_admin: bool,
}

/// `GET /admin/super-admins`.
pub(crate) async fn list(State(state): State<AppState>) -> Result<Answer<SuperAdmins>, ApiError> {
    let super_admins = admin::list(&state.infra.store).await?;
    Ok(Answer::ok(SuperAdmins { super_admins }))
}

async fn change(
    state: &AppState,
    config: &Config,
    caller: &Caller,
    user_id: &str,
    grant: bool,
) -> Result<Answer<SuperAdmin>, ApiError> {
    let store = &state.infra.store;
    let window = chrono::Duration::from_std(config.http.step_up_window)
        .unwrap_or(tenancy::DEFAULT_STEP_UP_WINDOW);
    admin::change(store, caller, user_id, grant, (Utc::now(), window)).await?;
    Ok(Answer::ok(SuperAdmin {
        user_id: user_id.to_owned(),
        super_admin: grant,
    }))
}

/// `PUT /admin/super-admins/{userId}`.
pub(crate) async fn grant(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> Result<Answer<SuperAdmin>, ApiError> {
    change(&state, &state.config, &caller, &user_id, true).await
}

/// `DELETE /admin/super-admins/{userId}`.
pub(crate) async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> Result<Answer<SuperAdmin>, ApiError> {
    change(&state, &state.config, &caller, &user_id, false).await
}

/// `GET /admin/users`'s filters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct UserQuery {
    /// A part of the e-mail (case-insensitive), at most 254 characters.
    email: Option<String>,
    /// `active`, `unverified`, `disabled` or `deleted`.
    state: Option<String>,
    /// Members of this organization only.
    org_id: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

/// `GET /admin/users`: accounts, newest first.
pub(crate) async fn users(
    State(state): State<AppState>,
    Query(q): Query<UserQuery>,
) -> Result<Paged<AdminUser>, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let email = q
        .email
        .as_deref()
        .map(|e| text("email", e, 254))
        .transpose()?;
    let org_id = q
        .org_id
        .as_deref()
        .map(|o| text("orgId", o, 200))
        .transpose()?;
    let search = UserSearch {
        email: email.as_deref(),
        state: q.state.as_deref(),
        org_id: org_id.as_deref(),
    };
    let (items, total) =
        admin::users::list(&state.infra.store, search, (page.limit, page.offset)).await?;
    Ok(Paged::new("users", items, total, page))
}

/// A new account.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CreateUser {
    #[schema(max_length = 254, example = "ada@example.com")]
    email: String,
    #[schema(max_length = 200)]
    name: Option<String>,
    /// A password the user must change at first sign-in (8 to 128 characters, not
    /// the e-mail). Left out: an invitation goes by e-mail, whose link sets it.
    #[schema(min_length = 8, max_length = 128)]
    password: Option<String>,
}

/// `POST /admin/users`.
pub(crate) async fn create_user(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<CreateUser>,
) -> Result<Answer<AdminUser>, ApiError> {
    let name = body
        .name
        .as_deref()
        .map(|n| text("name", n, 200))
        .transpose()?;
    let password = body
        .password
        .as_deref()
        .map(|p| crate::http::signin::secret("password", p, 1024))
        .transpose()?;
    let new = NewUser {
        email: body.email,
        name,
        password,
    };
    Ok(Answer::created(
        admin::users::create(
            &state.infra.store,
            &state.config,
            &state.infra.passwords,
            &caller,
            new,
            Utc::now(),
        )
        .await?,
    ))
}

/// What changes of an account; fields left out stay.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct UpdateUser {
    /// A new e-mail: it counts as verified (the administrator vouches for it).
    #[schema(max_length = 254)]
    email: Option<String>,
    #[schema(max_length = 200)]
    name: Option<String>,
    /// `true` disables the account (its sessions, console sessions and personal
    /// access tokens end at once); `false` enables it again.
    disabled: Option<bool>,
}

/// `PATCH /admin/users/{userId}`.
pub(crate) async fn update_user(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    Json(body): Json<UpdateUser>,
) -> Result<Answer<AdminUser>, ApiError> {
    let change = UserChange {
        email: body.email,
        name: body
            .name
            .as_deref()
            .map(|n| text("name", n, 200))
            .transpose()?,
        disabled: body.disabled,
    };
    Ok(Answer::ok(
        admin::users::update(&state.infra.store, &caller, &user_id, change, Utc::now()).await?,
    ))
}

/// `DELETE /admin/users/{userId}` (step-up).
pub(crate) async fn delete_user(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> Result<Answer<Deleted>, ApiError> {
    admin::users::delete(&state.infra.store, &caller, &user_id, Utc::now()).await?;
    Ok(Answer::ok(Deleted::new(user_id)))
}

/// A user's own feature flags, by name.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserFeatures {
    /// `false` on a tier feature takes it away from the user (`true` only undoes
    /// that: it never opens a feature the organization lacks); `true` on a preview
    /// feature (`alerts`, `dashboards`) opens it for the user. The whole set is
    /// replaced.
    #[schema(example = json!({"audit_log": false, "dashboards": true}))]
    pub features: BTreeMap<String, bool>,
}

/// `GET /admin/users/{userId}/features`.
pub(crate) async fn user_features(
    State(state): State<AppState>,
    Path(user_id): Path<String>,
) -> Result<Answer<UserFeatures>, ApiError> {
    let flags = admin::features::flags(&state.infra.store, &state.replica.kept, &user_id).await?;
    Ok(Answer::ok(UserFeatures {
        features: flags
            .iter()
            .map(|(flag, on)| (flag.name().to_owned(), *on))
            .collect(),
    }))
}

/// `PUT /admin/users/{userId}/features`.
pub(crate) async fn set_user_features(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    Json(body): Json<UserFeatures>,
) -> Result<Answer<UserFeatures>, ApiError> {
    if body.features.len() > 64 {
        return Err(ApiError::invalid_field("features", "at most 64 flags"));
    }
    let features = admin::features::set(
        &state.infra.store,
        &caller,
        &user_id,
        &body.features,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(UserFeatures { features }))
}

/// `GET /admin/organizations/{id}/namespace`: the manifests as YAML, their SHA-256
/// in `X-Content-SHA256` and the `ETag`.
pub(crate) async fn namespace(
    State(state): State<AppState>,
    caller: Caller,
    Path(org_id): Path<String>,
) -> Result<Response, ApiError> {
    let manifests =
        admin::namespace::render(&state.infra.store, &state.config, &caller, &org_id).await?;
    let digest =
        HeaderValue::from_str(&manifests.sha256).map_err(|e| ApiError::internal(e.to_string()))?;
    let etag = HeaderValue::from_str(&format!("\"sha256:{}\"", manifests.sha256))
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let mut response = manifests.yaml.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/yaml; charset=utf-8"),
    );
    headers.insert("x-content-sha256", digest);
    headers.insert(header::ETAG, etag);
    Ok(response)
}

/// An impersonation to start.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct StartImpersonation {
    #[schema(max_length = 200)]
    user_id: String,
    /// Why: 10 to 500 characters, told to the user.
    #[schema(min_length = 10, max_length = 500)]
    reason: String,
    /// 1 to 60.
    #[schema(minimum = 1, maximum = 60)]
    minutes: u32,
    /// Reads only: every request but GET is refused (false when left out).
    read_only: Option<bool>,
}

/// `POST /admin/impersonations` (super-admin, step-up).
pub(crate) async fn start_impersonation(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<StartImpersonation>,
) -> Result<Answer<admin::impersonation::Started>, ApiError> {
    let user_id = text("userId", &body.user_id, 200)?;
    if body.reason.chars().count() > 2000 {
        return Err(ApiError::invalid_field(
            "reason",
            "must be at most 500 characters",
        ));
    }
    let ask = admin::impersonation::Ask {
        user_id,
        reason: body.reason,
        minutes: body.minutes,
        read_only: body.read_only.unwrap_or(false),
    };
    Ok(Answer::created(
        admin::impersonation::start(
            &state.infra.store,
            &state.config,
            &state.infra.keys,
            &caller,
            ask,
            Utc::now(),
        )
        .await?,
    ))
}

/// `DELETE /admin/impersonations/{id}`.
pub(crate) async fn end_impersonation(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Answer<admin::impersonation::Ended>, ApiError> {
    Ok(Answer::ok(
        admin::impersonation::end(&state.infra.store, &caller, &id, Utc::now()).await?,
    ))
}
