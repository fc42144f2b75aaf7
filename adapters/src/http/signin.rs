//! `/api/auth/*` and `/api/me*`: accounts, sign-in, sessions, step-up and personal
//! access tokens. Handlers read and bound the bodies; `services::accounts` does the
//! work.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Path, State};
use axum::http::HeaderMap;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tenancy::Permission;

use crate::config::Config;
use crate::http::error::ApiError;
use crate::http::extract::Json;
use crate::http::organizations::text;
use crate::http::response::{Answer, Deleted};
use crate::http::state::{AppState, Caller};
use crate::services::accounts::{
    self, Account, Credentials, PersonalToken, Reverification, Session, StepUpProof, TokenRequest,
    TotpEnrollment,
};

/// The longest password text read (a new one must also pass the policy).
const MAX_PASSWORD_TEXT: usize = 1024;
/// The longest token text read.
const MAX_TOKEN_TEXT: usize = 512;

pub(crate) fn secret(field: &str, value: &str, max: usize) -> Result<String, ApiError> {
    if value.is_empty() {
        return Err(ApiError::invalid_field(field, "must not be empty"));
    }
    if value.chars().count() > max {
        return Err(ApiError::invalid_field(
            field,
            format!("must be at most {max} characters"),
        ));
    }
    Ok(value.to_owned())
}

/// An account to register.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Register {
    #[schema(max_length = 254, example = "ada@example.com")]
    email: String,
    /// 8 to 128 characters, not the e-mail.
    #[schema(min_length = 8, max_length = 128)]
    password: String,
    #[schema(max_length = 200)]
    name: Option<String>,
}

/// `POST /api/auth/register`: the account, unverified; the link goes by e-mail.
pub(crate) async fn register(
    State(state): State<AppState>,
    Peer(peer): Peer,
    headers: HeaderMap,
    Json(body): Json<Register>,
) -> Result<Answer<Account>, ApiError> {
    let password = secret("password", &body.password, MAX_PASSWORD_TEXT)?;
    let name = body
        .name
        .as_deref()
        .map(|n| text("name", n, 200))
        .transpose()?;
    let client = client_address(&state.config, &headers, peer);
    let account = accounts::register(
        &state.infra.store,
        &state.config,
        &state.infra.passwords,
        (&body.email, password, name.as_deref()),
        client,
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(account))
}

/// A verification link's token.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct VerifyEmail {
    #[schema(max_length = 512)]
    token: String,
    /// The account's password: required to accept an invitation (an account a
    /// super-admin created without one), optional otherwise (it replaces the
    /// password). 8 to 128 characters, not the e-mail.
    #[schema(min_length = 8, max_length = 128)]
    password: Option<String>,
}

/// `POST /api/auth/verify-email`.
pub(crate) async fn verify_email(
    State(state): State<AppState>,
    Json(body): Json<VerifyEmail>,
) -> Result<Answer<Account>, ApiError> {
    let token = secret("token", &body.token, MAX_TOKEN_TEXT)?;
    let password = body
        .password
        .as_deref()
        .map(|p| secret("password", p, MAX_PASSWORD_TEXT))
        .transpose()?;
    Ok(Answer::ok(
        accounts::verify_email(
            &state.infra.store,
            &state.infra.passwords,
            &token,
            password,
            Utc::now(),
        )
        .await?,
    ))
}

/// A sign-in.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Login {
    /// The account's e-mail.
    #[schema(max_length = 254, example = "ada@example.com")]
    identifier: String,
    #[schema(max_length = 1024)]
    password: String,
    /// The organization to sign into: its tier sets the access token's lifetime
    /// (`JWT_EXPIRES_IN_<TIER>`); the account must stand in it.
    #[schema(max_length = 200)]
    org_id: Option<String>,
}

/// The connection's peer, when the server was started with it (tests drive the
/// router without one).
pub(crate) struct Peer(pub(crate) Option<SocketAddr>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Peer(
            parts
                .extensions
                .get::<ConnectInfo<crate::http::listener::PeerAddr>>()
                .map(|ConnectInfo(peer)| peer.0),
        ))
    }
}

/// The client's address: the connection's peer, or with `TRUST_PROXY_HEADERS` the
/// last `X-Forwarded-For` entry.
pub(crate) fn client_address(
    config: &Config,
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
) -> Option<IpAddr> {
    if config.signin.trust_proxy_headers {
        let forwarded = headers
            .get_all("x-forwarded-for")
            .iter()
            .next_back()
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit(',').next())
            .and_then(|v| v.trim().parse::<IpAddr>().ok());
        if forwarded.is_some() {
            return forwarded;
        }
    }
    peer.map(|p| p.ip())
}

/// `POST /api/auth/login`.
pub(crate) async fn login(
    State(state): State<AppState>,
    Peer(peer): Peer,
    headers: HeaderMap,
    Json(body): Json<Login>,
) -> Result<Answer<Session>, ApiError> {
    let identifier = text("identifier", &body.identifier, 254)?;
    let password = secret("password", &body.password, MAX_PASSWORD_TEXT)?;
    let org_id = body
        .org_id
        .as_deref()
        .map(|o| text("orgId", o, 200))
        .transpose()?;
    let client = client_address(&state.config, &headers, peer);
    let session = accounts::login(
        &state,
        Credentials {
            identifier,
            password,
            org_id,
        },
        client,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(session))
}

/// A refresh token.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RefreshToken {
    #[schema(max_length = 512)]
    refresh_token: String,
}

/// `POST /api/auth/refresh`: a new pair; the token presented is used up.
pub(crate) async fn refresh(
    State(state): State<AppState>,
    Json(body): Json<RefreshToken>,
) -> Result<Answer<Session>, ApiError> {
    let token = secret("refreshToken", &body.refresh_token, MAX_TOKEN_TEXT)?;
    Ok(Answer::ok(
        accounts::refresh(
            &state.infra.store,
            &state.config,
            &state.infra.keys,
            &token,
            Utc::now(),
        )
        .await?,
    ))
}

/// What signing out answers.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SignedOut {
    pub signed_out: bool,
}

/// `POST /api/auth/logout`: the session ends (its refresh and access tokens).
pub(crate) async fn logout(
    State(state): State<AppState>,
    Json(body): Json<RefreshToken>,
) -> Result<Answer<SignedOut>, ApiError> {
    let token = secret("refreshToken", &body.refresh_token, MAX_TOKEN_TEXT)?;
    accounts::logout(&state.infra.store, &token, Utc::now()).await?;
    Ok(Answer::ok(SignedOut { signed_out: true }))
}

/// A re-verification: the password, or an authenticator's code.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct StepUp {
    #[schema(max_length = 1024)]
    password: Option<String>,
    /// A TOTP code (only for an account that enrolled an authenticator).
    #[schema(max_length = 10)]
    totp: Option<String>,
}

/// `POST /api/auth/step-up`.
pub(crate) async fn step_up(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<StepUp>,
) -> Result<Answer<StepUpProof>, ApiError> {
    let proof = match (&body.password, &body.totp) {
        (Some(p), None) => Reverification::Password(secret("password", p, MAX_PASSWORD_TEXT)?),
        (None, Some(code)) => Reverification::Code(secret("totp", code, 10)?),
        _ => {
            return Err(ApiError::validation(
                "give exactly one of `password` and `totp`",
            ))
        }
    };
    Ok(Answer::ok(
        accounts::step_up(&state, &caller, proof, Utc::now()).await?,
    ))
}

/// `GET /api/me`.
pub(crate) async fn me(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Answer<accounts::Me>, ApiError> {
    Ok(Answer::ok(
        accounts::me(
            &state.infra.store,
            &state.config,
            &state.replica.kept,
            &caller,
        )
        .await?,
    ))
}

/// The organization to act in by default.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActiveOrganization {
    #[schema(max_length = 200)]
    pub org_id: String,
}

/// `PUT /api/me/active-organization`.
pub(crate) async fn switch_organization(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<ActiveOrganization>,
) -> Result<Answer<ActiveOrganization>, ApiError> {
    let org_id = crate::http::organizations::text("orgId", &body.org_id, 200)?;
    accounts::switch_organization(&state.infra.store, &state.replica.kept, &caller, &org_id)
        .await?;
    Ok(Answer::ok(ActiveOrganization { org_id }))
}

/// A profile change.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct UpdateMe {
    #[schema(max_length = 200)]
    name: Option<String>,
    /// A new address is unverified until its link is followed.
    #[schema(max_length = 254)]
    email: Option<String>,
}

/// `PUT /api/me`.
pub(crate) async fn update_me(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<UpdateMe>,
) -> Result<Answer<Account>, ApiError> {
    let name = body
        .name
        .as_deref()
        .map(|n| text("name", n, 200))
        .transpose()?;
    let email = body
        .email
        .as_deref()
        .map(|e| text("email", e, 254))
        .transpose()?;
    let account = accounts::update_me(
        &state.infra.store,
        &state.config,
        &caller,
        (name.as_deref(), email.as_deref()),
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(account))
}

/// `DELETE /api/me` (with a fresh `X-Step-Up-Token`).
pub(crate) async fn delete_me(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Answer<Deleted>, ApiError> {
    accounts::delete_me(&state.infra.store, &state.config, &caller, Utc::now()).await?;
    Ok(Answer::ok(Deleted::new(caller.user_id)))
}

/// A password change.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ChangePassword {
    #[schema(max_length = 1024)]
    current_password: String,
    #[schema(min_length = 8, max_length = 128)]
    new_password: String,
}

/// `PUT /api/me/password`: every session ends; the answer is the caller's new one.
pub(crate) async fn change_password(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<ChangePassword>,
) -> Result<Answer<Session>, ApiError> {
    let current = secret("currentPassword", &body.current_password, MAX_PASSWORD_TEXT)?;
    let new = secret("newPassword", &body.new_password, MAX_PASSWORD_TEXT)?;
    Ok(Answer::ok(
        accounts::change_password(&state, &caller, (current, new), Utc::now()).await?,
    ))
}

/// A personal access token to create.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CreateToken {
    #[schema(max_length = 100, example = "ci")]
    name: String,
    /// RFC 3339; required, in the future, at most a year ahead.
    expires_at: String,
    /// The one organization it may act in.
    #[schema(max_length = 200)]
    org_id: Option<String>,
    /// A subset of the user's permissions there (`resource:action`).
    #[schema(max_items = 32)]
    permissions: Option<Vec<String>>,
}

/// `POST /api/me/tokens`: the token, with its secret this once.
pub(crate) async fn create_token(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<CreateToken>,
) -> Result<Answer<PersonalToken>, ApiError> {
    let name = text("name", &body.name, 100)?;
    let expires_at = DateTime::parse_from_rfc3339(body.expires_at.trim())
        .map_err(|_| ApiError::invalid_field("expiresAt", "must be an RFC 3339 instant"))?
        .with_timezone(&Utc);
    let org_id = body
        .org_id
        .as_deref()
        .map(|o| text("orgId", o, 200))
        .transpose()?;
    let permissions = match body.permissions {
        None => None,
        Some(names) if names.len() > 32 => {
            return Err(ApiError::invalid_field("permissions", "at most 32"))
        }
        Some(names) => Some(
            names
                .iter()
                .map(|n| n.parse::<Permission>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| ApiError::invalid_field("permissions", e.to_string()))?,
        ),
    };
    let token = accounts::create_token(
        &state.infra.store,
        &state.replica.kept,
        &caller,
        TokenRequest {
            name,
            expires_at,
            org_id,
            permissions,
        },
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(token))
}

/// The caller's personal access tokens.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tokens {
    pub tokens: Vec<PersonalToken>,
}

/// `GET /api/me/tokens`: newest first, with their last use; never their secrets.
pub(crate) async fn tokens(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Answer<Tokens>, ApiError> {
    Ok(Answer::ok(Tokens {
        tokens: accounts::tokens(&state.infra.store, &caller).await?,
    }))
}

/// `DELETE /api/me/tokens/{id}`.
pub(crate) async fn revoke_token(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Answer<Deleted>, ApiError> {
    accounts::revoke_token(&state.infra.store, &caller, &id, Utc::now()).await?;
    Ok(Answer::ok(Deleted::new(id)))
}

/// What revoke-all answers.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Revoked {
    pub revoked: bool,
}

/// `POST /api/me/tokens/revoke-all`: every session and personal access token ends,
/// the caller's own included, on every replica at once.
pub(crate) async fn revoke_all(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Answer<Revoked>, ApiError> {
    accounts::revoke_all(&state.infra.store, &caller, Utc::now()).await?;
    Ok(Answer::ok(Revoked { revoked: true }))
}

/// `POST /api/me/totp`: a new authenticator secret, waiting for its first code.
pub(crate) async fn enroll_totp(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Answer<TotpEnrollment>, ApiError> {
    Ok(Answer::created(
        accounts::enroll_totp(
            &state.infra.store,
            &state.config,
            &state.outbound.keyring,
            &caller,
            Utc::now(),
        )
        .await?,
    ))
}

/// An authenticator's code.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct TotpCode {
    #[schema(max_length = 10, example = "287082")]
    code: String,
}

/// `POST /api/me/totp/confirm`.
pub(crate) async fn confirm_totp(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<TotpCode>,
) -> Result<Answer<Account>, ApiError> {
    let code = secret("code", &body.code, 10)?;
    Ok(Answer::ok(
        accounts::confirm_totp(
            &state.infra.store,
            &state.config,
            &state.outbound.keyring,
            &caller,
            &code,
            Utc::now(),
        )
        .await?,
    ))
}

/// `DELETE /api/me/totp` (with a fresh `X-Step-Up-Token`).
pub(crate) async fn remove_totp(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Answer<Account>, ApiError> {
    Ok(Answer::ok(
        accounts::remove_totp(&state.infra.store, &state.config, &caller, Utc::now()).await?,
    ))
}
