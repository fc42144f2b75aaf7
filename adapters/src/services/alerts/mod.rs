//! Alerts over the reports: rules (a metric projected from a report, compared with
//! a threshold over a window), destinations (e-mail, Slack, a signed webhook,
//! PagerDuty), the leased evaluation that moves each rule through
//! `reporting::alert::step` and writes its transition with its notification in one
//! transaction, the history, and backtests. The notifications travel through the
//! delivery outbox the other notifications use (`deliveries`, channel
//! `alert:<destination>`), so retries, 4xx finality and the log are theirs.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use reporting::alert::{AlertState, Comparison, Metric, NoData, Spec, Tracker};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::context::{event, AppState, Caller};
use super::reports::filter_text;
use super::{ServiceError, ServiceResult};
use crate::config::Config;
use crate::storage::{
    new_id, unit_of_work, AlertRuleRow, AlertTable, NewNotification, OrgRecord, Store,
    TransitionRow,
};

pub mod definition;
pub mod destinations;
pub mod evaluation;

pub use definition::*;
pub use destinations::*;
pub use evaluation::*;

/// A rule as answered.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AlertRule {
    /// Its id.
    pub id: String,
    /// Its organization.
    pub org_id: String,
    /// Its name.
    pub name: String,
    /// What it measures.
    pub metric: Metric,
    /// What over.
    pub params: MetricParams,
    /// How compared.
    pub comparison: Comparison,
    /// The threshold.
    pub threshold: f64,
    /// The recovery threshold.
    pub recovery_threshold: Option<f64>,
    /// The window.
    pub window: String,
    /// The fewest samples.
    pub min_samples: u64,
    /// How long a breach lasts before firing.
    #[serde(rename = "for")]
    pub for_: String,
    /// How long a firing rule stays firing once clear.
    pub keep_firing_for: String,
    /// What no data means.
    pub no_data: NoData,
    /// How bad.
    pub severity: AlertSeverity,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Destination ids.
    pub destinations: Vec<String>,
    /// How often a firing rule notifies again.
    pub repeat_interval: Option<String>,
    /// Not evaluated while paused.
    pub paused: bool,
    /// Where it stands.
    pub state: AlertState,
    /// Since when.
    pub state_since: Option<DateTime<Utc>>,
    /// The last value observed.
    pub last_value: Option<f64>,
    /// When it was last evaluated.
    pub last_evaluated_at: Option<DateTime<Utc>>,
    /// When it is next due.
    pub next_evaluation_at: DateTime<Utc>,
    /// PagerDuty's `dedup_key` and the webhook id's stem.
    pub dedup_key: String,
    /// The version a change must carry.
    pub version: i64,
    /// Who made it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// A rule's stored definition and tracker, read.
pub(crate) fn definition_of(row: &AlertRuleRow) -> ServiceResult<(RuleDefinition, Tracker)> {
    let definition: RuleDefinition = serde_json::from_value(row.body.clone()).map_err(|e| {
        ServiceError::Broken(format!(
            "alert_rules `{}`: the body does not decode: {e}",
            row.id
        ))
    })?;
    let tracker: Tracker = serde_json::from_value(row.tracker.clone()).map_err(|e| {
        ServiceError::Broken(format!(
            "alert_rules `{}`: the tracker does not decode: {e}",
            row.id
        ))
    })?;
    Ok((definition, tracker))
}

/// The key of a rule's notifications: PagerDuty's `dedup_key`, the webhook id's
/// stem (one group per rule: its parameters name one series).
pub fn dedup_key(rule_id: &str) -> String {
    format!("alert-{rule_id}")
}

fn answer(row: AlertRuleRow) -> ServiceResult<AlertRule> {
    let (d, tracker) = definition_of(&row)?;
    Ok(AlertRule {
        dedup_key: dedup_key(&row.id),
        id: row.id,
        org_id: row.org_id,
        name: row.name,
        metric: d.metric,
        params: d.params,
        comparison: d.comparison,
        threshold: d.threshold,
        recovery_threshold: d.recovery_threshold,
        window: duration_text(d.window_seconds),
        min_samples: d.min_samples,
        for_: duration_text(d.for_seconds),
        keep_firing_for: duration_text(d.keep_firing_for_seconds),
        no_data: d.no_data,
        severity: d.severity,
        labels: d.labels,
        destinations: row.destinations,
        repeat_interval: d.repeat_seconds.map(duration_text),
        paused: row.paused,
        state: tracker.state,
        state_since: tracker.since,
        last_value: tracker.value,
        last_evaluated_at: row.last_evaluated_at,
        next_evaluation_at: row.next_evaluation_at,
        version: row.version,
        created_by: row.created_by,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

fn to_json<T: Serialize>(value: &T) -> ServiceResult<Value> {
    serde_json::to_value(value).map_err(|e| ServiceError::Broken(e.to_string()))
}

/// The organization's rules.
pub async fn rules(store: &Store, org: &OrgRecord) -> ServiceResult<Vec<AlertRule>> {
    store
        .alert_rules(&org.id)
        .await?
        .into_iter()
        .map(answer)
        .collect()
}

async fn rule_row(store: &Store, org: &OrgRecord, id: &str) -> ServiceResult<AlertRuleRow> {
    store
        .alert_rule(&org.id, id)
        .await?
        .ok_or_else(|| ServiceError::NotFound("alert rule".into()))
}

/// One rule.
pub async fn rule(store: &Store, org: &OrgRecord, id: &str) -> ServiceResult<AlertRule> {
    answer(rule_row(store, org, id).await?)
}

/// The rules firing now.
pub async fn firing(store: &Store, org: &OrgRecord) -> ServiceResult<Vec<AlertRule>> {
    store
        .alert_rules_in(&org.id, AlertState::Firing.name())
        .await?
        .into_iter()
        .map(answer)
        .collect()
}

fn name_taken(error: crate::storage::StoreError, name: &str) -> ServiceError {
    match error {
        crate::storage::StoreError::Conflict(_) => {
            ServiceError::Conflict(format!("the organization has an alert rule named `{name}`"))
        }
        other => other.into(),
    }
}

async fn check_destinations(
    tx: &mut crate::storage::Transaction<'_>,
    org: &OrgRecord,
    ids: &[String],
) -> ServiceResult<Vec<String>> {
    let mut wanted: Vec<String> = ids.to_vec();
    wanted.sort();
    wanted.dedup();
    let found = tx.existing_destinations(&org.id, &wanted).await?;
    if let Some(missing) = wanted.iter().find(|id| !found.contains(id)) {
        return Err(ServiceError::invalid(
            "destinations",
            format!(
                "`{}` is not a destination of the organization",
                missing.chars().take(64).collect::<String>()
            ),
        ));
    }
    Ok(wanted)
}

/// Makes a rule (`alert.rule.create`), due at once.
pub async fn create_rule(
    store: &Store,
    config: &Config,
    caller: &Caller,
    org: &OrgRecord,
    body: &AlertRuleBody,
    rollup: bool,
    now: DateTime<Utc>,
) -> ServiceResult<AlertRule> {
    let (name, definition) = check_rule(body, config.alerts.interval, rollup)?;
    let row = unit_of_work!(store, |tx| {
        tx.lock_organization(&org.id).await?;
        if tx.count_alert_rows(AlertTable::Rules, &org.id).await? >= MAX_RULES {
            return Err(ServiceError::Conflict(format!(
                "the organization has {MAX_RULES} alert rules, the most it may hold"
            )));
        }
        let destinations = check_destinations(tx, org, &body.destinations).await?;
        let tracker = Tracker::default();
        let row = AlertRuleRow {
            id: new_id(),
            org_id: org.id.clone(),
            name: name.clone(),
            body: to_json(&definition)?,
            paused: body.paused,
            version: 1,
            state: tracker.state.name().to_owned(),
            tracker: to_json(&tracker)?,
            evaluations: 0,
            notices: 0,
            next_evaluation_at: now,
            last_evaluated_at: None,
            destinations,
            created_by: caller.user_id.clone(),
            created_at: now,
            updated_at: now,
        };
        tx.insert_alert_rule(&row)
            .await
            .map_err(|e| name_taken(e, &name))?;
        tx.enqueue_audit(&[event(
            caller,
            "alert.rule.create",
            &org.id,
            "alert_rule",
            &row.id,
            json!({"name": name, "metric": definition.metric.name()}),
        )])
        .await?;
        Ok(row)
    })?;
    answer(row)
}

/// Replaces a rule's definition when `version` is still its version
/// (`alert.rule.update`). Its state stays; pausing keeps it as it is (nothing is
/// sent), and a rule taken out of pause is evaluated at once.
pub async fn update_rule(
    store: &Store,
    config: &Config,
    caller: &Caller,
    org: &OrgRecord,
    (id, version): (&str, i64),
    body: &AlertRuleBody,
    rollup: bool,
    now: DateTime<Utc>,
) -> ServiceResult<AlertRule> {
    let (name, definition) = check_rule(body, config.alerts.interval, rollup)?;
    let current = rule_row(store, org, id).await?;
    let stale = || {
        ServiceError::Conflict(format!(
            "the alert rule changed since version {version} was read: read it again"
        ))
    };
    if current.version != version {
        return Err(stale());
    }
    unit_of_work!(store, |tx| {
        let destinations = check_destinations(tx, org, &body.destinations).await?;
        let row = AlertRuleRow {
            name: name.clone(),
            body: to_json(&definition)?,
            paused: body.paused,
            version: version + 1,
            destinations,
            updated_at: now,
            next_evaluation_at: if current.paused && !body.paused {
                now
            } else {
                current.next_evaluation_at
            },
            ..current.clone()
        };
        if !tx
            .update_alert_rule(&row, version, None)
            .await
            .map_err(|e| name_taken(e, &name))?
        {
            return Err(stale());
        }
        tx.enqueue_audit(&[event(
            caller,
            "alert.rule.update",
            &org.id,
            "alert_rule",
            id,
            json!({"name": name, "version": row.version, "paused": row.paused}),
        )])
        .await?;
        Ok(())
    })?;
    rule(store, org, id).await
}

/// Deletes a rule with its history (`alert.rule.delete`). A rule whose firing
/// notice is unresolved sends its resolve, in the same transaction, so that no
/// incident stays open for a rule that is gone.
pub async fn delete_rule(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let current = rule_row(store, org, id).await?;
    let (definition, tracker) = definition_of(&current)?;
    unit_of_work!(store, |tx| {
        let mut resolved = false;
        if tracker.firing_notified && !current.destinations.is_empty() {
            let notification = notification_of(
                &current,
                &definition,
                (reporting::alert::Notice::Resolved, AlertState::Ok),
                tracker.value,
                current.notices + 1,
                now,
            );
            tx.insert_notification(&org.id, &notification, Utc::now())
                .await?;
            resolved = true;
        }
        if !tx.delete_alert_rule(&org.id, id).await? {
            return Err(ServiceError::NotFound("alert rule".into()));
        }
        tx.enqueue_audit(&[event(
            caller,
            "alert.rule.delete",
            &org.id,
            "alert_rule",
            id,
            json!({"name": current.name, "resolveSent": resolved}),
        )])
        .await?;
        Ok(())
    })?;
    Ok(())
}

/// The notification of a rule's notice: what every destination receives.
pub(crate) fn notification_of(
    row: &AlertRuleRow,
    d: &RuleDefinition,
    (notice, state): (reporting::alert::Notice, AlertState),
    value: Option<f64>,
    number: i64,
    at: DateTime<Utc>,
) -> NewNotification {
    let key = dedup_key(&row.id);
    NewNotification {
        kind: format!("alert.{}", notice.name()),
        payload: json!({
            "ruleId": row.id,
            "ruleName": row.name,
            "orgId": row.org_id,
            "notice": notice.name(),
            "state": state.name(),
            "severity": d.severity.name(),
            "labels": d.labels,
            "metric": d.metric.name(),
            "params": d.params,
            "comparison": d.comparison,
            "threshold": d.threshold,
            "window": duration_text(d.window_seconds),
            "value": value,
            "dedupKey": key,
            "messageId": format!("{key}.{number}"),
            "at": at,
            "test": false,
        }),
        channels: row
            .destinations
            .iter()
            .map(|id| (format!("{ALERT_CHANNEL}{id}"), None))
            .collect(),
    }
}

/// The channel prefix of an alert's deliveries.
pub const ALERT_CHANNEL: &str = "alert:";

/// One delivery of a notice.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryDelivery {
    /// The destination.
    pub destination_id: String,
    /// `pending`, `sent`, `failed`, `skipped`.
    pub status: String,
    /// Attempts made.
    pub attempts: u32,
    /// The last error.
    pub last_error: Option<String>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// One transition of a rule, with the deliveries of its notice.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// Its number in the rule's history.
    pub seq: i64,
    /// When.
    pub at: DateTime<Utc>,
    /// The state before.
    pub from: String,
    /// The state after.
    pub to: String,
    /// The value observed.
    pub value: Option<f64>,
    /// `firing`, `repeat` or `resolved` when it notified.
    pub notice: Option<String>,
    /// The notification.
    pub notification_id: Option<String>,
    /// Its deliveries, one per destination.
    pub deliveries: Vec<HistoryDelivery>,
}

/// A rule's history, newest first (the last 200 transitions).
pub async fn history(store: &Store, org: &OrgRecord, id: &str) -> ServiceResult<Vec<HistoryEntry>> {
    rule_row(store, org, id).await?;
    let transitions = store.alert_transitions(id, 200).await?;
    let ids: Vec<String> = transitions
        .iter()
        .filter_map(|t| t.notification_id.clone())
        .collect();
    let deliveries = store.alert_deliveries(&ids).await?;
    Ok(transitions
        .into_iter()
        .map(|t: TransitionRow| HistoryEntry {
            deliveries: deliveries
                .iter()
                .filter(|d| Some(&d.notification_id) == t.notification_id.as_ref())
                .map(|d| HistoryDelivery {
                    destination_id: d.destination_id.clone(),
                    status: d.status.clone(),
                    attempts: d.attempts,
                    last_error: d.last_error.clone(),
                    updated_at: d.updated_at,
                })
                .collect(),
            seq: t.seq,
            at: t.at,
            from: t.from_state,
            to: t.to_state,
            value: t.value,
            notice: t.notice,
            notification_id: t.notification_id,
        })
        .collect())
}
