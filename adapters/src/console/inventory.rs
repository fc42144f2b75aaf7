//! Inventory: pipelines and plugins with their current compliance, the build queue
//! and its dead letters (replayed by those the API lets replay).

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::Method;
use axum::response::Response;
use serde::de::IgnoredAny;

use super::api::{self, act, segment, Refusal};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::{Posted, Visitor};
use super::{field, Console};
use crate::http::builds::{BuildJob, QueueStatus};
use crate::http::pipelines::Pipeline;
use crate::http::plugins::Plugin;
use crate::inventory::EntityCompliance;

/// An entity as a row.
pub struct Entity {
    id: String,
    name: String,
    result: String,
    violations: usize,
}

fn entity(id: String, name: String, compliance: &EntityCompliance) -> Entity {
    Entity {
        id,
        name,
        result: api::wire(&compliance.result),
        violations: compliance.violations.len(),
    }
}

/// A queue's count.
pub struct QueueCount {
    queue: String,
    status: String,
    count: u64,
}

/// A dead letter.
pub struct DeadLetter {
    id: String,
    plugin_id: String,
    attempts: u32,
    last_error: String,
}

#[derive(Template)]
#[template(path = "console/inventory.html")]
struct InventoryPage {
    frame: Frame,
    pipelines: Vec<Entity>,
    pipeline_total: u64,
    plugins: Vec<Entity>,
    plugin_total: u64,
    queue: Vec<QueueCount>,
    dead: Vec<DeadLetter>,
}

async fn show(
    console: &Console,
    visitor: &Visitor,
    q: &HashMap<String, String>,
    outcome: Option<Result<String, Refusal>>,
) -> Result<Response, Refusal> {
    let mut frame = Frame::load(console, visitor, q, ("Inventory", "/console/inventory")).await?;
    if frame.org.is_empty() {
        return Ok(page::empty(frame));
    }
    let pipelines = frame
        .list::<Pipeline>(
            visitor,
            ("listPipelines", "pipelines"),
            "/api/pipelines?limit=50",
            "pipelines",
        )
        .await?;
    let plugins = frame
        .list::<Plugin>(
            visitor,
            ("listPlugins", "plugins"),
            "/api/plugins?limit=50",
            "plugins",
        )
        .await?;
    let queue: Option<QueueStatus> = frame
        .read(
            visitor,
            ("buildQueueStatus", "the build queue"),
            "/api/plugins/queue/status",
        )
        .await?;
    let dead = frame
        .list::<BuildJob>(
            visitor,
            ("deadLetters", "the dead letters"),
            "/api/plugins/queue/dlq?limit=50",
            "jobs",
        )
        .await?;
    let (pipeline_total, plugin_total) = (pipelines.total, plugins.total);
    let pipeline_rows = pipelines
        .items
        .into_iter()
        .map(|p| entity(p.id, p.pipeline_name, &p.compliance))
        .collect();
    let plugin_rows = plugins
        .items
        .into_iter()
        .map(|p| entity(p.id, format!("{}@{}", p.name, p.version), &p.compliance))
        .collect();
    let queue = queue
        .into_iter()
        .flat_map(|q| q.counts)
        .map(|c| QueueCount {
            queue: c.queue,
            status: c.status,
            count: c.count,
        })
        .collect();
    let dead_letters = dead
        .items
        .into_iter()
        .map(|d| DeadLetter {
            id: d.id,
            plugin_id: d.plugin_id,
            attempts: d.attempts,
            last_error: d.last_error.unwrap_or_default(),
        })
        .collect();
    let code = frame.settle(outcome);
    Ok(page::render(
        &InventoryPage {
            frame,
            pipelines: pipeline_rows,
            pipeline_total,
            plugins: plugin_rows,
            plugin_total,
            queue,
            dead: dead_letters,
        },
        code,
    ))
}

/// `GET /console/inventory`.
pub async fn page(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    show(&console, &visitor, &q, None)
        .await
        .unwrap_or_else(page::refused)
}

/// `POST /console/inventory`: `replay` a dead letter.
pub async fn action(State(console): State<Console>, posted: Posted) -> Response {
    let Posted { visitor, form } = posted;
    let org = field(&form, "org").to_owned();
    let outcome = async {
        match field(&form, "action") {
            "replay" => {
                let id = segment(field(&form, "jobId"))?;
                let uri = format!("/api/plugins/queue/dlq/{id}/replay");
                act::<IgnoredAny>(&visitor.api, (Method::POST, &uri), &org, None).await?;
                Ok(format!("job {id} replayed"))
            }
            _ => Err(unknown_action()),
        }
    }
    .await;
    show(&console, &visitor, &page::again(org), Some(outcome))
        .await
        .unwrap_or_else(page::refused)
}
