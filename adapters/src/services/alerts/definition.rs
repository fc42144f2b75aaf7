//! An alert rule's definition: its body as sent, checked field by field into the
//! `reporting` specification it evaluates, and its limits.

use super::*;

/// The most destinations a rule sends to.
pub const MAX_RULE_DESTINATIONS: usize = 10;
/// The longest window.
pub const MAX_WINDOW_DAYS: i64 = 90;
/// The most labels a rule carries.
pub const MAX_LABELS: usize = 20;
/// The most rules an organization holds.
pub const MAX_RULES: u64 = 1000;

/// How bad a firing rule is (PagerDuty's severities).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AlertSeverity {
    /// Critical.
    Critical,
    /// Error.
    Error,
    /// Warning (default).
    #[default]
    Warning,
    /// Information.
    Info,
}

impl AlertSeverity {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            AlertSeverity::Critical => "critical",
            AlertSeverity::Error => "error",
            AlertSeverity::Warning => "warning",
            AlertSeverity::Info => "info",
        }
    }
}

/// What a rule's metric is computed over.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricParams {
    /// One pipeline (execution metrics; required by `stage_failure_count`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_id: Option<String>,
    /// One stage (`stage_failure_count`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// One plugin, by name (`plugin_build_failure_rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_name: Option<String>,
    /// One error category (`error_category_count`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_category: Option<String>,
    /// The organization's teams too (needs `reports:rollup`).
    #[serde(default)]
    pub include_teams: bool,
}

/// A rule as a request writes it.
#[derive(Debug, Clone, PartialEq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AlertRuleBody {
    /// Its name (unique in the organization).
    pub name: String,
    /// What it measures.
    pub metric: Metric,
    /// What the metric is computed over.
    #[serde(default)]
    pub params: MetricParams,
    /// How the value is compared.
    pub comparison: Comparison,
    /// The threshold.
    pub threshold: f64,
    /// While firing, the threshold the value must clear to resolve.
    #[serde(default)]
    pub recovery_threshold: Option<f64>,
    /// The window the metric is computed over (`30m`, `1h`, `7d`; at most 90 days).
    #[serde(default = "default_window")]
    pub window: String,
    /// The fewest samples (executions, build attempts, entities) the window must
    /// hold for a value (default 1; fewer is no data).
    #[serde(default = "default_min_samples")]
    pub min_samples: u64,
    /// How long a breach lasts before firing (`0s`: at once; else at least the
    /// evaluation interval).
    #[serde(default = "zero", rename = "for")]
    pub for_: String,
    /// How long a firing rule stays firing once the value clears.
    #[serde(default = "zero")]
    pub keep_firing_for: String,
    /// What no data means.
    #[serde(default)]
    pub no_data: NoData,
    /// How bad it is.
    #[serde(default)]
    pub severity: AlertSeverity,
    /// Labels sent with each notification.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Where its notifications go (destination ids, at most 10).
    #[serde(default)]
    pub destinations: Vec<String>,
    /// How often a firing rule notifies again (none: never).
    #[serde(default)]
    pub repeat_interval: Option<String>,
    /// Not evaluated while paused.
    #[serde(default)]
    pub paused: bool,
    /// `PUT`: the version read; another is 409.
    #[serde(default)]
    pub version: Option<i64>,
}

fn default_window() -> String {
    "1h".to_owned()
}

fn default_min_samples() -> u64 {
    1
}

fn zero() -> String {
    "0s".to_owned()
}

/// A rule's definition, checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleDefinition {
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
    /// The window, in seconds.
    pub window_seconds: i64,
    /// The fewest samples.
    pub min_samples: u64,
    /// `for`, in seconds.
    pub for_seconds: i64,
    /// `keepFiringFor`, in seconds.
    pub keep_firing_for_seconds: i64,
    /// What no data means.
    pub no_data: NoData,
    /// How bad.
    pub severity: AlertSeverity,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// `repeatInterval`, in seconds.
    pub repeat_seconds: Option<i64>,
}

impl RuleDefinition {
    /// What `step` needs.
    pub fn spec(&self) -> Spec {
        Spec {
            comparison: self.comparison,
            threshold: self.threshold,
            recovery: self.recovery_threshold,
            for_: Duration::seconds(self.for_seconds),
            keep_firing_for: Duration::seconds(self.keep_firing_for_seconds),
            no_data: self.no_data,
            repeat: self.repeat_seconds.map(Duration::seconds),
        }
    }

    /// The window.
    pub fn window(&self) -> Duration {
        Duration::seconds(self.window_seconds)
    }
}

/// A duration as text: `90s`, `30m`, `2h`, `7d`, or seconds.
pub fn duration_text(seconds: i64) -> String {
    match seconds {
        0 => "0s".to_owned(),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

fn seconds_of(field: &'static str, text: &str) -> ServiceResult<i64> {
    crate::config::parse_duration(text)
        .and_then(|d| i64::try_from(d.as_secs()).ok())
        .ok_or_else(|| {
            ServiceError::invalid(
                field,
                "must be a duration such as `90s`, `30m`, `2h` or `7d`",
            )
        })
}

/// Checks a rule body: every field as its documentation says, the destinations
/// left to the caller (they are the organization's rows). `interval` is the
/// evaluation interval `for` is held to.
pub fn check_rule(
    body: &AlertRuleBody,
    interval: std::time::Duration,
    rollup: bool,
) -> ServiceResult<(String, RuleDefinition)> {
    let name = filter_text("name", &body.name, 200)?;
    if !body.threshold.is_finite() {
        return Err(ServiceError::invalid(
            "threshold",
            "must be a finite number",
        ));
    }
    if body.metric.is_ratio() && !(0.0..=1.0).contains(&body.threshold) {
        return Err(ServiceError::invalid(
            "threshold",
            format!("`{}` is a ratio: from 0 to 1", body.metric.name()),
        ));
    }
    if let Some(recovery) = body.recovery_threshold {
        if !recovery.is_finite() || !body.comparison.recovers_inside(body.threshold, recovery) {
            return Err(ServiceError::invalid(
                "recoveryThreshold",
                "must be a finite number on the clear side of the threshold",
            ));
        }
    }
    let window_seconds = seconds_of("window", &body.window)?;
    if !(60..=MAX_WINDOW_DAYS * 86_400).contains(&window_seconds) {
        return Err(ServiceError::invalid(
            "window",
            format!("from 1 minute to {MAX_WINDOW_DAYS} days"),
        ));
    }
    let interval_seconds = i64::try_from(interval.as_secs()).unwrap_or(i64::MAX);
    let for_seconds = seconds_of("for", &body.for_)?;
    if for_seconds != 0 && for_seconds < interval_seconds {
        return Err(ServiceError::invalid(
            "for",
            format!(
                "must be 0s or at least the evaluation interval ({})",
                duration_text(interval_seconds)
            ),
        ));
    }
    if for_seconds > 7 * 86_400 {
        return Err(ServiceError::invalid("for", "at most 7 days"));
    }
    let keep_firing_for_seconds = seconds_of("keepFiringFor", &body.keep_firing_for)?;
    if keep_firing_for_seconds > 7 * 86_400 {
        return Err(ServiceError::invalid("keepFiringFor", "at most 7 days"));
    }
    let repeat_seconds = body
        .repeat_interval
        .as_deref()
        .map(|r| seconds_of("repeatInterval", r))
        .transpose()?;
    if let Some(r) = repeat_seconds {
        if r < interval_seconds.max(60) || r > 30 * 86_400 {
            return Err(ServiceError::invalid(
                "repeatInterval",
                "from the evaluation interval (at least 1 minute) to 30 days",
            ));
        }
    }
    if body.min_samples > 1_000_000 {
        return Err(ServiceError::invalid("minSamples", "at most 1000000"));
    }
    if body.labels.len() > MAX_LABELS {
        return Err(ServiceError::invalid(
            "labels",
            format!("at most {MAX_LABELS} labels"),
        ));
    }
    for (key, value) in &body.labels {
        filter_text("labels", key, 100)?;
        if value.chars().count() > 200 || value.chars().any(char::is_control) {
            return Err(ServiceError::invalid(
                "labels",
                "a value is at most 200 characters, without control characters",
            ));
        }
    }
    if body.destinations.len() > MAX_RULE_DESTINATIONS {
        return Err(ServiceError::invalid(
            "destinations",
            format!("at most {MAX_RULE_DESTINATIONS} destinations"),
        ));
    }
    let params = check_params(body.metric, &body.params)?;
    if params.include_teams && !rollup {
        return Err(ServiceError::Forbidden(
            "the `reports:rollup` permission is required to include the teams",
        ));
    }
    Ok((
        name,
        RuleDefinition {
            metric: body.metric,
            params,
            comparison: body.comparison,
            threshold: body.threshold,
            recovery_threshold: body.recovery_threshold,
            window_seconds,
            min_samples: body.min_samples,
            for_seconds,
            keep_firing_for_seconds,
            no_data: body.no_data,
            severity: body.severity,
            labels: body.labels.clone(),
            repeat_seconds,
        },
    ))
}

/// The parameters a metric takes: the ones it needs, none it does not.
fn check_params(metric: Metric, p: &MetricParams) -> ServiceResult<MetricParams> {
    let text = |v: &Option<String>| {
        v.as_deref()
            .map(|t| filter_text("params", t, 200))
            .transpose()
    };
    let out = MetricParams {
        pipeline_id: text(&p.pipeline_id)?,
        stage: text(&p.stage)?,
        plugin_name: text(&p.plugin_name)?,
        error_category: text(&p.error_category)?,
        include_teams: p.include_teams,
    };
    let execution = !matches!(
        metric,
        Metric::PluginBuildFailureRate | Metric::BlockedEntities
    );
    let refuse = |what: &str| {
        Err(ServiceError::invalid(
            "params",
            format!("`{}` {what}", metric.name()),
        ))
    };
    if out.plugin_name.is_some() && metric != Metric::PluginBuildFailureRate {
        return refuse("takes no pluginName");
    }
    if out.pipeline_id.is_some() && !execution {
        return refuse("takes no pipelineId");
    }
    match metric {
        Metric::StageFailureCount if out.pipeline_id.is_none() || out.stage.is_none() => {
            return refuse("needs pipelineId and stage")
        }
        Metric::ErrorCategoryCount => match out.error_category.as_deref() {
            None => return refuse("needs errorCategory"),
            Some(c) if reporting::ErrorCategory::parse(c).is_none() => {
                return refuse(
                    "needs an errorCategory of the errors report (source, build, test, deploy, approval, invoke, action, stage, pipeline, stopped)",
                )
            }
            Some(_) => {}
        },
        _ => {}
    }
    if out.stage.is_some() && metric != Metric::StageFailureCount {
        return refuse("takes no stage");
    }
    if out.error_category.is_some() && metric != Metric::ErrorCategoryCount {
        return refuse("takes no errorCategory");
    }
    Ok(out)
}
