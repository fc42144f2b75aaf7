//! Accounts and sign-in: register, verify the e-mail, sign in, refresh, sign out,
//! step up; the profile, the password, deletion; personal access tokens and
//! revoke-all. Decisions are tenancy's (`signin`): the password policy and hashes,
//! the throttle, what a second use of a refresh token means, token layouts.
//!
//! - Passwords are hashed and checked on their own pool of threads, never on the
//!   async runtime; an unknown account is checked against a dummy hash, so both
//!   refusals take the same time and say the same thing.
//! - Refresh tokens, verification links and personal access tokens are random
//!   (256, 256 and 178 bits) and stored as SHA-256 hashes only.
//! - The `user.*` events are chained under [`ACCOUNTS_CHAIN`] (an account belongs
//!   to no organization), which super-admins read with `orgId=accounts`.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

use base64::Engine;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};
use tenancy::{Permission, SecondUse, SignInError, Throttle, ThrottlePolicy};

use super::context::{AppState, Caller};
use super::{ServiceError, ServiceResult};
use crate::auth::Claims;
use crate::config::Config;
use crate::cpu::CpuPool;
use crate::replica::kept::KeptFacts;
use crate::storage::{
    unit_of_work, AccountRecord, FamilyRecord, NewAccount, PersonalTokenRecord, Rotation, Store,
    Verification,
};

mod profile;
mod session;
mod step_up;
mod throttle;
mod tokens;

pub use profile::*;
pub use session::{end_session, login, logout, refresh, Credentials, Session};
pub(crate) use session::{new_family, tokens_for};
pub use step_up::{
    confirm_totp, enroll_totp, remove_totp, step_up, Reverification, StepUpProof, TotpEnrollment,
};
pub(crate) use throttle::{record_failure, refund, throttle};
pub use tokens::{create_token, revoke_token, tokens, PersonalToken, TokenRequest};

/// The chain of the `user.*` events.
pub const ACCOUNTS_CHAIN: &str = "accounts";

/// Why a sign-in (or a use of one of its tokens) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignInRefusal {
    /// Unknown account or wrong password: one answer (401 `INVALID_CREDENTIALS`).
    #[error("the identifier or the password is wrong")]
    InvalidCredentials,
    /// Too many failures for the account or the client address (429
    /// `TOO_MANY_ATTEMPTS`, with `Retry-After`).
    #[error("too many failed sign-ins: try again in {retry_after} seconds")]
    TooManyAttempts {
        /// Seconds until the next attempt is heard.
        retry_after: u64,
    },
    /// The account's e-mail is not verified yet (403 `EMAIL_NOT_VERIFIED`).
    #[error("the account's e-mail is not verified yet: follow the link that was sent to it")]
    EmailNotVerified,
    /// A refresh token, a verification link or a session that is not (or no longer)
    /// good (401 `UNAUTHORIZED`).
    #[error("{0}")]
    InvalidToken(&'static str),
    /// The organization to sign into is not the account's (403 `TENANT_FORBIDDEN`).
    #[error("the organization does not exist or is not yours")]
    NotYourOrganization,
    /// Only a signed-in session may do this, not a personal access token (403
    /// `FORBIDDEN`).
    #[error("a personal access token cannot do this: sign in")]
    SessionRequired,
    /// A super-admin disabled the account (403 `ACCOUNT_DISABLED`).
    #[error("the account is disabled: ask the platform's administrators")]
    AccountDisabled,
    /// The account must change its password first (403 `PASSWORD_CHANGE_REQUIRED`):
    /// only `PUT /api/me/password`, `GET /api/me` and sign-out are open.
    #[error("the password must be changed first: PUT /api/me/password")]
    PasswordChangeRequired,
}

impl From<SignInRefusal> for ServiceError {
    fn from(refusal: SignInRefusal) -> Self {
        ServiceError::SignIn(refusal)
    }
}

/// An account as the API shows it (no secret, no hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    /// The user's id (the tokens' `sub`).
    pub user_id: String,
    /// The sign-in e-mail.
    pub email: String,
    /// Whether the e-mail is verified.
    pub email_verified: bool,
    /// The display name.
    pub name: Option<String>,
    /// Whether the user is a super-admin.
    pub super_admin: bool,
    /// Whether an authenticator app is enrolled (step-up takes its codes).
    pub totp_enabled: bool,
    /// When the account was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
    /// The organization the user acts in by default (`PUT /api/me/active-organization`).
    pub active_org_id: Option<String>,
    /// The password must be changed before anything else (`PUT /api/me/password`).
    pub password_change_required: bool,
}

/// The caller's account and the features it has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Me {
    /// The account.
    #[serde(flatten)]
    pub account: Account,
    /// The features the user has in `featuresOrgId` (its tier's and bundles', less
    /// those a flag of the user's own took away), and the preview features opened
    /// for the user; sorted.
    pub features: Vec<std::borrow::Cow<'static, str>>,
    /// The organization `features` are of: `x-org-id`, else the active
    /// organization, when the user stands in it.
    pub features_org_id: Option<String>,
}

impl From<AccountRecord> for Account {
    fn from(a: AccountRecord) -> Self {
        Account {
            user_id: a.user_id,
            email: a.email,
            email_verified: a.email_verified_at.is_some(),
            name: a.name,
            super_admin: a.super_admin,
            totp_enabled: a.totp_secret.is_some(),
            created_at: a.created_at,
            updated_at: a.updated_at,
            active_org_id: a.active_org_id,
            password_change_required: a.password_change_required,
        }
    }
}

/// SHA-256 hex of a secret token, as stored.
pub fn token_hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

pub(crate) fn random<const N: usize>() -> ServiceResult<[u8; N]> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| ServiceError::Broken(format!("no randomness: {e}")))?;
    Ok(bytes)
}

/// An opaque secret: a prefix and 256 random bits, base64url.
pub(crate) fn opaque(prefix: &str) -> ServiceResult<String> {
    let bytes = random::<32>()?;
    Ok(format!(
        "{prefix}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

/// An e-mail as accounts store it: trimmed and lower-cased, checked.
pub fn normalize_email(field: &'static str, email: &str) -> ServiceResult<String> {
    let email = email.trim().to_lowercase();
    let valid = email.len() <= 254
        && !email.chars().any(|c| c.is_control() || c.is_whitespace())
        && email.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !domain.contains('@')
        });
    if valid {
        Ok(email)
    } else {
        Err(ServiceError::invalid(field, "must be an e-mail address"))
    }
}

pub(crate) fn weak(field: &'static str, error: SignInError) -> ServiceError {
    match error {
        SignInError::WeakPassword(why) => ServiceError::invalid(field, why),
        other => ServiceError::Broken(other.to_string()),
    }
}

/// The hash the passwords of unknown accounts are checked against: a real argon2id
/// hash at the same parameters (of a password no account has), so that checking it
/// costs what checking an account's does.
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$WlpaWlpaWlpaWlpaWlpaWg$jXmRu67zh92772pttDmVFpGWYPvTMOgeBvSrR24qCjs";

pub(crate) async fn hash_password(passwords: &CpuPool, password: String) -> ServiceResult<String> {
    let salt = random::<16>()?;
    passwords
        .run(move || tenancy::hash_password(&password, &salt))
        .await
        .map_err(|_| ServiceError::Unavailable)?
        .map_err(|e| ServiceError::Broken(e.to_string()))
}

/// Whether `password` is the account's (`None`: checked against the dummy hash, and
/// false). An unreadable stored hash never matches (logged without its value).
pub(crate) async fn password_matches(
    passwords: &CpuPool,
    account: Option<&AccountRecord>,
    password: String,
) -> ServiceResult<bool> {
    // An account made by single sign-on has no password: nothing matches it.
    let stored = account
        .map(|a| a.password_hash.clone())
        .filter(|hash| hash != crate::storage::NO_PASSWORD);
    let user = account.map(|a| a.user_id.clone());
    let outcome = passwords
        .run(move || match stored {
            Some(hash) => tenancy::verify_password(&hash, &password),
            None => tenancy::verify_password(DUMMY_HASH, &password).map(|_| false),
        })
        .await
        .map_err(|_| ServiceError::Unavailable)?;
    match outcome {
        Ok(matched) => Ok(matched),
        Err(error) => {
            tracing::error!(user = user.as_deref().unwrap_or("-"), %error, "a stored password hash cannot be read: the account cannot sign in");
            Ok(false)
        }
    }
}

pub(crate) fn user_event(
    action: &str,
    (actor_id, actor_email): (&str, Option<&str>),
    target_id: &str,
    details: serde_json::Value,
    outcome: &str,
) -> audit_chain::AuditEvent {
    crate::audit::Action {
        action,
        actor_id,
        actor_email,
        org_id: ACCOUNTS_CHAIN,
        affected_org_id: None,
        target_type: "account",
        target_id,
        details,
        outcome,
    }
    .into_event()
}

fn caller_event(
    caller: &Caller,
    action: &str,
    details: serde_json::Value,
) -> audit_chain::AuditEvent {
    user_event(
        action,
        (&caller.user_id, caller.email.as_deref()),
        &caller.user_id,
        details,
        "success",
    )
}

/// Why a verification mail is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MailReason {
    /// The address was registered (or changed) by its holder.
    Registration,
    /// A super-admin created the account: the link also sets its first password.
    Invitation,
}

/// A verification to record: the hash of its link's token, its mail (id, subject,
/// text with the link) and its expiry.
pub(crate) fn verification(
    config: &Config,
    reason: MailReason,
    now: DateTime<Utc>,
) -> ServiceResult<(String, String, String, String, DateTime<Utc>)> {
    let token = opaque("cev_")?;
    let hash = token_hash(&token);
    let link = format!(
        "{}/console/verify-email?token={token}",
        config.signin.public_url
    );
    let hours = config.signin.verification_lifetime.as_secs() / 3600;
    let (subject, body) = match reason {
        MailReason::Registration => (
            "Verify your e-mail address",
            format!(
                "Someone (we hope you) registered this address for an account.\n\nTo verify it, open:\n{link}\n\nOr send POST /api/auth/verify-email with {{\"token\": \"{token}\"}}.\n\nThe link works once, for {hours} hours. If this was not you, ignore this message.\n"
            ),
        ),
        MailReason::Invitation => (
            "You are invited: choose your password",
            format!(
                "An administrator of the platform created an account for this address.\n\nTo accept, open this link and choose your password:\n{link}\n\nOr send POST /api/auth/verify-email with {{\"token\": \"{token}\", \"password\": \"...\"}}.\n\nThe link works once, for {hours} hours. If you did not expect this, ignore this message.\n"
            ),
        ),
    };
    let expires = now
        + chrono::Duration::from_std(config.signin.verification_lifetime)
            .unwrap_or(chrono::Duration::hours(24));
    Ok((hash, crate::new_id(), subject.to_owned(), body, expires))
}

/// Registers an account. An address taken by a live account is 409.
///
/// Registrations are bounded per client address by the sign-in throttle's policy
/// (each one charged, none given back: past `lock_after` within its window, 429
/// until the lockout passes), before the password is hashed: an address cannot make
/// the server hash without bound.
pub async fn register(
    store: &Store,
    config: &Config,
    passwords: &CpuPool,
    (email, password, name): (&str, String, Option<&str>),
    client: Option<std::net::IpAddr>,
    now: DateTime<Utc>,
) -> ServiceResult<Account> {
    let email = normalize_email("email", email)?;
    tenancy::check_password(&password, &email).map_err(|e| weak("password", e))?;
    if let Some(ip) = client {
        let key = format!("register:{ip}");
        throttle(store, &[key.as_str()], now).await?;
    }
    let hash = hash_password(passwords, password).await?;
    let user_id = crate::new_id();
    let (token_hash, mail_id, subject, body, expires_at) =
        verification(config, MailReason::Registration, now)?;
    let verify = Verification {
        token_hash: &token_hash,
        email: &email,
        expires_at,
        mail: (&mail_id, &subject, &body),
    };
    let event = user_event(
        "user.register",
        (&user_id, Some(&email)),
        &user_id,
        json!({}),
        "success",
    );
    let account = create_account(
        store,
        &NewAccount {
            user_id: &user_id,
            email: &email,
            name,
            password_hash: &hash,
            verified: false,
            super_admin: false,
            password_change_required: false,
        },
        Some(&verify),
        now,
        &[event],
    )
    .await?;
    Ok(account.into())
}

/// Uses an e-mail verification link's token. An invited account (created by a
/// super-admin without a password) chooses its password here: `password` is
/// required for it, and checked as a registration's is; for any other account a
/// given password replaces the one it has.
pub async fn verify_email(
    store: &Store,
    passwords: &CpuPool,
    token: &str,
    password: Option<String>,
    now: DateTime<Utc>,
) -> ServiceResult<Account> {
    const INVALID: SignInRefusal = SignInRefusal::InvalidToken(
        "the verification link is not valid, was used already, or has expired",
    );
    let hash = token_hash(token.trim());
    let (email, invited) = store
        .pending_verification(&hash, now)
        .await?
        .ok_or(INVALID)?;
    let password_hash = match password {
        Some(password) => {
            tenancy::check_password(&password, &email).map_err(|e| weak("password", e))?;
            Some(hash_password(passwords, password).await?)
        }
        None if invited => {
            return Err(ServiceError::invalid(
                "password",
                "the account was created for you: choose its password to accept",
            ))
        }
        None => None,
    };
    let account = unit_of_work!(store, |tx| {
        // A verification used for an address that is no longer the account's stays
        // used (nothing else is written, nothing is audited).
        let Some(account) = tx
            .verify_email(&hash, password_hash.as_deref(), now)
            .await?
        else {
            return Ok(None);
        };
        tx.enqueue_audit(&[user_event(
            "user.email.verified",
            (&account.user_id, Some(&account.email)),
            &account.user_id,
            json!({"passwordSet": password_hash.is_some()}),
            "success",
        )])
        .await?;
        Ok(Some(account))
    })?
    .ok_or(INVALID)?;
    // What a token may claim changed (kept credentials follow it).
    store.facts_changed();
    Ok(account.into())
}

/// Records the organization the caller acts in by default (it must stand in it):
/// access tokens minted afterwards carry it, and requests without `x-org-id` act in
/// it. Audited `org.switch` in that organization's chain.
pub async fn switch_organization(
    store: &Store,
    kept: &KeptFacts,
    caller: &Caller,
    org_id: &str,
) -> ServiceResult<()> {
    check_standing(store, kept, org_id, &caller.user_id).await?;
    let event = crate::services::context::event(
        caller,
        "org.switch",
        org_id,
        "organization",
        org_id,
        json!({}),
    );
    let audit = [event];
    unit_of_work!(store, |tx| {
        tx.set_active_organization(&caller.user_id, org_id).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    Ok(())
}

/// Checks that the user stands in `org_id` (a member, a manager of the team, or a
/// super-admin).
async fn check_standing(
    store: &Store,
    kept: &KeptFacts,
    org_id: &str,
    user_id: &str,
) -> ServiceResult<()> {
    let facts = crate::services::access::facts(store, kept, org_id, user_id, false).await?;
    let organization = facts.org.as_ref().map(|o| o.organization());
    let access = tenancy::OrgAccess {
        organization: organization.as_ref(),
        membership: facts.membership.as_ref(),
        roles: &facts.roles,
        parent_membership: facts.parent_membership.as_ref(),
        parent_roles: &facts.parent_roles,
    };
    let principal = tenancy::Principal {
        user_id: user_id.to_owned(),
        super_admin: facts.super_admin,
        stepped_up_at: None,
    };
    access
        .standing(&principal)
        .map(|_| ())
        .map_err(|_| SignInRefusal::NotYourOrganization.into())
}

/// Creates an account (and its first verification, when given) with its audit
/// events, in one unit.
pub(crate) async fn create_account(
    store: &Store,
    new: &NewAccount<'_>,
    verification: Option<&Verification<'_>>,
    now: DateTime<Utc>,
    audit: &[audit_chain::AuditEvent],
) -> ServiceResult<AccountRecord> {
    let account = unit_of_work!(store, |tx| {
        let account = tx.create_account(new, verification, now).await?;
        tx.enqueue_audit(audit).await?;
        Ok(account)
    })?;
    if new.super_admin {
        store.facts_changed();
    }
    Ok(account)
}

/// Creates the first super-admin account (`compliance provision`): only for an
/// identifier of `BOOTSTRAP_SUPERADMIN_EMAILS`; its e-mail counts as verified.
pub async fn provision(
    store: &Store,
    config: &Config,
    passwords: &CpuPool,
    (identifier, password): (&str, String),
    now: DateTime<Utc>,
) -> ServiceResult<Account> {
    let email = normalize_email("PLATFORM_IDENTIFIER", identifier)?;
    if !config.bootstrap.allows(&email) {
        return Err(tenancy::TenancyError::NotBootstrapIdentifier.into());
    }
    tenancy::check_password(&password, &email).map_err(|e| weak("PLATFORM_PASSWORD", e))?;
    let hash = hash_password(passwords, password).await?;
    let user_id = crate::new_id();
    let event = user_event(
        "user.register",
        (&user_id, Some(&email)),
        &user_id,
        json!({"provisioned": true, "superAdmin": true}),
        "success",
    );
    let account = create_account(
        store,
        &NewAccount {
            user_id: &user_id,
            email: &email,
            name: None,
            password_hash: &hash,
            verified: true,
            super_admin: true,
            password_change_required: false,
        },
        None,
        now,
        &[event],
    )
    .await?;
    Ok(account.into())
}
