//! The six execution reports: the database groups and counts the derived
//! executions and stage runs of the scope, Rust computes the rates and summaries.

use super::*;

/// Executions by what they ended as.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Every execution.
    pub total: u64,
    /// `SUCCEEDED`.
    pub succeeded: u64,
    /// `FAILED`.
    pub failed: u64,
    /// `STOPPED` (counted as failures in rates).
    pub stopped: u64,
    /// `CANCELED`.
    pub canceled: u64,
    /// `SUPERSEDED`.
    pub superseded: u64,
    /// Not ended yet.
    pub running: u64,
}

impl Counts {
    fn add(&mut self, state: &str, n: u64) {
        self.total += n;
        match state {
            "SUCCEEDED" => self.succeeded += n,
            "FAILED" => self.failed += n,
            "STOPPED" => self.stopped += n,
            "CANCELED" | "ABANDONED" => self.canceled += n,
            "SUPERSEDED" => self.superseded += n,
            _ => self.running += n,
        }
    }
}

/// One pipeline's counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineCounts {
    /// The pipeline.
    pub pipeline_id: String,
    /// Its executions.
    #[serde(flatten)]
    pub counts: Counts,
}

/// `GET /api/reports/execution/count`.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CountReport {
    /// What was read.
    pub scope: ReportBasis,
    /// Every pipeline together.
    pub overall: Counts,
    /// The `limit` pipelines with the most executions (then by id).
    pub pipelines: Vec<PipelineCounts>,
}

/// `GET /api/reports/execution/success-rate`.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuccessRateReport {
    /// What was read.
    pub scope: ReportBasis,
    /// The bucket width.
    pub granularity: Granularity,
    /// The whole range.
    pub overall: Rate,
    /// Every bucket of the range, empty ones as zeros.
    pub series: Vec<RateBucket>,
}

/// One pipeline's durations.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineDurations {
    /// The pipeline.
    pub pipeline_id: String,
    /// Its finished executions' durations (ms).
    pub durations: Summary,
}

/// `GET /api/reports/execution/duration`: over finished executions (succeeded,
/// failed or stopped, with an end).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DurationReport {
    /// What was read.
    pub scope: ReportBasis,
    /// Every pipeline together (none without a finished execution).
    pub overall: Option<Summary>,
    /// The `limit` pipelines with the highest p95.
    pub pipelines: Vec<PipelineDurations>,
}

/// One bucket of a stage's failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CountBucket {
    /// The bucket's start.
    pub start: DateTime<Utc>,
    /// How many.
    pub count: u64,
}

/// One stage's row of the heat map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageFailures {
    /// The pipeline.
    pub pipeline_id: String,
    /// The stage.
    pub stage: String,
    /// Its failures over the range.
    pub failures: u64,
    /// Every bucket, empty ones as zeros.
    pub series: Vec<CountBucket>,
}

/// `GET /api/reports/execution/stage-failures`: a heat map of stage failures.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageFailureReport {
    /// What was read.
    pub scope: ReportBasis,
    /// The bucket width.
    pub granularity: Granularity,
    /// The `limit` stages that failed most (then by pipeline and name).
    pub stages: Vec<StageFailures>,
}

/// One stage's durations.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageDurations {
    /// The pipeline.
    pub pipeline_id: String,
    /// The stage.
    pub stage: String,
    /// Its ended runs' durations (ms).
    pub durations: Summary,
}

/// `GET /api/reports/execution/stage-bottlenecks`: the slowest stages.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BottleneckReport {
    /// What was read.
    pub scope: ReportBasis,
    /// The `limit` stages with the highest p95 (then by pipeline and name).
    pub stages: Vec<StageDurations>,
}

/// One error category's failures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CategoryCount {
    /// The category.
    pub category: ErrorCategory,
    /// Failed executions in it.
    pub count: u64,
    /// Its share of the failures, 0 to 1.
    pub share: f64,
}

/// `GET /api/reports/execution/errors`.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorReport {
    /// What was read.
    pub scope: ReportBasis,
    /// Failed (and stopped) executions.
    pub failures: u64,
    /// The `limit` categories with the most failures (then by name).
    pub categories: Vec<CategoryCount>,
}

/// The column expression of a bucket of `granularity` over a stored instant (RFC
/// 3339 text, UTC): its first 13 characters are its hour, its first 10 its day;
/// weeks are made of days here.
fn bucket_key(granularity: Granularity) -> &'static str {
    match granularity {
        Granularity::Hour => "substr(started_at, 1, 13)",
        Granularity::Day | Granularity::Week => "substr(started_at, 1, 10)",
    }
}

/// The bucket of a grouped key (`2026-11-20T10` or `2026-11-20`).
fn bucket_of(granularity: Granularity, key: &str) -> Option<DateTime<Utc>> {
    let text = if key.len() == 13 {
        format!("{key}:00:00Z")
    } else {
        format!("{key}T00:00:00Z")
    };
    let at = DateTime::parse_from_rfc3339(&text)
        .ok()?
        .with_timezone(&Utc);
    Some(granularity.bucket_of(at))
}

fn key(group: &[Option<String>], i: usize) -> &str {
    group.get(i).and_then(|k| k.as_deref()).unwrap_or_default()
}

/// The execution count report: executions grouped by pipeline and state.
pub async fn count(query: &ReportQuery) -> ServiceResult<CountReport> {
    let groups = query
        .reading
        .report_counts(
            "report_executions",
            &query.store_scope(),
            &["pipeline_id", "state"],
            "",
        )
        .await?;
    let mut overall = Counts::default();
    let mut by_pipeline: BTreeMap<String, Counts> = BTreeMap::new();
    for (group, n) in &groups {
        let (pipeline, state) = (key(group, 0), key(group, 1));
        overall.add(state, *n);
        by_pipeline
            .entry(pipeline.to_owned())
            .or_default()
            .add(state, *n);
    }
    let mut pipelines: Vec<PipelineCounts> = by_pipeline
        .into_iter()
        .map(|(pipeline_id, counts)| PipelineCounts {
            pipeline_id,
            counts,
        })
        .collect();
    pipelines.sort_by(|a, b| {
        b.counts
            .total
            .cmp(&a.counts.total)
            .then(a.pipeline_id.cmp(&b.pipeline_id))
    });
    pipelines.truncate(query.limit);
    Ok(CountReport {
        scope: query.scope(),
        overall,
        pipelines,
    })
}

/// The success-rate report: executions grouped by bucket and outcome.
pub async fn success_rate(query: &ReportQuery) -> ServiceResult<SuccessRateReport> {
    let groups = query
        .reading
        .report_counts(
            "report_executions",
            &query.store_scope(),
            &[bucket_key(query.granularity), "outcome"],
            "",
        )
        .await?;
    let (overall, series) = rate_series(
        query,
        groups.iter().map(|(group, n)| {
            (
                bucket_of(query.granularity, key(group, 0)),
                key(group, 1),
                *n,
            )
        }),
    );
    Ok(SuccessRateReport {
        scope: query.scope(),
        granularity: query.granularity,
        overall,
        series,
    })
}

/// Summaries per key of a `(keys, duration, count)` histogram, overall and for the
/// `limit` keys with the highest p95.
fn summaries(
    limit: usize,
    rows: Vec<(Vec<String>, i64, u64)>,
) -> (Option<Summary>, Vec<(Vec<String>, Summary)>) {
    let mut all: BTreeMap<i64, u64> = BTreeMap::new();
    let mut by_key: BTreeMap<Vec<String>, Vec<(i64, u64)>> = BTreeMap::new();
    for (group, ms, n) in rows {
        *all.entry(ms).or_default() += n;
        by_key.entry(group).or_default().push((ms, n));
    }
    let mut keyed: Vec<(Vec<String>, Summary)> = by_key
        .into_iter()
        .filter_map(|(group, pairs)| Some((group, Summary::of_histogram(pairs)?)))
        .collect();
    keyed.sort_by(|a, b| by_p95_then_key((&a.1, &a.0), (&b.1, &b.0)));
    keyed.truncate(limit);
    (Summary::of_histogram(all.into_iter().collect()), keyed)
}

/// The duration report: finished executions' durations.
pub async fn duration(query: &ReportQuery) -> ServiceResult<DurationReport> {
    let rows = query
        .reading
        .report_durations(
            "report_executions",
            &query.store_scope(),
            &["pipeline_id"],
            "AND outcome IN ('success', 'failure')",
        )
        .await?;
    let (overall, keyed) = summaries(query.limit, rows);
    Ok(DurationReport {
        scope: query.scope(),
        overall,
        pipelines: keyed
            .into_iter()
            .map(|(group, durations)| PipelineDurations {
                pipeline_id: group.into_iter().next().unwrap_or_default(),
                durations,
            })
            .collect(),
    })
}

/// The stage failure heat map: failed stage runs grouped by stage and bucket.
pub async fn stage_failures(query: &ReportQuery) -> ServiceResult<StageFailureReport> {
    let groups = query
        .reading
        .report_counts(
            "report_stages",
            &query.store_scope(),
            &["pipeline_id", "stage", bucket_key(query.granularity)],
            "AND state = 'FAILED'",
        )
        .await?;
    let buckets = query.range.buckets(query.granularity);
    let mut by_stage: BTreeMap<(String, String), BTreeMap<DateTime<Utc>, u64>> = BTreeMap::new();
    for (group, n) in &groups {
        let Some(bucket) = bucket_of(query.granularity, key(group, 2)) else {
            continue;
        };
        *by_stage
            .entry((key(group, 0).to_owned(), key(group, 1).to_owned()))
            .or_default()
            .entry(bucket)
            .or_default() += n;
    }
    type Row = (u64, (String, String), BTreeMap<DateTime<Utc>, u64>);
    let mut stages: Vec<Row> = by_stage
        .into_iter()
        .map(|(key, counts)| (counts.values().sum(), key, counts))
        .collect();
    stages.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    stages.truncate(query.limit);
    Ok(StageFailureReport {
        scope: query.scope(),
        granularity: query.granularity,
        stages: stages
            .into_iter()
            .map(|(failures, (pipeline_id, stage), counts)| StageFailures {
                pipeline_id,
                stage,
                failures,
                series: buckets
                    .iter()
                    .map(|start| CountBucket {
                        start: *start,
                        count: counts.get(start).copied().unwrap_or(0),
                    })
                    .collect(),
            })
            .collect(),
    })
}

/// The stage bottleneck report: ended stage runs' durations.
pub async fn stage_bottlenecks(query: &ReportQuery) -> ServiceResult<BottleneckReport> {
    let rows = query
        .reading
        .report_durations(
            "report_stages",
            &query.store_scope(),
            &["pipeline_id", "stage"],
            "",
        )
        .await?;
    let (_, keyed) = summaries(query.limit, rows);
    Ok(BottleneckReport {
        scope: query.scope(),
        stages: keyed
            .into_iter()
            .map(|(group, durations)| {
                let mut parts = group.into_iter();
                StageDurations {
                    pipeline_id: parts.next().unwrap_or_default(),
                    stage: parts.next().unwrap_or_default(),
                    durations,
                }
            })
            .collect(),
    })
}

/// The error category report: failed executions grouped by category.
pub async fn errors(query: &ReportQuery) -> ServiceResult<ErrorReport> {
    let groups = query
        .reading
        .report_counts(
            "report_executions",
            &query.store_scope(),
            &["error"],
            "AND outcome = 'failure'",
        )
        .await?;
    let mut counts: BTreeMap<ErrorCategory, u64> = BTreeMap::new();
    let mut failures = 0u64;
    for (group, n) in &groups {
        failures += n;
        // Every failed execution is stored with its category: none, or one this
        // server does not know, is a corrupt row (fail closed), not a guess.
        let category = ErrorCategory::parse(key(group, 0)).ok_or_else(|| {
            ServiceError::Broken(format!(
                "report_executions: a failed execution's error category `{}` is unknown",
                key(group, 0)
            ))
        })?;
        *counts.entry(category).or_default() += n;
    }
    let mut categories: Vec<CategoryCount> = counts
        .into_iter()
        .map(|(category, count)| CategoryCount {
            category,
            count,
            share: count as f64 / failures.max(1) as f64,
        })
        .collect();
    categories.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then(a.category.name().cmp(b.category.name()))
    });
    categories.truncate(query.limit);
    Ok(ErrorReport {
        scope: query.scope(),
        failures,
        categories,
    })
}

/// The failures in a row among the scope's finished executions, newest first,
/// before the newest success (at most 1,000 are read), and how many finished.
pub async fn consecutive_failures(query: &ReportQuery) -> ServiceResult<(u64, u64)> {
    let (outcomes, finished) = query
        .reading
        .recent_outcomes(&query.store_scope(), 1000)
        .await?;
    let streak = outcomes.iter().take_while(|o| *o == "failure").count();
    Ok((u64::try_from(streak).unwrap_or(u64::MAX), finished))
}
