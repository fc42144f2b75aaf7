//! Key-encryption keys behind one small trait: wrap a data key, unwrap it, describe
//! the key's state. [`Local`] is the platform's key (`SECRETS_ENCRYPTION_KEY`);
//! [`super::aws_kms::AwsKms`] and [`super::vault::VaultTransit`] are keys a customer
//! holds.

use std::future::Future;
use std::pin::Pin;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;

use super::sealed::Key;

/// What a provider answers, later.
pub type KeyFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, KeyFailure>> + Send + 'a>>;

/// Why a key-encryption key could not be used, as a class an operator acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// The key is disabled.
    Disabled,
    /// The key is scheduled for deletion (or deleted).
    PendingDeletion,
    /// The platform is no longer allowed to use the key.
    AccessDenied,
    /// No such key.
    NotFound,
    /// The provider did not answer (network, timeout, its own outage).
    Unreachable,
    /// The provider refused otherwise (a wrapped key it does not recognize).
    Refused,
}

impl FailureClass {
    /// As the API and the audit trail spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Disabled => "disabled",
            FailureClass::PendingDeletion => "pending_deletion",
            FailureClass::AccessDenied => "access_denied",
            FailureClass::NotFound => "not_found",
            FailureClass::Unreachable => "unreachable",
            FailureClass::Refused => "refused",
        }
    }
}

/// A provider's failure: its class, and what it said (never key material).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {detail}", .class.as_str())]
pub struct KeyFailure {
    /// The class.
    pub class: FailureClass,
    /// What the provider said.
    pub detail: String,
}

impl KeyFailure {
    pub(crate) fn new(class: FailureClass, detail: impl Into<String>) -> KeyFailure {
        KeyFailure {
            class,
            detail: detail.into(),
        }
    }
}

/// A key-encryption key.
pub trait KeyProvider: Send + Sync + std::fmt::Debug {
    /// The reference stored beside a data key it wraps: `local:<fingerprint>`,
    /// `aws-kms:<arn>`, `vault-transit:<name>`.
    fn reference(&self) -> String;

    /// Wraps `key`, the data key of organization `org_id` (bound to it where the
    /// provider can bind: AES-GCM's associated data, KMS's encryption context,
    /// Vault's derivation context).
    fn wrap<'a>(&'a self, org_id: &'a str, key: &'a Key) -> KeyFuture<'a, String>;

    /// Unwraps what [`KeyProvider::wrap`] made for `org_id`.
    fn unwrap<'a>(&'a self, org_id: &'a str, wrapped: &'a str) -> KeyFuture<'a, Key>;

    /// Whether the key is usable, as its provider describes it (enabled, not
    /// scheduled for deletion, reachable).
    fn describe(&self) -> KeyFuture<'_, ()>;
}

/// Wraps and unwraps a probe with `provider` for `org_id`: whether the key works.
pub async fn probe(provider: &dyn KeyProvider, org_id: &str) -> Result<(), KeyFailure> {
    provider.describe().await?;
    let probe = Key::generate().map_err(|e| KeyFailure::new(FailureClass::Refused, e.0))?;
    let wrapped = provider.wrap(org_id, &probe).await?;
    let back = provider.unwrap(org_id, &wrapped).await?;
    if back == probe {
        Ok(())
    } else {
        Err(KeyFailure::new(
            FailureClass::Refused,
            "the key unwrapped something else than it wrapped",
        ))
    }
}

/// The platform's key (`SECRETS_ENCRYPTION_KEY`): AES-256-GCM, the organization's id
/// as associated data.
#[derive(Debug, Clone)]
pub struct Local {
    key: Key,
}

impl Local {
    /// The provider of a platform key.
    pub fn new(key: Key) -> Local {
        Local { key }
    }

    fn aad(org_id: &str) -> Vec<u8> {
        [b"compliance-data-key/".as_slice(), org_id.as_bytes()].concat()
    }
}

impl KeyProvider for Local {
    fn reference(&self) -> String {
        format!("local:{}", self.key.fingerprint())
    }

    fn wrap<'a>(&'a self, org_id: &'a str, key: &'a Key) -> KeyFuture<'a, String> {
        Box::pin(async move {
            let sealed = self
                .key
                .encrypt(&Local::aad(org_id), key.bytes())
                .map_err(|e| KeyFailure::new(FailureClass::Refused, e.0))?;
            Ok(BASE64.encode(sealed))
        })
    }

    fn unwrap<'a>(&'a self, org_id: &'a str, wrapped: &'a str) -> KeyFuture<'a, Key> {
        Box::pin(async move {
            let bytes = BASE64
                .decode(wrapped)
                .map_err(|_| KeyFailure::new(FailureClass::Refused, "not base64"))?;
            let plain = self
                .key
                .decrypt(&Local::aad(org_id), &bytes)
                .map_err(|e| KeyFailure::new(FailureClass::Refused, e.0))?;
            Key::from_slice(&plain)
                .ok_or_else(|| KeyFailure::new(FailureClass::Refused, "not a 32-byte key"))
        })
    }

    fn describe(&self) -> KeyFuture<'_, ()> {
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_platform_key_wraps_for_one_organization() {
        let local = Local::new(Key::generate().unwrap());
        let data = Key::generate().unwrap();
        let wrapped = local.wrap("org-a", &data).await.unwrap();
        assert_eq!(local.unwrap("org-a", &wrapped).await.unwrap(), data);
        let moved = local.unwrap("org-b", &wrapped).await.unwrap_err();
        assert_eq!(moved.class, FailureClass::Refused);
        probe(&local, "org-a").await.unwrap();
        assert!(local.reference().starts_with("local:"));
    }
}
