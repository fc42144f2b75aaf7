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
use crate::services::accounts;
use crate::services::context::AppState;
pub use crate::storage::ConsoleSessionRecord;

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
    state: &AppState,
    access_token: &str,
    now: DateTime<Utc>,
) -> ServiceResult<Opened> {
    let claims = state
        .keys
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
    };
    state.store.open_console_session(&session, now).await?;
    Ok(Opened { cookie, session })
}

/// The live session a cookie names.
pub async fn resume(
    state: &AppState,
    cookie: &str,
    now: DateTime<Utc>,
) -> ServiceResult<Option<ConsoleSessionRecord>> {
    if cookie.is_empty() || cookie.len() > 128 {
        return Ok(None);
    }
    Ok(state.store.console_session(&hash_of(cookie), now).await?)
}

/// A short access token for one console request in `session`.
pub fn access_token(
    state: &AppState,
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
    claims.sid = Some(session.family_id.clone());
    state
        .keys
        .sign(&claims)
        .map_err(|e| ServiceError::Broken(e.to_string()))
}

/// Signs out: the console session is forgotten and its family ended (audited as a
/// logout). Signing out twice is signing out.
pub async fn close(state: &AppState, cookie: &str, now: DateTime<Utc>) -> ServiceResult<()> {
    if let Some(session) = resume(state, cookie, now).await? {
        state.store.close_console_session(&session.id_hash).await?;
        accounts::end_session(state, (&session.family_id, &session.user_id), now).await?;
    }
    Ok(())
}
