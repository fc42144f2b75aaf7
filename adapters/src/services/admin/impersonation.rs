//! A super-admin seeing what a user sees (`POST /api/admin/impersonations`): tenancy
//! decides whether it may start; it answers an access token for the user that
//! carries the admin as the actor (RFC 8693 `act`) and the impersonation (`imp`),
//! cannot be refreshed, and is checked against the stored impersonation on every
//! request (kept per replica, followed within a second), so that ending it, or its
//! expiry, refuses the token everywhere. The user is told by a message (who, when,
//! why); the start and the end are audited in the chain of every organization the
//! user belongs to.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use tenancy::impersonation::{self as decide, Refusal};

use super::users::admin_events;
use crate::auth::TokenKeys;
use crate::auth::{Actor, Claims};
use crate::config::Config;
use crate::replica::kept::KeptFacts;
use crate::services::accounts::SignInRefusal;
use crate::services::context::{Caller, Impersonating};
use crate::services::{ServiceError, ServiceResult};
use crate::storage::{unit_of_work, ImpersonationRow, NewMessage, Rate, Store, UserMembership};

/// What a super-admin asks for.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The user to see as.
    pub user_id: String,
    /// Why (10 to 500 characters).
    pub reason: String,
    /// For how long (1 to 60 minutes).
    pub minutes: u32,
    /// Reads only: every request but GET is refused.
    pub read_only: bool,
}

/// A started impersonation and its token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Started {
    /// The impersonation's id (`DELETE /api/admin/impersonations/{id}` ends it).
    pub id: String,
    /// The user seen as.
    pub user_id: String,
    /// An access token for the user, carrying the admin as its actor; it cannot be
    /// refreshed.
    pub access_token: String,
    /// Always `Bearer`.
    #[schema(example = "Bearer")]
    pub token_type: std::borrow::Cow<'static, str>,
    /// Seconds until it expires.
    pub expires_in: u64,
    /// When it expires.
    pub expires_at: DateTime<Utc>,
    /// Reads only.
    pub read_only: bool,
}

/// An ended impersonation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ended {
    /// Its id.
    pub id: String,
    /// When it ended.
    pub ended_at: DateTime<Utc>,
}

fn refusal(refused: Refusal) -> ServiceError {
    match refused {
        Refusal::Disabled => ServiceError::Forbidden(
            "impersonation is disabled on this platform (IMPERSONATION_ENABLED=false)",
        ),
        Refusal::Reason => ServiceError::invalid("reason", refused.to_string()),
        Refusal::Minutes => ServiceError::invalid("minutes", refused.to_string()),
        Refusal::Oneself => ServiceError::invalid("userId", refused.to_string()),
        Refusal::SuperAdmin => ServiceError::Forbidden("a super-admin cannot be impersonated"),
    }
}

/// Starts an impersonation (the route checked a super-admin with a fresh step-up).
pub async fn start(
    store: &Store,
    config: &Config,
    keys: &TokenKeys,
    caller: &Caller,
    ask: Ask,
    now: DateTime<Utc>,
) -> ServiceResult<Started> {
    if caller.impersonation.is_some() {
        return Err(ServiceError::Forbidden(
            "an impersonation cannot start another",
        ));
    }
    let enabled = config.signin.impersonation_enabled;
    // Refusals that need no lookup come first (and name nothing stored).
    decide::check(&decide::Ask {
        enabled,
        admin: &caller.user_id,
        target: &ask.user_id,
        target_super_admin: false,
        reason: &ask.reason,
        minutes: ask.minutes,
    })
    .map_err(refusal)?;
    let account = store
        .account(&ask.user_id)
        .await?
        .filter(|a| a.deleted_at.is_none() && a.disabled_at.is_none())
        .ok_or(ServiceError::NotFound("user".into()))?;
    decide::check(&decide::Ask {
        enabled,
        admin: &caller.user_id,
        target: &account.user_id,
        target_super_admin: account.super_admin,
        reason: &ask.reason,
        minutes: ask.minutes,
    })
    .map_err(refusal)?;
    let reason = ask.reason.trim().to_owned();
    let row = ImpersonationRow {
        id: crate::new_id(),
        admin_id: caller.user_id.clone(),
        user_id: account.user_id.clone(),
        reason: reason.clone(),
        read_only: ask.read_only,
        started_at: now,
        expires_at: now + chrono::Duration::minutes(i64::from(ask.minutes)),
        ended_at: None,
    };
    // Read once: where the user is told, and the chains the start is written in.
    let memberships = store.user_memberships(&row.user_id).await?;
    tell_the_user(
        store,
        caller,
        (&row, account.active_org_id.as_deref()),
        &memberships,
    )
    .await?;
    let details = json!({
        "impersonationId": row.id,
        "userId": row.user_id,
        "reason": reason,
        "minutes": ask.minutes,
        "readOnly": row.read_only,
        "expiresAt": row.expires_at,
    });
    let audit = admin_events(
        store,
        caller,
        ("admin.impersonate.start", &row.user_id),
        &memberships,
        details,
    )
    .await?;
    unit_of_work!(store, |tx| {
        tx.start_impersonation(&row).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    let lifetime = std::time::Duration::from_secs(u64::from(ask.minutes) * 60);
    let email = account.email_verified_at.map(|_| account.email.as_str());
    let mut claims = Claims::user(&account.user_id, email, now, lifetime);
    claims.gen = Some(account.generation);
    claims.act = Some(Actor {
        sub: caller.user_id.clone(),
    });
    claims.imp = Some(row.id.clone());
    let token = keys
        .sign(&claims)
        .map_err(|e| ServiceError::Broken(e.to_string()))?;
    Ok(Started {
        id: row.id,
        user_id: row.user_id,
        access_token: token,
        token_type: "Bearer".into(),
        expires_in: lifetime.as_secs(),
        expires_at: row.expires_at,
        read_only: row.read_only,
    })
}

/// The message that tells the user who sees as them, when and why: a conversation
/// in the organization the user acts in (its active one, else its first), written
/// before the impersonation is (a message about one that then failed to start is
/// harmless; an impersonation nobody was told of is not). A user in no organization
/// has no conversations; the audit events are its record.
async fn tell_the_user(
    store: &Store,
    caller: &Caller,
    (row, active): (&ImpersonationRow, Option<&str>),
    memberships: &[UserMembership],
) -> ServiceResult<()> {
    let org = memberships
        .iter()
        .find(|m| Some(m.org_id.as_str()) == active)
        .or_else(|| memberships.first());
    let Some(org) = org else {
        return Ok(());
    };
    let who = caller.email.as_deref().unwrap_or(&caller.user_id);
    let body = format!(
        "A platform administrator, {who}, began seeing the platform as you at {} UTC, until {} UTC{}.\n\nThe reason given: {}\n\nEverything done this way is recorded in the audit log with both of your names.",
        row.started_at.format("%Y-%m-%d %H:%M"),
        row.expires_at.format("%H:%M"),
        if row.read_only { " (read-only)" } else { "" },
        row.reason,
    );
    let id = crate::new_id();
    unit_of_work!(store, |tx| {
        Ok(tx
            .create_conversation(
                (
                    &id,
                    &org.org_id,
                    Some("A platform administrator is seeing your account"),
                ),
                &[caller.user_id.clone(), row.user_id.clone()],
                NewMessage {
                    id: &crate::new_id(),
                    author_id: &caller.user_id,
                    body: &body,
                },
                (
                    row.started_at,
                    // A notice of the platform's, not a member's chat: never throttled.
                    Rate {
                        since: row.started_at,
                        limit: 1_000_000,
                    },
                ),
            )
            .await?)
    })?;
    Ok(())
}

/// Ends an impersonation: by a super-admin, or from inside it (its own token, as
/// the console's banner does); anyone else is answered 404, as for an unknown one.
/// Ending one that ended or expired is 409. Audited `admin.impersonate.end` where
/// the start was.
pub async fn end(
    store: &Store,
    caller: &Caller,
    id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<Ended> {
    let from_inside = caller
        .impersonation
        .as_ref()
        .is_some_and(|imp| imp.id == id);
    let may = from_inside
        || (!caller.bound()
            && crate::services::access::is_super_admin(store, &caller.user_id).await?);
    let row = store
        .impersonation(id)
        .await?
        .filter(|_| may)
        .ok_or(ServiceError::NotFound("impersonation".into()))?;
    if !decide::is_live(row.ended_at.is_some(), row.expires_at, now) {
        return Err(ServiceError::Conflict(
            "the impersonation has ended already".to_owned(),
        ));
    }
    let memberships = store.user_memberships(&row.user_id).await?;
    let audit = admin_events(
        store,
        caller,
        ("admin.impersonate.end", &row.user_id),
        &memberships,
        json!({"impersonationId": row.id, "startedBy": row.admin_id}),
    )
    .await?;
    unit_of_work!(store, |tx| {
        if !tx.end_impersonation(id, &caller.user_id, now).await? {
            return Err(ServiceError::Conflict(
                "the impersonation has ended already".to_owned(),
            ));
        }
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    // Every replica stops honouring its token.
    store.facts_changed();
    Ok(Ended {
        id: row.id,
        ended_at: now,
    })
}

/// The impersonation a token was minted for, checked against the stored one (kept
/// per replica): live, of the token's subject, by the token's actor. A token that
/// names an actor but no impersonation of ours is refused.
pub async fn check(
    store: &Store,
    kept: &KeptFacts,
    claims: &Claims,
    now: DateTime<Utc>,
) -> ServiceResult<Option<Box<Impersonating>>> {
    const ENDED: SignInRefusal =
        SignInRefusal::InvalidToken("the impersonation has ended or expired");
    let Some(id) = &claims.imp else {
        if claims.act.is_some() {
            return Err(SignInRefusal::InvalidToken(
                "an `act` claim is honoured on this server's impersonation tokens only",
            )
            .into());
        }
        return Ok(None);
    };
    let stored = kept
        .impersonations
        .get_or_load(
            store,
            id.clone(),
            |found| found.is_some(),
            store.impersonation(id),
        )
        .await?;
    let Some(row) = stored.as_ref() else {
        return Err(ENDED.into());
    };
    let actor = claims.act.as_ref().map(|a| a.sub.as_str());
    if row.user_id != claims.sub
        || actor != Some(row.admin_id.as_str())
        || !decide::is_live(row.ended_at.is_some(), row.expires_at, now)
    {
        return Err(ENDED.into());
    }
    Ok(Some(Box::new(Impersonating {
        id: row.id.clone(),
        admin_id: row.admin_id.clone(),
        read_only: row.read_only,
    })))
}
