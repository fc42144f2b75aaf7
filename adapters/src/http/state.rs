//! The caller, taken from a request: the HTTP floor's side of
//! [`crate::services::context`], where the application state and the caller types live.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use chrono::{TimeZone, Utc};

use crate::auth::bearer;
use crate::http::error::ApiError;
pub use crate::services::context::{event, event_on, AnyCaller, AppState, Caller, ServiceCaller};

fn header<'a>(parts: &'a Parts, name: &str) -> Option<&'a str> {
    parts.headers.get(name).and_then(|v| v.to_str().ok())
}

/// A user's bearer token, checked: a personal access token (its prefix says so) or a
/// session's JWT (signature, expiry, and the session not revoked). Answers the user,
/// the e-mail the caller holds (the account's verified address, never an older
/// claim), the personal token used and the session (`sid`) of an access token.
pub(crate) async fn authenticate(
    state: &AppState,
    token: &str,
    now: chrono::DateTime<Utc>,
) -> Result<Authenticated, ApiError> {
    if tenancy::is_personal_token(token) {
        let (user_id, used) = crate::services::credentials::personal_token(
            &state.infra.store,
            &state.replica.kept,
            token,
            now,
        )
        .await?;
        return Ok(Authenticated {
            user_id,
            email: None,
            sso_org: used.sso_org.clone(),
            personal_token: Some(used),
            session: None,
            active_org: None,
            password_change_required: false,
            impersonation: None,
        });
    }
    let claims = state.infra.keys.verify(token).await?;
    if claims.step_up {
        return Err(ApiError::unauthorized(
            "a step-up token is not an access token",
        ));
    }
    if claims.service.is_some() {
        return Err(ApiError::forbidden(
            "service tokens cannot call user endpoints",
        ));
    }
    let facts = crate::services::credentials::check_session(
        &state.infra.store,
        &state.replica.kept,
        &claims,
    )
    .await?;
    let impersonation = crate::services::admin::impersonation::check(
        &state.infra.store,
        &state.replica.kept,
        &claims,
        now,
    )
    .await?;
    Ok(Authenticated {
        impersonation,
        user_id: claims.sub,
        email: facts.email,
        sso_org: facts.sso_org,
        personal_token: None,
        session: claims.sid,
        active_org: claims.org,
        password_change_required: facts.password_change_required,
    })
}

/// Who a bearer token stands for.
#[derive(Debug, Clone)]
pub(crate) struct Authenticated {
    /// The user.
    pub(crate) user_id: String,
    /// The address the user holds (verified), if known.
    pub(crate) email: Option<String>,
    /// The personal access token used, if it is one.
    pub(crate) personal_token: Option<crate::services::context::TokenUse>,
    /// The sign-in's refresh family of an access token.
    pub(crate) session: Option<String>,
    /// The root organization whose single sign-on issued the session.
    pub(crate) sso_org: Option<String>,
    /// The organization the token says the user acts in by default.
    pub(crate) active_org: Option<String>,
    /// The account must change its password before anything else.
    pub(crate) password_change_required: bool,
    /// The impersonation the token was minted for.
    pub(crate) impersonation: Option<Box<crate::services::context::Impersonating>>,
}

/// What an account that must change its password may still do.
fn open_before_password_change(parts: &Parts) -> bool {
    use axum::http::Method;
    matches!(
        (&parts.method, parts.uri.path()),
        (&Method::GET, "/api/me")
            | (&Method::PUT, "/api/me/password")
            | (&Method::POST, "/api/auth/logout")
    )
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        // Already authenticated by the route's guard.
        if let Some(known) = parts.extensions.get::<Caller>() {
            return Ok(known.clone());
        }
        let token = bearer(header(parts, "authorization"))?;
        let now = Utc::now();
        let Authenticated {
            user_id,
            email,
            personal_token,
            session,
            sso_org,
            active_org,
            password_change_required,
            impersonation,
        } = authenticate(state, token, now).await?;
        if impersonation.as_ref().is_some_and(|imp| {
            imp.read_only && !tenancy::impersonation::read_only_allows(parts.method.as_str())
        }) {
            return Err(ApiError::forbidden(
                "a read-only impersonation makes no change: only GET is allowed",
            ));
        }
        if password_change_required && !open_before_password_change(parts) {
            return Err(crate::services::ServiceError::from(
                crate::services::accounts::SignInRefusal::PasswordChangeRequired,
            )
            .into());
        }
        if state.first_sight(&user_id) {
            crate::services::access::first_sight(
                &state.infra.store,
                &user_id,
                email.as_deref(),
                now,
            )
            .await?;
        }
        let stepped_up_at = match header(parts, "x-step-up-token") {
            None => None,
            // Nobody steps up as someone else.
            Some(_) if impersonation.is_some() => {
                return Err(ApiError::forbidden(
                    "step-up is not available while impersonating",
                ))
            }
            Some(token) => {
                let step = state.infra.keys.verify(token).await?;
                // A proof is the user's, for the session it was made in, and ends
                // with it: logout, revoke-all and a password change end it too.
                if !step.step_up || step.sub != user_id || step.sid != session {
                    return Err(ApiError::unauthorized(
                        "the step-up token does not belong to this user and session",
                    ));
                }
                crate::services::credentials::check_session(
                    &state.infra.store,
                    &state.replica.kept,
                    &step,
                )
                .await?;
                step.iat.and_then(|iat| Utc.timestamp_opt(iat, 0).single())
            }
        };
        Ok(Caller {
            user_id,
            email,
            stepped_up_at,
            personal_token,
            session,
            sso_org,
            impersonation,
            // `x-org-id` wins for one request; else the organization the token
            // carries as the user's active one.
            org_header: header(parts, "x-org-id")
                .map(str::to_owned)
                .filter(|s| !s.is_empty())
                .or(active_org),
        })
    }
}

impl FromRequestParts<AppState> for ServiceCaller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        // Already authenticated by the route's guard.
        if let Some(known) = parts.extensions.get::<ServiceCaller>() {
            return Ok(known.clone());
        }
        let token = bearer(header(parts, "authorization"))?;
        let claims = state.infra.keys.verify(token).await?;
        match claims.service {
            Some(service) if !claims.step_up && !service.trim().is_empty() => {
                Ok(ServiceCaller { service })
            }
            _ => Err(ApiError::forbidden("this endpoint takes a service token")),
        }
    }
}

impl FromRequestParts<AppState> for AnyCaller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        // Already authenticated by the route's guard.
        if let Some(known) = parts.extensions.get::<AnyCaller>() {
            return Ok(known.clone());
        }
        let token = bearer(header(parts, "authorization"))?;
        if tenancy::is_personal_token(token) {
            return Caller::from_request_parts(parts, state)
                .await
                .map(AnyCaller::User);
        }
        let claims = state.infra.keys.verify(token).await?;
        match claims.service {
            Some(service) if !claims.step_up => Ok(AnyCaller::Service {
                service,
                org_header: header(parts, "x-org-id")
                    .map(str::to_owned)
                    .filter(|s| !s.is_empty()),
            }),
            _ => Caller::from_request_parts(parts, state)
                .await
                .map(AnyCaller::User),
        }
    }
}
