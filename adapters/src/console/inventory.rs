//! Inventory: pipelines and plugins with their current compliance, the build queue
//! and its dead letters (replayed by those the API lets replay).

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::Method;
use axum::response::Response;
use serde_json::Value;

use super::api::{self, act, segment, Refusal};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::{Posted, Visitor};
use super::{field, Console};

/// An entity as a row.
pub struct Entity {
    id: String,
    name: String,
    result: String,
    violations: usize,
}

fn entity(value: &Value, name: String) -> Entity {
    let compliance = value.get("compliance").cloned().unwrap_or(Value::Null);
    Entity {
        id: api::text(value, "id"),
        name,
        result: api::text(&compliance, "result"),
        violations: compliance
            .get("violations")
            .and_then(Value::as_array)
            .map_or(0, Vec::len),
    }
}

/// A queue's count.
pub struct QueueCount {
    queue: String,
    status: String,
    count: i64,
}

/// A dead letter.
pub struct DeadLetter {
    id: String,
    plugin_id: String,
    attempts: i64,
    last_error: String,
}

#[derive(Template)]
#[template(path = "console/inventory.html")]
struct InventoryPage {
    frame: Frame,
    pipelines: Vec<Entity>,
    pipeline_total: i64,
    plugins: Vec<Entity>,
    plugin_total: i64,
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
        .read(
            visitor,
            ("listPipelines", "pipelines"),
            "/api/pipelines?limit=50",
        )
        .await?;
    let plugins = frame
        .read(visitor, ("listPlugins", "plugins"), "/api/plugins?limit=50")
        .await?;
    let queue = frame
        .read(
            visitor,
            ("buildQueueStatus", "the build queue"),
            "/api/plugins/queue/status",
        )
        .await?;
    let dead = frame
        .read(
            visitor,
            ("deadLetters", "the dead letters"),
            "/api/plugins/queue/dlq?limit=50",
        )
        .await?;
    let pipeline_rows = api::items(&pipelines)
        .iter()
        .map(|p| entity(p, api::text(p, "pipelineName")))
        .collect();
    let plugin_rows = api::items(&plugins)
        .iter()
        .map(|p| {
            entity(
                p,
                format!("{}@{}", api::text(p, "name"), api::text(p, "version")),
            )
        })
        .collect();
    let queue = queue
        .get("counts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| QueueCount {
            queue: api::text(c, "queue"),
            status: api::text(c, "status"),
            count: api::number(c, "count"),
        })
        .collect();
    let dead_letters = api::items(&dead)
        .iter()
        .map(|d| DeadLetter {
            id: api::text(d, "id"),
            plugin_id: api::text(d, "pluginId"),
            attempts: api::number(d, "attempts"),
            last_error: api::text(d, "lastError"),
        })
        .collect();
    let code = frame.settle(outcome);
    Ok(page::render(
        &InventoryPage {
            frame,
            pipelines: pipeline_rows,
            pipeline_total: api::total(&pipelines),
            plugins: plugin_rows,
            plugin_total: api::total(&plugins),
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
                act(&visitor.api, (Method::POST, &uri), &org, None).await?;
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
