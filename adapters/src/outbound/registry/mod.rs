//! The OCI registry client: the distribution specification's calls over reqwest,
//! with the authentication the registry asks for (basic, or a bearer token from its
//! token endpoint), a timeout on every call, and bounded reads. Every manifest read
//! is verified against its digest; a blob that has to be carried over (a registry
//! that answers a mount with an upload session) is streamed in chunks, hashed on
//! the way, and its session is cancelled whenever the upload does not complete.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use oci::auth::{Challenge, TokenAnswer};
use oci::{Digest, Manifest, MediaType, Repository, Tag, Target, MAX_MANIFEST_BYTES};
use reqwest::header::{
    HeaderMap, ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE,
};
use reqwest::{Method, StatusCode, Url};

pub use crate::config::RegistrySettings;

mod blobs;
mod manifests;

/// Connecting to the registry.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A call that moves no blob (manifests, checks, mounts, deletes, tags).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// A call that moves a blob's bytes (one chunk of an upload, a blob read).
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(600);
/// The size of an upload chunk.
const CHUNK_BYTES: usize = 8 * 1024 * 1024;
/// The most of an error body or token answer read.
const SMALL_BODY: usize = 64 * 1024;
/// Tag list pages followed (100 tags each).
const MAX_TAG_PAGES: usize = 10;
/// Bearer tokens kept (one per scope set); past it, all are dropped.
const MAX_TOKENS: usize = 256;

/// What went wrong with the registry, as the workflows tell it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// `REGISTRY_URL` is unset.
    #[error("no image registry is configured (REGISTRY_URL)")]
    NotConfigured,
    /// The manifest, repository or blob does not exist.
    #[error("{0} was not found in the registry")]
    NotFound(String),
    /// The registry refuses deletes (405: `storage.delete.enabled` is off).
    #[error("the registry does not allow deletes")]
    DeletesDisabled,
    /// No answer, an answer too late, or a 5xx: the registry cannot be used now.
    #[error("the registry is unavailable: {0}")]
    Unreachable(String),
    /// Bytes that do not hash to the digest they were asked or announced by.
    #[error("{what}: the registry's content has digest {actual}, not {expected}")]
    DigestMismatch {
        /// What was checked.
        what: String,
        /// The digest expected.
        expected: String,
        /// The digest found.
        actual: String,
    },
    /// A manifest this server does not copy.
    #[error("{0}")]
    Unsupported(String),
    /// The registry refused the call (credentials, a manifest it finds invalid...).
    #[error("the registry refused {call}: {status} {code} {message}")]
    Refused {
        /// Which call.
        call: String,
        /// Its HTTP status.
        status: u16,
        /// The registry's error code (`DENIED`, `MANIFEST_INVALID`...), if any.
        code: String,
        /// The registry's message.
        message: String,
    },
    /// Deleting would also untag other tags of the same manifest.
    #[error("{digest} is also tagged {}; pass force=true to delete it and every tag of it", .tags.join(", "))]
    SharedDigest {
        /// The manifest.
        digest: String,
        /// The other tags.
        tags: Vec<String>,
    },
}

/// A manifest as fetched: its bytes (exactly as stored), digest and parse.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The verified digest.
    pub digest: Digest,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// What it is and references.
    pub manifest: Manifest,
}

/// How a blob reached the target repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mount {
    /// The registry linked it from the source repository (201).
    Mounted,
    /// The registry opened an upload session instead (202): the bytes must be sent.
    Session(Url),
}

/// The registry client.
#[derive(Debug)]
pub struct RegistryClient {
    base: Url,
    credentials: Option<(String, String)>,
    http: reqwest::Client,
    auth: Mutex<Auth>,
}

#[derive(Debug, Default)]
struct Auth {
    /// The registry asked for basic authentication once: send it with every call.
    basic: bool,
    /// Bearer tokens by the scope key of the calls they were fetched for.
    tokens: HashMap<String, (String, Instant)>,
}

/// The access a call needs, as the token scopes of the distribution protocol.
#[derive(Debug, Clone)]
struct Scope(String);

impl Scope {
    fn pull(repository: &Repository) -> Scope {
        Scope(format!("repository:{repository}:pull"))
    }
    fn push(repository: &Repository) -> Scope {
        Scope(format!("repository:{repository}:pull,push"))
    }
    fn mount(target: &Repository, source: &Repository) -> Scope {
        Scope(format!(
            "repository:{target}:pull,push repository:{source}:pull"
        ))
    }
    fn delete(repository: &Repository) -> Scope {
        Scope(format!("repository:{repository}:delete,pull"))
    }
}

/// One call: its method, address, headers and body (sent again after a challenge).
struct Call {
    name: String,
    method: Method,
    url: Url,
    headers: Vec<(reqwest::header::HeaderName, String)>,
    body: Option<Vec<u8>>,
    timeout: Duration,
}

impl Call {
    fn new(name: impl Into<String>, method: Method, url: Url) -> Call {
        Call {
            name: name.into(),
            method,
            url,
            headers: Vec::new(),
            body: None,
            timeout: CALL_TIMEOUT,
        }
    }
    fn header(mut self, name: reqwest::header::HeaderName, value: impl Into<String>) -> Call {
        self.headers.push((name, value.into()));
        self
    }
    fn body(mut self, body: Vec<u8>) -> Call {
        self.body = Some(body);
        self
    }
    fn timeout(mut self, timeout: Duration) -> Call {
        self.timeout = timeout;
        self
    }
}

fn unreachable(error: &reqwest::Error) -> RegistryError {
    let kind = if error.is_timeout() {
        "no answer in time"
    } else if error.is_connect() {
        "cannot connect"
    } else {
        "the connection failed"
    };
    RegistryError::Unreachable(format!("{kind}: {error}"))
}

impl RegistryClient {
    /// A client of the registry at `settings.url`.
    pub fn new(settings: &RegistrySettings) -> Result<RegistryClient, String> {
        let mut base = Url::parse(&settings.url).map_err(|e| format!("not a URL: {e}"))?;
        if !["http", "https"].contains(&base.scheme()) || base.host_str().is_none() {
            return Err("must be an http(s) address with a host".to_owned());
        }
        base.set_path("/");
        base.set_query(None);
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            // A blob read may be redirected to the registry's storage; reqwest drops
            // the Authorization header when a redirect leaves the host.
            .redirect(reqwest::redirect::Policy::limited(5))
            .no_proxy()
            .build()
            .map_err(|e| format!("the HTTP client: {e}"))?;
        let credentials = match (&settings.username, &settings.password) {
            (Some(user), password) => Some((
                user.clone(),
                password
                    .as_ref()
                    .map(|p| p.expose().to_owned())
                    .unwrap_or_default(),
            )),
            (None, _) => None,
        };
        Ok(RegistryClient {
            base,
            credentials,
            http,
            auth: Mutex::new(Auth::default()),
        })
    }

    /// The registry's base URL.
    pub fn base(&self) -> &Url {
        &self.base
    }

    /// Whether `url` is on the registry's own origin (scheme, host and port): the
    /// only place its credentials and tokens are ever sent (a token endpoint is
    /// checked by its own rule in `fetch_token`).
    fn is_own(&self, url: &Url) -> bool {
        url.scheme() == self.base.scheme()
            && url.host_str() == self.base.host_str()
            && url.port_or_known_default() == self.base.port_or_known_default()
    }

    /// `url` if the registry named an address of its own origin; anything else (a
    /// `Link` or `Location` to another host) is refused as a registry error.
    fn own(&self, call: &str, url: Url) -> Result<Url, RegistryError> {
        if self.is_own(&url) {
            return Ok(url);
        }
        Err(RegistryError::Refused {
            call: call.to_owned(),
            status: 200,
            code: "FOREIGN_ADDRESS".to_owned(),
            message: format!(
                "the registry pointed at `{}`, which is not its own origin; its credentials go nowhere else",
                url.host_str().unwrap_or_default()
            ),
        })
    }

    fn url(&self, path: &str) -> Result<Url, RegistryError> {
        self.base
            .join(path)
            .map_err(|e| RegistryError::Unreachable(format!("an address of the registry: {e}")))
    }

    fn manifest_url(&self, repository: &Repository, target: &str) -> Result<Url, RegistryError> {
        self.url(&format!("v2/{repository}/manifests/{target}"))
    }

    fn blob_url(&self, repository: &Repository, digest: &Digest) -> Result<Url, RegistryError> {
        self.url(&format!("v2/{repository}/blobs/{digest}"))
    }

    /// Sends a call with what the registry asked for before; on a 401, answers its
    /// challenge once and sends it again.
    async fn send(&self, call: &Call, scope: &Scope) -> Result<reqwest::Response, RegistryError> {
        let response = self.send_once(call, scope).await?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        let challenge = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(Challenge::parse);
        match challenge {
            Some(Challenge::Basic) if self.credentials.is_some() => {
                if let Ok(mut auth) = self.auth.lock() {
                    auth.basic = true;
                }
            }
            Some(Challenge::Bearer {
                realm,
                service,
                scopes,
            }) => {
                let (token, lifetime) = self
                    .fetch_token(&realm, service.as_deref(), &scopes)
                    .await?;
                if let Ok(mut auth) = self.auth.lock() {
                    if auth.tokens.len() >= MAX_TOKENS {
                        auth.tokens.clear();
                    }
                    // Renewed ten seconds before it expires.
                    let until = Instant::now() + lifetime.saturating_sub(Duration::from_secs(10));
                    auth.tokens.insert(scope.0.clone(), (token, until));
                }
            }
            _ => return Err(refusal(&call.name, response).await),
        }
        let again = self.send_once(call, scope).await?;
        if again.status() == StatusCode::UNAUTHORIZED {
            return Err(refusal(&call.name, again).await);
        }
        Ok(again)
    }

    async fn send_once(
        &self,
        call: &Call,
        scope: &Scope,
    ) -> Result<reqwest::Response, RegistryError> {
        // Credentials are attached below: never to another origin.
        self.own(&call.name, call.url.clone())?;
        let mut request = self
            .http
            .request(call.method.clone(), call.url.clone())
            .timeout(call.timeout);
        for (name, value) in &call.headers {
            request = request.header(name, value);
        }
        let (basic, bearer) = match self.auth.lock() {
            Ok(auth) => (
                auth.basic,
                auth.tokens
                    .get(&scope.0)
                    .filter(|(_, until)| *until > Instant::now())
                    .map(|(token, _)| token.clone()),
            ),
            Err(_) => (false, None),
        };
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        } else if let (true, Some((user, password))) = (basic, &self.credentials) {
            request = request.basic_auth(user, Some(password));
        }
        if let Some(body) = &call.body {
            request = request
                .header(CONTENT_LENGTH, body.len())
                .body(body.clone());
        }
        let response = request.send().await.map_err(|e| unreachable(&e))?;
        if response.status().is_server_error() {
            return Err(RegistryError::Unreachable(format!(
                "{} answered {}",
                call.name,
                response.status()
            )));
        }
        Ok(response)
    }

    /// A token from the registry's token endpoint. The endpoint is the registry's
    /// own host, or a public address: a registry cannot point the server's
    /// credentials at a private one.
    async fn fetch_token(
        &self,
        realm: &str,
        service: Option<&str>,
        scopes: &[String],
    ) -> Result<(String, Duration), RegistryError> {
        let refused = |why: String| RegistryError::Refused {
            call: "the token endpoint".to_owned(),
            status: 401,
            code: "UNAUTHORIZED".to_owned(),
            message: why,
        };
        let mut url = Url::parse(realm).map_err(|e| refused(format!("realm `{realm}`: {e}")))?;
        if !["http", "https"].contains(&url.scheme()) {
            return Err(refused(format!(
                "realm `{realm}` is not an http(s) address"
            )));
        }
        if url.host_str() != self.base.host_str() {
            let host = url.host_str().unwrap_or_default().to_owned();
            let port = url.port_or_known_default().unwrap_or(443);
            let addresses = tokio::time::timeout(
                CONNECT_TIMEOUT,
                tokio::net::lookup_host((host.as_str(), port)),
            )
            .await
            .map_err(|_| RegistryError::Unreachable(format!("`{host}` did not resolve in time")))?
            .map_err(|e| RegistryError::Unreachable(format!("`{host}` does not resolve: {e}")))?;
            if addresses
                .into_iter()
                .any(|a| !crate::notify::is_public(a.ip()))
            {
                return Err(refused(format!(
                    "the token endpoint `{host}` is neither the registry's host nor a public address"
                )));
            }
        }
        {
            let mut query = url.query_pairs_mut();
            if let Some(service) = service {
                query.append_pair("service", service);
            }
            for scope in scopes {
                query.append_pair("scope", scope);
            }
        }
        let mut request = self.http.get(url).timeout(CALL_TIMEOUT);
        if let Some((user, password)) = &self.credentials {
            request = request.basic_auth(user, Some(password));
        }
        let response = request.send().await.map_err(|e| unreachable(&e))?;
        let status = response.status();
        if status.is_server_error() {
            return Err(RegistryError::Unreachable(format!(
                "the token endpoint answered {status}"
            )));
        }
        if !status.is_success() {
            return Err(refused(format!("the token endpoint answered {status}")));
        }
        let bytes = read_bounded(response, SMALL_BODY).await?;
        let answer: TokenAnswer = serde_json::from_slice(&bytes)
            .map_err(|e| refused(format!("the token endpoint's answer: {e}")))?;
        let token = answer
            .bearer()
            .ok_or_else(|| refused("the token endpoint answered no token".to_owned()))?;
        Ok((token.to_owned(), Duration::from_secs(answer.lifetime())))
    }

    fn location(&self, call: &str, response: &reqwest::Response) -> Result<Url, RegistryError> {
        let refused = |why: &str| RegistryError::Refused {
            call: call.to_owned(),
            status: response.status().as_u16(),
            code: "NO_LOCATION".to_owned(),
            message: why.to_owned(),
        };
        let location = response
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| refused("an upload session without a Location"))?;
        let url = self
            .base
            .join(location)
            .map_err(|_| refused("an upload session at an address that does not parse"))?;
        self.own(call, url)
    }
}

fn digest_header(headers: &HeaderMap) -> Option<Digest> {
    headers
        .get("docker-content-digest")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| Digest::parse(v.trim()).ok())
}

/// Reads at most `limit` bytes of a body; more is an error, not a truncation.
async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, RegistryError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| unreachable(&e))? {
        if bytes.len() + chunk.len() > limit {
            return Err(RegistryError::Unsupported(format!(
                "the registry answered more than {limit} bytes"
            )));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// The registry's refusal of a call, with its error code (`{"errors": [{code, message}]}`).
async fn refusal(call: &str, response: reqwest::Response) -> RegistryError {
    #[derive(serde::Deserialize)]
    struct Errors {
        #[serde(default)]
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    let status = response.status().as_u16();
    let bytes = read_bounded(response, SMALL_BODY).await.unwrap_or_default();
    let first = serde_json::from_slice::<Errors>(&bytes)
        .ok()
        .and_then(|e| e.errors.into_iter().next());
    let (code, message) = first.map_or_else(
        || (String::new(), String::new()),
        |e| (e.code, e.message.chars().take(500).collect()),
    );
    RegistryError::Refused {
        call: call.to_owned(),
        status,
        code,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_http_address_with_a_host_is_a_registry() {
        let settings = |url: &str| RegistrySettings {
            url: url.to_owned(),
            username: None,
            password: None,
        };
        assert!(RegistryClient::new(&settings("http://127.0.0.1:5000")).is_ok());
        assert!(RegistryClient::new(&settings("ftp://registry")).is_err());
        assert!(RegistryClient::new(&settings("registry:5000")).is_err());
        let client = RegistryClient::new(&settings("https://r.example/some/path?x=1")).unwrap();
        assert_eq!(client.base().as_str(), "https://r.example/");
    }
}
