//! A registry's `WWW-Authenticate` challenge (RFC 7235 auth-params) and the answer
//! of its token endpoint (the distribution token protocol).

use serde::Deserialize;

/// How a registry asks to be authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    /// HTTP basic authentication with the configured credentials.
    Basic,
    /// A bearer token from `realm`, asked for `service` and `scope`.
    Bearer {
        /// The token endpoint.
        realm: String,
        /// The `service` parameter, when given.
        service: Option<String>,
        /// The scopes asked (space-separated in the header; one `scope` parameter
        /// each in the token request).
        scopes: Vec<String>,
    },
}

impl Challenge {
    /// Parses the header's value; `None` for a scheme this client does not speak
    /// or a bearer challenge without a realm.
    ///
    /// ```
    /// use oci::auth::Challenge;
    /// let c = Challenge::parse(r#"Bearer realm="https://auth.example/token",service="registry",scope="repository:a/b:pull,push repository:c:pull""#);
    /// assert_eq!(c, Some(Challenge::Bearer {
    ///     realm: "https://auth.example/token".into(),
    ///     service: Some("registry".into()),
    ///     scopes: vec!["repository:a/b:pull,push".into(), "repository:c:pull".into()],
    /// }));
    /// assert_eq!(Challenge::parse(r#"Basic realm="Registry""#), Some(Challenge::Basic));
    /// assert_eq!(Challenge::parse("Negotiate"), None);
    /// ```
    pub fn parse(header: &str) -> Option<Challenge> {
        let header = header.trim();
        let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return Some(Challenge::Basic);
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let params = auth_params(rest);
        let find = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        Some(Challenge::Bearer {
            realm: find("realm")?,
            service: find("service"),
            scopes: find("scope")
                .map(|s| s.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default(),
        })
    }
}

/// `name=value` or `name="quoted \" value"` pairs separated by commas.
fn auth_params(text: &str) -> Vec<(String, String)> {
    let mut params = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let name: String = std::iter::from_fn(|| chars.next_if(|c| *c != '=' && *c != ','))
            .collect::<String>()
            .trim()
            .to_owned();
        if name.is_empty() || chars.next() != Some('=') {
            return params;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            value = std::iter::from_fn(|| chars.next_if(|c| *c != ','))
                .collect::<String>()
                .trim()
                .to_owned();
        }
        params.push((name, value));
    }
}

/// The token endpoint's answer: `token` or `access_token`, and its lifetime.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TokenAnswer {
    /// The token (`token`).
    #[serde(default)]
    pub token: Option<String>,
    /// The token (`access_token`, the OAuth 2.0 spelling).
    #[serde(default)]
    pub access_token: Option<String>,
    /// Seconds the token lives (60 when absent, as the protocol says).
    #[serde(default)]
    pub expires_in: Option<u64>,
}

impl TokenAnswer {
    /// The token, whichever field carries it.
    pub fn bearer(&self) -> Option<&str> {
        self.token
            .as_deref()
            .or(self.access_token.as_deref())
            .filter(|t| !t.is_empty())
    }

    /// Its lifetime in seconds (60 by default, at least 1).
    pub fn lifetime(&self) -> u64 {
        self.expires_in.unwrap_or(60).max(1)
    }
}
