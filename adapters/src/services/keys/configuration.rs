//! An organization's choice of key: a customer's key-encryption key (AWS KMS, Vault
//! transit) checked, configured and removed, its data keys wrapped again under it, and
//! its status.

use super::*;

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
pub(super) fn configurable(org: &OrgRecord) -> ServiceResult<()> {
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
pub(super) fn config_of(
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
pub(super) async fn rewrap_all(
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
