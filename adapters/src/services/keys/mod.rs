//! Secrets under each organization's own key: sealing and opening (every secret the
//! platform keeps goes through [`seal`] and [`open`]), customer key configurations
//! (a super-admin's `PUT`/`DELETE`, audited), the checker that orphans an
//! organization whose key stopped working and sees it recover, and the background
//! pass that rewrites older values and rewraps data keys after a platform key's
//! rotation.
//!
//! Every organization has its own data keys (`org_data_keys`, versions 1, 2, ...),
//! wrapped by its root organization's customer key when it has one, else by the
//! platform key. A team's secrets are under its own data key, wrapped by its root's
//! key-encryption key. Without a platform key and without a customer key, secrets are
//! stored as they are (as before).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::json;

use super::context::{event_on, Caller};
use super::{ServiceError, ServiceResult};
use crate::config::Config;
use crate::keys::aws_kms::AwsKms;
use crate::keys::provider::{probe, Local};
use crate::keys::sealed::{self, Key, Stored};
use crate::keys::vault::{self, VaultTransit};
use crate::keys::Keyring;
use crate::keys::{Binding, FailureClass, KeyFailure, KeyProvider, OrgKeys, PLATFORM_SCOPE};
use crate::storage::{unit_of_work, DataKeyRow, OrgRecord, SecretColumn, Store, SECRET_COLUMNS};
mod configuration;
pub use configuration::*;

/// An organization's customer key configuration, as stored (the token sealed).
pub use crate::storage::KeyConfigRow;

/// Failed checks in a row that orphan an organization.
pub const ORPHAN_AFTER: u32 = 3;

/// The table, column and row of a configuration's Vault token (sealed under the
/// platform key itself: the organization's data key is what the token unlocks).
fn token_binding(org_id: &str) -> Binding<'_> {
    Binding {
        org_id: PLATFORM_SCOPE,
        table: "org_key_configs",
        column: "token",
        row_id: org_id,
    }
}

/// The platform key's provider, when `SECRETS_ENCRYPTION_KEY` is set.
fn platform(config: &Config) -> Option<Local> {
    config.keys.platform.clone().map(Local::new)
}

/// The platform key (current or previous) that a `local:<fingerprint>` reference
/// names.
fn platform_named(config: &Config, reference: &str) -> Option<Local> {
    let keys = &config.keys;
    [keys.platform.as_ref(), keys.previous.as_ref()]
        .into_iter()
        .flatten()
        .map(|key| Local::new(key.clone()))
        .find(|local| local.reference() == reference)
}

fn unavailable(failure: &KeyFailure) -> ServiceError {
    ServiceError::KeyUnavailable(failure.class.as_str().to_owned())
}

/// The provider of a stored customer key configuration.
fn customer(
    settings: &Config,
    keyring: &Keyring,
    config: &KeyConfigRow,
) -> ServiceResult<Arc<dyn KeyProvider>> {
    match config.provider.as_str() {
        "aws-kms" => {
            let kms = AwsKms::new(
                keyring.client(),
                &config.key_ref,
                settings.keys.aws_kms_endpoint.as_deref(),
                settings.keys.aws_credentials.clone(),
            )
            .map_err(|why| ServiceError::Broken(format!("a stored key ARN: {why}")))?;
            Ok(Arc::new(kms))
        }
        "vault-transit" => {
            let token = match &config.token {
                None => String::new(),
                Some(stored) => open_platform(settings, &token_binding(&config.org_id), stored)?,
            };
            let address = config.address.as_deref().unwrap_or_default();
            Ok(Arc::new(VaultTransit::new(
                keyring.client(),
                address,
                &config.key_ref,
                &token,
            )))
        }
        other => Err(ServiceError::Broken(format!(
            "a key configuration names the provider `{other}`"
        ))),
    }
}

/// Seals a configuration value under the platform key itself (as is without one).
fn seal_platform(config: &Config, binding: &Binding<'_>, plain: &str) -> ServiceResult<String> {
    match &config.keys.platform {
        Some(key) => {
            sealed::seal(key, 0, binding, plain).map_err(|e| ServiceError::Broken(e.to_string()))
        }
        None => Ok(plain.to_owned()),
    }
}

fn open_platform(config: &Config, binding: &Binding<'_>, stored: &str) -> ServiceResult<String> {
    match Stored::parse(stored).map_err(|e| ServiceError::Broken(e.to_string()))? {
        Stored::Plain(text) => Ok(text.to_owned()),
        Stored::Legacy(body) => open_legacy(config, body),
        Stored::Sealed { body, .. } => {
            let keys = &config.keys;
            [keys.platform.as_ref(), keys.previous.as_ref()]
                .into_iter()
                .flatten()
                .find_map(|key| sealed::open(key, binding, body).ok())
                .ok_or_else(|| {
                    ServiceError::KeyUnavailable("the platform key cannot open it".to_owned())
                })
        }
    }
}

fn open_legacy(config: &Config, body: &str) -> ServiceResult<String> {
    let keys = &config.keys;
    [keys.platform.as_ref(), keys.previous.as_ref()]
        .into_iter()
        .flatten()
        .find_map(|key| sealed::open_legacy(key, body).ok())
        .ok_or_else(|| {
            ServiceError::KeyUnavailable(
                "an enc:v1 secret and no platform key (SECRETS_ENCRYPTION_KEY) that opens it"
                    .to_owned(),
            )
        })
}

/// The organization whose key-encryption key wraps `org_id`'s data keys (its root),
/// and that organization's customer key configuration.
async fn owner_of(store: &Store, org_id: &str) -> ServiceResult<(String, Option<KeyConfigRow>)> {
    if org_id == PLATFORM_SCOPE {
        return Ok((PLATFORM_SCOPE.to_owned(), None));
    }
    let owner = store
        .key_owner(org_id)
        .await?
        .unwrap_or_else(|| org_id.to_owned());
    let config = store.key_config(&owner).await?;
    Ok((owner, config))
}

/// The key-encryption key that wraps new data keys of an owner: its customer key,
/// else the platform key; none without either.
fn wrapper(
    settings: &Config,
    keyring: &Keyring,
    config: Option<&KeyConfigRow>,
) -> ServiceResult<Option<Arc<dyn KeyProvider>>> {
    match config {
        Some(config) => customer(settings, keyring, config).map(Some),
        None => Ok(platform(settings).map(|p| Arc::new(p) as Arc<dyn KeyProvider>)),
    }
}

/// The provider that unwraps a data key wrapped by `kek_ref`.
fn unwrapper(
    settings: &Config,
    keyring: &Keyring,
    config: Option<&KeyConfigRow>,
    kek_ref: &str,
) -> ServiceResult<Arc<dyn KeyProvider>> {
    if kek_ref.starts_with("local:") {
        return platform_named(settings, kek_ref)
            .map(|p| Arc::new(p) as Arc<dyn KeyProvider>)
            .ok_or_else(|| {
                ServiceError::KeyUnavailable(
                    "a data key is wrapped by a platform key that is not configured".to_owned(),
                )
            });
    }
    let provider = config
        .map(|c| customer(settings, keyring, c))
        .transpose()?
        .filter(|p| p.reference() == kek_ref)
        .ok_or_else(|| {
            ServiceError::KeyUnavailable(
                "a data key is wrapped by a key the organization no longer names".to_owned(),
            )
        })?;
    Ok(provider)
}

/// Unwraps every data key of `org_id` with the keys that wrapped them.
async fn unwrap_all(
    store: &Store,
    settings: &Config,
    keyring: &Keyring,
    org_id: &str,
    config: Option<&KeyConfigRow>,
) -> ServiceResult<Vec<(u32, Key)>> {
    let mut keys = Vec::new();
    for row in store.data_keys(org_id).await? {
        let provider = unwrapper(settings, keyring, config, &row.kek_ref)?;
        match provider.unwrap(org_id, &row.wrapped).await {
            Ok(key) => keys.push((row.version, key)),
            Err(failure) => {
                tracing::warn!(org = %org_id, class = failure.class.as_str(), "a data key cannot be unwrapped");
                keyring.unwrap_failed();
                return Err(unavailable(&failure));
            }
        }
    }
    Ok(keys)
}

/// An organization's keys: kept by this replica, or read and unwrapped.
async fn load(
    store: &Store,
    settings: &Config,
    keyring: &Keyring,
    org_id: &str,
) -> ServiceResult<OrgKeys> {
    if let Some(keys) = keyring.get(org_id) {
        return Ok(keys);
    }
    let generation = keyring.generation();
    let (owner, config) = owner_of(store, org_id).await?;
    let keys = if config.as_ref().is_some_and(|c| c.state == "orphaned") {
        OrgKeys {
            keys: Default::default(),
            orphaned: true,
        }
    } else {
        OrgKeys {
            keys: unwrap_all(store, settings, keyring, org_id, config.as_ref())
                .await?
                .into_iter()
                .collect(),
            orphaned: false,
        }
    };
    keyring.keep(org_id, &owner, keys.clone(), generation);
    Ok(keys)
}

/// Makes an organization's first data key (another replica's, when it made one
/// first); none when nothing could wrap it.
async fn first_key(
    store: &Store,
    settings: &Config,
    keyring: &Keyring,
    org_id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<Option<OrgKeys>> {
    let (_, config) = owner_of(store, org_id).await?;
    let Some(provider) = wrapper(settings, keyring, config.as_ref())? else {
        return Ok(None);
    };
    let key = Key::generate().map_err(|e| ServiceError::Broken(e.to_string()))?;
    let wrapped = provider.wrap(org_id, &key).await.map_err(|failure| {
        keyring.unwrap_failed();
        unavailable(&failure)
    })?;
    let row = DataKeyRow {
        version: 1,
        wrapped,
        kek_ref: provider.reference(),
    };
    store.insert_first_data_key(org_id, &row, now).await?;
    keyring.forget(org_id);
    load(store, settings, keyring, org_id).await.map(Some)
}

/// Seals `plain` where `binding` says it will live: under the newest version of its
/// organization's data key (made on first use). As is when neither the platform nor
/// the organization has a key; 503 `KMS_UNAVAILABLE` when the organization's key
/// cannot be used.
pub async fn seal(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    binding: Binding<'_>,
    plain: &str,
) -> ServiceResult<String> {
    let mut keys = load(store, config, keyring, binding.org_id).await?;
    if keys.orphaned {
        return Err(ServiceError::KeyUnavailable("orphaned".to_owned()));
    }
    if keys.current().is_none() {
        match first_key(store, config, keyring, binding.org_id, Utc::now()).await? {
            Some(made) => keys = made,
            None => return Ok(plain.to_owned()),
        }
    }
    let (version, key) = keys
        .current()
        .ok_or_else(|| ServiceError::Broken("a data key was made and is not there".to_owned()))?;
    sealed::seal(key, version, &binding, plain).map_err(|e| ServiceError::Broken(e.to_string()))
}

/// Opens a value read from where `binding` says; values stored before (as they are,
/// or `enc:v1`) are read as they were written. 503 `KMS_UNAVAILABLE` when the
/// organization's key cannot be used; a value that does not open there is an error.
pub async fn open(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    binding: Binding<'_>,
    stored: &str,
) -> ServiceResult<String> {
    match Stored::parse(stored).map_err(|e| ServiceError::Broken(e.to_string()))? {
        Stored::Plain(text) => Ok(text.to_owned()),
        Stored::Legacy(body) => open_legacy(config, body),
        Stored::Sealed { version, body } => {
            let keys = load(store, config, keyring, binding.org_id).await?;
            if keys.orphaned {
                return Err(ServiceError::KeyUnavailable("orphaned".to_owned()));
            }
            let key = keys.keys.get(&version).ok_or_else(|| {
                ServiceError::Broken(format!(
                    "a secret is sealed under data key version {version}, which the organization does not have"
                ))
            })?;
            sealed::open(key, &binding, body).map_err(|e| ServiceError::Broken(e.to_string()))
        }
    }
}

mod upkeep;
pub use upkeep::{check_keys, rewrite_old_secrets, CheckRound, RewriteRound};

/// Where an organization's webhook signing secret lives.
pub fn webhook_secret(org_id: &str) -> Binding<'_> {
    Binding {
        org_id,
        table: "notification_preferences",
        column: "webhook_secret",
        row_id: org_id,
    }
}

/// Where an account's authenticator secret lives (the waiting one too: it becomes
/// the enrolled one unchanged).
pub fn totp_secret(user_id: &str) -> Binding<'_> {
    Binding {
        org_id: PLATFORM_SCOPE,
        table: "accounts",
        column: "totp_secret",
        row_id: user_id,
    }
}
