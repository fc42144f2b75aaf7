//! A rule's value (a projection of the report service's own answer for the
//! rule's window, so it equals what `GET /api/reports/...` says for that window),
//! the evaluation round, and backtests.

use chrono::{DateTime, Duration, Utc};
use reporting::alert::{self, AlertState, Metric, Observation};
use reporting::{Granularity, TimeRange};
use serde::{Deserialize, Serialize};

use super::*;
use crate::config::Config;
use crate::services::reports::{self, ReportQuery};
use crate::storage::unit_of_work;
use crate::storage::EvaluationWrite;
use crate::storage::Store;

/// A metric's value over a window and the samples it stands on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricValue {
    /// The value (none: the report has no number, such as a rate without runs).
    pub value: Option<f64>,
    /// Executions, build attempts or entities it was computed from.
    pub samples: u64,
}

/// The value of a rule's metric over `[from, to)` in `org` (and its teams when
/// the rule says so).
pub async fn metric_value(
    store: &Store,
    config: &Config,
    reporting: &Option<Store>,
    org: &OrgRecord,
    d: &RuleDefinition,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> ServiceResult<MetricValue> {
    let org_ids = reports::organizations_of(store, org, d.params.include_teams).await?;
    let reading = reports::reading(store, config, reporting).await;
    let query = ReportQuery {
        range: TimeRange { from, to },
        pipeline_id: d.params.pipeline_id.clone(),
        plugin_name: d.params.plugin_name.clone(),
        granularity: Granularity::Day,
        limit: usize::try_from(reports::MAX_LIMIT).unwrap_or(100),
        org_ids,
        reading,
    };
    let ratio = |failed: u64, succeeded: u64| {
        let n = failed + succeeded;
        MetricValue {
            value: (n > 0).then(|| failed as f64 / n as f64),
            samples: n,
        }
    };
    Ok(match d.metric {
        Metric::FailureRate => {
            let r = reports::success_rate(&query).await?.overall;
            ratio(r.failed, r.succeeded)
        }
        Metric::SuccessRate => {
            let r = reports::success_rate(&query).await?.overall;
            MetricValue {
                value: r.rate,
                samples: r.succeeded + r.failed,
            }
        }
        Metric::FailureCount => {
            let r = reports::success_rate(&query).await?.overall;
            MetricValue {
                value: Some(r.failed as f64),
                samples: r.succeeded + r.failed,
            }
        }
        Metric::RunCount => {
            let total = reports::count(&query).await?.overall.total;
            MetricValue {
                value: Some(total as f64),
                samples: total,
            }
        }
        Metric::P95DurationMs => {
            let overall = reports::duration(&query).await?.overall;
            MetricValue {
                value: overall.as_ref().map(|s| s.p95),
                samples: overall.map_or(0, |s| s.count),
            }
        }
        Metric::ConsecutiveFailures => {
            let (streak, finished) = reports::consecutive_failures(&query).await?;
            MetricValue {
                value: Some(streak as f64),
                samples: finished,
            }
        }
        Metric::StageFailureCount => {
            let stage = d.params.stage.as_deref().unwrap_or_default();
            let failures = reports::stage_failures(&query)
                .await?
                .stages
                .iter()
                .find(|s| s.stage == stage)
                .map_or(0, |s| s.failures);
            let total = reports::count(&query).await?.overall.total;
            MetricValue {
                value: Some(failures as f64),
                samples: total,
            }
        }
        Metric::ErrorCategoryCount => {
            let category = d.params.error_category.as_deref().unwrap_or_default();
            let count = reports::errors(&query)
                .await?
                .categories
                .iter()
                .find(|c| c.category.name() == category)
                .map_or(0, |c| c.count);
            let total = reports::count(&query).await?.overall.total;
            MetricValue {
                value: Some(count as f64),
                samples: total,
            }
        }
        Metric::PluginBuildFailureRate => {
            let r = reports::build_success_rate(&query).await?.overall;
            ratio(r.failed, r.succeeded)
        }
        Metric::BlockedEntities => {
            let mut blocked = 0;
            let mut total = 0;
            for id in &query.org_ids {
                let counts = store.entity_counts(id).await?;
                blocked += counts.block;
                total += counts.total;
            }
            MetricValue {
                value: Some(blocked as f64),
                samples: total,
            }
        }
    })
}

/// What a value means to `step`.
fn observe(d: &RuleDefinition, value: ServiceResult<MetricValue>) -> Observation {
    match value {
        Ok(MetricValue {
            value: Some(v),
            samples,
        }) if samples >= d.min_samples => Observation::Value(v),
        Ok(_) => Observation::NoData,
        Err(_) => Observation::Error,
    }
}

/// What one evaluation round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvaluationRound {
    /// Rules evaluated and written.
    pub evaluated: usize,
    /// State changes written.
    pub transitions: usize,
    /// Notifications written.
    pub notices: usize,
    /// Rules another evaluator wrote first.
    pub lost: usize,
    /// Rules that could not be evaluated (a stored rule that does not read).
    pub failed: usize,
}

/// The most rules one round evaluates (the rest wait for the next).
pub const MAX_PER_ROUND: u32 = 10_000;

/// Evaluates every rule due at `now` (the worker passes the clock's instant; tests
/// move it). Each rule's state change and its notification are written in one
/// transaction, conditional on the evaluation count it read.
pub async fn evaluate_due(
    store: &Store,
    config: &Config,
    reporting: &Option<Store>,
    now: DateTime<Utc>,
) -> ServiceResult<EvaluationRound> {
    let mut round = EvaluationRound::default();
    // Each organization read once a round, however many rules it has.
    let mut orgs: std::collections::HashMap<String, Option<OrgRecord>> =
        std::collections::HashMap::new();
    let mut after = String::new();
    let mut seen = 0u32;
    while seen < MAX_PER_ROUND {
        let due = store.due_alert_rules(now, &after, 200).await?;
        let Some(last) = due.last() else {
            break;
        };
        after = last.id.clone();
        for row in due {
            seen += 1;
            let id = row.id.clone();
            let org = match orgs.get(&row.org_id) {
                Some(org) => Ok(org.clone()),
                None => match store.organization(&row.org_id).await {
                    Ok(org) => {
                        orgs.insert(row.org_id.clone(), org.clone());
                        Ok(org)
                    }
                    Err(error) => Err(ServiceError::from(error)),
                },
            };
            match evaluate_one(store, config, reporting, (row, org), now, &mut round).await {
                Ok(()) => {}
                // The database itself failing ends the round (the next one retries).
                Err(error @ ServiceError::StoreUnavailable(_)) => return Err(error),
                Err(error) => {
                    round.failed += 1;
                    tracing::error!(rule = %id, %error, "an alert rule could not be evaluated");
                }
            }
        }
    }
    Ok(round)
}

async fn evaluate_one(
    store: &Store,
    config: &Config,
    reporting: &Option<Store>,
    (row, org): (AlertRuleRow, ServiceResult<Option<OrgRecord>>),
    now: DateTime<Utc>,
    round: &mut EvaluationRound,
) -> ServiceResult<()> {
    let (d, tracker) = definition_of(&row)?;
    let interval = Duration::from_std(config.alerts.interval).unwrap_or(Duration::minutes(1));
    let value = match org {
        Ok(Some(org)) => {
            metric_value(store, config, reporting, &org, &d, (now - d.window(), now)).await
        }
        Ok(None) => Err(ServiceError::NotFound("organization".into())),
        Err(error) => Err(error),
    };
    if let Err(error) = &value {
        tracing::warn!(rule = %row.id, %error, "an alert rule's query failed");
    }
    let step = alert::step(&d.spec(), &tracker, observe(&d, value), now);
    let notices = row.notices + i64::from(step.notice.is_some());
    let tracker_json = to_json(&step.tracker)?;
    // Whether this replica wrote it (another may have, first), and what it wrote:
    // counted once the unit is committed, however many times it ran.
    let wrote = unit_of_work!(store, |tx| {
        let written = tx
            .record_evaluation(&EvaluationWrite {
                rule_id: &row.id,
                expected: row.evaluations,
                state: step.tracker.state.name(),
                tracker: &tracker_json,
                notices,
                at: now,
                next: now + interval,
            })
            .await?;
        if !written {
            return Ok(None);
        }
        let mut noticed = false;
        if step.transition.is_some() || step.notice.is_some() {
            let notification_id = match step.notice {
                Some(notice) if !row.destinations.is_empty() => {
                    let n = notification_of(
                        &row,
                        &d,
                        (notice, step.tracker.state),
                        step.tracker.value,
                        notices,
                        now,
                    );
                    noticed = true;
                    // Decided at `now`; written at the real time, when it is due for
                    // delivery.
                    Some(tx.insert_notification(&row.org_id, &n, Utc::now()).await?)
                }
                _ => None,
            };
            let (from, to) = step
                .transition
                .unwrap_or((step.tracker.state, step.tracker.state));
            let seq = tx.next_transition_seq(&row.id).await?;
            tx.insert_transition(
                &row.org_id,
                &row.id,
                &TransitionRow {
                    seq,
                    at: now,
                    from_state: from.name().to_owned(),
                    to_state: to.name().to_owned(),
                    value: step.tracker.value,
                    notice: step.notice.map(|n| n.name().to_owned()),
                    notification_id,
                },
            )
            .await?;
        }
        Ok(Some(noticed))
    })?;
    let Some(noticed) = wrote else {
        round.lost += 1;
        return Ok(());
    };
    round.notices += usize::from(noticed);
    round.transitions += usize::from(step.transition.is_some());
    round.evaluated += 1;
    Ok(())
}

/// The most evaluation instants a backtest replays.
pub const MAX_BACKTEST_STEPS: i64 = 500;

/// A backtest: a rule body and the past range to replay it over.
#[derive(Debug, Clone, PartialEq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BacktestBody {
    /// The rule, as it would be saved (its destinations are not used).
    pub rule: AlertRuleBody,
    /// The range's start (RFC 3339).
    pub from: DateTime<Utc>,
    /// The range's end (RFC 3339; at most now, at most 90 days after `from`).
    pub to: DateTime<Utc>,
}

/// One transition a backtest found.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BacktestTransition {
    /// The evaluation's instant.
    pub at: DateTime<Utc>,
    /// The state before.
    pub from: AlertState,
    /// The state after.
    pub to: AlertState,
    /// The value observed.
    pub value: Option<f64>,
    /// The notice it would have sent.
    pub notice: Option<reporting::alert::Notice>,
}

/// What a backtest found.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Backtest {
    /// The range's start.
    pub from: DateTime<Utc>,
    /// The range's end.
    pub to: DateTime<Utc>,
    /// The time between two evaluations replayed (seconds): the evaluation
    /// interval, or longer so that at most 500 are replayed.
    pub step_seconds: i64,
    /// Evaluations replayed.
    pub evaluations: usize,
    /// The transitions and notices they would have made, oldest first.
    pub transitions: Vec<BacktestTransition>,
}

/// Replays a rule body over a past range: each evaluation instant's value computed
/// as the evaluation computes it, moved through the same `step`; nothing is saved
/// or sent.
pub async fn backtest(
    store: &Store,
    config: &Config,
    reporting: &Option<Store>,
    org: &OrgRecord,
    body: &BacktestBody,
    rollup: bool,
    now: DateTime<Utc>,
) -> ServiceResult<Backtest> {
    let (_, d) = check_rule(&body.rule, config.alerts.interval, rollup)?;
    if body.to > now {
        return Err(ServiceError::invalid("to", "must not be in the future"));
    }
    if body.from >= body.to {
        return Err(ServiceError::invalid("from", "must be before `to`"));
    }
    if body.from < now - Duration::days(366) {
        return Err(ServiceError::invalid(
            "from",
            "at most 366 days ago (older executions are not kept)",
        ));
    }
    if body.to - body.from > Duration::days(MAX_WINDOW_DAYS) {
        return Err(ServiceError::invalid(
            "from",
            format!("the range spans at most {MAX_WINDOW_DAYS} days"),
        ));
    }
    let interval = i64::try_from(config.alerts.interval.as_secs()).unwrap_or(60);
    let span = (body.to - body.from).num_seconds();
    let step_seconds = interval.max((span + MAX_BACKTEST_STEPS - 1) / MAX_BACKTEST_STEPS);
    let mut observations = Vec::new();
    let mut at = body.from;
    while at <= body.to {
        let value = metric_value(store, config, reporting, org, &d, (at - d.window(), at)).await;
        if let Err(ServiceError::StoreUnavailable(why)) = &value {
            return Err(ServiceError::StoreUnavailable(why.clone()));
        }
        observations.push((at, observe(&d, value)));
        at += Duration::seconds(step_seconds);
    }
    let transitions = alert::replay(&d.spec(), &observations)
        .into_iter()
        .map(|r| {
            let (from, to) = r
                .step
                .transition
                .unwrap_or((r.step.tracker.state, r.step.tracker.state));
            BacktestTransition {
                at: r.at,
                from,
                to,
                value: match r.observation {
                    Observation::Value(v) => Some(v),
                    _ => None,
                },
                notice: r.step.notice,
            }
        })
        .collect();
    Ok(Backtest {
        from: body.from,
        to: body.to,
        step_seconds,
        evaluations: observations.len(),
        transitions,
    })
}
