//! Accounts as a platform administrator manages them: the list (searched by
//! e-mail, state and organization), creating one (an invitation by e-mail, or a
//! password the user must change at first sign-in), changing its e-mail or name,
//! disabling and enabling it, and deleting it (it becomes a ghost). Every change is
//! audited `admin.user.*` in the system organization's chain and in the chain of
//! every organization the account belongs to (`affectedOrgId`), in the change's
//! transaction.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::config::Config;
use crate::cpu::CpuPool;
use crate::services::accounts::{self, MailReason};
use crate::services::context::{event_on, Caller};
use crate::services::{ServiceError, ServiceResult};
use crate::storage::{
    unit_of_work, AccountFilter, AccountRecord, AccountState, NewAccount, Store, UserMembership,
    Verification,
};

/// An account as administration answers it (no secret, no hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminUser {
    /// The user's id.
    pub user_id: String,
    /// The sign-in e-mail (a ghost's placeholder once deleted).
    pub email: String,
    /// The display name.
    pub name: Option<String>,
    /// `active`, `unverified`, `disabled` or `deleted`.
    #[schema(value_type = String, example = "active")]
    pub state: AccountState,
    /// Whether the user is a super-admin.
    pub super_admin: bool,
    /// Whether an authenticator app is enrolled.
    pub totp_enabled: bool,
    /// The password must be changed at the next sign-in.
    pub password_change_required: bool,
    /// How many organizations the user is a member of.
    pub organizations: u64,
    /// When the account was disabled.
    pub disabled_at: Option<DateTime<Utc>>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// The account's state.
pub fn state_of(account: &AccountRecord) -> AccountState {
    if account.deleted_at.is_some() {
        AccountState::Deleted
    } else if account.disabled_at.is_some() {
        AccountState::Disabled
    } else if account.email_verified_at.is_none() {
        AccountState::Unverified
    } else {
        AccountState::Active
    }
}

/// A state named on the wire.
fn parse_state(name: &str) -> ServiceResult<AccountState> {
    AccountState::named(name).ok_or_else(|| {
        let names: Vec<&str> = AccountState::ALL.iter().map(|s| s.name()).collect();
        ServiceError::invalid("state", format!("must be one of {}", names.join(", ")))
    })
}

fn answer(account: AccountRecord, organizations: u64) -> AdminUser {
    AdminUser {
        state: state_of(&account),
        user_id: account.user_id,
        email: account.email,
        name: account.name,
        super_admin: account.super_admin,
        totp_enabled: account.totp_secret.is_some(),
        password_change_required: account.password_change_required,
        organizations,
        disabled_at: account.disabled_at,
        created_at: account.created_at,
        updated_at: account.updated_at,
    }
}

/// What the account list is filtered by: a part of the e-mail, a state's name,
/// an organization.
#[derive(Debug, Clone, Copy, Default)]
pub struct UserSearch<'a> {
    /// A part of the e-mail.
    pub email: Option<&'a str>,
    /// `active`, `unverified`, `disabled` or `deleted`.
    pub state: Option<&'a str>,
    /// Members of this organization.
    pub org_id: Option<&'a str>,
}

/// A page of accounts, newest first, and how many match.
pub async fn list(
    store: &Store,
    search: UserSearch<'_>,
    (limit, offset): (u32, u64),
) -> ServiceResult<(Vec<AdminUser>, u64)> {
    let email = search.email.map(str::to_lowercase);
    let filter = AccountFilter {
        email: email.as_deref(),
        state: search.state.map(parse_state).transpose()?,
        org_id: search.org_id,
    };
    let (rows, total) = store.admin_accounts(&filter, limit, offset).await?;
    Ok((
        rows.into_iter()
            .map(|row| answer(row.account, row.organizations))
            .collect(),
        total,
    ))
}

/// A new account as a super-admin asks for it.
#[derive(Debug, Clone)]
pub struct NewUser {
    /// The e-mail.
    pub email: String,
    /// The display name.
    pub name: Option<String>,
    /// A password to set (the user must change it at first sign-in); `None` sends an
    /// invitation by e-mail, whose link sets the first password.
    pub password: Option<String>,
}

/// The audit events of an administration action on `user_id`: one in the system
/// organization's chain, and one in the chain of each organization of
/// `memberships` (the user's, read once by the workflow), with it as
/// `affectedOrgId`.
pub(super) async fn admin_events(
    store: &Store,
    caller: &Caller,
    (action, user_id): (&str, &str),
    memberships: &[UserMembership],
    details: serde_json::Value,
) -> ServiceResult<Vec<audit_chain::AuditEvent>> {
    let system = store
        .system_organization()
        .await?
        .ok_or(ServiceError::Forbidden("there is no system organization"))?;
    let mut events = vec![event_on(
        caller,
        action,
        (&system.id, None),
        ("user", user_id),
        details.clone(),
    )];
    for membership in memberships {
        if membership.org_id == system.id {
            continue;
        }
        events.push(event_on(
            caller,
            action,
            (&membership.org_id, Some(&membership.org_id)),
            ("user", user_id),
            details.clone(),
        ));
    }
    Ok(events)
}

/// Creates an account: with a password, verified and bound to change it at first
/// sign-in; without one, unverified, with an invitation mail whose link sets the
/// password. Audited `admin.user.create` (never the password).
pub async fn create(
    store: &Store,
    config: &Config,
    passwords: &CpuPool,
    caller: &Caller,
    new: NewUser,
    now: DateTime<Utc>,
) -> ServiceResult<AdminUser> {
    let email = accounts::normalize_email("email", &new.email)?;
    let user_id = crate::new_id();
    let invited = new.password.is_none();
    let password = match new.password {
        Some(password) => {
            tenancy::check_password(&password, &email)
                .map_err(|e| accounts::weak("password", e))?;
            password
        }
        // Nobody knows it: the invitation's link sets the real one.
        None => accounts::opaque("unusable_")?,
    };
    let hash = accounts::hash_password(passwords, password).await?;
    let pending = if invited {
        Some(accounts::verification(config, MailReason::Invitation, now)?)
    } else {
        None
    };
    let verify = pending
        .as_ref()
        .map(|(hash, id, subject, body, expires_at)| Verification {
            token_hash: hash,
            email: &email,
            expires_at: *expires_at,
            mail: (id, subject, body),
        });
    let audit = admin_events(
        store,
        caller,
        ("admin.user.create", &user_id),
        &[],
        json!({"email": email, "invited": invited}),
    )
    .await?;
    let account = accounts::create_account(
        store,
        &NewAccount {
            user_id: &user_id,
            email: &email,
            name: new.name.as_deref(),
            password_hash: &hash,
            verified: !invited,
            super_admin: false,
            password_change_required: true,
        },
        verify.as_ref(),
        now,
        &audit,
    )
    .await?;
    Ok(answer(account, 0))
}

/// What a super-admin changes of an account.
#[derive(Debug, Clone, Default)]
pub struct UserChange {
    /// A new e-mail (counts as verified: the administrator vouches for it).
    pub email: Option<String>,
    /// A new display name.
    pub name: Option<String>,
    /// Disable (`true`) or enable (`false`).
    pub disabled: Option<bool>,
}

/// Changes an account; disabling ends its sessions, console sessions and personal
/// access tokens at once on every replica. A super-admin cannot disable itself nor
/// another super-admin (revoke the flag first). Audited `admin.user.update` naming
/// the fields changed.
pub async fn update(
    store: &Store,
    caller: &Caller,
    user_id: &str,
    change: UserChange,
    now: DateTime<Utc>,
) -> ServiceResult<AdminUser> {
    let account = live_account(store, user_id).await?;
    let email = change
        .email
        .map(|e| accounts::normalize_email("email", &e))
        .transpose()?
        .filter(|e| *e != account.email);
    let disabled = change
        .disabled
        .filter(|d| *d != account.disabled_at.is_some());
    if disabled == Some(true) {
        if user_id == caller.user_id {
            return Err(ServiceError::Conflict(
                "a super-admin cannot disable its own account".to_owned(),
            ));
        }
        if account.super_admin {
            return Err(ServiceError::Conflict(
                "the account is a super-admin's: revoke the flag first".to_owned(),
            ));
        }
    }
    let changed: Vec<&str> = [
        change.name.as_ref().map(|_| "name"),
        email.as_ref().map(|_| "email"),
        disabled.map(|_| "disabled"),
    ]
    .into_iter()
    .flatten()
    .collect();
    let memberships = store.user_memberships(user_id).await?;
    let audit = admin_events(
        store,
        caller,
        ("admin.user.update", user_id),
        &memberships,
        json!({"changed": changed, "disabled": disabled}),
    )
    .await?;
    let account = unit_of_work!(store, |tx| {
        let account = tx
            .admin_update_account(
                user_id,
                (change.name.as_deref(), email.as_deref(), disabled),
                now,
            )
            .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(account)
    })?;
    store.facts_changed();
    Ok(answer(account, memberships.len() as u64))
}

/// Deletes an account (a fresh step-up was checked by the route): its memberships
/// end, its sessions and tokens end, its personal data is erased and its id stays
/// as a ghost (`deleted-<id>@ghost.invalid`) for what it made and for the audit
/// chain. The owner of an organization cannot be deleted (409 naming the
/// organizations), nor a super-admin, nor the caller. Audited `admin.user.delete`
/// in the chain of every organization it belonged to.
pub async fn delete(
    store: &Store,
    caller: &Caller,
    user_id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let account = live_account(store, user_id).await?;
    if user_id == caller.user_id {
        return Err(ServiceError::Conflict(
            "a super-admin cannot delete its own account here (DELETE /api/me)".to_owned(),
        ));
    }
    if account.super_admin {
        return Err(ServiceError::Conflict(
            "the account is a super-admin's: revoke the flag first".to_owned(),
        ));
    }
    let memberships = store.user_memberships(user_id).await?;
    let owned: Vec<&str> = memberships
        .iter()
        .filter(|m| m.owner)
        .map(|m| m.org_id.as_str())
        .collect();
    if !owned.is_empty() {
        return Err(ServiceError::Conflict(format!(
            "the account is the last Owner of {}: transfer ownership first",
            owned.join(", ")
        )));
    }
    let audit = admin_events(
        store,
        caller,
        ("admin.user.delete", user_id),
        &memberships,
        json!({}),
    )
    .await?;
    unit_of_work!(store, |tx| {
        tx.delete_account_as_admin(user_id, &ghost_email(user_id), now)
            .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    Ok(())
}

/// The placeholder address a deleted account keeps (never deliverable: `.invalid`).
pub fn ghost_email(user_id: &str) -> String {
    format!("deleted-{user_id}@ghost.invalid")
}

async fn live_account(store: &Store, user_id: &str) -> ServiceResult<AccountRecord> {
    store
        .account(user_id)
        .await?
        .filter(|a| a.deleted_at.is_none())
        .ok_or(ServiceError::NotFound("user".into()))
}
