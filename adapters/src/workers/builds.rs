//! The plugin build worker (every replica runs it; a claim is exclusive, so no lease):
//! claims a due job, unpacks the plugin's archive into a fresh temporary directory,
//! runs `PLUGIN_BUILD_COMMAND` there with a timeout, and records where the job goes
//! next. The terminal outcome is audit-chain's [`BuildOutcome`]: exactly one of
//! plugin.build.completed, or plugin.build.failed / plugin.build.timeout once the dead
//! letter queue is exhausted; retries wait `PLUGIN_BUILD_RETRY_SECONDS`, doubled per
//! failed attempt in the same queue.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use audit_chain::{Attempt, BuildOutcome, BuildState};
use chrono::{DateTime, Utc};
use serde_json::json;
use tokio::io::AsyncReadExt;

use super::Shutdown;
use crate::audit::Action;
use crate::config::BuildSettings;
use crate::storage::{unit_of_work, BuildJob, NextStep, Store, StoreError, StoreResult};

/// The actor of a build's audit events.
pub const ACTOR: &str = "system:plugin-builds";

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ran {
    /// The builder exited 0.
    Succeeded,
    /// It failed (exit status, or the archive could not be unpacked), with why.
    Failed(String),
    /// It ran past the timeout and was killed.
    TimedOut,
}

/// The owned form of a [`NextStep`], with the terminal audit action if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// `tier` or `dlq`.
    pub queue: &'static str,
    /// `queued`, `completed`, `failed` or `timed_out`.
    pub status: &'static str,
    /// Attempts made in that queue.
    pub attempts: u32,
    /// Not before.
    pub run_after: DateTime<Utc>,
    /// The terminal audit action.
    pub action: Option<&'static str>,
}

fn backoff(base: Duration, attempts: u32) -> chrono::Duration {
    let factor = 2u32.saturating_pow(attempts.saturating_sub(1).min(16));
    chrono::Duration::from_std(base.saturating_mul(factor)).unwrap_or(chrono::Duration::MAX)
}

/// Where a job goes after an attempt: audit-chain's state machine decides the state;
/// the settings decide the attempts and the waits.
pub fn decide(job: &BuildJob, ran: &Ran, settings: &BuildSettings, now: DateTime<Utc>) -> Decision {
    let in_dlq = job.queue == "dlq";
    let (state, max) = if in_dlq {
        (BuildState::DeadLetterQueue, settings.dlq_attempts)
    } else {
        (BuildState::TierQueue, settings.tier_attempts)
    };
    let attempts = job.attempts.saturating_add(1);
    let final_attempt = attempts >= max;
    let attempt = match ran {
        Ran::Succeeded => Attempt::Succeeded,
        Ran::Failed(_) => Attempt::Failed { final_attempt },
        Ran::TimedOut => Attempt::TimedOut { final_attempt },
    };
    let mut outcome = BuildOutcome::resume(state);
    let action = outcome.record(attempt).unwrap_or(None);
    let queue = if in_dlq { "dlq" } else { "tier" };
    match outcome.state() {
        BuildState::Completed => Decision {
            queue,
            status: "completed",
            attempts,
            run_after: now,
            action,
        },
        BuildState::Failed => Decision {
            queue,
            status: "failed",
            attempts,
            run_after: now,
            action,
        },
        BuildState::TimedOut => Decision {
            queue,
            status: "timed_out",
            attempts,
            run_after: now,
            action,
        },
        BuildState::DeadLetterQueue if !in_dlq => Decision {
            queue: "dlq",
            status: "queued",
            attempts: 0,
            run_after: now + backoff(settings.retry_delay, 1),
            action,
        },
        BuildState::TierQueue | BuildState::DeadLetterQueue => Decision {
            queue,
            status: "queued",
            attempts,
            run_after: now + backoff(settings.retry_delay, attempts),
            action,
        },
    }
}

/// Runs until the server stops.
pub async fn run(store: Store, settings: BuildSettings, mut shutdown: Shutdown) {
    let Some(command) = settings.command.clone() else {
        tracing::warn!("PLUGIN_BUILD_COMMAND is unset: plugin builds wait queued");
        return;
    };
    loop {
        if shutdown.is_set() {
            break;
        }
        match step(&store, &settings, &command).await {
            // A job was done: look for the next at once.
            Ok(true) => continue,
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "plugin build round failed; retrying"),
        }
        tokio::select! {
            _ = tokio::time::sleep(settings.poll) => {}
            _ = shutdown.wait() => break,
        }
    }
}

/// Claims the next due job (or one whose claim expired) until `lease_until`.
pub async fn claim(
    store: &Store,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
) -> StoreResult<Option<BuildJob>> {
    unit_of_work!(store, |tx| -> StoreError {
        tx.claim_build(now, lease_until).await
    })
}

/// Claims and runs one job; whether there was one.
pub async fn step(store: &Store, settings: &BuildSettings, command: &str) -> StoreResult<bool> {
    let now = Utc::now();
    let lease = now
        + chrono::Duration::from_std(settings.timeout + Duration::from_secs(60))
            .unwrap_or(chrono::Duration::MAX);
    let Some(job) = claim(store, now, lease).await? else {
        return Ok(false);
    };
    let ran = attempt(store, &job, settings, command).await;
    let now = Utc::now();
    let decision = decide(&job, &ran, settings, now);
    let (outcome, error) = match &ran {
        Ran::Succeeded => ("succeeded", None),
        Ran::Failed(why) => ("failed", Some(why.as_str())),
        Ran::TimedOut => ("timed_out", Some("the build ran past its timeout")),
    };
    // The plugin's build status follows the job's.
    let plugin_status = decision.status;
    let audit: Vec<_> = decision
        .action
        .map(|action| {
            Action {
                action,
                actor_id: ACTOR,
                org_id: &job.org_id,
                target_type: "plugin",
                target_id: &job.plugin_id,
                details: json!({"buildId": job.id, "image": job.image, "queue": decision.queue, "attempts": decision.attempts}),
                outcome: if action == "plugin.build.completed" { "success" } else { "failure" },
                ..Action::default()
            }
            .into_event()
        })
        .into_iter()
        .collect();
    let reason = reporting::failure_reason(outcome, error);
    let next = NextStep {
        queue: decision.queue,
        status: decision.status,
        attempts: decision.attempts,
        run_after: decision.run_after,
        outcome,
        error,
        reason: reason.as_deref(),
        plugin_status,
    };
    // The outcome and its terminal audit event are durable together, or neither.
    let held = unit_of_work!(store, |tx| -> StoreError {
        let held = tx.finish_build(&job, &next, now).await?;
        if held {
            tx.enqueue_audit(&audit).await?;
        }
        Ok(held)
    })?;
    if !held {
        tracing::warn!(job = %job.id, "a build's claim expired before it finished; its outcome is not recorded");
    }
    Ok(true)
}

/// The last bytes of the builder's output kept as the error.
const ERROR_TAIL: usize = 2048;

async fn attempt(store: &Store, job: &BuildJob, settings: &BuildSettings, command: &str) -> Ran {
    let archive = match store.plugin_archive(&job.plugin_id).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ran::Failed("the plugin's archive is gone".to_owned()),
        Err(e) => return Ran::Failed(format!("the plugin's archive cannot be read: {e}")),
    };
    let dir: PathBuf = std::env::temp_dir().join(format!("compliance-build-{}", job.id));
    let unpacked = {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            crate::archive::unpack(&archive, &dir).map_err(|e| e.to_string())
        })
        .await
    };
    let ran = match unpacked {
        Ok(Ok(())) => build(job, settings, command, &dir).await,
        Ok(Err(why)) => Ran::Failed(format!("the archive cannot be unpacked: {why}")),
        Err(_) => Ran::Failed("the archive cannot be unpacked".to_owned()),
    };
    let cleanup = dir.clone();
    let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(cleanup)).await;
    ran
}

async fn build(
    job: &BuildJob,
    settings: &BuildSettings,
    command: &str,
    dir: &std::path::Path,
) -> Ran {
    let (name, version) = job
        .image
        .rsplit_once('/')
        .and_then(|(_, tail)| tail.split_once(':'))
        .unwrap_or_default();
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .env("PLUGIN_DIR", dir)
        .env("PLUGIN_IMAGE", &job.image)
        .env("PLUGIN_NAME", name)
        .env("PLUGIN_VERSION", version)
        .env("PLUGIN_BUILD_ID", &job.id)
        .env("PLUGIN_BUILD_QUEUE", &job.queue)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => return Ran::Failed(format!("the builder cannot start: {e}")),
    };
    let mut stderr = child.stderr.take();
    let waited = tokio::time::timeout(settings.timeout, async {
        let mut output = Vec::new();
        if let Some(stderr) = stderr.as_mut() {
            let _ = stderr.take(1024 * 1024).read_to_end(&mut output).await;
        }
        (child.wait().await, output)
    })
    .await;
    match waited {
        Err(_) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            Ran::TimedOut
        }
        Ok((Ok(status), _)) if status.success() => Ran::Succeeded,
        Ok((Ok(status), output)) => {
            let text = String::from_utf8_lossy(&output);
            let start = text.len().saturating_sub(ERROR_TAIL);
            let tail = text.get(start..).unwrap_or_default().trim();
            Ran::Failed(format!("the builder exited with {status}: {tail}"))
        }
        Ok((Err(e), _)) => Ran::Failed(format!("the builder could not be waited for: {e}")),
    }
}
