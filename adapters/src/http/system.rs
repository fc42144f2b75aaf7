//! `/health`, `/ready`, `/metrics` and `/openapi.json`.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::http::error::ApiError;
use crate::http::response::Answer;
use crate::http::state::AppState;
use crate::metrics::Metrics;
use crate::metrics::MetricsSection;
use crate::services::operations;

/// How the server stands: `ok` (up) or `ready` (the database answers).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ServerStatus {
    status: &'static str,
}

/// `GET /health`: the process is up.
pub(crate) async fn health() -> Answer<ServerStatus> {
    Answer::ok(ServerStatus { status: "ok" })
}

/// `GET /ready`: the database answers and the process is not stopping.
pub(crate) async fn ready(State(state): State<AppState>) -> Result<Answer<ServerStatus>, ApiError> {
    operations::ready(&state.infra.store, &state.replica).await?;
    Ok(Answer::ok(ServerStatus { status: "ready" }))
}

/// `GET /metrics`: Prometheus text.
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    // Each section read from the database; one that fails is counted in
    // `metrics_section_errors_total` (rendered below, after the sections).
    // The outbox: how many of the server's own audit events wait to be chained, and
    // how old the oldest is (absent when the database does not answer).
    let outbox = match operations::outbox(&state.infra.store).await {
        Ok(depth) => {
            let age = depth.oldest.map_or(0.0, |oldest| {
                (chrono::Utc::now() - oldest).num_milliseconds().max(0) as f64 / 1000.0
            });
            format!(
                "# HELP audit_outbox_depth Audit events waiting in the outbox.\n# TYPE audit_outbox_depth gauge\naudit_outbox_depth {}\n\
                 # HELP audit_outbox_oldest_age_seconds Age of the oldest event in the outbox.\n# TYPE audit_outbox_oldest_age_seconds gauge\naudit_outbox_oldest_age_seconds {age}\n",
                depth.rows
            )
        }
        Err(error) => section_failed(&state.infra.metrics, MetricsSection::Outbox, &error),
    };
    // The re-evaluation queue: waiting and dead events, and the oldest waiting one.
    let queue = match operations::reevaluation(&state.infra.store).await {
        Ok(depth) => {
            let age = depth.oldest.map_or(0.0, |oldest| {
                (chrono::Utc::now() - oldest).num_milliseconds().max(0) as f64 / 1000.0
            });
            format!(
                "# HELP reevaluation_queue_depth Re-evaluation events waiting.\n# TYPE reevaluation_queue_depth gauge\nreevaluation_queue_depth {}\n\
                 # HELP reevaluation_queue_dead Re-evaluation events dead (attempts exhausted).\n# TYPE reevaluation_queue_dead gauge\nreevaluation_queue_dead {}\n\
                 # HELP reevaluation_queue_oldest_age_seconds Age of the oldest waiting event.\n# TYPE reevaluation_queue_oldest_age_seconds gauge\nreevaluation_queue_oldest_age_seconds {age}\n",
                depth.waiting, depth.dead
            )
        }
        Err(error) => section_failed(&state.infra.metrics, MetricsSection::Reevaluation, &error),
    };
    // Reporting: execution events whose resource name no single organization
    // registered, kept aside.
    let reports = match operations::unattributed(&state.infra.store).await {
        Ok((names, executions)) => format!(
            "# HELP report_unattributed_resources Resource names whose events wait for a registration.\n# TYPE report_unattributed_resources gauge\nreport_unattributed_resources {names}\n\
             # HELP report_unattributed_executions Executions waiting for their resource name's registration.\n# TYPE report_unattributed_executions gauge\nreport_unattributed_executions {executions}\n"
        ),
        Err(error) => section_failed(&state.infra.metrics, MetricsSection::Reports, &error),
    };
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        format!(
            "{}{}{outbox}{queue}{reports}",
            state.infra.metrics.render(),
            state.infra.audit_counters.render()
        ),
    )
        .into_response()
}

/// A section of `/metrics` that could not be read: counted (the counter is part of the
/// exposition, so the failure is visible) and logged, never silently dropped.
fn section_failed(
    metrics: &Metrics,
    section: MetricsSection,
    error: &crate::services::ServiceError,
) -> String {
    metrics.section_failed(section);
    tracing::error!(section = section.label(), %error, "a section of /metrics could not be read");
    String::new()
}

/// `GET /openapi.json`.
pub(crate) async fn openapi() -> Response {
    // The document depends only on the code: built once, served as bytes after.
    static DOCUMENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let body = DOCUMENT.get_or_init(|| {
        serde_json::to_string(&crate::http::openapi::document()).unwrap_or_default()
    });
    ([(header::CONTENT_TYPE, "application/json")], body.as_str()).into_response()
}
