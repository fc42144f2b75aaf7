//! Bearer tokens. Two sources of keys:
//! - HS256 with `JWT_SECRET`, for development and the tokens `compliance token` mints;
//! - an identity provider's key set (`JWT_JWKS_URL`): RS256 and ES256 tokens, checked
//!   against the key their `kid` names. The algorithm comes from that key (RSA keys
//!   verify RS256, P-256 keys ES256), never from the token's header; a token whose
//!   header disagrees is refused. The set is fetched at start, kept, and fetched again
//!   when an unknown `kid` arrives, at most once per `JWT_JWKS_MIN_REFRESH_SECONDS`.
//!
//! Every token: a signature, `exp` (and `nbf` when present) checked, a non-empty
//! `sub`, a lifetime of at most 24 hours (`exp - iat`, or `exp - now` without `iat`),
//! `iss` and `aud` when `JWT_ISSUER` / `JWT_AUDIENCE` are set. A `superAdmin` claim
//! means nothing: super-admin is a stored flag.
//!
//! Three kinds share the format: a user's access token (`sub`, `email`), a service
//! token (a `service` claim), and a step-up token (`stepUp: true`, minted by
//! `compliance token --step-up`, sent in `X-Step-Up-Token` next to the access token;
//! its `iat` is when the user re-verified). Tokens issued at sign-in also carry the
//! account's generation (`gen`) and the sign-in's family (`sid`), which every request
//! checks against what is stored (kept per replica), so revocation is immediate.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet};
use jsonwebtoken::{
    decode, decode_header, encode, Algorithm, DecodingKey, EncodingKey, Header, Validation,
};
use serde::{Deserialize, Serialize};

use crate::config::JwtConfig;

/// Why a token was not accepted, or could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The token (or its header) is not acceptable: 401 on the wire.
    #[error("{0}")]
    Rejected(&'static str),
    /// A token could not be signed.
    #[error("the token could not be signed: {0}")]
    Signing(String),
}

/// The longest an access token may live.
pub const MAX_LIFETIME_SECONDS: i64 = 24 * 3600;
/// Clock skew tolerated on `exp` and `nbf`, in seconds.
const LEEWAY: u64 = 5;

/// The claims this server reads and writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Claims {
    /// The subject: a user id, or a service's name.
    pub sub: String,
    /// The user's e-mail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// Expiry, seconds since the epoch (required; a number, nothing else).
    pub exp: i64,
    /// Not before, seconds since the epoch. Absent, or a number: a string, an object
    /// or `null` makes the token malformed (CVE-2026-25537 took such a claim for
    /// absent; the library checks it too since 10.3, this is the second lock).
    #[serde(
        default,
        deserialize_with = "number_when_present",
        skip_serializing_if = "Option::is_none"
    )]
    pub nbf: Option<i64>,
    /// Issued at, seconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<i64>,
    /// Set on service tokens: the calling service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// Set on step-up tokens.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub step_up: bool,
    /// The account's generation the token was issued under (tokens this server
    /// issues at sign-in): a revoke-all raises it, and older tokens fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gen: Option<i64>,
    /// The sign-in's refresh family: its logout (or its reuse detected) ends the
    /// access tokens issued in it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sid: Option<String>,
    /// The organization the user acts in by default (`PUT /api/me/active-organization`
    /// before the token was minted): requests without `x-org-id` act in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub org: Option<String>,
    /// The party acting for the subject (RFC 8693 `act`): on an impersonation's
    /// token, the super-admin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub act: Option<Actor>,
    /// The impersonation an access token was minted for: checked against the stored
    /// one on every request (ended or expired: refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imp: Option<String>,
}

/// RFC 8693's `act` claim: who acts for the token's subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// The acting party's subject.
    pub sub: String,
}

impl Claims {
    /// Claims for a user, valid for `ttl` from `now`.
    pub fn user(sub: &str, email: Option<&str>, now: DateTime<Utc>, ttl: Duration) -> Claims {
        let iat = now.timestamp();
        Claims {
            sub: sub.to_owned(),
            email: email.map(str::to_owned),
            exp: iat.saturating_add(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX)),
            iat: Some(iat),
            nbf: None,
            service: None,
            step_up: false,
            gen: None,
            sid: None,
            org: None,
            act: None,
            imp: None,
        }
    }
}

/// A claim that may be absent but, when present, is an integer (never `null`).
fn number_when_present<'de, D>(deserializer: D) -> Result<Option<i64>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    i64::deserialize(deserializer).map(Some)
}

/// The keys tokens are signed and verified with.
#[derive(Clone)]
pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    jwks: Option<Arc<KeySet>>,
    issuer: Option<String>,
    audience: Option<String>,
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenKeys")
            .field("jwks", &self.jwks.as_ref().map(|k| k.url.as_str()))
            .finish_non_exhaustive()
    }
}

impl TokenKeys {
    /// Keys for an HS256 secret only.
    pub fn hs256(secret: &str) -> TokenKeys {
        TokenKeys {
            encoding: EncodingKey::from_secret(secret.as_bytes()),
            decoding: DecodingKey::from_secret(secret.as_bytes()),
            jwks: None,
            issuer: None,
            audience: None,
        }
    }

    /// The keys a configuration names: the secret, and the key set when
    /// `JWT_JWKS_URL` is set (fetched on first use; [`TokenKeys::prefetch`] at start).
    pub fn from_config(config: &JwtConfig) -> TokenKeys {
        let mut keys = TokenKeys::hs256(config.secret.expose());
        keys.issuer = config.issuer.clone();
        keys.audience = config.audience.clone();
        keys.jwks = config
            .jwks_url
            .clone()
            .map(|url| Arc::new(KeySet::new(url, config.jwks_min_refresh)));
        keys
    }

    /// Fetches the key set now (at start); a failure is logged, and the set is
    /// fetched again when a token needs it.
    pub async fn prefetch(&self) {
        if let Some(jwks) = &self.jwks {
            match jwks.refresh().await {
                Ok(n) => tracing::info!(url = %jwks.url, keys = n, "identity provider keys loaded"),
                Err(error) => {
                    tracing::error!(url = %jwks.url, %error, "identity provider keys not loaded")
                }
            }
        }
    }

    /// Signs claims with HS256.
    pub fn sign(&self, claims: &Claims) -> Result<String, AuthError> {
        encode(&Header::new(Algorithm::HS256), claims, &self.encoding)
            .map_err(|e| AuthError::Signing(e.to_string()))
    }

    /// Verifies a token: key, signature, algorithm, `exp`, `nbf`, `sub`, lifetime,
    /// issuer and audience.
    pub async fn verify(&self, token: &str) -> Result<Claims, AuthError> {
        let header =
            decode_header(token).map_err(|_| AuthError::Rejected("the token is malformed"))?;
        let (key, algorithm) = if header.alg == Algorithm::HS256 {
            (self.decoding.clone(), Algorithm::HS256)
        } else {
            let jwks = self
                .jwks
                .as_ref()
                .ok_or(AuthError::Rejected("the token's algorithm is not accepted"))?;
            let (key, algorithm) = jwks.key(header.kid.as_deref()).await?;
            if header.alg != algorithm {
                return Err(AuthError::Rejected(
                    "the token's algorithm does not match its key",
                ));
            }
            (key, algorithm)
        };
        let mut validation = Validation::new(algorithm);
        validation.set_required_spec_claims(&["exp", "sub"]);
        validation.leeway = LEEWAY;
        validation.validate_nbf = true;
        if let Some(issuer) = &self.issuer {
            validation.set_issuer(&[issuer]);
        }
        match &self.audience {
            Some(audience) => validation.set_audience(&[audience]),
            None => validation.validate_aud = false,
        }
        let claims = decode::<Claims>(token, &key, &validation)
            .map(|data| data.claims)
            .map_err(|e| {
                use jsonwebtoken::errors::ErrorKind;
                let why = match e.kind() {
                    ErrorKind::ExpiredSignature => "the token has expired",
                    ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)",
                    ErrorKind::InvalidSignature => "the token's signature is invalid",
                    ErrorKind::InvalidAlgorithm => "the token's algorithm is not accepted",
                    ErrorKind::InvalidIssuer => "the token's issuer is not accepted",
                    ErrorKind::InvalidAudience => "the token's audience is not accepted",
                    ErrorKind::MissingRequiredClaim(_) => "the token lacks a required claim",
                    _ => "the token is malformed",
                };
                AuthError::Rejected(why)
            })?;
        check_claims(&claims, Utc::now().timestamp())?;
        Ok(claims)
    }
}

/// The checks beyond the signature: a subject, and a lifetime of at most 24 hours.
fn check_claims(claims: &Claims, now: i64) -> Result<(), AuthError> {
    if claims.sub.trim().is_empty() {
        return Err(AuthError::Rejected("the token's subject is empty"));
    }
    let start = claims.iat.unwrap_or(now);
    if claims.exp.saturating_sub(start) > MAX_LIFETIME_SECONDS + LEEWAY as i64 {
        return Err(AuthError::Rejected("the token lives longer than 24 hours"));
    }
    Ok(())
}

/// An identity provider's keys by `kid`, with the algorithm each one verifies.
struct KeySet {
    url: String,
    min_refresh: Duration,
    client: reqwest::Client,
    keys: tokio::sync::RwLock<HashMap<String, (DecodingKey, Algorithm)>>,
    last_fetch: tokio::sync::Mutex<Option<Instant>>,
}

impl KeySet {
    fn new(url: String, min_refresh: Duration) -> Self {
        KeySet {
            url,
            min_refresh,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap_or_default(),
            keys: tokio::sync::RwLock::new(HashMap::new()),
            last_fetch: tokio::sync::Mutex::new(None),
        }
    }

    /// The key `kid` names (or the only key, for a token without `kid`); an unknown
    /// one makes the set be fetched again, unless it was fetched too recently.
    async fn key(&self, kid: Option<&str>) -> Result<(DecodingKey, Algorithm), AuthError> {
        if let Some(found) = self.lookup(kid).await {
            return Ok(found);
        }
        {
            let mut last = self.last_fetch.lock().await;
            let due = last.is_none_or(|at| at.elapsed() >= self.min_refresh);
            if due {
                *last = Some(Instant::now());
                drop(last);
                if let Err(error) = self.refresh_now().await {
                    tracing::warn!(url = %self.url, %error, "identity provider keys not refreshed");
                }
            }
        }
        self.lookup(kid)
            .await
            .ok_or(AuthError::Rejected("the token's key is not known"))
    }

    async fn lookup(&self, kid: Option<&str>) -> Option<(DecodingKey, Algorithm)> {
        let keys = self.keys.read().await;
        match kid {
            Some(kid) => keys.get(kid).cloned(),
            None if keys.len() == 1 => keys.values().next().cloned(),
            None => None,
        }
    }

    /// Fetches the set (recording the time); returns how many keys it holds.
    async fn refresh(&self) -> Result<usize, String> {
        *self.last_fetch.lock().await = Some(Instant::now());
        self.refresh_now().await
    }

    async fn refresh_now(&self) -> Result<usize, String> {
        let response = self
            .client
            .get(&self.url)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("the key set answered {}", response.status()));
        }
        let set: JwkSet = response.json().await.map_err(|e| e.to_string())?;
        let mut keys = HashMap::new();
        for jwk in &set.keys {
            let (Some(kid), Some(algorithm)) = (jwk.common.key_id.clone(), algorithm_of(jwk))
            else {
                continue;
            };
            if let Ok(key) = DecodingKey::from_jwk(jwk) {
                keys.insert(kid, (key, algorithm));
            }
        }
        let n = keys.len();
        *self.keys.write().await = keys;
        Ok(n)
    }
}

/// The algorithm a key verifies: RS256 for RSA, ES256 for P-256; nothing else.
fn algorithm_of(jwk: &Jwk) -> Option<Algorithm> {
    let declared = jwk.common.key_algorithm.map(|a| format!("{a:?}"));
    let algorithm = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
            Algorithm::ES256
        }
        _ => return None,
    };
    // A key that declares another algorithm is not used for this one.
    match declared.as_deref() {
        None => Some(algorithm),
        Some(name) if name == format!("{algorithm:?}") => Some(algorithm),
        Some(_) => None,
    }
}

/// Takes the token out of an `Authorization: Bearer <token>` header value.
pub fn bearer(header: Option<&str>) -> Result<&str, AuthError> {
    let value = header.ok_or(AuthError::Rejected("the Authorization header is missing"))?;
    let (scheme, token) = value.split_once(' ').ok_or(AuthError::Rejected(
        "expected `Authorization: Bearer <token>`",
    ))?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(AuthError::Rejected(
            "expected `Authorization: Bearer <token>`",
        ));
    }
    Ok(token.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(sub: &str, iat: Option<i64>, exp: i64) -> Claims {
        Claims {
            sub: sub.to_owned(),
            email: None,
            exp,
            iat,
            nbf: None,
            service: None,
            step_up: false,
            gen: None,
            sid: None,
            org: None,
            act: None,
            imp: None,
        }
    }

    #[test]
    fn lifetimes_over_a_day_and_empty_subjects_are_refused() {
        let now = 1_000_000;
        assert!(check_claims(&claims("a", Some(now), now + 24 * 3600), now).is_ok());
        assert!(check_claims(&claims("a", Some(now), now + 24 * 3600 + 60), now).is_err());
        assert!(check_claims(&claims("a", None, now + 25 * 3600), now).is_err());
        assert!(check_claims(&claims("a", None, now + 3600), now).is_ok());
        assert!(check_claims(&claims(" ", Some(now), now + 60), now).is_err());
    }
}
