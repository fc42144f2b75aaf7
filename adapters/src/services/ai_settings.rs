//! An account root's own AI settings: the providers and models its generations may
//! use, its own provider (a base URL under the Git URLs' address rule, a key sealed
//! under its data key and never answered back, only its last four characters) and
//! a monthly token cap. Written by super-admins, read by the organization's admins,
//! used by every generation of the organization and its teams.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::config::Config;
use crate::config::ProviderSettings;
use crate::keys::Binding;
use crate::keys::Keyring;
use crate::outbound::git;
use crate::services::context::Caller;
use crate::services::keys;
use crate::services::{entitlement, ServiceError, ServiceResult};
use crate::storage::{unit_of_work, AiSettingsRow, OrgRecord, OwnProviderRow, QuotaRefusal, Store};

/// The most providers an allow-list names, and models per provider.
const MAX_MODELS: usize = 20;
/// The longest key accepted.
const MAX_KEY_CHARS: usize = 4096;
/// The highest monthly cap.
const MAX_CAP: u64 = 1_000_000_000_000;

/// The settings as they are answered (never the key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AiSettings {
    /// The account root.
    pub org_id: String,
    /// Provider -> the models the organization may use; `null`: the platform's.
    pub providers: Option<BTreeMap<String, Vec<String>>>,
    /// The organization's own provider.
    pub own_provider: Option<OwnProvider>,
    /// The most tokens a calendar month's generations may spend; `null`: no cap.
    pub monthly_token_cap: Option<u64>,
    /// Tokens spent this calendar month (UTC).
    pub tokens_this_month: u64,
    /// Raised by each change (`PUT` carries the one it read).
    pub version: i64,
    /// When it last changed.
    pub updated_at: Option<DateTime<Utc>>,
}

/// An organization's own provider, as answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OwnProvider {
    /// `openai`, `anthropic` or `ollama`.
    pub provider: String,
    /// Where it answers.
    pub base_url: String,
    /// The key's last four characters (`null`: no key).
    pub api_key_hint: Option<String>,
}

/// What a super-admin puts (the whole settings, replaced).
#[derive(Debug, Clone, Default)]
pub struct Put {
    /// Provider -> models (`None`: the platform's).
    pub providers: Option<BTreeMap<String, Vec<String>>>,
    /// The own provider: (name, base URL, key; `None` keeps the stored key of the
    /// same provider).
    pub own: Option<(String, String, Option<String>)>,
    /// The cap.
    pub monthly_token_cap: Option<u64>,
    /// The version read (`None`: no check).
    pub version: Option<i64>,
}

fn month(now: DateTime<Utc>) -> String {
    now.format("%Y-%m").to_string()
}

fn binding(org_id: &str) -> Binding<'_> {
    Binding {
        org_id,
        table: "org_ai_settings",
        column: "own_api_key",
        row_id: org_id,
    }
}

fn root_only(org: &OrgRecord) -> ServiceResult<()> {
    if org.parent_org_id.is_some() {
        return Err(ServiceError::Conflict(
            "AI settings belong to the account's root organization (its teams use them)".to_owned(),
        ));
    }
    Ok(())
}

fn answer(org_id: &str, row: Option<AiSettingsRow>, tokens: u64) -> AiSettings {
    match row {
        None => AiSettings {
            org_id: org_id.to_owned(),
            providers: None,
            own_provider: None,
            monthly_token_cap: None,
            tokens_this_month: tokens,
            version: 0,
            updated_at: None,
        },
        Some(row) => AiSettings {
            org_id: row.org_id,
            providers: row.allowed,
            own_provider: row.own.map(|own| OwnProvider {
                provider: own.provider,
                base_url: own.base_url,
                api_key_hint: own.key_hint,
            }),
            monthly_token_cap: row.monthly_token_cap,
            tokens_this_month: tokens,
            version: row.version,
            updated_at: Some(row.updated_at),
        },
    }
}

/// The settings of an account root (a team: 409).
pub async fn get(store: &Store, org: &OrgRecord, now: DateTime<Utc>) -> ServiceResult<AiSettings> {
    root_only(org)?;
    let row = store.ai_settings(&org.id).await?;
    let tokens = store.ai_tokens(&org.id, &month(now)).await?;
    Ok(answer(&org.id, row, tokens))
}

fn check_name(field: &'static str, name: &str) -> ServiceResult<()> {
    if name.is_empty() || name.chars().count() > 200 || name.chars().any(char::is_control) {
        return Err(ServiceError::invalid(
            field,
            "names are 1 to 200 characters, without control characters",
        ));
    }
    Ok(())
}

/// Replaces an account root's settings (a super-admin). Audited
/// `admin.org.ai-config.update` naming the fields changed, never the key.
pub async fn put(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    caller: &Caller,
    org: &OrgRecord,
    put: Put,
    now: DateTime<Utc>,
) -> ServiceResult<AiSettings> {
    root_only(org)?;
    let platform = &config.ai;
    let own_name = put.own.as_ref().map(|(name, _, _)| name.clone());
    if let Some(providers) = &put.providers {
        if providers.len() > generation::Wire::ALL.len() {
            return Err(ServiceError::invalid(
                "providers",
                "at most one entry per provider",
            ));
        }
        for (name, models) in providers {
            if generation::Wire::parse(name).is_none() {
                return Err(ServiceError::invalid(
                    "providers",
                    format!(
                        "`{}` is not a provider (openai, anthropic, ollama)",
                        name.chars().take(40).collect::<String>()
                    ),
                ));
            }
            if models.is_empty() || models.len() > MAX_MODELS {
                return Err(ServiceError::invalid(
                    "providers",
                    format!("each provider names 1 to {MAX_MODELS} models"),
                ));
            }
            for model in models {
                check_name("providers", model)?;
            }
            // A platform provider: only models the platform offers.
            if own_name.as_deref() != Some(name.as_str()) {
                let offered = platform.provider(name).ok_or_else(|| {
                    ServiceError::invalid(
                        "providers",
                        format!("`{name}` is not configured on this platform: give the organization its own provider"),
                    )
                })?;
                if let Some(model) = models.iter().find(|m| !offered.models.contains(m)) {
                    return Err(ServiceError::invalid(
                        "providers",
                        format!("`{model}` is not a model the platform's {name} provider offers"),
                    ));
                }
            }
        }
    }
    if let Some(cap) = put.monthly_token_cap {
        if cap == 0 || cap > MAX_CAP {
            return Err(ServiceError::invalid(
                "monthlyTokenCap",
                format!("from 1 to {MAX_CAP}, or null for no cap"),
            ));
        }
    }
    let stored = store.ai_settings(&org.id).await?;
    if let (Some(asked), Some(current)) = (put.version, stored.as_ref().map(|s| s.version)) {
        if asked != current {
            return Err(ServiceError::Conflict(format!(
                "the settings changed meanwhile: version {current} is current, read them again"
            )));
        }
    }
    let own = match put.own {
        None => None,
        Some((name, base_url, key)) => {
            let wire = generation::Wire::parse(&name).ok_or_else(|| {
                ServiceError::invalid(
                    "ownProvider.provider",
                    "must be openai, anthropic or ollama",
                )
            })?;
            if !put
                .providers
                .as_ref()
                .is_some_and(|p| p.contains_key(wire.name()))
            {
                return Err(ServiceError::invalid(
                    "providers",
                    format!(
                        "name the models the organization's own {} provider may use",
                        wire.name()
                    ),
                ));
            }
            if base_url.chars().count() > 2048 {
                return Err(ServiceError::invalid(
                    "ownProvider.baseUrl",
                    "at most 2048 characters",
                ));
            }
            git::check(&base_url, platform.allow_private_urls)
                .await
                .map_err(|e| {
                    ServiceError::invalid(
                        "ownProvider.baseUrl",
                        e.to_string().replace("`url`", "`baseUrl`"),
                    )
                })?;
            let kept = stored
                .as_ref()
                .and_then(|s| s.own.as_ref())
                .filter(|o| o.provider == wire.name());
            let (api_key, key_hint) = match key {
                Some(key) => {
                    let key = key.trim().to_owned();
                    if key.is_empty()
                        || key.chars().count() > MAX_KEY_CHARS
                        || key.chars().any(char::is_control)
                    {
                        return Err(ServiceError::invalid(
                            "ownProvider.apiKey",
                            format!("1 to {MAX_KEY_CHARS} characters, without control characters"),
                        ));
                    }
                    let hint: String = key
                        .chars()
                        .rev()
                        .take(4)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect();
                    (
                        Some(keys::seal(store, config, keyring, binding(&org.id), &key).await?),
                        Some(hint),
                    )
                }
                None => match kept {
                    Some(kept) => (kept.api_key.clone(), kept.key_hint.clone()),
                    None if wire == generation::Wire::Ollama => (None, None),
                    None => {
                        return Err(ServiceError::invalid(
                            "ownProvider.apiKey",
                            format!("the {} provider needs a key", wire.name()),
                        ))
                    }
                },
            };
            Some(OwnProviderRow {
                provider: wire.name().to_owned(),
                base_url: base_url.trim_end_matches('/').to_owned(),
                api_key,
                key_hint,
            })
        }
    };
    let row = AiSettingsRow {
        org_id: org.id.clone(),
        allowed: put.providers,
        own,
        monthly_token_cap: put.monthly_token_cap,
        version: stored.as_ref().map_or(1, |s| s.version + 1),
        updated_at: now,
        updated_by: caller.user_id.clone(),
    };
    let changed = changed_fields(stored.as_ref(), &row);
    let details = json!({"changed": changed, "version": row.version});
    let audit = super::admin::org_events(
        store,
        caller,
        "admin.org.ai-config.update",
        &org.id,
        details,
    )
    .await?;
    let version = stored.as_ref().map(|s| s.version);
    unit_of_work!(store, |tx| {
        tx.put_ai_settings(&row, version).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    let tokens = store.ai_tokens(&org.id, &month(now)).await?;
    Ok(answer(&org.id, Some(row), tokens))
}

/// The fields that differ, by their wire names (a new key is `ownProvider.apiKey`,
/// never its value).
fn changed_fields(before: Option<&AiSettingsRow>, after: &AiSettingsRow) -> Vec<&'static str> {
    let own = |row: Option<&AiSettingsRow>| row.and_then(|r| r.own.clone());
    let (old, new) = (own(before), own(Some(after)));
    let mut changed = Vec::new();
    if before.map(|b| &b.allowed) != Some(&after.allowed) {
        changed.push("providers");
    }
    if old.as_ref().map(|o| &o.provider) != new.as_ref().map(|o| &o.provider) {
        changed.push("ownProvider.provider");
    }
    if old.as_ref().map(|o| &o.base_url) != new.as_ref().map(|o| &o.base_url) {
        changed.push("ownProvider.baseUrl");
    }
    if old.as_ref().and_then(|o| o.api_key.as_ref())
        != new.as_ref().and_then(|o| o.api_key.as_ref())
    {
        changed.push("ownProvider.apiKey");
    }
    if before.map(|b| b.monthly_token_cap) != Some(after.monthly_token_cap) {
        changed.push("monthlyTokenCap");
    }
    changed
}

/// The provider a generation of `org` uses for (`provider`, `model`): the account
/// root's own when its settings name it, else the platform's, within the models
/// the settings allow; and refused (429 `QUOTA_EXCEEDED`, `aiTokens`) once the
/// month's tokens reached the cap. `Ok(None)`: the organization has no settings
/// (the platform's providers as they are).
pub async fn provider_for(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    org: &OrgRecord,
    (provider, model): (&str, &str),
    now: DateTime<Utc>,
) -> ServiceResult<Option<ProviderSettings>> {
    let root = entitlement::root_id(org).to_owned();
    let Some(settings) = store.ai_settings(&root).await? else {
        return Ok(None);
    };
    if let Some(cap) = settings.monthly_token_cap {
        let used = store.ai_tokens(&root, &month(now)).await?;
        if used >= cap {
            return Err(ServiceError::Quota {
                dimension: "aiTokens",
                refusal: QuotaRefusal {
                    limit: cap,
                    used,
                    requested: 1,
                },
            });
        }
    }
    let models = match &settings.allowed {
        None => None,
        Some(allowed) => Some(allowed.get(provider).ok_or_else(|| {
            ServiceError::invalid(
                "provider",
                format!(
                    "`{provider}` is not a provider this organization may use (allowed: {})",
                    allowed.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            )
        })?),
    };
    if let Some(models) = models {
        if !models.iter().any(|m| m == model) {
            return Err(ServiceError::invalid(
                "model",
                format!(
                    "`{model}` is not a model this organization may use with {provider} (allowed: {})",
                    models.join(", ")
                ),
            ));
        }
    }
    match settings.own.filter(|own| own.provider == provider) {
        Some(own) => {
            let wire = generation::Wire::parse(&own.provider).ok_or_else(|| {
                ServiceError::Broken(format!(
                    "org_ai_settings of {root}: provider `{}`",
                    own.provider
                ))
            })?;
            let api_key = match &own.api_key {
                Some(sealed) => {
                    Some(keys::open(store, config, keyring, binding(&root), sealed).await?)
                }
                None => None,
            };
            Ok(Some(ProviderSettings {
                wire,
                base_url: own.base_url,
                api_key: api_key.map(crate::config::Secret::new),
                models: models.cloned().unwrap_or_default(),
            }))
        }
        None => Ok(None),
    }
}

/// Adds a generation's tokens to its account root's month.
pub async fn spend(
    store: &Store,
    org: &OrgRecord,
    tokens: u64,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    if tokens == 0 {
        return Ok(());
    }
    Ok(store
        .spend_ai_tokens(entitlement::root_id(org), &month(now), tokens)
        .await?)
}
