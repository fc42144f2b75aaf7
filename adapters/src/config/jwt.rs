//! Tokens' settings (`JWT_*`): the HS256 secret, lifetimes (per tier too), an
//! identity provider's key set, issuer and audience.

use std::collections::BTreeMap;
use std::time::Duration;

use entitlements::Tier;

use super::{parse_duration, Reader, Secret};

/// The development JWT secret used when `JWT_SECRET` is unset (a warning says so).
pub const DEV_JWT_SECRET: &str = "compliance-development-secret-do-not-use-in-production";

/// The longest access-token lifetime `JWT_EXPIRES_IN` may ask for.
pub const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// Token settings.
#[derive(Debug, Clone)]
pub struct JwtConfig {
    /// The HS256 secret.
    pub secret: Secret,
    /// Whether the development secret is in use.
    pub secret_is_default: bool,
    /// Access-token lifetime (`JWT_EXPIRES_IN`, default 2 h, at most 24 h).
    pub expires_in: Duration,
    /// Per-tier lifetimes (`JWT_EXPIRES_IN_<TIER>`).
    pub expires_in_by_tier: BTreeMap<Tier, Duration>,
    /// `JWT_JWKS_URL`: an identity provider's key set; RS256 and ES256 tokens are
    /// verified against it (HS256 with `JWT_SECRET` stays for development).
    pub jwks_url: Option<String>,
    /// `JWT_ISSUER`: the `iss` a token must carry, when set.
    pub issuer: Option<String>,
    /// `JWT_AUDIENCE`: an `aud` a token must carry, when set.
    pub audience: Option<String>,
    /// `JWT_JWKS_MIN_REFRESH_SECONDS` (60): the key set is fetched again for an unknown
    /// `kid` at most this often.
    pub jwks_min_refresh: Duration,
}

/// Reads the section.
pub(super) fn jwt_settings(r: &mut Reader<'_>) -> JwtConfig {
    let secret_is_default = r.raw("JWT_SECRET").is_none_or(str::is_empty);
    let secret = r.string("JWT_SECRET", DEV_JWT_SECRET);
    if !secret_is_default && secret.len() < 16 {
        r.fail("JWT_SECRET", "must be at least 16 characters".to_owned());
    }
    if secret_is_default {
        r.warn(
            "JWT_SECRET is unset: using the development secret; set it in any shared environment"
                .to_owned(),
        );
    }
    let expires_in = lifetime(r, "JWT_EXPIRES_IN", Duration::from_secs(2 * 3600));
    let jwks_url = r.optional("JWT_JWKS_URL");
    if let Some(url) = &jwks_url {
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            r.fail("JWT_JWKS_URL", "expected an http(s) URL".to_owned());
        }
    }
    let issuer = r.optional("JWT_ISSUER");
    let audience = r.optional("JWT_AUDIENCE");
    let jwks_min_refresh =
        Duration::from_secs(r.parse("JWT_JWKS_MIN_REFRESH_SECONDS", 60, "a number of seconds"));
    let mut expires_in_by_tier = BTreeMap::new();
    for tier in Tier::ALL {
        let name = format!("JWT_EXPIRES_IN_{}", tier.env_name());
        if r.raw(&name).is_some_and(|v| !v.is_empty()) {
            let d = lifetime(r, &name, expires_in);
            expires_in_by_tier.insert(tier, d);
        }
    }
    JwtConfig {
        secret: Secret::new(secret),
        secret_is_default,
        expires_in,
        expires_in_by_tier,
        jwks_url,
        issuer,
        audience,
        jwks_min_refresh,
    }
}

/// A token lifetime: a duration above zero, capped at 24 hours (with a warning).
fn lifetime(r: &mut Reader<'_>, name: &str, default: Duration) -> Duration {
    match r.raw(name) {
        None | Some("") => default,
        Some(text) => match parse_duration(text) {
            Some(d) if d.is_zero() => {
                r.fail(name, "must be longer than zero".to_owned());
                default
            }
            Some(d) if d > MAX_TOKEN_LIFETIME => {
                r.warn(format!("{name}={text} is above 24h: capped at 24h"));
                MAX_TOKEN_LIFETIME
            }
            Some(d) => d,
            None => {
                r.fail(
                    name,
                    format!("`{text}` is not a duration such as 2h, 30m or 7200"),
                );
                default
            }
        },
    }
}
