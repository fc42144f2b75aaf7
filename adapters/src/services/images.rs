//! The image registry's tag copy and delete (document 3), by a system admin.
//!
//! A copy resolves the source and carries it over bottom-up: every blob the target
//! repository lacks is mounted from the source repository (or uploaded, when the
//! registry answers the mount with an upload session), every child manifest of an
//! index that the target lacks is put by digest before the index, and the top
//! manifest is put with its exact bytes under the target reference. Every manifest
//! read is verified against its digest. Only after success is the event written:
//! as the documented structured log line (`eventCategory: audit`) and as an audit
//! event in the chain of the organization each repository belongs to
//! ([`oci::owner_of`]; a repository of no organization is the platform's, chained in
//! the system organization). A copy runs to its end even if the request that asked
//! for it times out, so an upload session is never abandoned half-way.

use std::collections::HashSet;
use std::sync::Arc;

use audit_chain::{AuditEvent, LogLabels, Mounted, RegistryEvent, TagCopy, TagDelete};
use chrono::Utc;
use oci::{Digest, Manifest, Owner, Reference, Repository, Target};
use serde_json::json;

use super::{ServiceError, ServiceResult};
use crate::outbound::registry::{Fetched, Mount, RegistryClient, RegistryError};
use crate::services::context::{event_on, Caller};
use crate::storage::{unit_of_work, Store};

/// The `service_name` of the registry's log lines.
pub const SERVICE_NAME: &str = "compliance";
/// How deep an index may nest other indexes.
const MAX_DEPTH: usize = 4;

/// A finished copy, as the event records it.
pub type Copied = TagCopy;

/// A finished delete, as the event records it.
pub type Deleted = TagDelete;

fn client(registry: &Option<Arc<RegistryClient>>) -> ServiceResult<Arc<RegistryClient>> {
    registry
        .clone()
        .ok_or(ServiceError::Registry(RegistryError::NotConfigured))
}

/// What a copy put and carried.
#[derive(Default)]
struct Tally {
    manifests: u64,
    blobs: HashSet<Digest>,
}

/// What shows that a registry change was made, for an intent the answer could not
/// settle.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Check {
    /// A copy: `target` names `digest`.
    Copy {
        /// The target reference.
        target: String,
        /// The digest it must name.
        digest: String,
    },
    /// A delete: `repository` holds no manifest `digest`.
    Delete {
        /// The repository.
        repository: String,
        /// The digest deleted.
        digest: String,
    },
}

/// Copies `source` to `target`. Before the registry is touched, the event is written
/// as an intent (durable); after success it moves to the outbox with the answer. If
/// that write fails (503, the registry changed), the registry worker records it once
/// the registry shows the copy: a completed copy is always audited.
pub async fn copy(
    store: &Store,
    configured: &Option<Arc<RegistryClient>>,
    caller: &Caller,
    source: Reference,
    target: Reference,
) -> ServiceResult<Copied> {
    let registry = client(configured)?;
    let top = registry
        .manifest(&source.repository, &source.target)
        .await
        .map_err(ServiceError::Registry)?;
    let source_digest = top.digest.clone();
    // The target's organization, and the source's when it is another one.
    let system = system_id(store).await?;
    let mut chains = vec![chain_of(store, &target.repository, &system).await?];
    let source_chain = chain_of(store, &source.repository, &system).await?;
    if !chains.contains(&source_chain) {
        chains.push(source_chain);
    }
    let planned = TagCopy {
        actor: caller.user_id.clone(),
        source: source.to_string(),
        target: target.to_string(),
        source_digest: source_digest.to_string(),
        target_digest: source_digest.to_string(),
        mounted: Mounted {
            manifests: 0,
            blobs: 0,
        },
    };
    let intent = crate::new_id();
    let recovered = events_of(
        caller,
        ("registry.tag.copy", &system),
        &chains,
        &planned.target,
        details_of(&planned, ("recovered", json!(true)))?,
    );
    let check = Check::Copy {
        target: target.to_string(),
        digest: source_digest.to_string(),
    };
    store
        .record_intent(&intent, &recovered, &check_json(&check)?, Utc::now())
        .await?;
    // Run apart from the request: a timed-out request does not cut a copy half-way.
    let (from, to) = (source.clone(), target.clone());
    let copied = tokio::spawn(async move { copy_tree(&registry, &from, &to, top).await })
        .await
        .map_err(|e| ServiceError::Broken(format!("the copy stopped: {e}")));
    let tally = match copied {
        Ok(Ok(tally)) => tally,
        Ok(Err(error)) => {
            // Nothing was put under the target's name: no intent to keep (the
            // worker would find no copy and abandon it anyway).
            if let Err(dropped) = store.drop_intent(&intent).await {
                tracing::warn!(error = %dropped, "an intent of a failed copy stays for the registry worker");
            }
            return Err(ServiceError::Registry(error));
        }
        Err(stopped) => return Err(stopped),
    };
    let copy = TagCopy {
        mounted: Mounted {
            manifests: tally.manifests,
            blobs: tally.blobs.len() as u64,
        },
        ..planned
    };
    // The event's own fields are its details (identifiers and digests only).
    let details = details_of(
        &copy,
        ("isPromotionToSystem", json!(copy.is_promotion_to_system())),
    )?;
    let events = events_of(
        caller,
        ("registry.tag.copy", &system),
        &chains,
        &copy.target,
        details,
    );
    settle(store, &intent, &events).await?;
    log_line(&RegistryEvent::TagCopy(copy.clone()), &target.repository);
    Ok(copy)
}

/// Settles an intent whose change was made, with its audit events in the same unit
/// (unless the registry worker recorded them already).
async fn settle(store: &Store, intent: &str, events: &[AuditEvent]) -> ServiceResult<()> {
    unit_of_work!(store, |tx| {
        if tx.settle_intent(intent).await? {
            tx.enqueue_audit(events).await?;
        }
        Ok(())
    })
}

fn check_json(check: &Check) -> ServiceResult<serde_json::Value> {
    serde_json::to_value(check)
        .map_err(|e| ServiceError::Broken(format!("an intent's check does not serialize: {e}")))
}

async fn copy_tree(
    registry: &RegistryClient,
    source: &Reference,
    target: &Reference,
    top: Fetched,
) -> Result<Tally, RegistryError> {
    if let Target::Digest(asked) = &target.target {
        if asked != &top.digest {
            return Err(RegistryError::DigestMismatch {
                what: format!("the target {target}"),
                expected: top.digest.to_string(),
                actual: asked.to_string(),
            });
        }
    }
    let mut tally = Tally::default();
    carry_references(registry, source, target, &top, &mut tally, 0).await?;
    let put = registry
        .put_manifest(
            &target.repository,
            &target.target,
            top.manifest.media_type(),
            &top.bytes,
        )
        .await?;
    if put != top.digest {
        return Err(RegistryError::DigestMismatch {
            what: format!("the manifest put as {target}"),
            expected: top.digest.to_string(),
            actual: put.to_string(),
        });
    }
    tally.manifests += 1;
    Ok(tally)
}

/// Carries what a manifest references into the target repository: an index's child
/// manifests (each after what it references), an image's blobs.
async fn carry_references(
    registry: &RegistryClient,
    source: &Reference,
    target: &Reference,
    fetched: &Fetched,
    tally: &mut Tally,
    depth: usize,
) -> Result<(), RegistryError> {
    match &fetched.manifest {
        Manifest::Image { blobs, .. } => {
            for digest in blobs {
                carry_blob(
                    registry,
                    &source.repository,
                    &target.repository,
                    digest,
                    tally,
                )
                .await?;
            }
            Ok(())
        }
        Manifest::Index { children, .. } => {
            if depth >= MAX_DEPTH {
                return Err(RegistryError::Unsupported(format!(
                    "{source}: indexes nest deeper than {MAX_DEPTH}"
                )));
            }
            let mut done: HashSet<&Digest> = HashSet::new();
            for child in children {
                if !done.insert(&child.digest) {
                    continue;
                }
                let by_digest = Target::Digest(child.digest.clone());
                if registry
                    .manifest_digest(&target.repository, &by_digest)
                    .await?
                    .is_some()
                {
                    continue;
                }
                let fetched = registry.manifest(&source.repository, &by_digest).await?;
                Box::pin(carry_references(
                    registry,
                    source,
                    target,
                    &fetched,
                    tally,
                    depth + 1,
                ))
                .await?;
                registry
                    .put_manifest(
                        &target.repository,
                        &by_digest,
                        fetched.manifest.media_type(),
                        &fetched.bytes,
                    )
                    .await?;
                tally.manifests += 1;
            }
            Ok(())
        }
    }
}

async fn carry_blob(
    registry: &RegistryClient,
    source: &Repository,
    target: &Repository,
    digest: &Digest,
    tally: &mut Tally,
) -> Result<(), RegistryError> {
    if tally.blobs.contains(digest) || registry.has_blob(target, digest).await? {
        return Ok(());
    }
    match registry.mount_blob(target, digest, source).await? {
        Mount::Mounted => {}
        Mount::Session(session) => registry.carry_blob(source, target, digest, session).await?,
    }
    tally.blobs.insert(digest.clone());
    Ok(())
}

/// Deletes the manifest `reference` names, by digest. A tag whose manifest other
/// tags also name (or a digest that two or more tags name) is refused unless
/// `force`: deleting by digest removes every tag of it.
pub async fn delete(
    store: &Store,
    configured: &Option<Arc<RegistryClient>>,
    caller: &Caller,
    reference: Reference,
    force: bool,
) -> ServiceResult<Deleted> {
    let registry = client(configured)?;
    let repository = reference.repository.clone();
    let digest = registry
        .manifest_digest(&repository, &reference.target)
        .await
        .map_err(ServiceError::Registry)?
        .ok_or_else(|| {
            ServiceError::Registry(RegistryError::NotFound(format!("the manifest {reference}")))
        })?;
    if !force {
        let shared = sharing_tags(&registry, &reference, &digest).await?;
        if !shared.is_empty() {
            return Err(ServiceError::Registry(RegistryError::SharedDigest {
                digest: digest.to_string(),
                tags: shared,
            }));
        }
    }
    let deleted = TagDelete {
        actor: caller.user_id.clone(),
        repo: repository.to_string(),
        reference: reference.target.to_string(),
        digest: digest.to_string(),
    };
    let details = details_of(&deleted, ("force", json!(force)))?;
    let system = system_id(store).await?;
    let chain = chain_of(store, &repository, &system).await?;
    let mut recovered_details = details.clone();
    if let Some(fields) = recovered_details.as_object_mut() {
        fields.insert("recovered".to_owned(), json!(true));
    }
    let action = ("registry.tag.delete", system.as_str());
    let target_id = reference.to_string();
    let chains = [chain];
    let intent = crate::new_id();
    let check = Check::Delete {
        repository: repository.to_string(),
        digest: digest.to_string(),
    };
    store
        .record_intent(
            &intent,
            &events_of(caller, action, &chains, &target_id, recovered_details),
            &check_json(&check)?,
            Utc::now(),
        )
        .await?;
    if let Err(error) = registry.delete_manifest(&repository, &digest).await {
        if let Err(dropped) = store.drop_intent(&intent).await {
            tracing::warn!(error = %dropped, "an intent of a failed delete stays for the registry worker");
        }
        return Err(ServiceError::Registry(error));
    }
    settle(
        store,
        &intent,
        &events_of(caller, action, &chains, &target_id, details),
    )
    .await?;
    log_line(&RegistryEvent::TagDelete(deleted.clone()), &repository);
    Ok(deleted)
}

/// The tags, other than the one deleted, that name `digest` (all of them when the
/// reference is the digest itself and more than one tag names it).
async fn sharing_tags(
    registry: &RegistryClient,
    reference: &Reference,
    digest: &Digest,
) -> ServiceResult<Vec<String>> {
    let repository = &reference.repository;
    let tags = registry
        .tags(repository)
        .await
        .map_err(ServiceError::Registry)?
        .ok_or_else(|| {
            ServiceError::Conflict(format!(
                "{repository} has too many tags to tell whether others share {digest}; pass force=true to delete it and every tag of it"
            ))
        })?;
    let mut naming = Vec::new();
    for tag in tags {
        if matches!(&reference.target, Target::Tag(asked) if asked == &tag) {
            continue;
        }
        let target = Target::Tag(tag.clone());
        let found = registry
            .manifest_digest(repository, &target)
            .await
            .map_err(ServiceError::Registry)?;
        if found.as_ref() == Some(digest) {
            naming.push(tag.to_string());
        }
    }
    naming.sort();
    // By digest, one tag naming it is that tag alone; two or more are shared.
    if matches!(reference.target, Target::Digest(_)) && naming.len() < 2 {
        return Ok(Vec::new());
    }
    Ok(naming)
}

/// An event's audit details: its own fields (identifiers and digests only), and one
/// more.
fn details_of(
    event: &impl serde::Serialize,
    (key, value): (&str, serde_json::Value),
) -> ServiceResult<serde_json::Value> {
    let mut details = serde_json::to_value(event)
        .map_err(|e| ServiceError::Broken(format!("a registry event does not serialize: {e}")))?;
    if let Some(fields) = details.as_object_mut() {
        fields.insert(key.to_owned(), value);
    }
    Ok(details)
}

/// The system organization: the actor's own (only super-admins copy and delete).
async fn system_id(store: &Store) -> ServiceResult<String> {
    store
        .system_organization()
        .await?
        .map(|org| org.id)
        .ok_or_else(|| {
            ServiceError::Broken(
                "a super-admin acted without a system organization to record it in".to_owned(),
            )
        })
}

/// The organization whose chain records an event of `repository`: the root
/// organization its first path component names, else the system organization.
async fn chain_of(store: &Store, repository: &Repository, system: &str) -> ServiceResult<String> {
    let owner = match oci::owner_of(repository) {
        Owner::System => None,
        Owner::Organization(name) => store.root_organization_named(&name).await?,
    };
    Ok(owner.map_or_else(|| system.to_owned(), |org| org.id))
}

/// The event for each chain: the actor's organization is the system organization,
/// the affected one the repository's.
fn events_of(
    caller: &Caller,
    (action, system): (&str, &str),
    chains: &[String],
    target_id: &str,
    details: serde_json::Value,
) -> Vec<audit_chain::AuditEvent> {
    chains
        .iter()
        .map(|org_id| {
            let affected = (org_id != system).then_some(org_id.as_str());
            event_on(
                caller,
                action,
                (system, affected),
                ("image", target_id),
                details.clone(),
            )
        })
        .collect()
}

/// Settles the intents older than `before` whose answer could not record them (at
/// most 100 a pass): recorded when the registry shows their change, else marked
/// abandoned. How many were recorded.
pub async fn settle_stale_intents(
    store: &Store,
    configured: &Option<Arc<RegistryClient>>,
    before: chrono::DateTime<Utc>,
) -> ServiceResult<u64> {
    let Some(registry) = configured.clone() else {
        return Ok(0);
    };
    let mut recorded = 0;
    for intent in store.stale_intents(before, 100).await? {
        let check: Check = serde_json::from_value(intent.check.clone())
            .map_err(|e| ServiceError::Broken(format!("registry_intents.check_json: {e}")))?;
        let made = match &check {
            Check::Copy { target, digest } => {
                let target = Reference::parse(target)
                    .map_err(|e| ServiceError::Broken(format!("registry_intents: {e}")))?;
                registry
                    .manifest_digest(&target.repository, &target.target)
                    .await
                    .map_err(ServiceError::Registry)?
                    .is_some_and(|found| found.as_str() == digest)
            }
            Check::Delete { repository, digest } => {
                let repository = Repository::parse(repository)
                    .map_err(|e| ServiceError::Broken(format!("registry_intents: {e}")))?;
                let digest = Digest::parse(digest)
                    .map_err(|e| ServiceError::Broken(format!("registry_intents: {e}")))?;
                registry
                    .manifest_digest(&repository, &Target::Digest(digest))
                    .await
                    .map_err(ServiceError::Registry)?
                    .is_none()
            }
        };
        let resolved = unit_of_work!(store, |tx| {
            let resolved = tx.resolve_intent(&intent.id, made).await?;
            if resolved && made {
                tx.enqueue_audit(&intent.events).await?;
            }
            Ok(resolved)
        })?;
        if resolved && made {
            recorded += 1;
        }
    }
    Ok(recorded)
}

/// The `tracing` target of the registry's audit lines: the server's subscriber
/// writes them as they are (one JSON object, the documented labels at its top),
/// whatever `RUST_LOG` says: an audit line is never filtered.
pub const AUDIT_TARGET: &str = "registry_audit";

/// Emits the event's structured log line through `tracing`, like every other line
/// of the server (see [`AUDIT_TARGET`]).
fn log_line(event: &RegistryEvent, repository: &Repository) {
    let line = event.to_labelled_line(LogLabels {
        service_name: SERVICE_NAME,
        plugin_name: Some(oci::plugin_name(repository)),
        timestamp: Some(Utc::now()),
    });
    tracing::info!(target: AUDIT_TARGET, "{line}");
}
