//! Exemptions, policies, templates, the check log and notification preferences.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use compliance_core::ExemptionAction;
use serde::Deserialize;
use serde_json::json;
use tenancy::{MembershipRole, Permission};

use crate::error::ApiError;
use crate::http::extract::{Json, PageParams, Query};
use crate::http::organizations::text;
use crate::http::response::{ok, paginated};
use crate::http::rules::tenant;
use crate::http::state::{event, AppState, Caller};
use crate::services::{exemptions, templates};

/// The most exemptions one bulk request may ask for.
pub const BULK_LIMIT: usize = 500;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ExemptionRequest {
    rule_id: String,
    entity_id: String,
    reason: String,
    expires_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct BulkExemptionRequest {
    rule_id: String,
    entity_ids: Vec<String>,
    reason: String,
    expires_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Review {
    decision: String,
    note: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExemptionQuery {
    status: Option<String>,
    rule_id: Option<String>,
    entity_id: Option<String>,
    #[serde(flatten)]
    page: PageParams,
}

/// `POST /compliance/exemptions`: request a waiver of one rule for one entity.
pub(crate) async fn request(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<ExemptionRequest>,
) -> Result<Response, ApiError> {
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceWrite,
        true,
        "POST /compliance/exemptions",
    )
    .await?;
    let request = exemptions::Request {
        rule_id: body.rule_id,
        entity_ids: vec![text("entityId", &body.entity_id, 200)?],
        reason: text("reason", &body.reason, 2000)?,
        expires_at: body.expires_at,
    };
    let ids = exemptions::request(&state.store, &caller, &granted.org, request, Utc::now()).await?;
    let id = ids.into_iter().next().unwrap_or_default();
    let stored = state.store.exemption(&granted.org.id, &id).await?;
    Ok(ok(StatusCode::CREATED, stored))
}

/// `POST /compliance/exemptions/bulk`: one rule, many entities, at most 500, all or nothing.
pub(crate) async fn request_bulk(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<BulkExemptionRequest>,
) -> Result<Response, ApiError> {
    if body.entity_ids.len() > BULK_LIMIT {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "BULK_LIMIT_EXCEEDED",
            format!(
                "at most {BULK_LIMIT} exemptions per call, got {}",
                body.entity_ids.len()
            ),
        )
        .with_details(json!({"max": BULK_LIMIT, "actual": body.entity_ids.len()})));
    }
    if body.entity_ids.is_empty() {
        return Err(ApiError::invalid_field(
            "entityIds",
            "must list at least one entity",
        ));
    }
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceWrite,
        true,
        "POST /compliance/exemptions/bulk",
    )
    .await?;
    let entity_ids = body
        .entity_ids
        .iter()
        .map(|entity| text("entityIds", entity, 200))
        .collect::<Result<Vec<_>, ApiError>>()?;
    let request = exemptions::Request {
        rule_id: body.rule_id,
        entity_ids,
        reason: text("reason", &body.reason, 2000)?,
        expires_at: body.expires_at,
    };
    let ids = exemptions::request(&state.store, &caller, &granted.org, request, Utc::now()).await?;
    Ok(ok(
        StatusCode::CREATED,
        json!({"ids": ids, "count": ids.len()}),
    ))
}

/// `GET /compliance/exemptions`: filtered by status, rule and entity.
pub(crate) async fn list_exemptions(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<ExemptionQuery>,
) -> Result<Response, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    if let Some(status) = &q.status {
        if !["requested", "approved", "rejected", "revoked"].contains(&status.as_str()) {
            return Err(ApiError::invalid_field(
                "status",
                "must be requested, approved, rejected or revoked",
            ));
        }
    }
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceRead,
        false,
        "GET /compliance/exemptions",
    )
    .await?;
    let (items, total) = state
        .store
        .exemptions(
            &granted.org.id,
            q.status.as_deref(),
            q.rule_id.as_deref(),
            q.entity_id.as_deref(),
            page.limit,
            page.offset,
        )
        .await?;
    Ok(paginated("exemptions", items, total, &page))
}

/// `PUT /compliance/exemptions/:id/review` (`compliance:review`): approve or reject;
/// the requester may not review their own request.
pub(crate) async fn review(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(body): Json<Review>,
) -> Result<Response, ApiError> {
    let action = match body.decision.as_str() {
        "approve" | "approved" => ExemptionAction::Approve,
        "reject" | "rejected" => ExemptionAction::Reject,
        _ => {
            return Err(ApiError::invalid_field(
                "decision",
                "must be approve or reject",
            ))
        }
    };
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceReview,
        true,
        "PUT /compliance/exemptions/:id/review",
    )
    .await?;
    let decided = exemptions::decide(
        &state.store,
        &caller,
        &granted.org,
        &id,
        action,
        body.note.as_deref(),
        Utc::now(),
    )
    .await?;
    Ok(ok(StatusCode::OK, decided))
}

/// `DELETE /compliance/exemptions/:id`: revoke.
pub(crate) async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceWrite,
        true,
        "DELETE /compliance/exemptions/:id",
    )
    .await?;
    let decided = exemptions::decide(
        &state.store,
        &caller,
        &granted.org,
        &id,
        ExemptionAction::Revoke,
        None,
        Utc::now(),
    )
    .await?;
    Ok(ok(StatusCode::OK, decided))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PolicyBody {
    name: Option<String>,
    description: Option<String>,
    rule_ids: Option<Vec<String>>,
    is_template: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PolicyQuery {
    name: Option<String>,
    #[serde(flatten)]
    page: PageParams,
}

/// `POST /compliance/policies`.
pub(crate) async fn create_policy(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<PolicyBody>,
) -> Result<Response, ApiError> {
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceWrite,
        true,
        "POST /compliance/policies",
    )
    .await?;
    let name = text("name", body.name.as_deref().unwrap_or_default(), 200)?;
    let is_template = body.is_template.unwrap_or(false);
    if is_template && !granted.org.is_system {
        return Err(ApiError::forbidden(
            "only the system organization owns template policies",
        ));
    }
    let rule_ids = body.rule_ids.unwrap_or_default();
    let audit = |policy_id: &str| {
        vec![event(
            &caller,
            "compliance.policy.create",
            &granted.org.id,
            "policy",
            policy_id,
            json!({"name": name}),
        )]
    };
    let policy = state
        .store
        .create_policy(
            &granted.org.id,
            (&name, body.description.as_deref()),
            &rule_ids,
            is_template,
            Utc::now(),
            &audit,
        )
        .await?;

    Ok(ok(StatusCode::CREATED, policy))
}

/// `GET /compliance/policies`.
pub(crate) async fn list_policies(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<PolicyQuery>,
) -> Result<Response, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceRead,
        false,
        "GET /compliance/policies",
    )
    .await?;
    let (items, total) = state
        .store
        .policies(
            &granted.org.id,
            q.name.as_deref(),
            None,
            page.limit,
            page.offset,
        )
        .await?;
    Ok(paginated("policies", items, total, &page))
}

/// `GET /compliance/policies/:id`.
pub(crate) async fn get_policy(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceRead,
        false,
        "GET /compliance/policies/:id",
    )
    .await?;
    let policy = state
        .store
        .policy(&granted.org.id, &id)
        .await?
        .ok_or_else(|| ApiError::not_found("policy"))?;
    Ok(ok(StatusCode::OK, policy))
}

/// `PUT /compliance/policies/:id`.
pub(crate) async fn update_policy(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(body): Json<PolicyBody>,
) -> Result<Response, ApiError> {
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceWrite,
        true,
        "PUT /compliance/policies/:id",
    )
    .await?;
    let name = body
        .name
        .as_deref()
        .map(|n| text("name", n, 200))
        .transpose()?;
    let audit = [event(
        &caller,
        "compliance.policy.update",
        &granted.org.id,
        "policy",
        &id,
        json!({}),
    )];
    let policy = state
        .store
        .update_policy(
            &granted.org.id,
            &id,
            (
                name.as_deref(),
                body.description.as_deref(),
                body.rule_ids.as_deref(),
            ),
            Utc::now(),
            &audit,
        )
        .await?;

    Ok(ok(StatusCode::OK, policy))
}

/// `DELETE /compliance/policies/:id`.
pub(crate) async fn delete_policy(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceWrite,
        true,
        "DELETE /compliance/policies/:id",
    )
    .await?;
    let audit = [event(
        &caller,
        "compliance.policy.delete",
        &granted.org.id,
        "policy",
        &id,
        json!({}),
    )];
    state
        .store
        .delete_policy(&granted.org.id, &id, &audit)
        .await?;

    Ok(ok(StatusCode::OK, json!({"id": id, "deleted": true})))
}

/// `GET /compliance/templates`: the system organization's template rules and policies.
pub(crate) async fn templates(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Response, ApiError> {
    tenant(
        &state,
        &caller,
        Permission::ComplianceRead,
        false,
        "GET /compliance/templates",
    )
    .await?;
    let (rules, policies) = templates::catalog(&state).await?;
    Ok(ok(
        StatusCode::OK,
        json!({"rules": rules, "policies": policies}),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ApplyTemplate {
    template_id: String,
    name: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CloneBody {
    name: Option<String>,
}

/// The optional `{name}` of a clone request: an empty body is allowed.
fn clone_name(body: &[u8]) -> Result<Option<String>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice::<CloneBody>(body)
        .map(|b| b.name)
        .map_err(|e| ApiError::validation(format!("invalid body: {e}")))
}

/// `POST /compliance/templates/apply`: a template rule instantiated as an org rule.
pub(crate) async fn apply(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<ApplyTemplate>,
) -> Result<Response, ApiError> {
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceWrite,
        true,
        "POST /compliance/templates/apply",
    )
    .await?;
    let stored = templates::apply(
        &state,
        &caller,
        &granted.org,
        &body.template_id,
        body.name,
        Utc::now(),
    )
    .await?;
    Ok(ok(StatusCode::CREATED, stored))
}

/// `POST /compliance/templates/rules/:id/clone`: an editable copy of a template rule.
pub(crate) async fn clone_rule(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    crate::http::extract::RawBody(body): crate::http::extract::RawBody,
) -> Result<Response, ApiError> {
    let name = clone_name(&body)?;
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceWrite,
        true,
        "POST /compliance/templates/rules/:id/clone",
    )
    .await?;
    let stored = templates::apply(&state, &caller, &granted.org, &id, name, Utc::now()).await?;
    Ok(ok(StatusCode::CREATED, stored))
}

/// `POST /compliance/templates/policies/:id/clone`: a template policy copied with the
/// template rules it groups (each cloned as an org rule).
pub(crate) async fn clone_policy(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    crate::http::extract::RawBody(body): crate::http::extract::RawBody,
) -> Result<Response, ApiError> {
    let name = clone_name(&body)?;
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceWrite,
        true,
        "POST /compliance/templates/policies/:id/clone",
    )
    .await?;
    let policy =
        templates::clone_policy(&state, &caller, &granted.org, &id, name, Utc::now()).await?;
    Ok(ok(StatusCode::CREATED, policy))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CheckQuery {
    target: Option<String>,
    result: Option<String>,
    entity_id: Option<String>,
    #[serde(flatten)]
    page: PageParams,
}

/// `GET /compliance/audit`: the check log.
pub(crate) async fn checks(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<CheckQuery>,
) -> Result<Response, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    if q.result
        .as_deref()
        .is_some_and(|r| !["pass", "warn", "block"].contains(&r))
    {
        return Err(ApiError::invalid_field(
            "result",
            "must be pass, warn or block",
        ));
    }
    if q.target
        .as_deref()
        .is_some_and(|t| !["plugin", "pipeline"].contains(&t))
    {
        return Err(ApiError::invalid_field(
            "target",
            "must be plugin or pipeline",
        ));
    }
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceRead,
        false,
        "GET /compliance/audit",
    )
    .await?;
    let (items, total) = state
        .store
        .checks(
            &granted.org.id,
            q.target.as_deref(),
            q.result.as_deref(),
            q.entity_id.as_deref(),
            page.limit,
            page.offset,
        )
        .await?;
    Ok(paginated("entries", items, total, &page))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PreferenceBody {
    email_enabled: Option<bool>,
    target_users: Option<Vec<String>>,
    webhook_url: Option<String>,
    webhook_secret: Option<String>,
    digest_mode: Option<String>,
    notify_warnings: Option<bool>,
}

/// `GET /compliance/notification-preferences`: column defaults when unset.
pub(crate) async fn preferences(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Response, ApiError> {
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceRead,
        false,
        "GET /compliance/notification-preferences",
    )
    .await?;
    Ok(ok(
        StatusCode::OK,
        state.store.notification_preference(&granted.org.id).await?,
    ))
}

/// `PUT /compliance/notification-preferences`: organization admin or owner only. An
/// omitted `webhookSecret` keeps the stored one; an empty string clears it.
pub(crate) async fn save_preferences(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<PreferenceBody>,
) -> Result<Response, ApiError> {
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceRead,
        true,
        "PUT /compliance/notification-preferences",
    )
    .await?;
    let role = state
        .store
        .membership(&granted.org.id, &caller.user_id)
        .await?
        .filter(|m| m.active)
        .map(|m| m.role);
    if !(granted.super_admin || matches!(role, Some(MembershipRole::Owner | MembershipRole::Admin)))
    {
        return Err(ApiError::forbidden(
            "only the organization's admins or owner may change notification preferences",
        ));
    }
    let mut preference = state.store.notification_preference(&granted.org.id).await?;
    if let Some(mode) = body.digest_mode {
        if !["immediate", "daily", "weekly"].contains(&mode.as_str()) {
            return Err(ApiError::invalid_field(
                "digestMode",
                "must be immediate, daily or weekly",
            ));
        }
        preference.digest_mode = mode;
    }
    if let Some(url) = body.webhook_url {
        if !(url.is_empty() || url.starts_with("https://") || url.starts_with("http://")) {
            return Err(ApiError::invalid_field(
                "webhookUrl",
                "must be an http(s) URL",
            ));
        }
        preference.webhook_url = Some(url).filter(|u| !u.is_empty());
    }
    if let Some(secret) = body.webhook_secret {
        preference.webhook_secret = Some(secret).filter(|s| !s.is_empty());
    }
    preference.has_webhook_secret = preference.webhook_secret.is_some();
    if let Some(enabled) = body.email_enabled {
        preference.email_enabled = enabled;
    }
    if let Some(users) = body.target_users {
        preference.target_users = Some(users).filter(|u| !u.is_empty());
    }
    if let Some(warnings) = body.notify_warnings {
        preference.notify_warnings = warnings;
    }
    state
        .store
        .save_notification_preference(&granted.org.id, &preference, Utc::now(), &[])
        .await?;
    Ok(ok(StatusCode::OK, preference))
}
