//! Keys' settings: the platform key (`SECRETS_ENCRYPTION_KEY`, and the one it
//! replaces, `SECRETS_ENCRYPTION_KEY_PREVIOUS`), how AWS KMS is reached
//! (`AWS_KMS_ENDPOINT_URL`, the platform's AWS credentials) and how often customer
//! keys are checked (`KMS_CHECK_INTERVAL_SECONDS`).

use std::time::Duration;

use super::Reader;
use crate::keys::Key;

/// A secret of the configuration: its `Debug` and `Display` print nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// A secret of the configuration.
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The secret itself, for the one call that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// The platform's AWS credentials, from the standard variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: String,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: Secret,
    /// `AWS_SESSION_TOKEN` (temporary credentials).
    pub session_token: Option<Secret>,
}

/// Keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySettings {
    /// `SECRETS_ENCRYPTION_KEY` (32 bytes, base64 or 64 hex digits): the platform's
    /// key-encryption key, which wraps every organization's data key unless the
    /// organization holds its own key. Unset, secrets are stored as they are (and an
    /// organization with a customer key still seals its own).
    pub platform: Option<Key>,
    /// `SECRETS_ENCRYPTION_KEY_PREVIOUS`: the platform key `SECRETS_ENCRYPTION_KEY`
    /// replaces; data keys wrapped by it are rewrapped by the background pass, and
    /// `enc:v1` values sealed with it still open.
    pub previous: Option<Key>,
    /// `AWS_KMS_ENDPOINT_URL`: where AWS KMS answers (default: the key's region,
    /// `https://kms.<region>.amazonaws.com`).
    pub aws_kms_endpoint: Option<String>,
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`.
    pub aws_credentials: Option<AwsCredentials>,
    /// `KMS_CHECK_INTERVAL_SECONDS` (300): how often every customer key is checked
    /// (a key that fails three times in a row orphans its organization).
    pub check_interval: Duration,
}

fn key(r: &mut Reader<'_>, name: &str) -> Option<Key> {
    let text = r.raw(name).filter(|v| !v.is_empty())?;
    let parsed = Key::from_text(text);
    if parsed.is_none() {
        r.fail(
            name,
            "the key must be 32 bytes, as base64 or hex".to_owned(),
        );
    }
    parsed
}

/// Reads the keys' section.
pub(super) fn key_settings(r: &mut Reader<'_>) -> KeySettings {
    let platform = key(r, "SECRETS_ENCRYPTION_KEY");
    let previous = key(r, "SECRETS_ENCRYPTION_KEY_PREVIOUS");
    if previous.is_some() && platform.is_none() {
        r.fail(
            "SECRETS_ENCRYPTION_KEY_PREVIOUS",
            "is the key SECRETS_ENCRYPTION_KEY replaces, and SECRETS_ENCRYPTION_KEY is not set"
                .to_owned(),
        );
    }
    let endpoint = r
        .raw("AWS_KMS_ENDPOINT_URL")
        .filter(|v| !v.is_empty())
        .map(str::to_owned);
    let aws_kms_endpoint = match endpoint {
        None => None,
        Some(url) => {
            let ok = reqwest::Url::parse(&url)
                .is_ok_and(|u| ["http", "https"].contains(&u.scheme()) && u.host_str().is_some());
            if !ok {
                r.fail(
                    "AWS_KMS_ENDPOINT_URL",
                    format!("`{url}` is not an http(s) address with a host"),
                );
            }
            Some(url)
        }
    };
    let text =
        |r: &Reader<'_>, name: &str| r.raw(name).filter(|v| !v.is_empty()).map(str::to_owned);
    let aws_credentials = match (
        text(r, "AWS_ACCESS_KEY_ID"),
        text(r, "AWS_SECRET_ACCESS_KEY"),
    ) {
        (Some(access_key_id), Some(secret)) => Some(AwsCredentials {
            access_key_id,
            secret_access_key: Secret(secret),
            session_token: text(r, "AWS_SESSION_TOKEN").map(Secret),
        }),
        _ => None,
    };
    KeySettings {
        platform,
        previous,
        aws_kms_endpoint,
        aws_credentials,
        check_interval: Duration::from_secs(r.positive("KMS_CHECK_INTERVAL_SECONDS", 300)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let secret = Secret("hunter2".to_owned());
        assert_eq!(format!("{secret} {secret:?}"), "*** ***");
        let credentials = AwsCredentials {
            access_key_id: "AKID".to_owned(),
            secret_access_key: secret.clone(),
            session_token: Some(secret),
        };
        assert!(!format!("{credentials:?}").contains("hunter2"));
    }

    /// Every secret the configuration reads stays out of its `Debug`.
    #[test]
    fn the_configuration_prints_no_secret() {
        let key = "11".repeat(32);
        let vars = [
            ("JWT_SECRET", "jwt-secret-0123456789"),
            ("SECRETS_ENCRYPTION_KEY", key.as_str()),
            ("SECRETS_ENCRYPTION_KEY_PREVIOUS", "22".repeat(32).as_str()),
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "aws-secret-key"),
            ("AWS_SESSION_TOKEN", "aws-session-token"),
            (
                "SMTP_URL",
                "smtps://mailer:smtp-password@mail.example.com:465",
            ),
            ("PLATFORM_IDENTIFIER", "ops@example.com"),
            ("PLATFORM_PASSWORD", "platform-password"),
            ("REGISTRY_URL", "https://registry.example.com"),
            ("REGISTRY_PASSWORD", "registry-password"),
            ("AI_OPENAI_API_KEY", "sk-openai-key"),
            ("AI_OPENAI_MODELS", "gpt-4o"),
            ("AI_ANTHROPIC_API_KEY", "sk-ant-key"),
            ("AI_ANTHROPIC_MODELS", "claude-sonnet-4"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let config = crate::config::Config::from_vars(vars).unwrap();
        let printed = format!("{config:?}");
        for secret in [
            "jwt-secret-0123456789",
            &key,
            &"22".repeat(32),
            "aws-secret-key",
            "aws-session-token",
            "smtp-password",
            "platform-password",
            "registry-password",
            "sk-openai-key",
            "sk-ant-key",
        ] {
            assert!(!printed.contains(secret), "{secret} is printed");
        }
    }
}
