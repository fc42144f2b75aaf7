//! Judging an entity again (after a mutation): under the event's own tenant scope
//! (the organization comes from the event, never from the worker), with the same
//! check as the door and validation (`check_entity`, recorded), keeping the result
//! with the entity. An entity or organization that is gone has nothing to judge. A
//! rule or subscription change becomes a scan.

use compliance_core::Target;

use super::checks::{self, Recording};
use super::{pipelines, plugins, ServiceError, ServiceResult};
use crate::services::context::AppState;
use crate::storage::{ClaimedEntity, EVERYTHING};

/// Re-evaluates the claimed entity once, whatever number of events it had; for a
/// rule or subscription change ([`EVERYTHING`]), starts a scan of the organization's
/// entities of the target instead (swept in pages by the scan workers).
pub async fn process(state: &AppState, claimed: &ClaimedEntity) -> ServiceResult<()> {
    let Some(org) = state.store.organization(&claimed.org_id).await? else {
        return Ok(());
    };
    let target: Target = claimed.target.parse().map_err(|_| {
        ServiceError::Broken(format!("a queued event of target `{}`", claimed.target))
    })?;
    if claimed.entity_id == EVERYTHING {
        super::scans::after_change(state, &org, target).await?;
        return Ok(());
    }
    let document = match target {
        Target::Pipeline => state
            .store
            .pipeline(&org.id, &claimed.entity_id)
            .await?
            .map(|p| pipelines::document(&p)),
        Target::Plugin => state
            .store
            .plugin(&org.id, &claimed.entity_id)
            .await?
            .map(|p| plugins::document(&p)),
    };
    let Some(document) = document else {
        return Ok(());
    };
    let deadline = tokio::time::Instant::now() + crate::services::checks::BUDGET;
    let entity = claimed.entity_id.clone();
    let checks::Checked { evaluation, .. } = checks::check_entity(
        state,
        &org,
        target,
        None,
        deadline,
        move || Ok((document, Some(entity))),
        Recording::Live,
    )
    .await?;
    state
        .store
        .set_compliance(
            (&org.id, target.as_str(), &claimed.entity_id),
            &evaluation.compliance(),
        )
        .await?;
    Ok(())
}
