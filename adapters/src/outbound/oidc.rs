//! OpenID Connect providers, through the `openidconnect` crate: discovery (the
//! issuer must match exactly), the authorization request (code flow, PKCE S256, a
//! `state` and a `nonce`), the code exchange, and the ID token's checks (signature
//! by the provider's key set with an asymmetric algorithm only, `iss`, `aud`, `azp`,
//! `exp` and `iat` with 60 s of skew, `nonce`). Each configuration's discovery
//! document and key set are kept per replica under the configuration's version; an
//! ID token signed by a key the set does not hold makes the set be fetched again,
//! at most once a minute, so a provider's key rotation is followed without a
//! restart. No redirect is followed (a provider's answers come from where the
//! discovery document says).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreIdToken, CoreIdTokenVerifier, CoreJsonWebKeySet,
    CoreJwsSigningAlgorithm, CoreProviderMetadata,
};
use openidconnect::{
    AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken, IssuerUrl,
    Nonce, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, SignatureVerificationError,
    TokenResponse,
};
use tenancy::sso::{Refusal, CLOCK_SKEW_SECONDS};

/// How long a provider's answer may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// How long a discovery document is kept.
const METADATA_TTL: Duration = Duration::from_secs(3600);
/// Configurations kept per replica at most.
const CAPACITY: usize = 1000;

/// The asymmetric algorithms an ID token may be signed with (never `none`, never a
/// shared secret).
const ALLOWED_ALGS: [CoreJwsSigningAlgorithm; 9] = [
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha384,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha512,
    CoreJwsSigningAlgorithm::RsaSsaPssSha256,
    CoreJwsSigningAlgorithm::RsaSsaPssSha384,
    CoreJwsSigningAlgorithm::RsaSsaPssSha512,
    CoreJwsSigningAlgorithm::EcdsaP256Sha256,
    CoreJwsSigningAlgorithm::EcdsaP384Sha384,
    CoreJwsSigningAlgorithm::EdDsa,
];

/// Why a provider could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The issuer is not a URL this platform accepts.
    #[error("the issuer must be an https URL (http only on loopback): {0}")]
    BadIssuer(String),
    /// Discovery failed (unreachable, not a discovery document, another issuer).
    #[error("the discovery document could not be used: {0}")]
    Discovery(String),
}

/// A configuration as the provider sees this platform.
#[derive(Debug, Clone)]
pub struct Relying<'a> {
    /// The configuration's id and version (the key of what is kept).
    pub config: (&'a str, u32),
    /// The issuer.
    pub issuer: &'a str,
    /// The client id.
    pub client_id: &'a str,
    /// Where the provider sends the person back.
    pub redirect_uri: &'a str,
}

/// What a started sign-in keeps (never in a URL).
#[derive(Debug, Clone)]
pub struct Started {
    /// Where to send the person.
    pub url: String,
    /// The `state` sent.
    pub state: String,
    /// The `nonce` sent.
    pub nonce: String,
    /// The PKCE verifier.
    pub pkce_verifier: String,
}

/// An ID token's claims, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// `iss`.
    pub issuer: String,
    /// `sub`.
    pub subject: String,
    /// `email`.
    pub email: Option<String>,
    /// `email_verified` (absent: false).
    pub email_verified: bool,
    /// `name`.
    pub name: Option<String>,
    /// The groups claim's strings (an array of strings, or one string).
    pub groups: Vec<String>,
}

#[derive(Debug)]
struct Provider {
    metadata: CoreProviderMetadata,
    fetched: Instant,
    keys: Mutex<(CoreJsonWebKeySet, Instant)>,
}

/// The providers' client and what is kept of each configuration.
#[derive(Debug)]
pub struct Providers {
    http: openidconnect::reqwest::Client,
    allow_http_loopback: bool,
    jwks_min_refresh: Duration,
    kept: Mutex<HashMap<(String, u32), Arc<Provider>>>,
}

impl Providers {
    /// A client; `allow_http_loopback` lets issuers on loopback speak plain HTTP
    /// (tests, and a provider beside the server); a key set is fetched again on an
    /// unknown key at most every `jwks_min_refresh`.
    pub fn new(allow_http_loopback: bool, jwks_min_refresh: Duration) -> Self {
        let http = openidconnect::reqwest::ClientBuilder::new()
            .redirect(openidconnect::reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .build()
            .unwrap_or_default();
        Providers {
            http,
            allow_http_loopback,
            jwks_min_refresh,
            kept: Mutex::new(HashMap::new()),
        }
    }

    /// Checks an issuer's form: https, or http on a loopback host.
    pub fn issuer_url(&self, issuer: &str) -> Result<IssuerUrl, ProviderError> {
        let url = IssuerUrl::new(issuer.to_owned())
            .map_err(|e| ProviderError::BadIssuer(e.to_string()))?;
        let parsed = url.url();
        let loopback = matches!(parsed.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
        let scheme_ok = parsed.scheme() == "https"
            || (parsed.scheme() == "http" && loopback && self.allow_http_loopback);
        if !scheme_ok || parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(ProviderError::BadIssuer(issuer.to_owned()));
        }
        Ok(url)
    }

    /// Fetches the issuer's discovery document and key set; the document's `issuer`
    /// must be `issuer` exactly.
    pub async fn discover(&self, issuer: &str) -> Result<(), ProviderError> {
        self.fetch(issuer).await.map(|_| ())
    }

    async fn fetch(&self, issuer: &str) -> Result<Provider, ProviderError> {
        let url = self.issuer_url(issuer)?;
        let metadata = CoreProviderMetadata::discover_async(url, &self.http)
            .await
            .map_err(|e| ProviderError::Discovery(error_chain(&e)))?;
        if metadata.issuer().as_str() != issuer {
            return Err(ProviderError::Discovery(format!(
                "the document names the issuer `{}`",
                metadata.issuer().as_str()
            )));
        }
        let keys = metadata.jwks().clone();
        Ok(Provider {
            metadata,
            fetched: Instant::now(),
            keys: Mutex::new((keys, Instant::now())),
        })
    }

    async fn provider(&self, relying: &Relying<'_>) -> Result<Arc<Provider>, ProviderError> {
        let key = (relying.config.0.to_owned(), relying.config.1);
        if let Some(hit) = self
            .kept
            .lock()
            .ok()
            .and_then(|kept| kept.get(&key).cloned())
        {
            if hit.fetched.elapsed() < METADATA_TTL {
                return Ok(hit);
            }
        }
        let provider = Arc::new(self.fetch(relying.issuer).await?);
        if let Ok(mut kept) = self.kept.lock() {
            if kept.len() >= CAPACITY {
                kept.clear();
            }
            kept.retain(|(id, _), _| id != relying.config.0);
            kept.insert(key, provider.clone());
        }
        Ok(provider)
    }

    /// Starts a sign-in: the provider's authorization URL with a fresh `state`,
    /// `nonce` and PKCE S256 challenge.
    pub async fn start(
        &self,
        relying: &Relying<'_>,
        scopes: &[String],
    ) -> Result<Started, ProviderError> {
        let provider = self.provider(relying).await?;
        let client = client(&provider, relying, None)?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge);
        for scope in scopes.iter().filter(|s| s.as_str() != "openid") {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, nonce) = request.url();
        Ok(Started {
            url: url.to_string(),
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
        })
    }

    /// Exchanges the code for tokens and checks the ID token: the refusal says why
    /// one is not accepted.
    pub async fn finish(
        &self,
        relying: &Relying<'_>,
        (client_secret, groups_claim): (&str, &str),
        (code, pkce_verifier, nonce): (&str, &str, &str),
        now: DateTime<Utc>,
    ) -> Result<Verified, Refusal> {
        let provider = self
            .provider(relying)
            .await
            .map_err(|_| Refusal::ProviderError)?;
        let client =
            client(&provider, relying, Some(client_secret)).map_err(|_| Refusal::ProviderError)?;
        let answer = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|_| Refusal::ProviderError)?
            .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier.to_owned()))
            .request_async(&self.http)
            .await
            .map_err(|e| {
                tracing::info!(error = %error_chain(&e), "an identity provider refused a code exchange");
                Refusal::ProviderError
            })?;
        let token = answer.id_token().ok_or(Refusal::TokenInvalid)?;
        let mut refetched = false;
        loop {
            let keys = provider
                .keys
                .lock()
                .map(|k| k.0.clone())
                .map_err(|_| Refusal::TokenInvalid)?;
            match verify(relying, keys, token, (nonce, groups_claim), now) {
                Err(Unverified::UnknownKey) if !refetched => {
                    refetched = true;
                    if !self.refetch_keys(&provider).await {
                        return Err(Refusal::TokenInvalid);
                    }
                }
                Err(Unverified::UnknownKey) => return Err(Refusal::TokenInvalid),
                Err(Unverified::Refused(refusal)) => return Err(refusal),
                Ok(verified) => return Ok(verified),
            }
        }
    }

    /// Fetches the provider's key set again unless it was fetched within the last
    /// minute; whether it was.
    async fn refetch_keys(&self, provider: &Provider) -> bool {
        let due = provider
            .keys
            .lock()
            .map(|k| k.1.elapsed() >= self.jwks_min_refresh)
            .unwrap_or(false);
        if !due {
            return false;
        }
        match CoreJsonWebKeySet::fetch_async(provider.metadata.jwks_uri(), &self.http).await {
            Ok(keys) => {
                if let Ok(mut kept) = provider.keys.lock() {
                    *kept = (keys, Instant::now());
                }
                true
            }
            Err(e) => {
                tracing::warn!(error = %error_chain(&e), "an identity provider's key set could not be fetched again");
                if let Ok(mut kept) = provider.keys.lock() {
                    kept.1 = Instant::now();
                }
                false
            }
        }
    }
}

type Client = CoreClient<
    openidconnect::EndpointSet,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointMaybeSet,
    openidconnect::EndpointMaybeSet,
>;

fn client(
    provider: &Provider,
    relying: &Relying<'_>,
    secret: Option<&str>,
) -> Result<Client, ProviderError> {
    let redirect = RedirectUrl::new(relying.redirect_uri.to_owned())
        .map_err(|e| ProviderError::Discovery(e.to_string()))?;
    Ok(CoreClient::from_provider_metadata(
        provider.metadata.clone(),
        ClientId::new(relying.client_id.to_owned()),
        secret.map(|s| ClientSecret::new(s.to_owned())),
    )
    .set_redirect_uri(redirect))
}

enum Unverified {
    UnknownKey,
    Refused(Refusal),
}

fn verify(
    relying: &Relying<'_>,
    keys: CoreJsonWebKeySet,
    token: &CoreIdToken,
    (nonce, groups_claim): (&str, &str),
    now: DateTime<Utc>,
) -> Result<Verified, Unverified> {
    let issuer = IssuerUrl::new(relying.issuer.to_owned())
        .map_err(|_| Unverified::Refused(Refusal::IssuerMismatch))?;
    let skew = chrono::Duration::seconds(CLOCK_SKEW_SECONDS);
    // A public client's verifier: no shared secret, so HS* can never verify.
    let verifier = CoreIdTokenVerifier::new_public_client(
        ClientId::new(relying.client_id.to_owned()),
        issuer,
        keys,
    )
    .set_allowed_algs(ALLOWED_ALGS)
    // `exp` with the skew: the token is taken as seen 60 s earlier.
    .set_time_fn(move || now - skew)
    .set_issue_time_verifier_fn(move |iat| {
        if iat > now + skew {
            Err(format!("issued in the future ({iat})"))
        } else {
            Ok(())
        }
    });
    let claims = token
        .claims(&verifier, &Nonce::new(nonce.to_owned()))
        .map_err(|e| match e {
            ClaimsVerificationError::SignatureVerification(
                SignatureVerificationError::NoMatchingKey,
            ) => Unverified::UnknownKey,
            ClaimsVerificationError::InvalidIssuer(_) => {
                Unverified::Refused(Refusal::IssuerMismatch)
            }
            ClaimsVerificationError::InvalidAudience(_) => {
                Unverified::Refused(Refusal::AudienceMismatch)
            }
            ClaimsVerificationError::Expired(_) => Unverified::Refused(Refusal::TokenExpired),
            ClaimsVerificationError::InvalidNonce(_) => Unverified::Refused(Refusal::NonceMismatch),
            ClaimsVerificationError::Other(why) if why.contains("issued in the future") => {
                Unverified::Refused(Refusal::TokenExpired)
            }
            other => {
                tracing::info!(error = %other, "an ID token was refused");
                Unverified::Refused(Refusal::TokenInvalid)
            }
        })?;
    // `azp`: when present it names this client; several audiences require it.
    match claims.authorized_party() {
        Some(azp) if azp.as_str() != relying.client_id => {
            return Err(Unverified::Refused(Refusal::AudienceMismatch))
        }
        None if claims.audiences().len() > 1 => {
            return Err(Unverified::Refused(Refusal::AudienceMismatch))
        }
        _ => {}
    }
    let groups = groups_of(&token.to_string(), groups_claim);
    Ok(Verified {
        issuer: claims.issuer().as_str().to_owned(),
        subject: claims.subject().as_str().to_owned(),
        email: claims.email().map(|e| e.as_str().to_owned()),
        email_verified: claims.email_verified().unwrap_or(false),
        name: claims
            .name()
            .and_then(|n| n.get(None))
            .map(|n| n.as_str().chars().take(200).collect()),
        groups,
    })
}

/// The groups claim of a token whose signature was checked: its payload read again
/// as JSON for the one claim the standard claims do not carry. An array of strings
/// (others ignored) or one string; at most `MAX_GROUPS`, each at most 256 bytes.
fn groups_of(compact: &str, claim: &str) -> Vec<String> {
    use base64::Engine;
    let payload = compact
        .split('.')
        .nth(1)
        .and_then(|p| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p)
                .ok()
        })
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok());
    let Some(value) = payload.as_ref().and_then(|p| p.get(claim)) else {
        return Vec::new();
    };
    let items: Vec<&serde_json::Value> = match value {
        serde_json::Value::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    items
        .into_iter()
        .filter_map(serde_json::Value::as_str)
        .filter(|g| g.len() <= 256)
        .take(tenancy::sso::MAX_GROUPS)
        .map(str::to_owned)
        .collect()
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text.chars().take(500).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issuers_are_https_or_loopback_http() {
        let minute = Duration::from_secs(60);
        let providers = Providers::new(true, minute);
        assert!(providers
            .issuer_url("https://idp.example.com/realms/acme")
            .is_ok());
        assert!(providers.issuer_url("http://127.0.0.1:9400").is_ok());
        assert!(providers.issuer_url("http://idp.example.com").is_err());
        assert!(providers
            .issuer_url("https://idp.example.com/?tenant=x")
            .is_err());
        assert!(providers.issuer_url("not a url").is_err());
        assert!(Providers::new(false, minute)
            .issuer_url("http://127.0.0.1:9400")
            .is_err());
    }

    #[test]
    fn groups_are_read_bounded() {
        use base64::Engine;
        let payload =
            serde_json::json!({"groups": ["eng", 7, "ops", "x".repeat(300)], "role": "admin"});
        let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(payload.to_string());
        let compact = format!("e30.{encoded}.sig");
        assert_eq!(groups_of(&compact, "groups"), ["eng", "ops"]);
        assert_eq!(groups_of(&compact, "role"), ["admin"]);
        assert!(groups_of(&compact, "missing").is_empty());
        assert!(groups_of("garbage", "groups").is_empty());
    }
}

/// Single sign-on's clients on one replica: the providers (and what is kept of
/// them) and the TXT lookup that proves domains (the system's resolver, or one the
/// embedding program or a test sets).
#[derive(Debug)]
pub struct SsoClients {
    /// The OpenID providers.
    pub providers: Providers,
    txt: std::sync::RwLock<Arc<dyn super::dns::TxtLookup>>,
}

impl SsoClients {
    /// The clients; as [`Providers::new`].
    pub fn new(allow_http_loopback: bool, jwks_min_refresh: Duration) -> Self {
        SsoClients {
            providers: Providers::new(allow_http_loopback, jwks_min_refresh),
            txt: std::sync::RwLock::new(Arc::new(super::dns::SystemResolver)),
        }
    }

    /// The TXT lookup in use.
    pub fn txt(&self) -> Arc<dyn super::dns::TxtLookup> {
        match self.txt.read() {
            Ok(txt) => txt.clone(),
            Err(_) => Arc::new(super::dns::SystemResolver),
        }
    }

    /// Replaces the TXT lookup.
    pub fn set_txt(&self, lookup: Arc<dyn super::dns::TxtLookup>) {
        if let Ok(mut txt) = self.txt.write() {
            *txt = lookup;
        }
    }
}
