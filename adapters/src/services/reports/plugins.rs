//! The four plugin reports: the inventory now, and the build attempts of the range.

use super::*;

/// The plugins by build status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildStatuses {
    /// Waiting for a build.
    pub queued: u64,
    /// Being built.
    pub running: u64,
    /// Built.
    pub completed: u64,
    /// Failed for good.
    pub failed: u64,
    /// Timed out for good.
    pub timed_out: u64,
}

/// The plugin inventory now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    /// Every plugin (each version counts).
    pub total: u64,
    /// Active ones.
    pub active: u64,
    /// Public ones.
    pub public: u64,
    /// Private ones.
    pub private: u64,
    /// By the state of their image build.
    pub build_status: BuildStatuses,
}

/// Build attempts by outcome.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct Attempts {
    /// Every attempt.
    pub total: u64,
    /// Built.
    pub succeeded: u64,
    /// Failed.
    pub failed: u64,
    /// Ran past `PLUGIN_BUILD_TIMEOUT_SECONDS`.
    pub timed_out: u64,
}

/// `GET /api/reports/plugins/summary`.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginSummaryReport {
    /// What was read (the inventory is today's; the attempts the range's).
    pub scope: ReportBasis,
    /// The plugins now.
    pub plugins: Inventory,
    /// The build attempts that began in the range.
    pub builds: Attempts,
}

/// `GET /api/reports/plugins/build-success-rate`: attempts built over attempts
/// ended (a timeout is a failure).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildRateReport {
    /// What was read.
    pub scope: ReportBasis,
    /// The bucket width.
    pub granularity: Granularity,
    /// The whole range.
    pub overall: Rate,
    /// Every bucket, empty ones as zeros.
    pub series: Vec<RateBucket>,
}

/// One plugin's build durations.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginDurations {
    /// The plugin's name.
    pub plugin_name: String,
    /// Its attempts' durations (ms).
    pub durations: Summary,
}

/// `GET /api/reports/plugins/build-duration`.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildDurationReport {
    /// What was read.
    pub scope: ReportBasis,
    /// Every attempt together.
    pub overall: Option<Summary>,
    /// The `limit` plugins with the highest p95.
    pub plugins: Vec<PluginDurations>,
}

/// One failure reason.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReasonCount {
    /// The reason: `timed out`, or the last line the builder wrote.
    pub reason: String,
    /// Attempts that failed for it.
    pub count: u64,
    /// Its share of the failures, 0 to 1.
    pub share: f64,
}

/// `GET /api/reports/plugins/build-failures`.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildFailureReport {
    /// What was read.
    pub scope: ReportBasis,
    /// Failed and timed-out attempts.
    pub failures: u64,
    /// The `limit` most frequent reasons (then by text).
    pub reasons: Vec<ReasonCount>,
}

fn attempt_outcome(outcome: &str) -> &'static str {
    match outcome {
        "succeeded" => "success",
        "failed" | "timed_out" => "failure",
        _ => "excluded",
    }
}

/// The plugin summary report.
pub async fn plugin_summary(query: &ReportQuery) -> ServiceResult<PluginSummaryReport> {
    let inventory = query
        .reading
        .plugin_inventory(&query.org_ids, query.plugin_name.as_deref())
        .await?;
    let attempts = query.reading.build_attempts(&query.attempt_scope()).await?;
    let mut plugins = Inventory::default();
    for (status, access, active, n) in inventory {
        plugins.total += n;
        if active {
            plugins.active += n;
        }
        match access.as_str() {
            "public" => plugins.public += n,
            _ => plugins.private += n,
        }
        let s = &mut plugins.build_status;
        match status.as_str() {
            "queued" => s.queued += n,
            "running" => s.running += n,
            "completed" => s.completed += n,
            "timed_out" => s.timed_out += n,
            _ => s.failed += n,
        }
    }
    let mut builds = Attempts::default();
    for a in &attempts {
        builds.total += 1;
        match a.outcome.as_str() {
            "succeeded" => builds.succeeded += 1,
            "timed_out" => builds.timed_out += 1,
            _ => builds.failed += 1,
        }
    }
    Ok(PluginSummaryReport {
        scope: query.scope(),
        plugins,
        builds,
    })
}

/// The build success-rate report.
pub async fn build_success_rate(query: &ReportQuery) -> ServiceResult<BuildRateReport> {
    let attempts = query.reading.build_attempts(&query.attempt_scope()).await?;
    let (overall, series) = rate_series(
        query,
        attempts.iter().map(|a| {
            (
                Some(query.granularity.bucket_of(a.started_at)),
                attempt_outcome(&a.outcome),
                1,
            )
        }),
    );
    Ok(BuildRateReport {
        scope: query.scope(),
        granularity: query.granularity,
        overall,
        series,
    })
}

/// The build duration report.
pub async fn build_duration(query: &ReportQuery) -> ServiceResult<BuildDurationReport> {
    let attempts = query.reading.build_attempts(&query.attempt_scope()).await?;
    Ok(build_duration_of(query, &attempts))
}

/// The build durations of `attempts` (pure).
pub fn build_duration_of(query: &ReportQuery, attempts: &[AttemptRow]) -> BuildDurationReport {
    let mut all = Vec::new();
    let mut by_plugin: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for a in attempts {
        all.push(a.duration_ms);
        by_plugin
            .entry(&a.plugin_name)
            .or_default()
            .push(a.duration_ms);
    }
    let mut plugins: Vec<PluginDurations> = by_plugin
        .into_iter()
        .filter_map(|(name, values)| {
            Some(PluginDurations {
                plugin_name: name.to_owned(),
                durations: Summary::of(values)?,
            })
        })
        .collect();
    plugins.sort_by(|a, b| {
        by_p95_then_key(
            (&a.durations, &a.plugin_name),
            (&b.durations, &b.plugin_name),
        )
    });
    plugins.truncate(query.limit);
    BuildDurationReport {
        scope: query.scope(),
        overall: Summary::of(all),
        plugins,
    }
}

/// The build failure report.
pub async fn build_failures(query: &ReportQuery) -> ServiceResult<BuildFailureReport> {
    let attempts = query.reading.build_attempts(&query.attempt_scope()).await?;
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    let mut failures = 0u64;
    for a in attempts
        .iter()
        .filter(|a| attempt_outcome(&a.outcome) == "failure")
    {
        failures += 1;
        // Every failed attempt is recorded with its reason (reporting::failure_reason).
        let reason = a.reason.as_deref().ok_or_else(|| {
            ServiceError::Broken("plugin_build_attempts: a failed attempt has no reason".to_owned())
        })?;
        *counts.entry(reason).or_default() += 1;
    }
    let mut reasons: Vec<ReasonCount> = counts
        .into_iter()
        .map(|(reason, count)| ReasonCount {
            reason: reason.to_owned(),
            count,
            share: count as f64 / failures.max(1) as f64,
        })
        .collect();
    reasons.sort_by(|a, b| b.count.cmp(&a.count).then(a.reason.cmp(&b.reason)));
    reasons.truncate(query.limit);
    Ok(BuildFailureReport {
        scope: query.scope(),
        failures,
        reasons,
    })
}
