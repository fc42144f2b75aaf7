//! Invitations of an organization: send, list, revoke, resend; each change audited
//! in the same transaction.

use chrono::{DateTime, Utc};
use serde_json::json;
use tenancy::MembershipRole;

use super::{ServiceError, ServiceResult};
use crate::config::Config;
use crate::replica::allowance::Allowances;
use crate::services::context::{event, Caller};
use crate::storage::{unit_of_work, MemberRecord, OrgRecord, Store};
pub use crate::storage::{InvitationRecord, InvitationStatus};

/// Invites `email` with `role`.
pub async fn send(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    (email, role): (&str, MembershipRole),
    now: DateTime<Utc>,
) -> ServiceResult<InvitationRecord> {
    let audit = |invitation_id: &str| {
        vec![event(
            caller,
            "invitation.send",
            &org.id,
            "invitation",
            invitation_id,
            json!({"role": role}),
        )]
    };
    let id = unit_of_work!(store, |tx| {
        let id = tx
            .create_invitation(&org.id, email, role, &caller.user_id, now)
            .await?;
        tx.enqueue_audit(&audit(&id)).await?;
        Ok(id)
    })?;
    store
        .invitation(&org.id, &id)
        .await?
        .ok_or(ServiceError::NotFound("invitation".into()))
}

/// A page of the organization's invitations: (invitations, total).
pub async fn list(
    store: &Store,
    org: &OrgRecord,
    limit: u32,
    offset: u64,
    ascending: bool,
) -> ServiceResult<(Vec<InvitationRecord>, u64)> {
    Ok(store.invitations(&org.id, limit, offset, ascending).await?)
}

/// Revokes an invitation; answers it as it now stands.
pub async fn revoke(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
) -> ServiceResult<Option<InvitationRecord>> {
    let audit = [event(
        caller,
        "invitation.revoke",
        &org.id,
        "invitation",
        id,
        json!({}),
    )];
    unit_of_work!(store, |tx| {
        tx.revoke_invitation(&org.id, id).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    Ok(store.invitation(&org.id, id).await?)
}

/// Sends an invitation again; answers it as it now stands.
pub async fn resend(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<Option<InvitationRecord>> {
    let audit = [event(
        caller,
        "invitation.resend",
        &org.id,
        "invitation",
        id,
        json!({}),
    )];
    unit_of_work!(store, |tx| {
        tx.resend_invitation(&org.id, id, now).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    Ok(store.invitation(&org.id, id).await?)
}

/// The invitee accepts: the caller whose token carries the invited e-mail joins the
/// organization with the invited role, within the account's seats (429 beyond
/// them). An invitation of someone else is not found, whatever its id.
pub async fn accept(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    caller: &Caller,
    id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<Option<MemberRecord>> {
    let invitation = store
        .invitation_by_id(id)
        .await?
        .filter(|i| {
            caller
                .email
                .as_deref()
                .is_some_and(|email| email.eq_ignore_ascii_case(&i.email))
        })
        .ok_or(ServiceError::NotFound("invitation".into()))?;
    if invitation.status != InvitationStatus::Pending {
        return Err(ServiceError::Conflict(
            "the invitation is no longer pending".to_owned(),
        ));
    }
    let org = store
        .organization(&invitation.org_id)
        .await?
        .ok_or(ServiceError::NotFound("invitation".into()))?;
    let implied =
        super::members::builtin(store, &org.id, tenancy::implied_role(invitation.role)).await?;
    let root = super::members::seats_of(store, config, allowances, &org).await?;
    store
        .ensure_user(&caller.user_id, caller.email.as_deref(), now)
        .await?;
    let audit = [event(
        caller,
        "invitation.accept",
        &org.id,
        "invitation",
        id,
        json!({"role": invitation.role}),
    )];
    let grants = [(org.id.clone(), implied.id.clone())];
    unit_of_work!(store, |tx| {
        tx.lock_organization(&root.id).await?;
        tx.accept_invitation(&org.id, id).await?;
        tx.insert_memberships(&caller.user_id, invitation.role, &grants, now)
            .await?;
        super::members::seat_taken(tx.seats(&root.id).await?)?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    Ok(store.membership(&org.id, &caller.user_id).await?)
}
