//! Checking one entity: the organization's effective rules, the evaluation (on the CPU
//! pool), the entity's exemptions, and for a live check the check log, the entity's
//! snapshot and the decision to notify. Validation calls it; scans and the
//! re-evaluation worker are to call the same function.
//!
//! It fails closed: rules or exemptions that cannot be loaded within the deadline, or
//! at all (storage unavailable, a stored row or rule that does not decode), make the
//! check [`ServiceError::Unavailable`], never a pass.

use std::sync::Arc;

use chrono::Utc;
use compliance_core::{
    Compliance, Dependencies, Error as CoreError, Evaluation, Outcome, Rule, RuleSet,
    StoredViolations, Target, Waivers,
};
use serde_json::Value;
use tokio::time::Instant;

use super::{ServiceError, ServiceResult};
use crate::config::Config;
use crate::cpu::CpuPool;
use crate::services::context::AppState;
/// An entry of the check log, as [`log`] answers it.
pub use crate::storage::CheckRecord;
use crate::storage::{LiveCheck, OrgRecord, Store, StoreError};

/// The budget of one check: past it the answer is 503 COMPLIANCE_UNAVAILABLE.
pub const BUDGET: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether the check is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recording {
    /// Evaluated only (`/dry-run`).
    DryRun,
    /// Written to the check log (and the snapshot), and notified when it must be.
    Live,
    /// Recorded as [`Recording::Live`], by the re-evaluation queue: background work,
    /// whose evaluation waits its turn on the CPU pool instead of being refused
    /// ([`crate::cpu::CpuPool::run_in_background`]).
    Reevaluation,
    /// At the inventory's door: the check log and the notification, which are the
    /// compliance service's and stay; the entity's snapshot is the inventory's, written
    /// by the create or update in its own transaction (none when that is refused).
    Door,
}

/// A check's evaluation and the document it judged.
#[derive(Debug)]
pub struct Checked {
    /// The result.
    pub evaluation: Evaluation,
    /// The document judged.
    pub document: Value,
    /// The check-log row it was recorded as, the judgement an entity may refer to
    /// (none for a dry run).
    pub recorded: Option<Recorded>,
}

/// A recorded check: its check-log row and its digest (`storage::judgement_digest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The check-log row's id.
    pub check_id: String,
    /// What it says, as a digest of its result and violations.
    pub digest: String,
}

/// The document to check, made on the CPU pool: its attributes and the entity's id.
/// Parsing a request body belongs there too, so `prepare` runs inside the same job.
pub type Prepared = (Value, Option<String>);

/// Checks one entity of `org` for `target` by `deadline`. `cached` is the rule set when
/// the caller already holds it; `prepare` makes the document (parsing a body, or
/// handing over a stored one) on the CPU pool, where the limits are checked and the
/// rules evaluated in the same job.
pub async fn check_entity<P>(
    state: &AppState,
    org: &OrgRecord,
    target: Target,
    cached: Option<Arc<RuleSet>>,
    deadline: Instant,
    prepare: P,
    recording: Recording,
) -> ServiceResult<Checked>
where
    P: FnOnce() -> ServiceResult<Prepared> + Send + 'static,
{
    // The system organization's own entities are never evaluated.
    let set = match (org.is_system, cached) {
        (true, _) => None,
        (false, Some(set)) => Some(set),
        (false, None) => Some(
            within(
                deadline,
                crate::compliance::rule_set(
                    &state.infra.store,
                    &state.replica.rule_cache,
                    &state.config,
                    org,
                    target,
                ),
            )
            .await?,
        ),
    };
    let limits = state.config.attribute_limits();
    // A live check of an entity keeps the document as its snapshot: written as text
    // here, on the CPU pool, with the evaluation.
    let keeps_snapshot = matches!(recording, Recording::Live | Recording::Reevaluation);
    let evaluate = move || {
        let (document, entity_id) = prepare()?;
        // The entity's exemptions are known once the document is: applied after.
        let evaluation =
            compliance_core::judge(set.as_deref(), target, &document, &limits, &Waivers::none())
                .map_err(|e| match e {
                    CoreError::AttributeLimitExceeded(limit) => ServiceError::Limit(limit),
                    CoreError::AttributesNotObject => {
                        ServiceError::invalid("attributes", "must be a JSON object")
                    }
                    other => ServiceError::Malformed(other.to_string()),
                })?;
        // Only an entity's check keeps a snapshot (the impact preview reads it by entity).
        let snapshot = (keeps_snapshot && entity_id.is_some()).then(|| document.to_string());
        Ok::<_, ServiceError>((document, entity_id, evaluation, snapshot))
    };
    let job = async {
        match recording {
            Recording::Reevaluation => state.infra.cpu.run_in_background(evaluate).await,
            Recording::DryRun | Recording::Live | Recording::Door => {
                state.infra.cpu.run(evaluate).await
            }
        }
    };
    let (document, entity_id, mut evaluation, snapshot) =
        match tokio::time::timeout_at(deadline, job).await {
            Ok(Ok(done)) => done?,
            Ok(Err(_)) | Err(_) => return Err(ServiceError::Unavailable),
        };
    // Exemptions are per entity: known once the document is, applied after.
    if let (Some(entity), false) = (&entity_id, org.is_system) {
        let exemptions = within(
            deadline,
            crate::replica::kept::approved_exemptions(
                &state.infra.store,
                &state.replica.kept,
                &org.id,
                entity,
            ),
        )
        .await?;
        evaluation.waive(&Waivers::for_entity(&exemptions, entity, Utc::now()));
    }
    let recorded = if matches!(recording, Recording::DryRun) {
        None
    } else {
        Some(
            record(
                state,
                (org, target, entity_id.as_deref()),
                snapshot,
                &evaluation,
                deadline,
            )
            .await?,
        )
    };
    Ok(Checked {
        evaluation,
        document,
        recorded,
    })
}

/// A dry run: the body is parsed on the CPU pool first, as `parse` makes it, for it may
/// bring `draft`, the rule being written. Without one, the check of
/// [`check_entity`] (`cached` the set when the caller holds it); with one, the draft
/// is checked as a create or an update of it would be ([`super::rules::check`]), its
/// target must be `target`, and it is evaluated in place of the stored rule with its
/// id among the organization's effective rules of `target` (beside them when new).
/// Nothing is recorded.
pub async fn dry_run<P>(
    state: &AppState,
    org: &OrgRecord,
    target: Target,
    cached: Option<Arc<RuleSet>>,
    deadline: Instant,
    parse: P,
) -> ServiceResult<Checked>
where
    P: FnOnce() -> ServiceResult<(Prepared, Option<Rule>)> + Send + 'static,
{
    let parsed = match tokio::time::timeout_at(deadline, state.infra.cpu.run(parse)).await {
        Ok(Ok(parsed)) => parsed?,
        Ok(Err(_)) | Err(_) => return Err(ServiceError::Unavailable),
    };
    let (prepared, set) = match parsed {
        (prepared, None) => (prepared, cached),
        (prepared, Some(draft)) => (
            prepared,
            Some(
                draft_set(
                    &state.infra.store,
                    &state.config,
                    &state.infra.cpu,
                    org,
                    target,
                    draft,
                    deadline,
                )
                .await?,
            ),
        ),
    };
    check_entity(
        state,
        org,
        target,
        set,
        deadline,
        move || Ok(prepared),
        Recording::DryRun,
    )
    .await
}

/// The organization's effective rules of `target` with `draft` in place of the stored
/// rule with its id (added when it has none), compiled on the CPU pool by `deadline`.
async fn draft_set(
    store: &Store,
    config: &Config,
    cpu: &CpuPool,
    org: &OrgRecord,
    target: Target,
    draft: Rule,
    deadline: Instant,
) -> ServiceResult<Arc<RuleSet>> {
    if draft.target != target {
        return Err(ServiceError::invalid(
            "rule.target",
            format!("must be {}, the target the path names", target.as_str()),
        ));
    }
    let loaded = async {
        super::rules::check(store, config, org, &draft).await?;
        let rules = crate::compliance::effective(store, org).await?;
        Ok::<_, ServiceError>(rules)
    };
    let rules = match tokio::time::timeout_at(deadline, loaded).await {
        Ok(rules) => rules?,
        Err(_) => return Err(ServiceError::Unavailable),
    };
    let options = crate::compliance::compile_options(config, Dependencies::Lenient);
    let compile = move || {
        let key = draft.key().to_owned();
        let mut set: Vec<Rule> = rules
            .into_iter()
            .filter(|r| r.target == target && r.key() != key)
            .collect();
        set.push(draft);
        RuleSet::compile(set, &options)
    };
    match tokio::time::timeout_at(deadline, cpu.run(compile)).await {
        Ok(Ok(set)) => Ok(Arc::new(set?)),
        Ok(Err(_)) | Err(_) => Err(ServiceError::Unavailable),
    }
}

/// The check log's row, the entity's snapshot (for the impact preview), and the
/// notification when the result blocks, or warns and the organization asked to hear,
/// in one transaction with the other checks being recorded (`services::grouped`),
/// by the check's deadline. Answers the row it was recorded as.
async fn record(
    state: &AppState,
    (org, target, entity_id): (&OrgRecord, Target, Option<&str>),
    snapshot: Option<String>,
    evaluation: &Evaluation,
    deadline: Instant,
) -> ServiceResult<Recorded> {
    let now = Utc::now();
    // The notification is decided now and written with the check.
    let needs = evaluation.blocked || !evaluation.violations.is_empty();
    let notification = if needs {
        let preference = within(
            deadline,
            crate::replica::kept::preference(&state.infra.store, &state.replica.kept, &org.id),
        )
        .await?;
        super::notifications::for_check(&preference, (&org.id, target, entity_id), evaluation, now)
    } else {
        None
    };
    let held = notification.as_ref().map_or(0, |n| {
        n.channels
            .iter()
            .filter(|(_, window)| window.is_some())
            .count()
    });
    let result = evaluation.outcome().as_str();
    // As stored: without the messages, written again when read.
    let violations = serde_json::to_string(&StoredViolations(&evaluation.violations))
        .map_err(|e| ServiceError::Broken(format!("violations do not serialize: {e}")))?;
    let judgement = Recorded {
        check_id: crate::storage::new_id(),
        digest: crate::storage::judgement_digest(result, &violations),
    };
    let check = LiveCheck {
        id: judgement.check_id.clone(),
        org_id: org.id.clone(),
        target: target.as_str(),
        entity_id: entity_id.map(str::to_owned),
        result,
        violations,
        snapshot,
        notification,
        at: now,
    };
    let store = state.infra.store.clone();
    let recorded = state
        .replica
        .recorder
        .submit(check, move |checks: Vec<LiveCheck>| {
            let store = store.clone();
            async move {
                let count = checks.len();
                let outcome = store.record_live_checks(checks).await;
                (0..count)
                    .map(|_| match &outcome {
                        Ok(()) => Ok(()),
                        Err(error) => Err(StoreError::Unavailable(error.to_string())),
                    })
                    .collect::<Vec<_>>()
            }
        });
    within(deadline, async {
        recorded.await.unwrap_or_else(|| {
            Err(StoreError::Unavailable(
                "the check recorder stopped".to_owned(),
            ))
        })
    })
    .await?;
    for _ in 0..held {
        state.infra.metrics.notification("held");
    }
    Ok(judgement)
}

/// Storage work under the check's deadline. Storage that cannot answer in time, or
/// at all, or answers with rows that do not decode, makes the check unavailable (fail
/// closed); a refusal (not found, conflict) stays what it is.
pub async fn within<T>(
    deadline: Instant,
    work: impl std::future::Future<Output = Result<T, StoreError>>,
) -> ServiceResult<T> {
    match tokio::time::timeout_at(deadline, work).await {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(
            cause @ (StoreError::Unavailable(_)
            | StoreError::Contended(_)
            | StoreError::Corrupt(_)
            | StoreError::Other(_)),
        )) => {
            tracing::warn!(%cause, "a check could not be made");
            Err(ServiceError::Unavailable)
        }
        Ok(Err(refusal)) => Err(refusal.into()),
        Err(_) => Err(ServiceError::Unavailable),
    }
}

/// What the check log is narrowed to.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogFilter<'a> {
    /// `plugin` or `pipeline`.
    pub target: Option<&'a str>,
    /// `pass`, `warn` or `block`.
    pub result: Option<&'a str>,
    /// One entity.
    pub entity_id: Option<&'a str>,
}

/// A page of the organization's check log: (entries, total).
pub async fn log(
    store: &Store,
    org: &OrgRecord,
    filter: LogFilter<'_>,
    limit: u32,
    offset: u64,
) -> ServiceResult<(Vec<crate::storage::CheckRecord>, u64)> {
    Ok(store
        .checks(
            &org.id,
            filter.target,
            filter.result,
            filter.entity_id,
            limit,
            offset,
        )
        .await?)
}

/// The organization a service validates in, found by `deadline`: a missing one is
/// not the service's to see (`TENANT_FORBIDDEN`), storage that fails or does not
/// answer in time is "compliance unavailable" (fail closed).
pub async fn service_organization(
    store: &Store,
    org_id: &str,
    deadline: Instant,
) -> Result<Option<OrgRecord>, ServiceError> {
    match tokio::time::timeout_at(deadline, store.organization(org_id)).await {
        Ok(Ok(org)) => Ok(org),
        Ok(Err(_)) | Err(_) => Err(ServiceError::Unavailable),
    }
}

/// What an entity admitted at the door keeps, written with it in one transaction.
#[derive(Debug, Clone)]
pub struct Admitted {
    /// Its compliance.
    pub compliance: Compliance,
    /// The judgement it refers to.
    pub judgement: crate::storage::DoorJudgement,
    /// The snapshot of its attributes for the impact preview, when this server judged
    /// it (a remote compliance service keeps its own).
    pub snapshot: Option<Value>,
}

/// Checks a new or changed entity of `org` at the door of the inventory, before it is
/// stored: in process through [`check_entity`] (recorded like a validation), or,
/// when `COMPLIANCE_SERVICE_HOST` names another server, through `ComplianceClient`
/// there. Either way within the 5-second budget and failing closed. A block is
/// [`ServiceError::Blocked`] (or [`ServiceError::Violations`] from a remote);
/// otherwise answers what the inventory keeps with the entity ([`Admitted`]).
pub async fn at_the_door(
    state: &AppState,
    org: &OrgRecord,
    target: Target,
    entity_id: &str,
    document: Value,
) -> ServiceResult<Admitted> {
    if let Some(base) = &state.config.hosts.remote_compliance {
        let compliance =
            remotely(&state.infra.keys, base, org, target, entity_id, &document).await?;
        // The remote service logs its check; this server keeps the verdict as the
        // entity's judgement, written with the entity.
        let violations = serde_json::to_string(&StoredViolations(&compliance.violations))
            .map_err(|e| ServiceError::Broken(format!("violations do not serialize: {e}")))?;
        let judgement = crate::storage::DoorJudgement {
            check_id: crate::storage::new_id(),
            digest: crate::storage::judgement_digest(compliance.result.as_str(), &violations),
            carried: Some(violations),
        };
        return Ok(Admitted {
            compliance,
            judgement,
            snapshot: None,
        });
    }
    let deadline = Instant::now() + BUDGET;
    let entity = entity_id.to_owned();
    let Checked {
        evaluation,
        document,
        recorded,
    } = check_entity(
        state,
        org,
        target,
        None,
        deadline,
        move || Ok((document, Some(entity))),
        Recording::Door,
    )
    .await?;
    if evaluation.blocked {
        return Err(ServiceError::Blocked(Box::new(evaluation)));
    }
    let Some(Recorded { check_id, digest }) = recorded else {
        return Err(ServiceError::Broken(
            "a check at the door was not recorded".to_owned(),
        ));
    };
    Ok(Admitted {
        compliance: evaluation.compliance(),
        judgement: crate::storage::DoorJudgement {
            check_id,
            digest,
            carried: None,
        },
        snapshot: Some(document),
    })
}

/// The check made by another `compliance serve`, with a short-lived service token.
async fn remotely(
    keys: &crate::auth::TokenKeys,
    base: &str,
    org: &OrgRecord,
    target: Target,
    entity_id: &str,
    document: &Value,
) -> ServiceResult<Compliance> {
    use crate::client::{ComplianceClient, Entity};
    let mut claims = crate::auth::Claims::user(
        "inventory",
        None,
        Utc::now(),
        std::time::Duration::from_secs(300),
    );
    claims.service = Some("inventory".to_owned());
    let token = keys.sign(&claims).map_err(|e| {
        tracing::warn!(error = %e, "no service token for the remote compliance check");
        ServiceError::Unavailable
    })?;
    let entity = match target {
        Target::Plugin => Entity::Plugin,
        Target::Pipeline => Entity::Pipeline,
    };
    let client = ComplianceClient::new(base, &token);
    match client
        .validate(&org.id, entity, document, Some(entity_id))
        .await
    {
        Ok(passed) => {
            let violations = passed
                .warnings
                .into_iter()
                .map(serde_json::from_value)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| {
                    tracing::warn!(error = %e, "the remote compliance check answered violations that do not read: failing closed");
                    ServiceError::Unavailable
                })?;
            let result = if violations.is_empty() {
                Outcome::Pass
            } else {
                Outcome::Warn
            };
            Ok(Compliance { result, violations })
        }
        Err(refusal) if refusal.blocks() => Err(ServiceError::Violations(
            refusal.details.unwrap_or(Value::Null),
        )),
        Err(refusal) if refusal.status < 500 && refusal.status != 401 && refusal.status != 403 => {
            Err(ServiceError::Malformed(refusal.message))
        }
        Err(refusal) => {
            tracing::warn!(status = refusal.status, message = %refusal.message, "the remote compliance check failed: failing closed");
            Err(ServiceError::Unavailable)
        }
    }
}
