//! Judging an entity again (after a mutation): under the event's own tenant scope
//! (the organization comes from the event, never from the worker), with the same
//! check as the door and validation (`check_entity`, recorded), keeping the result
//! with the entity. An entity or organization that is gone has nothing to judge. A
//! rule or subscription change becomes a scan. The worker claims entities in batches:
//! they are judged together (each on the CPU pool, their checks recorded in groups)
//! and their results kept in one statement per organization and target.

use std::collections::HashMap;

use compliance_core::Target;
use serde_json::Value;

use super::checks::{self, Recording};
use super::{ServiceError, ServiceResult};
use crate::services::context::AppState;
use crate::storage::{ClaimedEntity, Kept, OrgRecord, Store, EVERYTHING};

/// Re-evaluates the claimed entity once, whatever number of events it had; for a
/// rule or subscription change ([`EVERYTHING`]), starts a scan of the organization's
/// entities of the target instead (swept in pages by the scan workers).
pub async fn process(state: &AppState, claimed: &ClaimedEntity) -> ServiceResult<()> {
    process_all(state, std::slice::from_ref(claimed))
        .await
        .into_iter()
        .next()
        .unwrap_or(Ok(()))
}

/// Re-evaluates claimed entities (as [`process`]), all at once: what became of each,
/// in the claim's order. The entities of each organization and target are read in one
/// query.
pub async fn process_all(state: &AppState, claimed: &[ClaimedEntity]) -> Vec<ServiceResult<()>> {
    let mut organizations: HashMap<String, Option<OrgRecord>> = HashMap::new();
    let mut outcomes: Vec<Option<ServiceResult<()>>> = Vec::with_capacity(claimed.len());
    let mut to_judge: Vec<(usize, OrgRecord)> = Vec::with_capacity(claimed.len());
    for (i, entity) in claimed.iter().enumerate() {
        let org = match organizations.get(&entity.org_id) {
            Some(known) => Ok(known.clone()),
            None => state
                .infra
                .store
                .organization(&entity.org_id)
                .await
                .inspect(|org| {
                    organizations.insert(entity.org_id.clone(), org.clone());
                }),
        };
        match org {
            Err(e) => outcomes.push(Some(Err(e.into()))),
            // An organization that is gone has nothing to judge.
            Ok(None) => outcomes.push(Some(Ok(()))),
            Ok(Some(org)) => {
                outcomes.push(None);
                to_judge.push((i, org));
            }
        }
    }
    let mut documents = documents(&state.infra.store, claimed, &to_judge).await;
    let mut judging = tokio::task::JoinSet::new();
    for (i, org) in to_judge {
        let Some(entity) = claimed.get(i) else {
            continue;
        };
        let document = match documents.remove(&i) {
            Some(Err(e)) => {
                set(&mut outcomes, i, Err(e));
                continue;
            }
            Some(Ok(document)) => Some(document),
            None => None,
        };
        let (state, entity) = (state.clone(), entity.clone());
        judging.spawn(async move { (i, judge(&state, &org, &entity, document).await) });
    }
    // The results to keep, per organization and target.
    let mut keep: HashMap<(String, Target), Vec<(usize, Rejudged)>> = HashMap::new();
    while let Some(done) = judging.join_next().await {
        let Ok((i, judged)) = done else {
            continue;
        };
        let Some(entity) = claimed.get(i) else {
            continue;
        };
        match judged {
            Ok(Some((target, judged))) => keep
                .entry((entity.org_id.clone(), target))
                .or_default()
                .push((i, judged)),
            Ok(None) => set(&mut outcomes, i, Ok(())),
            Err(e) => set(&mut outcomes, i, Err(e)),
        }
    }
    for ((org_id, target), results) in keep {
        let rows: Vec<Kept<'_>> = results
            .iter()
            .filter_map(|(i, judged)| {
                claimed.get(*i).map(|e| Kept {
                    entity_id: &e.entity_id,
                    result: judged.result,
                    reference: &judged.recorded.check_id,
                    digest: &judged.recorded.digest,
                })
            })
            .collect();
        let written = state
            .infra
            .store
            .keep_rejudged((&org_id, target.as_str()), &rows)
            .await;
        for (i, _) in &results {
            let outcome = match &written {
                Ok(()) => Ok(()),
                Err(e) => Err(ServiceError::Broken(format!(
                    "the compliance results were not kept: {e}"
                ))),
            };
            set(&mut outcomes, *i, outcome);
        }
    }
    // A judgement whose task stopped (it panicked) failed.
    outcomes
        .into_iter()
        .map(|o| {
            o.unwrap_or_else(|| Err(ServiceError::Broken("a re-evaluation stopped".to_owned())))
        })
        .collect()
}

fn set(outcomes: &mut [Option<ServiceResult<()>>], i: usize, outcome: ServiceResult<()>) {
    if let Some(slot) = outcomes.get_mut(i) {
        *slot = Some(outcome);
    }
}

/// The documents of the claimed entities to judge (not the [`EVERYTHING`] events), by
/// their place in the claim: read in one query per organization and target. An
/// entity that is gone has none; a read that failed fails each of its entities.
async fn documents(
    store: &Store,
    claimed: &[ClaimedEntity],
    to_judge: &[(usize, OrgRecord)],
) -> HashMap<usize, ServiceResult<Value>> {
    let mut groups: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (i, _) in to_judge {
        if let Some(entity) = claimed.get(*i).filter(|e| e.entity_id != EVERYTHING) {
            groups
                .entry((entity.org_id.as_str(), entity.target.as_str()))
                .or_default()
                .push(*i);
        }
    }
    let mut documents = HashMap::with_capacity(to_judge.len());
    for ((org_id, target), places) in groups {
        let ids: Vec<&str> = places
            .iter()
            .filter_map(|i| claimed.get(*i).map(|e| e.entity_id.as_str()))
            .collect();
        // A read's error fails each of its entities (below), described by its text.
        // `judge` answers an unknown target.
        if target.parse::<Target>().is_err() {
            continue;
        }
        // A read's error fails each of its entities (below), described by its text.
        let mut read: Result<HashMap<String, Value>, crate::storage::StoreError> = store
            .subjects_of(target, org_id, &ids)
            .await
            .map(|found| found.into_iter().map(|s| (s.id, s.document)).collect());
        for i in places {
            let Some(entity) = claimed.get(i) else {
                continue;
            };
            match &mut read {
                Ok(found) => {
                    if let Some(document) = found.remove(&entity.entity_id) {
                        documents.insert(i, Ok(document));
                    }
                }
                Err(e) => {
                    documents.insert(
                        i,
                        Err(ServiceError::Broken(format!(
                            "the entities were not read: {e}"
                        ))),
                    );
                }
            }
        }
    }
    documents
}

/// A re-evaluation's judgement: its result and the check-log row it was recorded as.
struct Rejudged {
    result: &'static str,
    recorded: checks::Recorded,
}

/// Judges one claimed entity of `org` on its `document` (`None`: the entity is gone):
/// the judgement to keep (`None`: nothing to keep: the entity is gone, or the event
/// was a rule change and started a scan).
async fn judge(
    state: &AppState,
    org: &OrgRecord,
    claimed: &ClaimedEntity,
    document: Option<Value>,
) -> ServiceResult<Option<(Target, Rejudged)>> {
    let target: Target = claimed.target.parse().map_err(|_| {
        ServiceError::Broken(format!("a queued event of target `{}`", claimed.target))
    })?;
    if claimed.entity_id == EVERYTHING {
        super::scans::after_change(
            &state.infra.store,
            &state.config,
            &state.infra.metrics,
            org,
            target,
        )
        .await?;
        return Ok(None);
    }
    let Some(document) = document else {
        return Ok(None);
    };
    let deadline = tokio::time::Instant::now() + crate::services::checks::BUDGET;
    let entity = claimed.entity_id.clone();
    let checks::Checked {
        evaluation,
        recorded,
        ..
    } = checks::check_entity(
        state,
        org,
        target,
        None,
        deadline,
        move || Ok((document, Some(entity))),
        Recording::Reevaluation,
    )
    .await?;
    let recorded = recorded.ok_or_else(|| {
        ServiceError::Broken("a re-evaluation's check was not recorded".to_owned())
    })?;
    Ok(Some((
        target,
        Rejudged {
            result: evaluation.outcome().as_str(),
            recorded,
        },
    )))
}
