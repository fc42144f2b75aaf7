//! Sign-in's settings: where links point, the proxy headers that name a client,
//! how long refresh families and verification links live, whether sign-in waits for
//! a verified e-mail, and single sign-on's provider rules.

use std::time::Duration;

use super::Reader;

/// Sign-in settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInSettings {
    /// `PUBLIC_URL` (`http://localhost:<port>`): where the e-mail verification link
    /// points (`<PUBLIC_URL>/console/verify-email?token=...`).
    pub public_url: String,
    /// `TRUST_PROXY_HEADERS` (false): the client address that sign-in throttling
    /// counts is the last `X-Forwarded-For` entry (the one the nearest proxy saw)
    /// instead of the connection's peer. Only behind a proxy that sets it.
    pub trust_proxy_headers: bool,
    /// `REFRESH_TOKEN_TTL_DAYS` (30): a sign-in's refresh family ends this long after
    /// the sign-in, however often it rotates.
    pub refresh_lifetime: Duration,
    /// `EMAIL_VERIFICATION_TTL_HOURS` (24): how long a verification link works.
    pub verification_lifetime: Duration,
    /// `EMAIL_VERIFICATION_REQUIRED` (true when `SMTP_URL` is set, else false, with
    /// a warning): whether sign-in waits for the e-mail's verification. Without a
    /// relay no link can arrive.
    pub verification_required: bool,
    /// `SSO_ALLOW_LOOPBACK_HTTP` (false): identity providers on a loopback address
    /// may speak plain HTTP (a provider beside the server, tests); every other
    /// issuer is https.
    pub sso_allow_loopback_http: bool,
    /// `SSO_JWKS_MIN_REFRESH_SECONDS` (60): an ID token signed by a key an identity
    /// provider's kept key set does not hold makes the set be fetched again, at most
    /// this often.
    pub sso_jwks_min_refresh: Duration,
    /// `IMPERSONATION_ENABLED` (true): a super-admin may see what a user sees
    /// (`POST /api/admin/impersonations`); false refuses every impersonation.
    pub impersonation_enabled: bool,
}

/// Reads the sign-in section (`port`: the server's, for the default `PUBLIC_URL`;
/// `has_relay`: whether `SMTP_URL` is set, the default of
/// `EMAIL_VERIFICATION_REQUIRED`).
pub(super) fn signin_settings(r: &mut Reader<'_>, port: u16, has_relay: bool) -> SignInSettings {
    SignInSettings {
        public_url: r
            .string("PUBLIC_URL", &format!("http://localhost:{port}"))
            .trim_end_matches('/')
            .to_owned(),
        trust_proxy_headers: r.flag("TRUST_PROXY_HEADERS"),
        refresh_lifetime: Duration::from_secs(
            r.positive("REFRESH_TOKEN_TTL_DAYS", 30).min(365) * 86_400,
        ),
        verification_lifetime: Duration::from_secs(
            r.positive("EMAIL_VERIFICATION_TTL_HOURS", 24).min(24 * 30) * 3_600,
        ),
        verification_required: match r.raw("EMAIL_VERIFICATION_REQUIRED") {
            Some(v) if !v.is_empty() => r.flag("EMAIL_VERIFICATION_REQUIRED"),
            _ => has_relay,
        },
        sso_allow_loopback_http: r.flag("SSO_ALLOW_LOOPBACK_HTTP"),
        sso_jwks_min_refresh: Duration::from_secs(
            r.parse("SSO_JWKS_MIN_REFRESH_SECONDS", 60, "a number of seconds")
                .min(3600),
        ),
        impersonation_enabled: match r.raw("IMPERSONATION_ENABLED") {
            Some(v) if !v.is_empty() => r.flag("IMPERSONATION_ENABLED"),
            _ => true,
        },
    }
}
