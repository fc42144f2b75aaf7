//! The console's sessions. Signing in is the API's sign-in (its throttle, its
//! answers); the console then keeps an opaque id for the browser's cookie, stored
//! only as its SHA-256, tied to the sign-in's refresh family. Each console request
//! is made with a short access token minted from it, carrying the family (`sid`)
//! and the account's generation (`gen`), so the API's gate judges it exactly as it
//! judges the sign-in's own tokens: a logout, revoke-all or reuse detected ends it on
//! every replica.

use std::time::Duration;

use base64::Engine as _;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use super::{ServiceError, ServiceResult};
use crate::auth::Claims;
use crate::auth::TokenKeys;
use crate::services::accounts;
use crate::storage::Store;
pub use crate::storage::{ConsoleImpersonation, ConsoleSessionRecord};

/// How long a console session lives at most (its family may end it sooner).
pub const CONSOLE_SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// The lifetime of the access tokens the console mints per request.
const MINTED_LIFETIME: Duration = Duration::from_secs(300);

/// A console session and the cookie's id that names it (given to the browser
/// once, never stored).
#[derive(Debug, Clone)]
pub struct Opened {
    /// The cookie's value.
    pub cookie: String,
    /// The session.
    pub session: ConsoleSessionRecord,
}

/// SHA-256 of a cookie's id, hex (as sign-in's opaque tokens are kept).
fn hash_of(cookie: &str) -> String {
    accounts::token_hash(cookie)
}

/// The anti-forgery token of a session: derived from the cookie's id (which only
/// the browser holds), so a page of another site can neither read nor guess it.
pub fn form_token(cookie: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(b"console-form\n");
    hash.update(cookie.as_bytes());
    hex::encode(hash.finalize())
}

/// Keeps a console session for a sign-in's access token (just issued by the API's
/// sign-in).
pub async fn open(
    store: &Store,
    keys: &TokenKeys,
    access_token: &str,
    now: DateTime<Utc>,
) -> ServiceResult<Opened> {
    let claims = keys
        .verify(access_token)
        .await
        .map_err(|e| ServiceError::Broken(format!("a sign-in's own token: {e}")))?;
    let (Some(family_id), Some(generation)) = (claims.sid, claims.gen) else {
        return Err(ServiceError::Broken(
            "a sign-in's token without its session".to_owned(),
        ));
    };
    let mut random = [0u8; 32];
    getrandom::fill(&mut random).map_err(|e| ServiceError::Broken(e.to_string()))?;
    let cookie = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random);
    let lifetime = chrono::Duration::from_std(CONSOLE_SESSION_LIFETIME)
        .map_err(|e| ServiceError::Broken(e.to_string()))?;
    let session = ConsoleSessionRecord {
        id_hash: hash_of(&cookie),
        family_id,
        user_id: claims.sub,
        email: claims.email,
        generation,
        expires_at: now + lifetime,
        impersonation: None,
    };
    store.open_console_session(&session, now).await?;
    Ok(Opened { cookie, session })
}

/// The live session a cookie names.
pub async fn resume(
    store: &Store,
    cookie: &str,
    now: DateTime<Utc>,
) -> ServiceResult<Option<ConsoleSessionRecord>> {
    if cookie.is_empty() || cookie.len() > 128 {
        return Ok(None);
    }
    Ok(store.console_session(&hash_of(cookie), now).await?)
}

/// A short access token for one console request in `session`.
pub fn access_token(
    keys: &TokenKeys,
    session: &ConsoleSessionRecord,
    now: DateTime<Utc>,
) -> ServiceResult<String> {
    let mut claims = Claims::user(
        &session.user_id,
        session.email.as_deref(),
        now,
        MINTED_LIFETIME,
    );
    claims.gen = Some(session.generation);
    match &session.impersonation {
        // The family is the super-admin's (its sign-out ends this session); the
        // token is the impersonation's, as the API's start answered it.
        Some(imp) => {
            claims.act = Some(crate::auth::Actor {
                sub: imp.admin_id.clone(),
            });
            claims.imp = Some(imp.id.clone());
        }
        None => claims.sid = Some(session.family_id.clone()),
    }
    keys.sign(&claims)
        .map_err(|e| ServiceError::Broken(e.to_string()))
}

/// What the API's start of an impersonation answered, as the console keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImpersonationStarted {
    /// The impersonation's id.
    pub id: String,
    /// The user seen as.
    pub user_id: String,
    /// When it expires.
    pub expires_at: DateTime<Utc>,
    /// Reads only.
    pub read_only: bool,
}

fn new_cookie() -> ServiceResult<(String, String)> {
    let mut random = [0u8; 32];
    getrandom::fill(&mut random).map_err(|e| ServiceError::Broken(e.to_string()))?;
    let cookie = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random);
    let hash = hash_of(&cookie);
    Ok((cookie, hash))
}

/// Turns a super-admin's console session into one that sees as the impersonated
/// user (the impersonation was just started through the API): a new session on the
/// admin's family, until the impersonation expires; the admin's own is forgotten.
pub async fn open_impersonation(
    store: &Store,
    admin: &ConsoleSessionRecord,
    started: &ImpersonationStarted,
    now: DateTime<Utc>,
) -> ServiceResult<Opened> {
    let account = store
        .account(&started.user_id)
        .await?
        .ok_or(ServiceError::NotFound("user".into()))?;
    let (cookie, id_hash) = new_cookie()?;
    let session = ConsoleSessionRecord {
        id_hash,
        family_id: admin.family_id.clone(),
        user_id: account.user_id.clone(),
        email: account.email_verified_at.map(|_| account.email.clone()),
        generation: account.generation,
        expires_at: started.expires_at.min(admin.expires_at),
        impersonation: Some(ConsoleImpersonation {
            id: started.id.clone(),
            admin_id: admin.user_id.clone(),
            admin: admin.email.clone().unwrap_or_else(|| admin.user_id.clone()),
            read_only: started.read_only,
        }),
    };
    store.open_console_session(&session, now).await?;
    store.close_console_session(&admin.id_hash).await?;
    Ok(Opened { cookie, session })
}

/// Ends the impersonation a console session is (from inside, as its token may) and
/// gives the super-admin their own console session back, on their family.
pub async fn end_impersonation(
    store: &Store,
    session: &ConsoleSessionRecord,
    now: DateTime<Utc>,
) -> ServiceResult<Opened> {
    let Some(imp) = &session.impersonation else {
        return Err(ServiceError::Conflict(
            "this console session is not an impersonation".to_owned(),
        ));
    };
    let inside = crate::services::context::Caller {
        user_id: session.user_id.clone(),
        email: session.email.clone(),
        stepped_up_at: None,
        org_header: None,
        personal_token: None,
        session: None,
        sso_org: None,
        impersonation: Some(Box::new(crate::services::context::Impersonating {
            id: imp.id.clone(),
            admin_id: imp.admin_id.clone(),
            read_only: imp.read_only,
        })),
    };
    match crate::services::admin::impersonation::end(store, &inside, &imp.id, now).await {
        // Expired or ended elsewhere already: the admin comes back all the same.
        Ok(_) | Err(ServiceError::Conflict(_)) => {}
        Err(other) => return Err(other),
    }
    store.close_console_session(&session.id_hash).await?;
    let admin = store
        .account(&imp.admin_id)
        .await?
        .filter(|a| a.deleted_at.is_none())
        .ok_or(ServiceError::NotFound("account".into()))?;
    let lifetime = chrono::Duration::from_std(CONSOLE_SESSION_LIFETIME)
        .map_err(|e| ServiceError::Broken(e.to_string()))?;
    let (cookie, id_hash) = new_cookie()?;
    let back = ConsoleSessionRecord {
        id_hash,
        family_id: session.family_id.clone(),
        user_id: admin.user_id.clone(),
        email: admin.email_verified_at.map(|_| admin.email.clone()),
        generation: admin.generation,
        expires_at: now + lifetime,
        impersonation: None,
    };
    store.open_console_session(&back, now).await?;
    Ok(Opened {
        cookie,
        session: back,
    })
}

/// Signs out: the console session is forgotten and its family ended (audited as a
/// logout). Signing out twice is signing out.
pub async fn close(store: &Store, cookie: &str, now: DateTime<Utc>) -> ServiceResult<()> {
    if let Some(session) = resume(store, cookie, now).await? {
        store.close_console_session(&session.id_hash).await?;
        accounts::end_session(store, (&session.family_id, &session.user_id), now).await?;
    }
    Ok(())
}
