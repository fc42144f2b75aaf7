//! Bearer tokens: HS256 JWTs signed with `JWT_SECRET`, `exp` required, the
//! algorithm pinned (so `alg: none` and RS/HS confusion are refused).
//!
//! Three kinds share the format: a user's access token (`sub`, `email`), a service
//! token (a `service` claim), and a step-up token (`stepUp: true`, minted by
//! `compliance token --step-up`, sent in `X-Step-Up-Token` next to the access token;
//! its `iat` is when the user re-verified).

use std::time::Duration;

use chrono::{DateTime, Utc};
use jsonwebtoken::{decode, encode, Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::error::ApiError;

/// The claims this server reads and writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Claims {
    /// The subject: a user id, or a service's name.
    pub sub: String,
    /// The user's e-mail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// Expiry, seconds since the epoch (required).
    pub exp: i64,
    /// Issued at, seconds since the epoch.
    #[serde(default)]
    pub iat: i64,
    /// The issuer asserts the user is a super-admin.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub super_admin: bool,
    /// Set on service tokens: the calling service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// Set on step-up tokens.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub step_up: bool,
}

impl Claims {
    /// Claims for a user, valid for `ttl` from `now`.
    pub fn user(sub: &str, email: Option<&str>, now: DateTime<Utc>, ttl: Duration) -> Claims {
        let iat = now.timestamp();
        Claims {
            sub: sub.to_owned(),
            email: email.map(str::to_owned),
            exp: iat.saturating_add(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX)),
            iat,
            super_admin: false,
            service: None,
            step_up: false,
        }
    }
}

/// Signing and verification keys for HS256.
#[derive(Clone)]
pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKeys(HS256)")
    }
}

impl TokenKeys {
    /// Keys for an HS256 secret.
    pub fn hs256(secret: &str) -> TokenKeys {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_required_spec_claims(&["exp", "sub"]);
        validation.leeway = 5;
        TokenKeys {
            encoding: EncodingKey::from_secret(secret.as_bytes()),
            decoding: DecodingKey::from_secret(secret.as_bytes()),
            validation,
        }
    }

    /// Signs claims.
    pub fn sign(&self, claims: &Claims) -> Result<String, ApiError> {
        encode(&Header::new(Algorithm::HS256), claims, &self.encoding).map_err(ApiError::internal)
    }

    /// Verifies a token: signature, algorithm, expiry.
    pub fn verify(&self, token: &str) -> Result<Claims, ApiError> {
        decode::<Claims>(token, &self.decoding, &self.validation)
            .map(|data| data.claims)
            .map_err(|e| {
                use jsonwebtoken::errors::ErrorKind;
                let why = match e.kind() {
                    ErrorKind::ExpiredSignature => "the token has expired",
                    ErrorKind::InvalidSignature => "the token's signature is invalid",
                    ErrorKind::InvalidAlgorithm => "the token's algorithm is not accepted",
                    ErrorKind::MissingRequiredClaim(_) => "the token lacks a required claim",
                    _ => "the token is malformed",
                };
                ApiError::unauthorized(why)
            })
    }
}

/// Takes the token out of an `Authorization: Bearer <token>` header value.
pub fn bearer(header: Option<&str>) -> Result<&str, ApiError> {
    let value =
        header.ok_or_else(|| ApiError::unauthorized("the Authorization header is missing"))?;
    let (scheme, token) = value
        .split_once(' ')
        .ok_or_else(|| ApiError::unauthorized("expected `Authorization: Bearer <token>`"))?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(ApiError::unauthorized(
            "expected `Authorization: Bearer <token>`",
        ));
    }
    Ok(token.trim())
}
