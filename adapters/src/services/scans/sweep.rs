//! The sweep of a scan: its entities judged page by page under a lease, its counts and
//! results flushed as it goes, taken over when its sweeper dies.

use super::*;

/// How a sweep is run.
#[derive(Debug, Clone, Copy)]
pub struct SweepSettings {
    /// Evaluation jobs at a time.
    pub concurrency: usize,
    /// Entities per page (and per flush).
    pub batch: usize,
    /// How long a claim holds without a flush.
    pub lease: Duration,
}

/// How a sweep ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Swept {
    /// Every entity judged; the scan is `completed`.
    Completed,
    /// The scan was cancelled, another sweeper took it over, or the server is
    /// stopping (the claim given back): stopped.
    Stopped,
    /// It could not go on; the scan is `failed`.
    Failed,
}

/// The fingerprint of the rules a set applies to `target`: SHA-256 of their JSON, in
/// evaluation order (any change of a rule bumps its version, so changes it).
pub fn fingerprint(set: &RuleSet, target: Target) -> String {
    let mut hash = Sha256::new();
    for rule in set.rules(target) {
        if let Ok(bytes) = serde_json::to_vec(rule) {
            hash.update(&bytes);
        }
        hash.update(b"\n");
    }
    hex::encode(hash.finalize())
}

/// An entity to judge: its id, its name, its document.
pub(super) type Entity = (String, String, Value);

/// Sweeps a claimed scan to its end (or until it is stopped).
pub async fn sweep(
    state: &AppState,
    scan: &ScanRecord,
    settings: SweepSettings,
    stopping: &(dyn Fn() -> bool + Sync),
) -> ServiceResult<Swept> {
    let token = scan.sweep.token;
    if scan.sweep.takeovers > MAX_TAKEOVERS {
        let why = format!(
            "its sweeper stopped {} times before it ended",
            scan.sweep.takeovers
        );
        fail(&state.infra.store, scan, &why).await?;
        return Ok(Swept::Failed);
    }
    let Some(org) = state.infra.store.organization(&scan.org_id).await? else {
        fail(
            &state.infra.store,
            scan,
            "the organization no longer exists",
        )
        .await?;
        return Ok(Swept::Failed);
    };
    let filter = stored_filter(scan)?;
    let all = phases(&scan.target);
    let first = all.iter().position(|p| *p == scan.sweep.phase).unwrap_or(0);
    // A page is one flush; its statements bind 9 values per entity, so a page stays
    // under both backends' bind limits.
    let batch = u32::try_from(settings.batch.clamp(1, MAX_PAGE)).unwrap_or(1);
    for (i, phase) in all.iter().enumerate().skip(first) {
        let target: Target = phase
            .parse()
            .map_err(|_| ServiceError::Broken(format!("scan phase `{phase}`")))?;
        let mut after = if i == first {
            scan.sweep.after_id.clone()
        } else {
            String::new()
        };
        // The system organization's set (swept only with SYSTEM_ORG_SCANS_ENABLED) is
        // what validation gives it: no rules.
        let set = crate::compliance::rule_set(
            &state.infra.store,
            &state.replica.rule_cache,
            &state.config,
            &org,
            target,
        )
        .await?;
        let print = fingerprint(&set, target);
        let sweeping = Sweeping {
            state,
            scan,
            org: &org,
            target,
            filter: &filter,
            set: &set,
            settings,
            batch,
        };
        // A page is read and judged while the one before it is flushed: the two
        // overlap, the flushes stay in order (each one fenced by the claim).
        let mut judged: Option<JudgedPage> = None;
        loop {
            let flushed = judged.take();
            let stop = stopping();
            let next = async {
                if stop {
                    return Ok(None);
                }
                sweeping.next_page(&after).await
            };
            let (kept, next) = match &flushed {
                Some(page) => {
                    let flush = Flush {
                        org_id: &org.id,
                        phase,
                        after_id: &page.last,
                        counts: page.counts,
                        fingerprint: &print,
                        lease_until: lease_until(settings.lease),
                        at: Utc::now(),
                        results: &page.rows,
                    };
                    let (kept, next) =
                        tokio::join!(state.infra.store.flush_scan(&scan.id, token, &flush), next);
                    (kept?, next)
                }
                None => (true, next.await),
            };
            if !kept {
                return Ok(Swept::Stopped);
            }
            if let Some(page) = &flushed {
                state.infra.metrics.scanned(page.counts.scanned);
            }
            if stop {
                state.infra.store.release_scan(&scan.id, token).await?;
                return Ok(Swept::Stopped);
            }
            match next? {
                None => break,
                Some(page) => {
                    after.clone_from(&page.last);
                    judged = Some(page);
                }
            }
        }
    }
    let preference = state
        .infra
        .store
        .notification_preference(&scan.org_id)
        .await?;
    let now = Utc::now();
    let notify = |done: &ScanRecord| {
        (done.counts.blocked > 0)
            .then(|| crate::services::notifications::for_scan(&preference, done, now))
    };
    let completed = unit_of_work!(&state.infra.store, |tx| {
        Ok(tx.complete_scan(&scan.id, token, now, &notify).await?)
    })?;
    if completed.is_none() {
        return Ok(Swept::Stopped);
    }
    // The trend's point at the end of the scan (the scan is complete whatever
    // becomes of it; the hourly round writes the next one).
    if let Err(error) =
        crate::services::posture::snapshot(&state.infra.store, &scan.org_id, "scan", now).await
    {
        tracing::warn!(scan = %scan.id, %error, "the scan's posture snapshot was not written");
    }
    Ok(Swept::Completed)
}

/// Ends a scan `failed` with `why` (if the claim still holds).
pub(super) async fn fail(store: &Store, scan: &ScanRecord, why: &str) -> ServiceResult<bool> {
    Ok(store
        .fail_scan(&scan.id, scan.sweep.token, why, Utc::now())
        .await?)
}

pub(super) fn lease_until(lease: Duration) -> DateTime<Utc> {
    Utc::now() + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::seconds(30))
}

/// A page judged, waiting for its flush.
pub(super) struct JudgedPage {
    /// Its last entity id (where the sweep stands once it is flushed).
    last: String,
    /// Its results, in the page's order.
    rows: Vec<SweptEntity>,
    /// Their counts.
    counts: ScanCounts,
}

/// One phase of a sweep: what every page of it shares.
pub(super) struct Sweeping<'a> {
    state: &'a AppState,
    scan: &'a ScanRecord,
    org: &'a OrgRecord,
    target: Target,
    filter: &'a EntityFilter,
    set: &'a Arc<RuleSet>,
    settings: SweepSettings,
    batch: u32,
}

impl Sweeping<'_> {
    /// Reads the page after `after` and judges it (`None`: the phase is done).
    async fn next_page(&self, after: &str) -> ServiceResult<Option<JudgedPage>> {
        let page = self.page(after).await?;
        let Some(last) = page.last().map(|(id, _, _)| id.clone()) else {
            return Ok(None);
        };
        let ids: Vec<&str> = page.iter().map(|(id, _, _)| id.as_str()).collect();
        // An organization with no approved exemption (kept per replica, following
        // every change) asks for none.
        let state = self.state;
        let exemptions = if crate::replica::kept::any_approved_exemption(
            &state.infra.store,
            &state.replica.kept,
            &self.org.id,
        )
        .await?
        {
            state
                .infra
                .store
                .approved_exemptions_of(&self.org.id, &ids)
                .await?
        } else {
            Vec::new()
        };
        let rows = self.judge(page, exemptions).await?;
        let mut counts = ScanCounts::default();
        for row in &rows {
            counts.add(row.result);
        }
        Ok(Some(JudgedPage { last, rows, counts }))
    }

    /// The next page of the sweep: entities with their names and documents.
    async fn page(&self, after: &str) -> ServiceResult<Vec<Entity>> {
        Ok(self
            .state
            .infra
            .store
            .sweep_subjects(
                self.scan,
                (self.target.as_str(), self.filter),
                after,
                self.batch,
            )
            .await?
            .into_iter()
            .map(|s| (s.id, s.name, s.document))
            .collect())
    }

    /// Judges a page on the CPU pool, `settings.concurrency` jobs at a time, and
    /// renders the texts a flush stores there too; the results in the page's order.
    async fn judge(
        &self,
        page: Vec<Entity>,
        exemptions: Vec<Exemption>,
    ) -> ServiceResult<Vec<SweptEntity>> {
        let jobs = self.settings.concurrency.max(1);
        let per_job = page.len().div_ceil(jobs).max(1);
        let exemptions = Arc::new(exemptions);
        let target = self.target;
        let mut chunks: Vec<Vec<Entity>> = Vec::with_capacity(jobs);
        let mut rest = page.into_iter().peekable();
        while rest.peek().is_some() {
            chunks.push(rest.by_ref().take(per_job).collect());
        }
        let mut running = Vec::with_capacity(chunks.len());
        for chunk in chunks {
            let state = self.state.clone();
            let set = Arc::clone(self.set);
            let exemptions = Arc::clone(&exemptions);
            running.push(tokio::spawn(async move {
                let limits = state.config.attribute_limits();
                // Background work: the job waits its turn in the pool's background
                // lane (never more jobs than threads), not refused by requests' work.
                let job = state.infra.cpu.run_in_background(move || {
                    let now = Utc::now();
                    chunk
                        .iter()
                        .map(|(id, name, document)| {
                            let judged = compliance_core::judge(
                                Some(&set),
                                target,
                                document,
                                &limits,
                                &Waivers::for_entity(&exemptions, id, now),
                            );
                            swept(target, (id.clone(), name.clone()), judged, now)
                        })
                        .collect::<Vec<_>>()
                });
                job.await.map_err(|_| ServiceError::Unavailable)
            }));
        }
        let mut results = Vec::new();
        for job in running {
            let done = job
                .await
                .map_err(|e| ServiceError::Broken(format!("a scan job stopped: {e}")))??;
            results.extend(done);
        }
        Ok(results)
    }
}

/// One entity's result, with the text its flush stores: the violations (the judgement
/// the entity then refers to) and their digest.
pub(super) fn swept(
    target: Target,
    (entity_id, entity_name): (String, String),
    judged: Result<Evaluation, compliance_core::Error>,
    now: DateTime<Utc>,
) -> SweptEntity {
    let rendered = judged.map_err(|e| e.to_string()).and_then(|evaluation| {
        serde_json::to_string(&compliance_core::StoredViolations(&evaluation.violations))
            .map(|violations| (evaluation.outcome().as_str(), violations))
            .map_err(|e| format!("its violations do not serialize: {e}"))
    });
    let (result, violations, error) = match rendered {
        Ok((result, violations)) => (result, violations, None),
        Err(why) => ("error", "[]".to_owned(), Some(why)),
    };
    SweptEntity {
        target: target.as_str(),
        entity_id,
        entity_name,
        result,
        digest: crate::storage::judgement_digest(result, &violations),
        violations,
        error,
        scanned_at: now,
    }
}
