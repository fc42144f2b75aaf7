//! Step-up: the password again, or a code of an enrolled authenticator app (RFC
//! 6238, each code good once on every replica), for the `X-Step-Up-Token` proof; the
//! authenticator's enrolment, confirmation and removal.

use super::*;
use crate::config::Config;
use crate::keys::Keyring;
use crate::storage::Store;

/// A step-up proof, for the `X-Step-Up-Token` header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepUpProof {
    /// The proof (a JWT bound to the user).
    pub step_up_token: String,
    /// Its lifetime in seconds (`STEP_UP_WINDOW_SECONDS`).
    pub expires_in: u64,
}

/// How a step-up re-verifies the user.
#[derive(Debug, Clone)]
pub enum Reverification {
    /// The password.
    Password(String),
    /// An enrolled authenticator's code.
    Code(String),
}

/// Gives a step-up proof for the password, or for a code of the enrolled
/// authenticator (each code good once). A failure counts as a failed sign-in.
pub async fn step_up(
    state: &AppState,
    caller: &Caller,
    proof: Reverification,
    now: DateTime<Utc>,
) -> ServiceResult<StepUpProof> {
    session_only(caller)?;
    let account = own_account(&state.infra.store, caller).await?;
    match proof {
        Reverification::Password(password) => {
            reauthenticate(
                &state.infra.store,
                &state.infra.passwords,
                &account,
                password,
                now,
            )
            .await?;
        }
        Reverification::Code(code) => {
            check_code(
                &state.infra.store,
                &state.config,
                &state.outbound.keyring,
                &account,
                &code,
                now,
            )
            .await?
        }
    }
    let window = state.config.http.step_up_window;
    let mut claims = Claims::user(&account.user_id, None, now, window);
    claims.step_up = true;
    // Bound to the session it was made in and to the account's generation: logout,
    // revoke-all and a password change end it with the session.
    claims.gen = Some(account.generation);
    claims.sid = caller.session.clone();
    let token = state
        .infra
        .keys
        .sign(&claims)
        .map_err(|e| ServiceError::Broken(e.to_string()))?;
    Ok(StepUpProof {
        step_up_token: token,
        expires_in: window.as_secs(),
    })
}

/// The secret bytes of a stored (sealed) authenticator secret.
async fn open_totp(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    user_id: &str,
    stored: &str,
) -> ServiceResult<Vec<u8>> {
    let text = crate::services::keys::open(
        store,
        config,
        keyring,
        crate::services::keys::totp_secret(user_id),
        stored,
    )
    .await?;
    tenancy::totp_secret_bytes(&text).map_err(|e| ServiceError::Broken(e.to_string()))
}

fn unix(now: DateTime<Utc>) -> u64 {
    u64::try_from(now.timestamp()).unwrap_or(0)
}

/// Checks an enrolled authenticator's code and uses its step.
async fn check_code(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    account: &AccountRecord,
    code: &str,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let Some(stored) = &account.totp_secret else {
        return Err(ServiceError::invalid(
            "totp",
            "no authenticator is enrolled for this account: step up with the password",
        ));
    };
    let key = format!("account:{}", account.email);
    throttle(store, &[key.as_str()], now).await?;
    let secret = open_totp(store, config, keyring, &account.user_id, stored).await?;
    let last = account.totp_last_step.and_then(|s| u64::try_from(s).ok());
    let step = tenancy::totp_step(&secret, code, unix(now), last)
        .map_err(|e| ServiceError::Broken(e.to_string()))?;
    let used = match step.and_then(|s| i64::try_from(s).ok()) {
        Some(step) => store.use_totp_step(&account.user_id, step).await?,
        None => false,
    };
    if used {
        return refund(store, &[key.as_str()]).await;
    }
    let event = user_event(
        "user.login.failed",
        (&account.user_id, Some(&account.email)),
        &account.user_id,
        json!({"reason": "authenticator code refused"}),
        "failure",
    );
    record_failure(store, event).await?;
    Err(SignInRefusal::InvalidCredentials.into())
}

/// An authenticator to enroll: its secret as apps take it, and the URI they scan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TotpEnrollment {
    /// Base32, for typing into an app.
    pub secret: String,
    /// `otpauth://totp/...`, for scanning.
    pub otpauth_uri: String,
}

/// Starts enrolling an authenticator: a new secret waits for its first code (one
/// enrolled already stays until the new one is confirmed). A fresh step-up is
/// required (the password again, or a code of the authenticator enrolled): an access
/// token alone never makes itself a second factor.
pub async fn enroll_totp(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    caller: &Caller,
    now: DateTime<Utc>,
) -> ServiceResult<TotpEnrollment> {
    session_only(caller)?;
    fresh_step_up(config, caller, now)?;
    let account = own_account(store, caller).await?;
    let secret = random::<20>()?;
    let text = tenancy::totp_secret_text(&secret);
    let sealed = crate::services::keys::seal(
        store,
        config,
        keyring,
        crate::services::keys::totp_secret(&account.user_id),
        &text,
    )
    .await?;
    store
        .set_totp_pending(&account.user_id, Some(&sealed), now)
        .await?;
    Ok(TotpEnrollment {
        otpauth_uri: tenancy::totp_uri(&secret, &account.email, "compliance"),
        secret: text,
    })
}

/// Confirms the waiting authenticator with its first code, with a fresh step-up
/// (audit user.profile.update; the account is mailed that its authenticator was
/// added or replaced).
pub async fn confirm_totp(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    caller: &Caller,
    code: &str,
    now: DateTime<Utc>,
) -> ServiceResult<Account> {
    session_only(caller)?;
    fresh_step_up(config, caller, now)?;
    let account = own_account(store, caller).await?;
    let Some(pending) = &account.totp_pending else {
        return Err(ServiceError::Conflict(
            "no authenticator is waiting: start with POST /api/me/totp".to_owned(),
        ));
    };
    let secret = open_totp(store, config, keyring, &account.user_id, pending).await?;
    let step = tenancy::totp_step(&secret, code, unix(now), None)
        .map_err(|e| ServiceError::Broken(e.to_string()))?
        .and_then(|s| i64::try_from(s).ok())
        .ok_or_else(|| ServiceError::invalid("code", "is not the authenticator's current code"))?;
    let replaced = account.totp_secret.is_some();
    let event = caller_event(
        caller,
        "user.profile.update",
        json!({"changed": ["authenticator"], "replaced": replaced}),
    );
    let (subject, body) = if replaced {
        (
            "The authenticator of your account was replaced",
            "The authenticator app of your account was replaced: codes of the former one no longer work. If this was not you, sign in, change your password and end every session (revoke all).",
        )
    } else {
        (
            "An authenticator was added to your account",
            "An authenticator app was added to your account: its codes now verify you. If this was not you, sign in, change your password and end every session (revoke all).",
        )
    };
    let mail = security_mail(&account, subject, body);
    let audit = [event];
    unit_of_work!(store, |tx| {
        let settled = tx
            .settle_totp(
                &account.user_id,
                Some((pending, step)),
                now,
                &mail.borrowed(),
            )
            .await?;
        if !settled {
            return Err(ServiceError::Conflict(
                "the authenticator waiting changed meanwhile: start again".to_owned(),
            ));
        }
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    Ok(own_account(store, caller).await?.into())
}

/// Removes the enrolled authenticator (a fresh step-up is required).
pub async fn remove_totp(
    store: &Store,
    config: &Config,
    caller: &Caller,
    now: DateTime<Utc>,
) -> ServiceResult<Account> {
    session_only(caller)?;
    fresh_step_up(config, caller, now)?;
    let account = own_account(store, caller).await?;
    let event = caller_event(
        caller,
        "user.profile.update",
        json!({"changed": ["authenticator removed"]}),
    );
    let mail = security_mail(
        &account,
        "The authenticator of your account was removed",
        "The authenticator app of your account was removed. If this was not you, sign in, change your password and end every session (revoke all).",
    );
    let audit = [event];
    unit_of_work!(store, |tx| {
        // Nothing to remove is no change: nothing is audited.
        if tx
            .settle_totp(&account.user_id, None, now, &mail.borrowed())
            .await?
        {
            tx.enqueue_audit(&audit).await?;
        }
        Ok(())
    })?;
    Ok(own_account(store, caller).await?.into())
}

/// A mail telling the account of a change to how it signs in.
struct SecurityMail {
    id: String,
    recipient: String,
    subject: &'static str,
    body: &'static str,
}

impl SecurityMail {
    fn borrowed(&self) -> crate::storage::NewAccountMail<'_> {
        crate::storage::NewAccountMail {
            id: &self.id,
            kind: "security",
            recipient: &self.recipient,
            subject: self.subject,
            body: self.body,
        }
    }
}

fn security_mail(
    account: &AccountRecord,
    subject: &'static str,
    body: &'static str,
) -> SecurityMail {
    SecurityMail {
        id: crate::storage::new_id(),
        recipient: account.email.clone(),
        subject,
        body,
    }
}
