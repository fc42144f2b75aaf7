//! Invitations of an organization: send, list, revoke, resend; each change audited
//! in the same transaction.

use chrono::{DateTime, Utc};
use serde_json::json;
use tenancy::MembershipRole;

use super::ServiceResult;
use crate::http::state::{event, Caller};
use crate::storage::{InvitationRecord, OrgRecord, Store};

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
    Ok(store
        .create_invitation(&org.id, email, role, &caller.user_id, now, &audit)
        .await?)
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
    store.revoke_invitation(&org.id, id, &audit).await?;
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
    store.resend_invitation(&org.id, id, now, &audit).await?;
    Ok(store.invitation(&org.id, id).await?)
}
