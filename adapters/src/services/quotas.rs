//! The quota service (document 2): each organization's usage against its account's
//! limits, increments by other services, API calls counted per request, resets and
//! a system admin's overrides. Every check-and-increment is one conditional UPDATE
//! on the root's pool row (storage), which holds the synchronized limit.

use std::collections::BTreeMap;
use std::time::Instant;

use chrono::{DateTime, Utc};
use entitlements::{Dimension, Limit, Period, Tier, MAX_INCREMENT};
use serde::Serialize;
use serde_json::json;

use super::entitlement::{self, Change};
use super::{ServiceError, ServiceResult};
use crate::config::Config;
use crate::replica::allowance::Allowances;
use crate::replica::allowance::BLOCK;
use crate::services::context::{event_on, Caller};
use crate::storage::{unit_of_work, Charge, Charged, OrgRecord, QuotaRefusal, Store, UsageRow};

/// How long an increment's `Idempotency-Key` is remembered (a retry after that
/// counts again); the retention worker forgets older ones.
pub const INCREMENT_KEY_RETENTION: chrono::Duration = chrono::Duration::days(7);

/// The quota types the service reports, in order.
pub fn quota_types() -> impl Iterator<Item = Dimension> {
    Dimension::ALL.into_iter().filter(|d| d.is_quota_type())
}

/// The key of the period monthly types count in at `now`.
pub fn period_of(now: DateTime<Utc>) -> String {
    Period::containing(now).key()
}

/// One quota type of one organization.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct QuotaStatus {
    /// The quota type.
    #[serde(rename = "type")]
    pub dimension: Dimension,
    /// The account's limit (-1 unlimited).
    pub limit: i64,
    /// Used by the whole account (the root and its teams): what the limit bounds.
    pub used: u64,
    /// Used by this organization itself.
    pub own_used: u64,
    /// What is left (-1 unlimited).
    pub remaining: i64,
    /// `used` as a percentage of the limit (`null` unlimited; a zero limit is 100).
    pub percent: Option<f64>,
    /// When a monthly type starts again from zero.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reset_at: Option<DateTime<Utc>>,
}

/// One organization's quotas.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OrgQuotas {
    /// The organization.
    pub org_id: String,
    /// The account root whose pool it draws from.
    pub root_org_id: String,
    /// The account's tier.
    pub tier: Tier,
    /// One entry per quota type, by its name.
    pub quotas: BTreeMap<String, QuotaStatus>,
}

fn status(
    dimension: Dimension,
    (pool, own): (&[UsageRow], &[UsageRow]),
    now: DateTime<Utc>,
) -> ServiceResult<QuotaStatus> {
    let name = dimension.name();
    let row = pool.iter().find(|r| r.dimension == name);
    let wire = row
        .and_then(|r| r.limit)
        .ok_or_else(|| ServiceError::Broken(format!("the {name} limit is not synchronized")))?;
    let limit = Limit::from_wire(wire)
        .ok_or_else(|| ServiceError::Broken(format!("stored {name} limit {wire}")))?;
    let used = row.map_or(0, |r| r.used);
    let own_used = own
        .iter()
        .find(|r| r.dimension == name)
        .map_or(0, |r| r.used);
    let usage = entitlements::Usage {
        dimension,
        used,
        limit,
    };
    Ok(QuotaStatus {
        dimension,
        limit: wire,
        used,
        own_used,
        remaining: match limit {
            Limit::Unlimited => -1,
            Limit::Finite(n) => i64::try_from(n.saturating_sub(used)).unwrap_or(i64::MAX),
        },
        percent: usage.percent_used().map(|p| (p * 100.0).round() / 100.0),
        reset_at: if dimension.is_monthly() {
            Period::containing(now).ends_at()
        } else {
            None
        },
    })
}

/// The quotas of `org`.
pub async fn of(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    org: &OrgRecord,
    now: DateTime<Utc>,
) -> ServiceResult<OrgQuotas> {
    let root = entitlement::root_of(store, org).await?;
    entitlement::ensure_synced(store, config, allowances, &root).await?;
    of_account(store, allowances, (org, &root), now).await
}

/// The quotas of `org` in `root`'s account, whose limits are synchronized.
async fn of_account(
    store: &Store,
    allowances: &Allowances,
    (org, root): (&OrgRecord, &OrgRecord),
    now: DateTime<Utc>,
) -> ServiceResult<OrgQuotas> {
    let period = period_of(now);
    let mut pool = store.pool_rows(&root.id, &period).await?;
    let mut own = store.own_rows(&org.id, &period).await?;
    // Units this replica reserved and did not spend are not used yet.
    for dimension in quota_types().filter(|d| d.is_monthly()) {
        let (own_unspent, account_unspent) =
            allowances.unspent((&org.id, &root.id), dimension, &period);
        for (rows, unspent) in [(&mut pool, account_unspent), (&mut own, own_unspent)] {
            if let Some(row) = rows.iter_mut().find(|r| r.dimension == dimension.name()) {
                row.used = row.used.saturating_sub(unspent);
            }
        }
    }
    let quotas = quota_types()
        .map(|d| Ok((d.name().to_owned(), status(d, (&pool, &own), now)?)))
        .collect::<ServiceResult<BTreeMap<_, _>>>()?;
    Ok(OrgQuotas {
        org_id: org.id.clone(),
        root_org_id: root.id.clone(),
        tier: root.tier,
        quotas,
    })
}

/// One quota type of `org` (`type` as on the wire; another name is 400).
pub async fn one(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    org: &OrgRecord,
    name: &str,
    now: DateTime<Utc>,
) -> ServiceResult<QuotaStatus> {
    let dimension = parse_type(name)?;
    pick(of(store, config, allowances, org, now).await?, dimension)
}

fn pick(mut quotas: OrgQuotas, dimension: Dimension) -> ServiceResult<QuotaStatus> {
    quotas
        .quotas
        .remove(dimension.name())
        .ok_or(ServiceError::NotFound("quota type".into()))
}

fn parse_type(name: &str) -> ServiceResult<Dimension> {
    Dimension::from_name(name)
        .filter(|d| d.is_quota_type())
        .ok_or_else(|| {
            let names: Vec<&str> = quota_types().map(Dimension::name).collect();
            ServiceError::invalid(
                "type",
                format!("`{name}` is not one of {}", names.join(", ")),
            )
        })
}

async fn organization(store: &Store, id: &str) -> ServiceResult<OrgRecord> {
    store
        .organization(id)
        .await?
        .ok_or(ServiceError::NotFound("organization".into()))
}

/// A page of every organization's quotas: (records, total).
pub async fn all(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    (limit, offset): (u32, u64),
    now: DateTime<Utc>,
) -> ServiceResult<(Vec<OrgQuotas>, u64)> {
    let (orgs, total) = store.organizations_page(false, limit, offset).await?;
    let mut records = Vec::with_capacity(orgs.len());
    for org in &orgs {
        records.push(of(store, config, allowances, org, now).await?);
    }
    Ok((records, total))
}

/// A page of the account roots at or above `threshold` percent on any quota type:
/// (records, total). The pool rows hold the limits, so the database selects them.
pub async fn at_risk(
    store: &Store,
    allowances: &Allowances,
    threshold: f64,
    (limit, offset): (u32, u64),
    now: DateTime<Utc>,
) -> ServiceResult<(Vec<OrgQuotas>, u64)> {
    if !(0.0..=1_000_000.0).contains(&threshold) {
        return Err(ServiceError::invalid(
            "threshold",
            "must be a percentage between 0 and 1000000",
        ));
    }
    let (roots, total) = store
        .roots_at_risk(
            entitlements::AtRiskTest::at(threshold),
            &period_of(now),
            limit,
            offset,
        )
        .await?;
    let mut records = Vec::with_capacity(roots.len());
    for root in &roots {
        records.push(of_account(store, allowances, (root, root), now).await?);
    }
    Ok((records, total))
}

/// Charges `amount` of `dimension` to `org` and its root's pool in one statement,
/// synchronizing the account first if it never was; over the limit, nothing counts.
pub(crate) async fn charge(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    org: &OrgRecord,
    (dimension, amount): (Dimension, u64),
    idempotency: Option<(&str, &str)>,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let period = if dimension.is_monthly() {
        period_of(now)
    } else {
        String::new()
    };
    let charge = Charge {
        org_id: &org.id,
        root_id: entitlement::root_id(org),
        dimension: dimension.name(),
        period: &period,
        amount,
    };
    for _ in 0..2 {
        let outcome = unit_of_work!(store, |tx| {
            let outcome = tx.charge_now(&charge, idempotency, now).await?;
            if outcome != Charged::Done {
                // Not counted: nothing of it (the idempotency key either) is kept.
                tx.abandon();
            }
            Ok(outcome)
        })?;
        match outcome {
            Charged::Done => return Ok(()),
            Charged::Refused(refusal) => {
                return Err(ServiceError::Quota {
                    dimension: dimension.name(),
                    refusal,
                })
            }
            Charged::Unsynced => {
                let root = entitlement::root_of(store, org).await?;
                entitlement::ensure_synced(store, config, allowances, &root).await?;
            }
        }
    }
    Err(ServiceError::Broken(format!(
        "the {} limit of {} does not synchronize",
        dimension.name(),
        entitlement::root_id(org)
    )))
}

/// Counts one authenticated API request of `org` (429 when apiCalls is exhausted):
/// spent from this replica's block of the account's units, so that most requests
/// write nothing ([`spend`]).
pub async fn count_api_call(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    org: &OrgRecord,
) -> ServiceResult<()> {
    spend(
        store,
        config,
        allowances,
        org,
        Dimension::ApiCalls,
        Utc::now(),
    )
    .await
}

/// What an increment asks.
#[derive(Debug, Clone)]
pub struct Increment {
    /// The quota type's wire name.
    pub dimension: String,
    /// How much (1 to 1000).
    pub amount: u64,
    /// The `Idempotency-Key`.
    pub key: Option<String>,
}

/// A service's increment of `org_id`'s usage; with a key, a retry counts once (the
/// same key for another increment is 409).
pub async fn increment(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    service: &str,
    org_id: &str,
    ask: Increment,
    now: DateTime<Utc>,
) -> ServiceResult<QuotaStatus> {
    let dimension = parse_type(&ask.dimension)?;
    if dimension.is_inventory() {
        return Err(ServiceError::invalid(
            "type",
            format!(
                "{} are counted from the inventory, in the transaction of each create and delete",
                dimension.name()
            ),
        ));
    }
    if ask.amount == 0 || ask.amount > MAX_INCREMENT {
        return Err(ServiceError::invalid(
            "amount",
            format!("must be between 1 and {MAX_INCREMENT}"),
        ));
    }
    let org = organization(store, org_id).await?;
    if let Some(key) = ask.key.as_deref() {
        if let Some(earlier) = store.increment_by_key(service, key).await? {
            if earlier != (org.id.clone(), dimension.name().to_owned(), ask.amount) {
                return Err(ServiceError::Conflict(
                    "this Idempotency-Key was used for another increment".to_owned(),
                ));
            }
            return one(store, config, allowances, &org, dimension.name(), now).await;
        }
    }
    let idempotency = ask.key.as_deref().map(|key| (service, key));
    charge(
        store,
        config,
        allowances,
        &org,
        (dimension, ask.amount),
        idempotency,
        now,
    )
    .await?;
    // The charge found the account synchronized (or synchronized it).
    let root = entitlement::root_of(store, &org).await?;
    pick(
        of_account(store, allowances, (&org, &root), now).await?,
        dimension,
    )
}

/// Sets `org`'s monthly usage (or one type's) back to zero: a root's whole account,
/// or a team's own share.
pub async fn reset(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    caller: &Caller,
    org_id: &str,
    only: Option<&str>,
    now: DateTime<Utc>,
) -> ServiceResult<OrgQuotas> {
    let org = organization(store, org_id).await?;
    let types: Vec<Dimension> = match only {
        Some(name) => {
            let dimension = parse_type(name)?;
            if dimension.is_inventory() {
                return Err(ServiceError::invalid(
                    "type",
                    format!(
                        "{} are counted from the inventory and cannot be reset",
                        dimension.name()
                    ),
                ));
            }
            vec![dimension]
        }
        None => quota_types().filter(|d| d.is_monthly()).collect(),
    };
    let root = entitlement::root_of(store, &org).await?;
    let names: Vec<&str> = types.iter().map(|d| d.name()).collect();
    let audit = [event_on(
        caller,
        "quota.reset",
        (&org.id, Some(&org.id)),
        ("quota", &org.id),
        json!({"types": names}),
    )];
    unit_of_work!(store, |tx| {
        tx.reset_usage((&org.id, &root.id), &names).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    // The reset counted this replica's unspent units (others hear of it).
    crate::replica::allowance::forget_account(allowances, &root.id).await;
    of(store, config, allowances, &org, now).await
}

/// A system admin's update: the account's tier and limit overrides (-1 unlimited,
/// `None` back to the entitlement's). Applies to account roots; a team draws from
/// its root's.
pub async fn update(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    caller: &Caller,
    org_id: &str,
    (tier, limits): (Option<Tier>, Vec<(Dimension, Option<Limit>)>),
    now: DateTime<Utc>,
) -> ServiceResult<OrgQuotas> {
    let org = organization(store, org_id).await?;
    if org.parent_org_id.is_some() {
        return Err(ServiceError::invalid(
            "orgId",
            "a team draws from its account root's pool: update the root",
        ));
    }
    if org.is_system {
        return Err(ServiceError::invalid(
            "orgId",
            "the system organization has no caps to change",
        ));
    }
    entitlement::commit(store, config, allowances, &org, now, |current| {
        let mut audit = Vec::new();
        let mut bundles = None;
        if let Some(tier) = tier {
            // A tier change keeps nothing the new tier cannot buy.
            let moving = entitlement::moving(config, caller, &org, current, tier);
            audit.push(event_on(
                caller,
                "billing.tier.override",
                (&org.id, Some(&org.id)),
                ("subscription", &current.subscription.id),
                json!({"from": current.account.tier, "tier": tier, "removedBundles": moving.removed}),
            ));
            audit.extend(moving.audit);
            bundles = moving.bundles;
        }
        if !limits.is_empty() {
            let details: BTreeMap<&str, Option<i64>> = limits
                .iter()
                .map(|(d, l)| (d.name(), l.map(Limit::to_wire)))
                .collect();
            audit.push(event_on(
                caller,
                "admin.org.quota.override",
                (&org.id, Some(&org.id)),
                ("organization", &org.id),
                json!({"limits": details}),
            ));
        }
        Ok((
            Change {
                tier,
                bundles: bundles.clone(),
                overrides: limits.clone(),
                ..Change::default()
            },
            audit,
        ))
    })
    .await?;
    let org = organization(store, org_id).await?;
    of(store, config, allowances, &org, now).await
}

// Monthly units spent without a write per request (this replica's blocks are
// `crate::replica::allowance`):
// Monthly units spent without a write per request: each replica reserves a block
// of units of an organization from its account's pool by one conditional statement
// (the charge any increment makes), spends it in memory, and gives back what it did
// not spend once the organization has been idle on this replica for a second, when
// the account's limits change, and when the server stops. API calls use it; AI
// calls will when generation counts them one by one.
//
// What holds:
// - The pool's used count includes every reserved block, so it never passes the
//   limit on any number of replicas; near the limit a block is only what is left.
// - A crashed replica's unspent units stay counted as used, never as free.
// - A request is refused while units remain unspent elsewhere only within this
//   bound: at most [`BLOCK`]` - 1` units per other replica and organization of the
//   account, for at most [`IDLE`] (plus one sweep) after that replica's last request
//   of the organization.
// - A block counts in the month it was reserved in: past the month's end its rest
//   is neither spent nor given back (the new month started from zero).
// - After a reset the blocks of the account are forgotten, not given back (the
//   reset counted them); a give-back racing a reset may take back up to
//   `BLOCK - 1` units of the new count (stated, not closed).
// - The quotas a replica reports subtract its own unspent units: on one replica
//   they are exact; another replica's unspent units show as used until it gives
//   them back.

/// Spends one unit of `dimension` for `org` at `now`: from this replica's block, or
/// from a new one reserved from the pool. Over the limit: 429 with the pool's limit
/// and usage, and nothing counted.
pub async fn spend(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    org: &OrgRecord,
    dimension: Dimension,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let slot = allowances
        .slot((&org.id, entitlement::root_id(org)), dimension)
        .ok_or_else(|| ServiceError::Broken("the allowances' lock is poisoned".to_owned()))?;
    let mut block = slot.lock().await;
    let period = period_of(now);
    if block.period != period {
        // The rest of last month's block was counted there.
        block.period = period;
        block.unspent = 0;
    }
    block.last_used = Instant::now();
    if block.unspent > 0 {
        block.unspent -= 1;
        return Ok(());
    }
    let mut ask = BLOCK;
    let mut last = None;
    for _ in 0..3 {
        match charge(store, config, allowances, org, (dimension, ask), None, now).await {
            Ok(()) => {
                block.unspent = ask - 1;
                return Ok(());
            }
            Err(ServiceError::Quota { refusal, .. }) => {
                let left = refusal.limit.saturating_sub(refusal.used);
                last = Some(refusal);
                if left == 0 {
                    break;
                }
                // Near the limit a block is what is left.
                ask = left.min(BLOCK);
            }
            Err(other) => return Err(other),
        }
    }
    match last {
        Some(refusal) => Err(ServiceError::Quota {
            dimension: dimension.name(),
            refusal: QuotaRefusal {
                requested: 1,
                ..refusal
            },
        }),
        None => Err(ServiceError::Unavailable),
    }
}
