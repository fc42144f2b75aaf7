//! Personal access tokens: created by a signed-in session with a required expiry and
//! optional bounds, shown once, listed with their last use, revoked one by one.

use super::*;
use crate::replica::kept::KeptFacts;
use crate::storage::Store;

/// A personal access token as the API shows it; `token` only in the answer that
/// creates it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PersonalToken {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its last four characters.
    pub hint: String,
    /// The organization it is bound to.
    pub org_id: Option<String>,
    /// The permissions it is bound to there.
    pub permissions: Option<Vec<String>>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it stops working.
    pub expires_at: DateTime<Utc>,
    /// When it was last used (recorded at most once a minute).
    pub last_used_at: Option<DateTime<Utc>>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
    /// The secret: shown once, here, and never again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

impl From<PersonalTokenRecord> for PersonalToken {
    fn from(t: PersonalTokenRecord) -> Self {
        PersonalToken {
            id: t.id,
            name: t.name,
            hint: t.hint,
            org_id: t.org_id,
            permissions: t.permissions,
            created_at: t.created_at,
            expires_at: t.expires_at,
            last_used_at: t.last_used_at,
            revoked_at: t.revoked_at,
            token: None,
        }
    }
}

/// What a new personal access token is asked to be.
#[derive(Debug, Clone)]
pub struct TokenRequest {
    /// Its name.
    pub name: String,
    /// When it stops working (required; at most a year ahead).
    pub expires_at: DateTime<Utc>,
    /// The one organization it acts in.
    pub org_id: Option<String>,
    /// The subset of the user's permissions there.
    pub permissions: Option<Vec<Permission>>,
}

/// Creates a personal access token; its secret is in this answer only.
pub async fn create_token(
    store: &Store,
    kept: &KeptFacts,
    caller: &Caller,
    request: TokenRequest,
    now: DateTime<Utc>,
) -> ServiceResult<PersonalToken> {
    session_only(caller)?;
    let account = own_account(store, caller).await?;
    let name = request.name;
    if request.expires_at <= now {
        return Err(ServiceError::invalid("expiresAt", "must be in the future"));
    }
    if request.expires_at > now + tenancy::MAX_PERSONAL_TOKEN_LIFETIME {
        return Err(ServiceError::invalid(
            "expiresAt",
            "must be at most a year ahead",
        ));
    }
    if request.permissions.is_some() && request.org_id.is_none() {
        return Err(ServiceError::invalid(
            "permissions",
            "a subset of permissions needs the organization (orgId) it applies in",
        ));
    }
    if let Some(org) = &request.org_id {
        check_standing(store, kept, org, &account.user_id).await?;
        if let Some(asked) = &request.permissions {
            let facts =
                crate::services::access::facts(store, kept, org, &account.user_id, true).await?;
            let held: BTreeSet<Permission> = if facts.super_admin {
                Permission::ALL.into_iter().collect()
            } else if facts.membership.as_ref().is_some_and(|m| m.active) {
                tenancy::union_of(&facts.roles)
            } else {
                tenancy::union_of(&facts.parent_roles)
            };
            let missing: Vec<Permission> = asked
                .iter()
                .filter(|p| !held.contains(p))
                .copied()
                .collect();
            if !missing.is_empty() {
                return Err(tenancy::TenancyError::Escalation(missing).into());
            }
        }
    }
    let secret = tenancy::personal_token(&random::<{ tenancy::PERSONAL_TOKEN_RANDOM }>()?);
    let permissions = request.permissions.map(|set| {
        set.into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
    });
    let record = PersonalTokenRecord {
        id: crate::new_id(),
        user_id: account.user_id.clone(),
        name,
        hint: tenancy::token_hint(&secret),
        org_id: request.org_id,
        permissions,
        created_at: now,
        expires_at: request.expires_at,
        last_used_at: None,
        revoked_at: None,
        // A token made in a session that an organization's single sign-on issued
        // counts as that sign-on where the organization requires it.
        sso_org_id: caller.sso_org.clone(),
    };
    let event = caller_event(
        caller,
        "user.token.create",
        json!({"tokenId": record.id, "name": record.name, "orgId": record.org_id, "permissions": record.permissions, "expiresAt": record.expires_at}),
    );
    let audit = [event];
    unit_of_work!(store, |tx| {
        tx.create_personal_token(&record, &token_hash(&secret))
            .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    let mut shown = PersonalToken::from(record);
    shown.token = Some(secret);
    Ok(shown)
}

/// The caller's personal access tokens, newest first.
pub async fn tokens(store: &Store, caller: &Caller) -> ServiceResult<Vec<PersonalToken>> {
    session_only(caller)?;
    Ok(store
        .personal_tokens(&caller.user_id)
        .await?
        .into_iter()
        .map(PersonalToken::from)
        .collect())
}

/// Revokes one of the caller's personal access tokens (404 when not theirs or
/// revoked already).
pub async fn revoke_token(
    store: &Store,
    caller: &Caller,
    id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    session_only(caller)?;
    if store
        .revoke_personal_token(&caller.user_id, id, now)
        .await?
    {
        // Kept credentials follow on every replica.
        store.facts_changed();
        Ok(())
    } else {
        Err(ServiceError::NotFound("token".into()))
    }
}
