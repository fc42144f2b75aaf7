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
use std::io::Write as _;
use std::sync::Arc;

use audit_chain::{LogLabels, Mounted, RegistryEvent, TagCopy, TagDelete};
use chrono::Utc;
use oci::{Digest, Manifest, Owner, Reference, Repository, Target};
use serde_json::json;

use super::{ServiceError, ServiceResult};
use crate::outbound::registry::{Fetched, Mount, RegistryClient, RegistryError};
use crate::services::context::{event_on, AppState, Caller};

/// The `service_name` of the registry's log lines.
pub const SERVICE_NAME: &str = "compliance";
/// How deep an index may nest other indexes.
const MAX_DEPTH: usize = 4;

/// A finished copy, as the event records it.
pub type Copied = TagCopy;

/// A finished delete, as the event records it.
pub type Deleted = TagDelete;

fn client(state: &AppState) -> ServiceResult<Arc<RegistryClient>> {
    state
        .registry
        .clone()
        .ok_or(ServiceError::Registry(RegistryError::NotConfigured))
}

/// What a copy put and carried.
#[derive(Default)]
struct Tally {
    manifests: u64,
    blobs: HashSet<Digest>,
}

/// Copies `source` to `target`; the event is written only after success.
pub async fn copy(
    state: &AppState,
    caller: &Caller,
    source: Reference,
    target: Reference,
) -> ServiceResult<Copied> {
    let registry = client(state)?;
    // Run apart from the request: a timed-out request does not cut a copy half-way.
    let (from, to) = (source.clone(), target.clone());
    let copied = tokio::spawn(async move { copy_tree(&registry, &from, &to).await })
        .await
        .map_err(|e| ServiceError::Broken(format!("the copy stopped: {e}")))?
        .map_err(ServiceError::Registry)?;
    let (source_digest, tally) = copied;
    let copy = TagCopy {
        actor: caller.user_id.clone(),
        source: source.to_string(),
        target: target.to_string(),
        source_digest: source_digest.to_string(),
        target_digest: source_digest.to_string(),
        mounted: Mounted {
            manifests: tally.manifests,
            blobs: tally.blobs.len() as u64,
        },
    };
    // The event's own fields are its details (identifiers and digests only).
    let details = details_of(
        &copy,
        ("isPromotionToSystem", json!(copy.is_promotion_to_system())),
    )?;
    // The target's organization, and the source's when it is another one.
    let system = system_id(state).await?;
    let mut chains = vec![chain_of(state, &target.repository, &system).await?];
    let source_chain = chain_of(state, &source.repository, &system).await?;
    if !chains.contains(&source_chain) {
        chains.push(source_chain);
    }
    record(
        state,
        caller,
        ("registry.tag.copy", &system),
        &chains,
        &copy.target,
        details,
    )
    .await?;
    log_line(&RegistryEvent::TagCopy(copy.clone()), &target.repository);
    Ok(copy)
}

async fn copy_tree(
    registry: &RegistryClient,
    source: &Reference,
    target: &Reference,
) -> Result<(Digest, Tally), RegistryError> {
    let top = registry
        .manifest(&source.repository, &source.target)
        .await?;
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
    Ok((top.digest, tally))
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
    state: &AppState,
    caller: &Caller,
    reference: Reference,
    force: bool,
) -> ServiceResult<Deleted> {
    let registry = client(state)?;
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
    registry
        .delete_manifest(&repository, &digest)
        .await
        .map_err(ServiceError::Registry)?;
    let deleted = TagDelete {
        actor: caller.user_id.clone(),
        repo: repository.to_string(),
        reference: reference.target.to_string(),
        digest: digest.to_string(),
    };
    let details = details_of(&deleted, ("force", json!(force)))?;
    let system = system_id(state).await?;
    let chain = chain_of(state, &repository, &system).await?;
    record(
        state,
        caller,
        ("registry.tag.delete", &system),
        &[chain],
        &reference.to_string(),
        details,
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
async fn system_id(state: &AppState) -> ServiceResult<String> {
    state
        .store
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
async fn chain_of(
    state: &AppState,
    repository: &Repository,
    system: &str,
) -> ServiceResult<String> {
    let owner = match oci::owner_of(repository) {
        Owner::System => None,
        Owner::Organization(name) => state.store.root_organization_named(&name).await?,
    };
    Ok(owner.map_or_else(|| system.to_owned(), |org| org.id))
}

/// Records the event in each chain: the actor's organization is the system
/// organization, the affected one the repository's.
async fn record(
    state: &AppState,
    caller: &Caller,
    (action, system): (&str, &str),
    chains: &[String],
    target_id: &str,
    details: serde_json::Value,
) -> ServiceResult<()> {
    let events: Vec<_> = chains
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
        .collect();
    Ok(state.store.record_events(&events).await?)
}

/// Writes the event's structured log line to standard output, beside the server's
/// own JSON log lines, whatever `RUST_LOG` says: an audit line is never filtered.
fn log_line(event: &RegistryEvent, repository: &Repository) {
    let line = event.to_labelled_line(LogLabels {
        service_name: SERVICE_NAME,
        plugin_name: Some(oci::plugin_name(repository)),
        timestamp: Some(Utc::now()),
    });
    let mut out = std::io::stdout().lock();
    if let Err(error) = writeln!(out, "{line}") {
        tracing::error!(%error, "the registry's audit log line could not be written");
    }
}
