//! Organization exports as a background job: asked for (202, audited
//! `admin.org.export`), taken by one replica under a lease, written a page at a
//! time into an archive on local disk ([`crate::org_export`]: memory stays flat
//! whatever the organization's size), then stored in chunks with the job marked
//! done in one transaction; downloadable for 24 hours, then forgotten. Secrets are
//! never read into an archive (the columns that hold them are left out).

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::Stream;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::org_export::{ArchiveWriter, AUDIT_FILE};
use crate::services::context::Caller;
use crate::services::{ServiceError, ServiceResult};
/// An export job, as the workflows answer it.
pub use crate::storage::ExportRecord;
use crate::storage::{unit_of_work, ExportSource, OrgRecord, Store};

/// Rows read at a time.
pub const PAGE: u32 = 1000;
/// How long a replica holds a job before another may take it over.
pub const LEASE: Duration = Duration::from_secs(600);
/// How long a finished archive can be downloaded.
pub const DOWNLOAD_HOURS: i64 = 24;

const NO_SECRETS: &[&str] = &[];

/// What an archive holds, file by file: the organization, its teams, people and
/// Roles, its rules and policies, its inventory, its settings (never a secret).
pub const SOURCES: [(&str, ExportSource); 20] = [
    (
        "organization.jsonl",
        source("organizations", "id", "id", NO_SECRETS),
    ),
    (
        "teams.jsonl",
        source("organizations", "parent_org_id", "id", NO_SECRETS),
    ),
    (
        "members.jsonl",
        source("memberships", "org_id", "user_id", NO_SECRETS),
    ),
    ("roles.jsonl", source("roles", "org_id", "id", NO_SECRETS)),
    (
        "role-members.jsonl",
        source(
            "role_members",
            "org_id",
            "role_id || '/' || user_id",
            NO_SECRETS,
        ),
    ),
    (
        "invitations.jsonl",
        source("invitations", "org_id", "id", NO_SECRETS),
    ),
    ("rules.jsonl", source("rules", "org_id", "id", NO_SECRETS)),
    (
        "policies.jsonl",
        source("policies", "org_id", "id", NO_SECRETS),
    ),
    (
        "subscriptions.jsonl",
        source("subscriptions", "org_id", "rule_id", NO_SECRETS),
    ),
    (
        "exemptions.jsonl",
        source("exemptions", "org_id", "id", NO_SECRETS),
    ),
    (
        "pipelines.jsonl",
        source("pipelines", "org_id", "id", NO_SECRETS),
    ),
    (
        "plugins.jsonl",
        source("plugins", "org_id", "id", NO_SECRETS),
    ),
    (
        "notification-preferences.jsonl",
        source(
            "notification_preferences",
            "org_id",
            "org_id",
            &["webhook_secret"],
        ),
    ),
    (
        "domains.jsonl",
        source("org_domains", "org_id", "domain", NO_SECRETS),
    ),
    (
        "identity-providers.jsonl",
        source("org_idp_configs", "org_id", "id", &["client_secret"]),
    ),
    (
        "sso-policy.jsonl",
        source("org_sso_policies", "org_id", "org_id", NO_SECRETS),
    ),
    (
        "dashboards.jsonl",
        source("dashboards", "org_id", "id", NO_SECRETS),
    ),
    (
        "alert-rules.jsonl",
        source("alert_rules", "org_id", "id", NO_SECRETS),
    ),
    (
        "alert-destinations.jsonl",
        source("alert_destinations", "org_id", "id", &["secret"]),
    ),
    (
        "ai-settings.jsonl",
        source(
            "org_ai_settings",
            "org_id",
            "org_id",
            &["own_api_key", "own_key_hint"],
        ),
    ),
];

const fn source(
    table: &'static str,
    org_column: &'static str,
    key: &'static str,
    skip: &'static [&'static str],
) -> ExportSource {
    ExportSource {
        table,
        org_column,
        key,
        skip,
    }
}

/// Asks for an export of `org` (one at a time per organization: another while one
/// is queued or running is 409). Audited `admin.org.export` in its chain and the
/// system organization's.
pub async fn request(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    now: DateTime<Utc>,
) -> ServiceResult<ExportRecord> {
    let record = ExportRecord {
        id: crate::new_id(),
        org_id: org.id.clone(),
        requested_by: caller.user_id.clone(),
        status: "queued".to_owned(),
        error: None,
        created_at: now,
        started_at: None,
        finished_at: None,
        expires_at: None,
        size_bytes: None,
        sha256: None,
    };
    let audit = super::admin::org_events(
        store,
        caller,
        "admin.org.export",
        &org.id,
        json!({"exportId": record.id}),
    )
    .await?;
    unit_of_work!(store, |tx| {
        if !tx.create_export(&record).await? {
            tx.abandon();
            return Err(ServiceError::Conflict(
                "an export of this organization is being made: wait for it".to_owned(),
            ));
        }
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    Ok(record)
}

/// An export job of `org`.
pub async fn status(store: &Store, org: &OrgRecord, id: &str) -> ServiceResult<ExportRecord> {
    store
        .export(&org.id, id)
        .await?
        .ok_or(ServiceError::NotFound("export".into()))
}

/// A finished archive's bytes, chunk by chunk: 409 until it is done, 410 once its
/// download window closed.
pub async fn download(
    store: &Store,
    org: &OrgRecord,
    id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<(
    ExportRecord,
    impl Stream<Item = Result<Vec<u8>, std::io::Error>>,
)> {
    let record = status(store, org, id).await?;
    match record.status.as_str() {
        "done" if record.expires_at.is_some_and(|at| at > now) => {}
        "done" | "expired" => {
            return Err(ServiceError::Gone(
                "the export's download window (24 hours) has closed: ask for a new one".to_owned(),
            ))
        }
        "failed" => {
            return Err(ServiceError::Conflict(format!(
                "the export failed: {}",
                record.error.as_deref().unwrap_or("unknown")
            )))
        }
        _ => {
            return Err(ServiceError::Conflict(
                "the export is not done yet".to_owned(),
            ))
        }
    }
    let store = store.clone();
    let chunks = futures_util::stream::unfold(
        (store, record.id.clone(), 0i64),
        |(store, id, seq)| async move {
            if seq < 0 {
                return None;
            }
            match store.export_chunk(&id, seq).await {
                Ok(Some(data)) => Some((Ok(data), (store, id, seq + 1))),
                Ok(None) => None,
                Err(error) => Some((
                    Err(std::io::Error::other(error.to_string())),
                    (store, id, -1),
                )),
            }
        },
    );
    Ok((record, chunks))
}

/// Forgets the archives whose download window closed; how many.
pub async fn forget_expired(store: &Store, now: DateTime<Utc>) -> ServiceResult<u64> {
    unit_of_work!(store, |tx| { Ok(tx.forget_expired_exports(now).await?) })
}

/// Takes one export job and makes its archive; whether there was one. A failure is
/// recorded on the job (the next request may try again).
pub async fn run_due(store: &Store, holder: &str, now: DateTime<Utc>) -> ServiceResult<bool> {
    let lease = chrono::Duration::from_std(LEASE).unwrap_or(chrono::Duration::minutes(10));
    let Some(job) = store.claim_export(holder, now, now + lease).await? else {
        return Ok(false);
    };
    let path = std::env::temp_dir().join(format!("compliance-export-{}.zip", job.id));
    let built = build(store, &job, &path).await;
    let outcome = match built {
        Ok((size, sha256)) => {
            let stored = match tokio::fs::File::open(&path).await {
                Ok(mut file) => {
                    let done_at = Utc::now();
                    store
                        .finish_export(
                            (&job.id, holder),
                            &mut file,
                            (size, &sha256),
                            (done_at, done_at + chrono::Duration::hours(DOWNLOAD_HOURS)),
                        )
                        .await
                        .map_err(ServiceError::from)
                }
                Err(error) => Err(ServiceError::Broken(format!(
                    "the export's archive: {error}"
                ))),
            };
            match stored {
                Ok(true) => {
                    tracing::info!(export = %job.id, org = %job.org_id, size, "organization export done");
                    Ok(())
                }
                Ok(false) => {
                    tracing::warn!(export = %job.id, "an export's lease was lost: another replica makes it");
                    Ok(())
                }
                Err(error) => Err(error),
            }
        }
        Err(error) => Err(error),
    };
    let _ = tokio::fs::remove_file(&path).await;
    if let Err(error) = outcome {
        tracing::warn!(export = %job.id, %error, "an organization export failed");
        store
            .fail_export((&job.id, holder), &error.to_string(), Utc::now())
            .await?;
    }
    Ok(true)
}

/// Runs `work` on the writer off the async runtime (compression is CPU work), and
/// gives the writer back.
async fn on_writer<F>(writer: ArchiveWriter, work: F) -> ServiceResult<ArchiveWriter>
where
    F: FnOnce(&mut ArchiveWriter) -> Result<(), crate::org_export::ArchiveError> + Send + 'static,
{
    tokio::task::spawn_blocking(move || {
        let mut writer = writer;
        work(&mut writer).map(|()| writer)
    })
    .await
    .map_err(|e| ServiceError::Broken(format!("the export's writer: {e}")))?
    .map_err(|e| ServiceError::Broken(format!("the export's archive: {e}")))
}

/// Writes the archive of `job` at `path`: each resource a page at a time, then the
/// audit chain (the newest signed checkpoint first, as `compliance audit verify`
/// reads it), then the manifest. Answers the archive's size and SHA-256.
async fn build(
    store: &Store,
    job: &ExportRecord,
    path: &std::path::Path,
) -> ServiceResult<(u64, String)> {
    let at = path.to_owned();
    let mut writer = tokio::task::spawn_blocking(move || ArchiveWriter::create(&at))
        .await
        .map_err(|e| ServiceError::Broken(e.to_string()))?
        .map_err(|e| ServiceError::Broken(format!("the export's archive: {e}")))?;
    for (file, source) in &SOURCES {
        let name = (*file).to_owned();
        writer = on_writer(writer, move |w| w.begin(&name)).await?;
        let mut after = String::new();
        loop {
            let rows = store.export_rows(source, &job.org_id, &after, PAGE).await?;
            let Some((last, _)) = rows.last() else { break };
            after = last.clone();
            let full = rows.len() == PAGE as usize;
            writer = on_writer(writer, move |w| {
                rows.into_iter()
                    .try_for_each(|(_, row)| w.line(&Value::Object(row)))
            })
            .await?;
            if !full {
                break;
            }
        }
    }
    // The organization's audit chain, from its first event.
    writer = on_writer(writer, |w| w.begin(AUDIT_FILE)).await?;
    let (checkpoints, _) = store.checkpoints(&job.org_id, 1, 0).await?;
    if let Some(newest) = checkpoints.into_iter().next() {
        let line = json!({"checkpoint": newest.note});
        writer = on_writer(writer, move |w| w.line(&line)).await?;
    }
    let mut after = 0;
    loop {
        let rows = store.chain_batch(&job.org_id, after, PAGE).await?;
        let Some(last) = rows.last() else { break };
        after = last.seq;
        let full = rows.len() == PAGE as usize;
        let lines = rows
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ServiceError::Broken(format!("an audit row: {e}")))?;
        writer = on_writer(writer, move |w| lines.iter().try_for_each(|l| w.line(l))).await?;
        if !full {
            break;
        }
    }
    let (org_id, created_at) = (job.org_id.clone(), job.created_at);
    let at = path.to_owned();
    tokio::task::spawn_blocking(move || {
        writer.finish(&org_id, created_at)?;
        let mut file = std::fs::File::open(&at)?;
        let mut hash = Sha256::new();
        let mut buffer = vec![0u8; 64 * 1024];
        let mut size = 0u64;
        loop {
            let read = std::io::Read::read(&mut file, &mut buffer)?;
            if read == 0 {
                break;
            }
            hash.update(buffer.get(..read).unwrap_or_default());
            size += read as u64;
        }
        Ok::<_, crate::org_export::ArchiveError>((size, hex::encode(hash.finalize())))
    })
    .await
    .map_err(|e| ServiceError::Broken(e.to_string()))?
    .map_err(|e| ServiceError::Broken(format!("the export's archive: {e}")))
}
