//! What every request's credential stands on, beyond its signature: a session's
//! access token against its account (the generation revoke-all raises, deletion)
//! and its sign-in's family (logout, reuse detected); a personal access token
//! against its stored record (revoked, expired, its bounds). Both are kept per
//! replica ([`super::kept`]) and follow changes on every replica within a second
//! (the triggers of migration 0017 notify inside the change's transaction), so an
//! authenticated request costs no query for them while nothing changes.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::accounts::{token_hash, SignInRefusal};
use super::context::TokenUse;
use super::ServiceResult;
use crate::auth::Claims;
use crate::replica::kept::KeptFacts;
use crate::storage::PersonalTokenRecord;
use crate::storage::Store;

/// How often a busy personal access token's last use is written.
pub const LAST_USE_EVERY: Duration = Duration::from_secs(60);

const ENDED: SignInRefusal =
    SignInRefusal::InvalidToken("the session has ended (signed out or revoked): sign in again");

/// Checks a session's token (an access token or a step-up proof) against what is
/// stored, and answers the e-mail the caller may be taken to hold: for an account
/// here its current verified address, whatever an older token claims (an address it
/// no longer holds is never believed); for a user with no account here (an outside
/// identity provider's, a development token), the token passes on its signature
/// alone and its claim stands. Also answers the root organization whose single
/// sign-on issued the session, if one did.
pub async fn check_session(
    store: &Store,
    kept: &KeptFacts,
    claims: &Claims,
) -> ServiceResult<SessionFacts> {
    let standing = kept
        .sessions
        .get_or_load(
            store,
            (claims.sub.clone(), claims.sid.clone()),
            |_| true,
            store.session_standing(&claims.sub, claims.sid.as_deref()),
        )
        .await?;
    if let Some((generation, revoked_at, deleted)) = standing.account {
        if deleted || !tenancy::token_is_current(generation, revoked_at, claims.gen, claims.iat) {
            return Err(ENDED.into());
        }
    }
    // A token that names a family must name a live one of its user.
    if claims.sid.is_some() && standing.family_ended != Some(false) {
        return Err(ENDED.into());
    }
    if standing.disabled {
        return Err(SignInRefusal::AccountDisabled.into());
    }
    let email = match standing.account {
        Some(_) => standing.verified_email.clone(),
        None => claims.email.clone(),
    };
    Ok(SessionFacts {
        email,
        sso_org: standing.sso_org.clone(),
        password_change_required: standing.password_change_required,
    })
}

/// What a checked session stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFacts {
    /// The address the caller may be taken to hold.
    pub email: Option<String>,
    /// The root organization whose single sign-on issued the session.
    pub sso_org: Option<String>,
    /// The account must change its password before anything else.
    pub password_change_required: bool,
}

/// The root organization whose single sign-on issued a session (by its family),
/// kept with the session's standing.
pub async fn session_sso_org(
    store: &Store,
    kept: &KeptFacts,
    user_id: &str,
    family_id: &str,
) -> ServiceResult<Option<String>> {
    let standing = kept
        .sessions
        .get_or_load(
            store,
            (user_id.to_owned(), Some(family_id.to_owned())),
            |_| true,
            store.session_standing(user_id, Some(family_id)),
        )
        .await?;
    Ok(standing.sso_org.clone())
}

/// Resolves a personal access token to its owner and bounds: its layout and
/// checksum first (a mistyped one costs no query), then its stored record.
pub async fn personal_token(
    store: &Store,
    kept: &KeptFacts,
    secret: &str,
    now: DateTime<Utc>,
) -> ServiceResult<(String, TokenUse)> {
    const INVALID: SignInRefusal =
        SignInRefusal::InvalidToken("the personal access token is not valid");
    tenancy::check_personal_token(secret).map_err(|_| INVALID)?;
    let hash = token_hash(secret);
    let record: Arc<Option<PersonalTokenRecord>> = kept
        .tokens
        .get_or_load(
            store,
            hash.clone(),
            |found| found.is_some(),
            store.personal_token_by_hash(&hash),
        )
        .await?;
    let Some(token) = record.as_ref() else {
        return Err(INVALID.into());
    };
    if token.revoked_at.is_some() {
        return Err(SignInRefusal::InvalidToken("the personal access token was revoked").into());
    }
    if token.expires_at <= now {
        return Err(SignInRefusal::InvalidToken("the personal access token has expired").into());
    }
    let scope = match &token.org_id {
        None => None,
        Some(org_id) => Some(tenancy::TokenScope {
            org_id: org_id.clone(),
            permissions: token
                .permissions
                .as_ref()
                .map(|names| {
                    names
                        .iter()
                        .map(|n| n.parse::<tenancy::Permission>())
                        .collect::<Result<_, _>>()
                })
                .transpose()
                .map_err(|e| {
                    super::ServiceError::Broken(format!(
                        "personal token {}: stored permission unreadable: {e}",
                        token.id
                    ))
                })?,
        }),
    };
    note_use(store, kept, &token.id, now);
    Ok((
        token.user_id.clone(),
        TokenUse {
            id: token.id.clone(),
            scope,
            sso_org: token.sso_org_id.clone(),
        },
    ))
}

/// Records a token's use at most once a minute per replica, off the request path.
fn note_use(store: &Store, kept: &KeptFacts, id: &str, now: DateTime<Utc>) {
    if !kept.token_used(id, LAST_USE_EVERY) {
        return;
    }
    let (store, id) = (store.clone(), id.to_owned());
    let since = now - chrono::Duration::from_std(LAST_USE_EVERY).unwrap_or_default();
    tokio::spawn(async move {
        if let Err(error) = store.touch_personal_token(&id, since, now).await {
            tracing::warn!(%error, "a personal access token's last use was not recorded");
        }
    });
}
