//! The keys' upkeep in the background: the checker that orphans an organization
//! whose customer key stopped working and sees it recover, and the pass that
//! rewrites older values and rewraps data keys after a platform key's rotation.

use super::*;
use crate::config::Config;
use crate::keys::Keyring;
use crate::storage::Store;

/// What one round of the checker saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CheckRound {
    /// Keys checked.
    pub checked: usize,
    /// Organizations orphaned by this round.
    pub orphaned: usize,
    /// Organizations that recovered in this round.
    pub recovered: usize,
}

fn system_event(action: &str, org_id: &str, details: serde_json::Value) -> audit_chain::AuditEvent {
    crate::audit::Action {
        action,
        actor_id: crate::services::notifications::SYSTEM,
        actor_email: None,
        org_id,
        affected_org_id: Some(org_id),
        target_type: "organization",
        target_id: org_id,
        details,
        outcome: "success",
    }
    .into_event()
}

/// Checks one customer key: its state as the provider describes it, and an unwrap
/// of the organization's newest data key (or a probe when it has none).
async fn check_one(
    store: &Store,
    settings: &Config,
    keyring: &Keyring,
    config: &KeyConfigRow,
) -> Result<(), KeyFailure> {
    let provider = customer(settings, keyring, config)
        .map_err(|e| KeyFailure::new(FailureClass::Refused, e.to_string()))?;
    provider.describe().await?;
    let rows = store
        .data_keys(&config.org_id)
        .await
        .map_err(|e| KeyFailure::new(FailureClass::Unreachable, e.to_string()))?;
    match rows.last() {
        Some(row) if row.kek_ref == provider.reference() => provider
            .unwrap(&config.org_id, &row.wrapped)
            .await
            .map(|_| ()),
        _ => probe(provider.as_ref(), &config.org_id).await,
    }
}

/// Checks every customer key once: a key that fails [`ORPHAN_AFTER`] times in a row
/// orphans its organization (org.kms.orphaned once per transition, with the error's
/// class); one that works again recovers it (org.kms.recovered) and its webhook
/// deliveries that waited go out.
pub async fn check_keys(
    store: &Store,
    settings: &Config,
    keyring: &Keyring,
    now: DateTime<Utc>,
) -> ServiceResult<CheckRound> {
    let mut round = CheckRound::default();
    for config in store.key_configs().await? {
        round.checked += 1;
        match check_one(store, settings, keyring, &config).await {
            Ok(()) => {
                let recovered = unit_of_work!(store, |tx| {
                    let recovered = tx.key_check_passed(&config.org_id, now).await?;
                    if recovered {
                        tx.enqueue_audit(&[system_event(
                            "org.kms.recovered",
                            &config.org_id,
                            json!({"provider": config.provider, "keyRef": config.key_ref}),
                        )])
                        .await?;
                        let orgs = store.with_teams(&config.org_id).await?;
                        tx.release_waiting_deliveries(&orgs, now).await?;
                    }
                    Ok(recovered)
                })?;
                if recovered {
                    round.recovered += 1;
                    keyring.forget(&config.org_id);
                    tracing::info!(org = %config.org_id, "a customer key works again: the organization recovered");
                }
            }
            Err(failure) => {
                let why = failure.to_string();
                let audit = [system_event(
                    "org.kms.orphaned",
                    &config.org_id,
                    json!({"provider": config.provider, "keyRef": config.key_ref,
                           "errorClass": failure.class.as_str()}),
                )];
                let orphaned = unit_of_work!(store, |tx| {
                    let orphaned = tx
                        .key_check_failed(&config.org_id, &why, ORPHAN_AFTER, now)
                        .await?;
                    if orphaned {
                        tx.enqueue_audit(&audit).await?;
                    }
                    Ok(orphaned)
                })?;
                tracing::warn!(org = %config.org_id, class = failure.class.as_str(), "a customer key check failed");
                if orphaned {
                    round.orphaned += 1;
                    keyring.forget(&config.org_id);
                    tracing::error!(org = %config.org_id, class = failure.class.as_str(), "a customer key failed three checks in a row: the organization is orphaned");
                }
            }
        }
    }
    Ok(round)
}

/// What one run of the rewrite pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RewriteRound {
    /// Data keys rewrapped from the previous platform key to the current one.
    pub rewrapped: usize,
    /// Secrets rewritten in the current format.
    pub rewritten: usize,
    /// Secrets left as they are (no key to seal them under, or their key unusable).
    pub left: usize,
}

/// One run of the background pass, at most `limit` changes: data keys wrapped by
/// the previous platform key are rewrapped by the current one (never a secret), and
/// secrets stored before (as they are, or `enc:v1`) are rewritten in the current
/// format. Each change is one conditional write: the pass may stop anywhere and
/// start again, on any replica, and rewrites nothing twice.
pub async fn rewrite_old_secrets(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    limit: usize,
) -> ServiceResult<RewriteRound> {
    let mut round = RewriteRound::default();
    let now = Utc::now();
    if let (Some(previous), Some(current)) = (
        config.keys.previous.clone().map(Local::new),
        platform(config),
    ) {
        let batch = u32::try_from(limit).unwrap_or(u32::MAX);
        for (org_id, row) in store
            .data_keys_wrapped_by(&previous.reference(), batch)
            .await?
        {
            let key = previous
                .unwrap(&org_id, &row.wrapped)
                .await
                .map_err(|f| unavailable(&f))?;
            let wrapped = current
                .wrap(&org_id, &key)
                .await
                .map_err(|f| unavailable(&f))?;
            let new = DataKeyRow {
                version: row.version,
                wrapped,
                kek_ref: current.reference(),
            };
            let rewrapped = unit_of_work!(store, |tx| {
                Ok(tx.rewrap_data_key(&org_id, &row.kek_ref, &new, now).await?)
            })?;
            round.rewrapped += usize::from(rewrapped);
            keyring.forget(&org_id);
        }
    }
    for column in &SECRET_COLUMNS {
        rewrite_column(store, config, keyring, column, limit, &mut round).await?;
    }
    Ok(round)
}

async fn rewrite_column(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    column: &SecretColumn,
    limit: usize,
    round: &mut RewriteRound,
) -> ServiceResult<()> {
    let mut after = String::new();
    while round.rewrapped + round.rewritten < limit {
        let batch = store.old_secrets(column, &after, 100).await?;
        let Some(last) = batch.last() else {
            return Ok(());
        };
        after = last.row_id.clone();
        for old in batch {
            if round.rewrapped + round.rewritten >= limit {
                return Ok(());
            }
            let org_id = old.org_id.as_deref().unwrap_or(PLATFORM_SCOPE);
            let binding = Binding {
                org_id,
                table: column.table,
                column: column.bound_as,
                row_id: &old.row_id,
            };
            let rewritten = match open(store, config, keyring, binding, &old.stored).await {
                Ok(plain) => seal(store, config, keyring, binding, &plain).await,
                Err(error) => Err(error),
            };
            match rewritten {
                Ok(new) if new.starts_with(sealed::SEALED) => {
                    if store
                        .rewrite_secret(column, &old.row_id, (&old.stored, &new))
                        .await?
                    {
                        round.rewritten += 1;
                    }
                }
                Ok(_) => round.left += 1,
                Err(error) => {
                    tracing::warn!(table = column.table, column = column.column, %error, "a stored secret cannot be rewritten now");
                    round.left += 1;
                }
            }
        }
    }
    Ok(())
}
