//! The caller's own account: reading and changing it, its password, its deletion,
//! and the end of its sessions.

use super::*;

pub(super) fn session_only(caller: &Caller) -> ServiceResult<()> {
    if caller.personal_token.is_some() {
        return Err(SignInRefusal::SessionRequired.into());
    }
    // Seeing as a user never reaches its credentials.
    if caller.impersonation.is_some() {
        return Err(ServiceError::Forbidden(
            "not while impersonating: the account's credentials are its own",
        ));
    }
    Ok(())
}

pub(super) async fn own_account(store: &Store, caller: &Caller) -> ServiceResult<AccountRecord> {
    store
        .account(&caller.user_id)
        .await?
        .filter(|a| a.deleted_at.is_none())
        .ok_or(ServiceError::NotFound("account".into()))
}

/// Checks the caller's password again (a failure counts against the account's
/// sign-in failures and is audited as `user.login.failed`).
pub(super) async fn reauthenticate(
    store: &Store,
    passwords: &CpuPool,
    account: &AccountRecord,
    password: String,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let key = format!("account:{}", account.email);
    throttle(store, &[key.as_str()], now).await?;
    if password_matches(passwords, Some(account), password).await? {
        return refund(store, &[key.as_str()]).await;
    }
    let event = user_event(
        "user.login.failed",
        (&account.user_id, Some(&account.email)),
        &account.user_id,
        json!({"reason": "re-authentication failed"}),
        "failure",
    );
    record_failure(store, event).await?;
    Err(SignInRefusal::InvalidCredentials.into())
}

pub(super) fn fresh_step_up(
    config: &Config,
    caller: &Caller,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let window = chrono::Duration::from_std(config.http.step_up_window)
        .unwrap_or(tenancy::DEFAULT_STEP_UP_WINDOW);
    if tenancy::step_up_status(&caller.principal(), true, now, window) != tenancy::StepUp::Fresh {
        return Err(tenancy::TenancyError::StepUpRequired.into());
    }
    Ok(())
}
/// The caller's account, with its effective features.
pub async fn me(
    store: &Store,
    config: &Config,
    kept: &KeptFacts,
    caller: &Caller,
) -> ServiceResult<Me> {
    let account: Account = own_account(store, caller).await?.into();
    let flags = crate::services::entitlement::flags(store, kept, &caller.user_id).await?;
    let mut org_features = std::collections::BTreeSet::new();
    let mut features_org_id = None;
    if let Some(org_id) = &caller.org_header {
        // An organization the user no longer stands in (or that is gone) lists no
        // features of its own; it is not an error here.
        if check_standing(store, kept, org_id, &caller.user_id)
            .await
            .is_ok()
        {
            if let Some(org) = store.organization(org_id).await? {
                let root = crate::services::entitlement::root_of(store, &org).await?;
                let current = crate::services::entitlement::current(store, config, &root).await?;
                org_features = crate::services::entitlement::entitlement(config, &current).features;
                features_org_id = Some(org.id);
            }
        }
    }
    Ok(Me {
        account,
        features: entitlements::effective_user_features(&org_features, &flags)
            .into_iter()
            .map(std::borrow::Cow::Borrowed)
            .collect(),
        features_org_id,
    })
}

/// Changes the caller's name and e-mail (a new e-mail is verified again).
pub async fn update_me(
    store: &Store,
    config: &Config,
    caller: &Caller,
    (name, email): (Option<&str>, Option<&str>),
    now: DateTime<Utc>,
) -> ServiceResult<Account> {
    session_only(caller)?;
    let account = own_account(store, caller).await?;
    let name = name.map(str::to_owned);
    let email = email.map(|e| normalize_email("email", e)).transpose()?;
    let email = email.filter(|e| *e != account.email);
    let pending = match &email {
        Some(_) => Some(verification(config, MailReason::Registration, now)?),
        None => None,
    };
    let verify = match (&email, &pending) {
        (Some(e), Some((hash, id, subject, body, expires_at))) => Some(Verification {
            token_hash: hash,
            email: e,
            expires_at: *expires_at,
            mail: (id, subject, body),
        }),
        _ => None,
    };
    let changed: Vec<&str> = [
        name.as_ref().map(|_| "name"),
        email.as_ref().map(|_| "email"),
    ]
    .into_iter()
    .flatten()
    .collect();
    let event = caller_event(caller, "user.profile.update", json!({"changed": changed}));
    let audit = [event];
    let account = unit_of_work!(store, |tx| {
        let account = tx
            .update_account(
                &account.user_id,
                (name.as_deref(), email.as_deref()),
                verify.as_ref(),
                now,
            )
            .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(account)
    })?;
    if email.is_some() {
        // What a token may claim changed (kept credentials follow it).
        store.facts_changed();
    }
    Ok(account.into())
}

/// Changes the caller's password: every session ends, and the caller gets a new one.
pub async fn change_password(
    state: &AppState,
    caller: &Caller,
    (current, new): (String, String),
    now: DateTime<Utc>,
) -> ServiceResult<Session> {
    session_only(caller)?;
    let account = own_account(&state.infra.store, caller).await?;
    tenancy::check_password(&new, &account.email).map_err(|e| weak("newPassword", e))?;
    reauthenticate(
        &state.infra.store,
        &state.infra.passwords,
        &account,
        current,
        now,
    )
    .await?;
    let hash = hash_password(&state.infra.passwords, new).await?;
    let event = caller_event(caller, "user.password.change", json!({}));
    end_sessions(
        &state.infra.store,
        &account.user_id,
        ((false, Some(&hash), false), "password.change"),
        now,
        event,
    )
    .await?;
    let account = own_account(&state.infra.store, caller).await?;
    session::start_session(
        &state.infra.store,
        &state.config,
        &state.infra.keys,
        &account,
        None,
        now,
        &[],
    )
    .await
}

/// Deletes the caller's account (a fresh step-up is required): it can no longer
/// sign in, every session and token ends; its audit history stays.
pub async fn delete_me(
    store: &Store,
    config: &Config,
    caller: &Caller,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    session_only(caller)?;
    fresh_step_up(config, caller, now)?;
    let account = own_account(store, caller).await?;
    let event = caller_event(caller, "user.delete", json!({}));
    end_sessions(
        store,
        &account.user_id,
        ((true, None, true), "user.delete"),
        now,
        event,
    )
    .await?;
    Ok(())
}

/// Ends every session and personal access token of the caller.
pub async fn revoke_all(store: &Store, caller: &Caller, now: DateTime<Utc>) -> ServiceResult<()> {
    session_only(caller)?;
    let account = own_account(store, caller).await?;
    let event = caller_event(caller, "user.tokens.revoke-all", json!({}));
    end_sessions(
        store,
        &account.user_id,
        ((true, None, false), "revoke-all"),
        now,
        event,
    )
    .await
}
/// Ends the sessions (and, as `what` says, the tokens, the password, the account) of
/// a user, with its audit event, in one unit; kept credentials follow on every
/// replica.
pub(super) async fn end_sessions(
    store: &Store,
    user_id: &str,
    (what, reason): ((bool, Option<&str>, bool), &str),
    now: DateTime<Utc>,
    event: audit_chain::AuditEvent,
) -> ServiceResult<()> {
    let audit = [event];
    unit_of_work!(store, |tx| {
        tx.end_sessions(user_id, what, reason, now).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    Ok(())
}
