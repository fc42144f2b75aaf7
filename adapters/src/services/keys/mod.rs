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

/// A customer key-encryption key's provider, as a request names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum ProviderName {
    /// AWS KMS: `keyRef` is the key's ARN.
    AwsKms,
    /// Vault's transit engine: `keyRef` is the key's name; `address` and `token`.
    VaultTransit,
}

impl ProviderName {
    /// As stored and answered.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderName::AwsKms => "aws-kms",
            ProviderName::VaultTransit => "vault-transit",
        }
    }
}

/// A customer key, as a super-admin configures it.
#[derive(Clone)]
pub struct KeyChoice {
    /// The provider.
    pub provider: ProviderName,
    /// The ARN, or the transit key's name.
    pub key_ref: String,
    /// Vault's address.
    pub address: Option<String>,
    /// Vault's token (never answered, never logged).
    pub token: Option<String>,
}

/// The root organization a key configuration may be set on, with the tier check.
fn configurable(org: &OrgRecord) -> ServiceResult<()> {
    if org.parent_org_id.is_some() {
        return Err(ServiceError::invalid(
            "id",
            "a team's secrets are under its root organization's key: configure the root",
        ));
    }
    if !(org.is_system || org.tier == entitlements::Tier::Enterprise) {
        return Err(ServiceError::TierRequired {
            what: "customer_managed_keys",
            tier: org.tier,
        });
    }
    Ok(())
}

/// Checks a choice and builds the stored configuration (the token sealed).
fn config_of(
    config: &Config,
    org: &OrgRecord,
    choice: &KeyChoice,
    now: DateTime<Utc>,
) -> ServiceResult<KeyConfigRow> {
    let (address, token) = match choice.provider {
        ProviderName::AwsKms => {
            crate::keys::aws_kms::region_of(&choice.key_ref)
                .map_err(|why| ServiceError::invalid("keyRef", why))?;
            if choice.address.is_some() || choice.token.is_some() {
                return Err(ServiceError::invalid(
                    "address",
                    "aws-kms takes no address nor token (AWS_KMS_ENDPOINT_URL and the platform's AWS credentials)",
                ));
            }
            (None, None)
        }
        ProviderName::VaultTransit => {
            if !vault::valid_name(&choice.key_ref) {
                return Err(ServiceError::invalid(
                    "keyRef",
                    "a transit key's name: letters, digits, `-`, `_` or `.`, at most 128",
                ));
            }
            let address = choice
                .address
                .clone()
                .filter(|a| {
                    reqwest::Url::parse(a).is_ok_and(|u| {
                        ["http", "https"].contains(&u.scheme())
                            && u.host_str().is_some()
                            && u.query().is_none()
                            && u.username().is_empty()
                    })
                })
                .ok_or_else(|| {
                    ServiceError::invalid(
                        "address",
                        "Vault's http(s) address, with no query or user",
                    )
                })?;
            let token = choice
                .token
                .as_deref()
                .filter(|t| !t.is_empty() && t.len() <= 4096)
                .ok_or_else(|| ServiceError::invalid("token", "Vault's token is required"))?;
            let sealed = seal_platform(config, &token_binding(&org.id), token)?;
            (Some(address), Some(sealed))
        }
    };
    Ok(KeyConfigRow {
        org_id: org.id.clone(),
        provider: choice.provider.as_str().to_owned(),
        key_ref: choice.key_ref.clone(),
        address,
        token,
        state: "active".to_owned(),
        failures: 0,
        last_error: None,
        checked_at: Some(now),
        orphaned_at: None,
        created_at: now,
        updated_at: now,
    })
}

/// Moves every data key of a root and its teams from the keys that wrap them now to
/// `to`: the rows to store, by organization. A data key that cannot be unwrapped
/// stops it (409: nothing is moved).
async fn rewrap_all(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    root_id: &str,
    from: Option<&KeyConfigRow>,
    to: &dyn KeyProvider,
) -> ServiceResult<Vec<(String, Vec<DataKeyRow>)>> {
    let mut moved = Vec::new();
    for org_id in store.with_teams(root_id).await? {
        let keys = match unwrap_all(store, config, keyring, &org_id, from).await {
            Ok(keys) => keys,
            Err(ServiceError::KeyUnavailable(why)) => {
                return Err(ServiceError::Conflict(format!(
                    "the organization's data keys cannot be unwrapped by its current key ({why}): nothing was changed"
                )))
            }
            Err(other) => return Err(other),
        };
        let mut rows = Vec::new();
        for (version, key) in keys {
            let wrapped = to.wrap(&org_id, &key).await.map_err(|f| unavailable(&f))?;
            rows.push(DataKeyRow {
                version,
                wrapped,
                kek_ref: to.reference(),
            });
        }
        if rows.is_empty() && org_id == root_id {
            // The root gets its data key now, under the new key.
            let key = Key::generate().map_err(|e| ServiceError::Broken(e.to_string()))?;
            let wrapped = to.wrap(&org_id, &key).await.map_err(|f| unavailable(&f))?;
            rows.push(DataKeyRow {
                version: 1,
                wrapped,
                kek_ref: to.reference(),
            });
        }
        moved.push((org_id, rows));
    }
    Ok(moved)
}

/// Puts an organization's secrets under a key its customer holds: the key is
/// proven (a probe wrapped and unwrapped, its state described) before anything is
/// saved; then the data keys of the organization and its teams are rewrapped under
/// it and the configuration stored, audited admin.org.kms-config.upsert (provider
/// and key reference, never a credential), in one transaction.
pub async fn configure(
    store: &Store,
    settings: &Config,
    keyring: &Keyring,
    caller: &Caller,
    org: &OrgRecord,
    choice: KeyChoice,
    now: DateTime<Utc>,
) -> ServiceResult<KeyConfigRow> {
    configurable(org)?;
    let config = config_of(settings, org, &choice, now)?;
    let provider = customer(settings, keyring, &config)?;
    probe(provider.as_ref(), &org.id)
        .await
        .map_err(|failure| match failure.class {
            FailureClass::Unreachable => unavailable(&failure),
            _ => ServiceError::invalid(
                "keyRef",
                format!("the key does not work for this organization: {failure}"),
            ),
        })?;
    let current = store.key_config(&org.id).await?;
    let moved = rewrap_all(
        store,
        settings,
        keyring,
        &org.id,
        current.as_ref(),
        provider.as_ref(),
    )
    .await?;
    unit_of_work!(store, |tx| {
        tx.save_key_config(&config).await?;
        for (org_id, rows) in &moved {
            tx.put_data_keys(org_id, rows, now).await?;
        }
        tx.enqueue_audit(&[event_on(
            caller,
            "admin.org.kms-config.upsert",
            (&org.id, Some(&org.id)),
            ("organization", &org.id),
            json!({
                "provider": config.provider,
                "keyRef": config.key_ref,
                "previousProvider": current.as_ref().map(|c| c.provider.as_str()),
            }),
        )])
        .await?;
        Ok(())
    })?;
    keyring.forget(&org.id);
    Ok(config)
}

/// Puts an organization's secrets back under the platform key: its data keys are
/// rewrapped under the platform key first, and nothing changes (409) when that
/// fails (no platform key, the customer key no longer unwraps). Audited
/// admin.org.kms-config.delete.
pub async fn remove(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    caller: &Caller,
    org: &OrgRecord,
    now: DateTime<Utc>,
) -> ServiceResult<KeyConfigRow> {
    let current = store
        .key_config(&org.id)
        .await?
        .ok_or(ServiceError::NotFound("key configuration".into()))?;
    let Some(platform) = platform(config) else {
        return Err(ServiceError::Conflict(
            "there is no platform key (SECRETS_ENCRYPTION_KEY) to rewrap the organization's data keys under: nothing was changed".to_owned(),
        ));
    };
    let moved = rewrap_all(store, config, keyring, &org.id, Some(&current), &platform).await?;
    unit_of_work!(store, |tx| {
        for (org_id, rows) in &moved {
            tx.put_data_keys(org_id, rows, now).await?;
        }
        tx.delete_key_config(&org.id).await?;
        tx.enqueue_audit(&[event_on(
            caller,
            "admin.org.kms-config.delete",
            (&org.id, Some(&org.id)),
            ("organization", &org.id),
            json!({"provider": current.provider, "keyRef": current.key_ref}),
        )])
        .await?;
        Ok(())
    })?;
    keyring.forget(&org.id);
    Ok(current)
}

/// What an organization's keys are: its customer key configuration, or the
/// platform's key (`None` when there is none), and its data keys' versions.
pub async fn status(
    store: &Store,
    settings: &Config,
    org: &OrgRecord,
) -> ServiceResult<(Option<KeyConfigRow>, Option<String>, u32)> {
    let (_, config) = owner_of(store, &org.id).await?;
    let platform = platform(settings).map(|p| p.reference());
    let versions = store.data_keys(&org.id).await?.len();
    Ok((
        config,
        platform,
        u32::try_from(versions).unwrap_or(u32::MAX),
    ))
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
