//! The domains an organization claims for single sign-on, proved by a DNS TXT record.

use super::*;

/// A claimed domain.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Domain {
    pub domain: String,
    /// Whether its TXT record was found (one organization at most).
    pub verified: bool,
    /// The TXT record to publish: its name and value.
    pub record_name: String,
    pub record_value: String,
    pub created_at: DateTime<Utc>,
    pub verified_at: Option<DateTime<Utc>>,
}

pub(super) fn domain_answer(row: DomainRow) -> Domain {
    Domain {
        record_name: tenancy::sso::txt_record_name(&row.domain),
        record_value: tenancy::sso::txt_record_value(&row.token),
        verified: row.verified_at.is_some(),
        domain: row.domain,
        created_at: row.created_at,
        verified_at: row.verified_at,
    }
}

/// A domain to claim.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ClaimDomain {
    #[schema(max_length = 253)]
    domain: String,
}

/// `GET /organization/{id}/domains`.
pub(crate) async fn domains(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<Vec<Domain>>, ApiError> {
    let rows = sso::domains(&state.infra.store, &granted.org).await?;
    Ok(Answer::ok(rows.into_iter().map(domain_answer).collect()))
}

/// `POST /organization/{id}/domains`.
pub(crate) async fn claim_domain(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<ClaimDomain>,
) -> Result<Answer<Domain>, ApiError> {
    let row = sso::claim_domain(
        &state.infra.store,
        &caller,
        &granted.org,
        &body.domain,
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(domain_answer(row)))
}

/// `POST /organization/{id}/domains/{domain}/verify`.
pub(crate) async fn verify_domain(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((_, domain)): Path<(String, String)>,
) -> Result<Answer<Domain>, ApiError> {
    let row = sso::verify_domain(
        &state.infra.store,
        &state.outbound.sso,
        &caller,
        &granted.org,
        &domain,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(domain_answer(row)))
}

/// `DELETE /organization/{id}/domains/{domain}`.
pub(crate) async fn remove_domain(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((_, domain)): Path<(String, String)>,
) -> Result<Answer<Deleted>, ApiError> {
    sso::remove_domain(&state.infra.store, &caller, &granted.org, &domain).await?;
    Ok(Answer::ok(Deleted::new(domain)))
}
