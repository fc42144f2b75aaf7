//! An organization's single sign-on enforcement and its break-glass accounts.

use super::*;

/// An organization's enforcement.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Enforcement {
    /// Whether password sessions and tokens not issued through the organization's
    /// single sign-on are refused (403 `SSO_REQUIRED`) in it and its teams.
    pub required: bool,
    /// From when (after the grace period).
    pub enforce_from: Option<DateTime<Utc>>,
    pub break_glass: Vec<BreakGlass>,
    pub updated_at: Option<DateTime<Utc>>,
}

/// A break-glass account.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BreakGlass {
    pub user_id: String,
    pub armed_until: DateTime<Utc>,
    pub armed_by: String,
    pub reason: String,
}

pub(super) fn enforcement_answer(policy: SsoPolicyRow) -> Enforcement {
    Enforcement {
        required: policy.required,
        enforce_from: policy.enforce_from,
        updated_at: policy.updated_at,
        break_glass: policy
            .break_glass
            .into_iter()
            .map(|b| BreakGlass {
                user_id: b.user_id,
                armed_until: b.armed_until,
                armed_by: b.armed_by,
                reason: b.reason,
            })
            .collect(),
    }
}

/// Enforcement to set.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PutEnforcement {
    required: bool,
    /// Hours before enforcement starts (0 to 2160).
    #[serde(default)]
    grace_hours: u32,
}

/// `GET /organization/{id}/sso`.
pub(crate) async fn enforcement(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<Enforcement>, ApiError> {
    Ok(Answer::ok(enforcement_answer(
        sso::policy(&state.infra.store, &granted.org).await?,
    )))
}

/// `PUT /organization/{id}/sso`.
pub(crate) async fn set_enforcement(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<PutEnforcement>,
) -> Result<Answer<Enforcement>, ApiError> {
    let policy = sso::set_enforcement(
        &state.infra.store,
        &state.config,
        &caller,
        &granted.org,
        (body.required, body.grace_hours),
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(enforcement_answer(policy)))
}

/// A break-glass account to arm.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ArmBreakGlass {
    /// Until when (at most 30 days ahead).
    until: DateTime<Utc>,
    #[schema(min_length = 1, max_length = 500)]
    reason: String,
}

/// `PUT /organization/{id}/sso/break-glass/{userId}`.
pub(crate) async fn arm(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((_, user_id)): Path<(String, String)>,
    Json(body): Json<ArmBreakGlass>,
) -> Result<Answer<Enforcement>, ApiError> {
    let policy = sso::arm_break_glass(
        &state.infra.store,
        &caller,
        &granted.org,
        (&user_id, body.until, &body.reason),
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(enforcement_answer(policy)))
}

/// `DELETE /organization/{id}/sso/break-glass/{userId}`.
pub(crate) async fn disarm(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((_, user_id)): Path<(String, String)>,
) -> Result<Answer<Enforcement>, ApiError> {
    let policy =
        sso::disarm_break_glass(&state.infra.store, &caller, &granted.org, &user_id).await?;
    Ok(Answer::ok(enforcement_answer(policy)))
}
