//! Sessions: sign-in with a password (throttled, one answer for an unknown account
//! and a wrong password), the refresh tokens that rotate within their family, and
//! sign-out.

use super::*;
use crate::auth::TokenKeys;
use crate::config::Config;
use crate::storage::Store;

/// A signed-in session's tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// The access token (a JWT) for `Authorization: Bearer`.
    pub access_token: String,
    /// The refresh token: opaque, used once (each refresh returns the next).
    pub refresh_token: String,
    /// Always `Bearer`.
    #[schema(example = "Bearer")]
    pub token_type: std::borrow::Cow<'static, str>,
    /// The access token's lifetime, in seconds.
    pub expires_in: u64,
}

/// How sign-in was asked for.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The e-mail.
    pub identifier: String,
    /// The password.
    pub password: String,
    /// The organization to sign into (its tier sets the lifetime).
    pub org_id: Option<String>,
}

/// The access token's lifetime for a session in `org` (by its tier), at most 24 h.
fn lifetime(config: &Config, tier: Option<entitlements::Tier>) -> Duration {
    let jwt = &config.jwt;
    tier.and_then(|t| jwt.expires_in_by_tier.get(&t).copied())
        .unwrap_or(jwt.expires_in)
        .min(crate::config::MAX_TOKEN_LIFETIME)
}

/// Mints an access token for `family`.
pub(crate) async fn tokens_for(
    store: &Store,
    config: &Config,
    keys: &TokenKeys,
    account: &AccountRecord,
    family_id: &str,
    org_id: Option<&str>,
    now: DateTime<Utc>,
) -> ServiceResult<(String, u64)> {
    let tier = match org_id {
        Some(org) => store.organization(org).await?.map(|o| o.tier),
        None => None,
    };
    let ttl = lifetime(config, tier);
    // The e-mail is claimed only once verified: invitations are accepted and the
    // system organization bootstrapped by it.
    let email = account.email_verified_at.map(|_| account.email.as_str());
    let mut claims = Claims::user(&account.user_id, email, now, ttl);
    claims.gen = Some(account.generation);
    claims.sid = Some(family_id.to_owned());
    claims.org = account.active_org_id.clone();
    let token = keys
        .sign(&claims)
        .map_err(|e| ServiceError::Broken(e.to_string()))?;
    Ok((token, ttl.as_secs()))
}

/// A new refresh family for `account` and its first refresh token.
pub(crate) fn new_family(
    config: &Config,
    account: &AccountRecord,
    org_id: Option<&str>,
    now: DateTime<Utc>,
) -> ServiceResult<(FamilyRecord, String)> {
    // Every way into a session (a password, single sign-on) comes through here.
    if account.disabled_at.is_some() {
        return Err(SignInRefusal::AccountDisabled.into());
    }
    let family = FamilyRecord {
        id: crate::new_id(),
        user_id: account.user_id.clone(),
        org_id: org_id.map(str::to_owned),
        expires_at: now
            + chrono::Duration::from_std(config.signin.refresh_lifetime)
                .unwrap_or(chrono::Duration::days(30)),
        revoked_at: None,
    };
    Ok((family, opaque("crt_")?))
}

/// Starts a session for `account` (a new refresh family).
pub(super) async fn start_session(
    store: &Store,
    config: &Config,
    keys: &TokenKeys,
    account: &AccountRecord,
    org_id: Option<&str>,
    now: DateTime<Utc>,
    audit: &[audit_chain::AuditEvent],
) -> ServiceResult<Session> {
    let (family, refresh) = new_family(config, account, org_id, now)?;
    let (hash, failures) = (token_hash(&refresh), format!("account:{}", account.email));
    unit_of_work!(store, |tx| {
        tx.start_family(&family, (&hash, None), now).await?;
        // A sign-in that succeeds forgets the account's failures.
        tx.clear_signin_failures(&failures).await?;
        tx.enqueue_audit(audit).await?;
        Ok(())
    })?;
    let (access, expires_in) =
        tokens_for(store, config, keys, account, &family.id, org_id, now).await?;
    Ok(Session {
        access_token: access,
        refresh_token: refresh,
        token_type: "Bearer".into(),
        expires_in,
    })
}

/// Signs in with an e-mail and a password.
pub async fn login(
    state: &AppState,
    credentials: Credentials,
    client: Option<IpAddr>,
    now: DateTime<Utc>,
) -> ServiceResult<Session> {
    // Any text is looked up (an unknown one is as wrong as a wrong password); only a
    // bounded one is kept in the throttle's keys.
    let identifier: String = credentials
        .identifier
        .trim()
        .to_lowercase()
        .chars()
        .take(254)
        .collect();
    let account_key = format!("account:{identifier}");
    let address_key = client.map(|ip| format!("address:{ip}"));
    let mut keys = vec![account_key.as_str()];
    keys.extend(address_key.as_deref());
    throttle(&state.infra.store, &keys, now).await?;
    let account = state.infra.store.account_by_email(&identifier).await?;
    let matched = password_matches(
        &state.infra.passwords,
        account.as_ref(),
        credentials.password,
    )
    .await?;
    let Some(account) = account.filter(|_| matched) else {
        let target = "unknown";
        let event = user_event(
            "user.login.failed",
            ("anonymous", None),
            target,
            json!({"reason": "invalid credentials", "clientAddress": client.map(|ip| ip.to_string())}),
            "failure",
        );
        record_failure(&state.infra.store, event).await?;
        return Err(SignInRefusal::InvalidCredentials.into());
    };
    refund(&state.infra.store, &keys).await?;
    if state.config.signin.verification_required && account.email_verified_at.is_none() {
        return Err(SignInRefusal::EmailNotVerified.into());
    }
    if let Some(org) = &credentials.org_id {
        check_standing(
            &state.infra.store,
            &state.replica.kept,
            org,
            &account.user_id,
        )
        .await?;
    }
    let event = user_event(
        "user.login",
        (&account.user_id, Some(&account.email)),
        &account.user_id,
        json!({"method": "password", "orgId": credentials.org_id, "clientAddress": client.map(|ip| ip.to_string())}),
        "success",
    );
    start_session(
        &state.infra.store,
        &state.config,
        &state.infra.keys,
        &account,
        credentials.org_id.as_deref(),
        now,
        &[event],
    )
    .await
}

/// Exchanges a refresh token for a new pair, in the same family.
pub async fn refresh(
    store: &Store,
    config: &Config,
    keys: &TokenKeys,
    token: &str,
    now: DateTime<Utc>,
) -> ServiceResult<Session> {
    let successor = opaque("crt_")?;
    let (presented, next) = (token_hash(token.trim()), token_hash(&successor));
    let rotated = unit_of_work!(store, |tx| {
        Ok(tx.rotate_refresh(&presented, &next, now).await?)
    })?;
    let rotation = match rotated {
        Some(family) => Rotation::Rotated(family),
        None => store
            .refresh_standing(&presented)
            .await?
            .unwrap_or(Rotation::Unknown),
    };
    let family = match rotation {
        Rotation::Rotated(family) => family,
        Rotation::Unknown => {
            return Err(SignInRefusal::InvalidToken("the refresh token is not valid").into())
        }
        Rotation::Ended(_) => {
            return Err(SignInRefusal::InvalidToken("the session has ended: sign in again").into())
        }
        Rotation::AlreadyUsed(used_at, family) => {
            return Err(match tenancy::second_use(used_at, now) {
                SecondUse::LostRace => SignInRefusal::InvalidToken(
                    "the refresh token was just used by another request: use the token that request received",
                ),
                SecondUse::Reuse => {
                    let event = user_event(
                        "user.logout",
                        (&family.user_id, None),
                        &family.user_id,
                        json!({"reason": "refresh token reuse detected", "sessionId": family.id}),
                        "failure",
                    );
                    end_family(store, &family.id, "reuse", now, event).await?;
                    SignInRefusal::InvalidToken(
                        "the refresh token was used before: the session has ended, sign in again",
                    )
                }
            }
            .into())
        }
    };
    let account = store
        .account(&family.user_id)
        .await?
        .filter(|a| a.deleted_at.is_none())
        .ok_or(SignInRefusal::InvalidToken(
            "the session has ended: sign in again",
        ))?;
    let (access, expires_in) = tokens_for(
        store,
        config,
        keys,
        &account,
        &family.id,
        family.org_id.as_deref(),
        now,
    )
    .await?;
    Ok(Session {
        access_token: access,
        refresh_token: successor,
        token_type: "Bearer".into(),
        expires_in,
    })
}

/// Ends the session a refresh token belongs to (an unknown token ends nothing and
/// is not an error: signing out twice is signing out).
pub async fn logout(store: &Store, token: &str, now: DateTime<Utc>) -> ServiceResult<()> {
    if let Some(family) = store.family_of(&token_hash(token.trim())).await? {
        end_session(store, (&family.id, &family.user_id), now).await?;
    }
    Ok(())
}

/// Ends a session by its family (a console's sign-out), audited as a logout.
pub async fn end_session(
    store: &Store,
    (family_id, user_id): (&str, &str),
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let event = user_event(
        "user.logout",
        (user_id, None),
        user_id,
        json!({"sessionId": family_id}),
        "success",
    );
    end_family(store, family_id, "logout", now, event).await
}

/// Ends a refresh family with its audit event (none when it had ended already);
/// kept credentials follow on every replica.
async fn end_family(
    store: &Store,
    family_id: &str,
    reason: &str,
    now: DateTime<Utc>,
    event: audit_chain::AuditEvent,
) -> ServiceResult<()> {
    let audit = [event];
    let ended = unit_of_work!(store, |tx| {
        let ended = tx.end_family(family_id, reason, now).await?;
        if ended {
            tx.enqueue_audit(&audit).await?;
        }
        Ok(ended)
    })?;
    if ended {
        store.facts_changed();
    }
    Ok(())
}
