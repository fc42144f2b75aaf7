//! Inventory: pipelines and plugins with their current compliance, the build queue
//! and its dead letters (replayed by those the API lets replay); a pipeline added
//! from a pasted JSON or YAML body, a plugin uploaded as a ZIP, each judged by the
//! API with the violations that block it shown as a list.

use std::collections::HashMap;

use askama::Template;
use axum::body::Bytes;
use axum::extract::multipart::{Multipart, MultipartRejection};
use axum::extract::{Query, State};
use axum::http::Method;
use axum::response::Response;
use serde::de::IgnoredAny;

use super::api::{self, act, segment, Call, Named, Refusal};
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

/// Where plugins are uploaded.
pub const UPLOAD: &str = "/console/inventory/plugin";

/// A violation that blocks, as the list shows it.
pub struct Blocking {
    rule: String,
    severity: String,
    message: String,
}

/// What the forms keep after an action: the pasted pipeline, and what the API
/// named in its refusal.
#[derive(Default)]
pub struct Kept {
    pipeline: String,
    problems: Vec<(String, String)>,
    violations: Vec<Blocking>,
}

impl Kept {
    /// A refusal's named fields and violations kept for the page.
    fn refused(&mut self, named: Named) -> Refusal {
        self.problems = named.problems;
        self.violations = named
            .violations
            .iter()
            .map(|v| Blocking {
                rule: v.rule_name().to_owned(),
                severity: api::wire(&v.severity()),
                message: v.message(),
            })
            .collect();
        named.refusal
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
    kept: Kept,
}

async fn show(
    console: &Console,
    visitor: &Visitor,
    q: &HashMap<String, String>,
    (outcome, kept): (Option<Result<String, Refusal>>, Kept),
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
            kept,
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
    show(&console, &visitor, &q, (None, Kept::default()))
        .await
        .unwrap_or_else(page::refused)
}

/// `POST /console/inventory`: `replay` a dead letter, `createPipeline` from a
/// pasted JSON or YAML body.
pub async fn action(State(console): State<Console>, posted: Posted) -> Response {
    let Posted { visitor, form } = posted;
    let org = field(&form, "org").to_owned();
    let mut kept = Kept::default();
    let outcome = async {
        match field(&form, "action") {
            "replay" => {
                let id = segment(field(&form, "jobId"))?;
                let uri = format!("/api/plugins/queue/dlq/{id}/replay");
                act::<IgnoredAny>(&visitor.api, (Method::POST, &uri), &org, None).await?;
                Ok(format!("job {id} replayed"))
            }
            "createPipeline" => {
                kept.pipeline = form.get("pipeline").cloned().unwrap_or_default();
                let Some(body) = page::pasted_object(&kept.pipeline) else {
                    kept.problems.push((
                        "pipeline".to_owned(),
                        "a pipeline's body: a JSON object, or YAML".to_owned(),
                    ));
                    return Err(Refusal::invalid(
                        "the pipeline's body is not a JSON or YAML object",
                    ));
                };
                let created: Pipeline =
                    api::act_naming(&visitor.api, (Method::POST, "/api/pipelines"), &org, body)
                        .await
                        .map_err(|named| kept.refused(named))?;
                kept.pipeline.clear();
                Ok(format!(
                    "pipeline {} created ({})",
                    created.pipeline_name,
                    api::wire(&created.compliance.result)
                ))
            }
            _ => Err(unknown_action()),
        }
    }
    .await;
    show(&console, &visitor, &page::again(org), (Some(outcome), kept))
        .await
        .unwrap_or_else(page::refused)
}

/// The parts of the console's upload form.
#[derive(Default)]
struct UploadForm {
    csrf: String,
    org: String,
    access_modifier: String,
    archive: Option<Bytes>,
}

async fn upload_form(mut multipart: Multipart) -> Result<UploadForm, Refusal> {
    let unreadable = |e: axum::extract::multipart::MultipartError| {
        Refusal::invalid(format!("the upload cannot be read: {}", e.body_text()))
    };
    let mut form = UploadForm::default();
    while let Some(part) = multipart.next_field().await.map_err(unreadable)? {
        match part.name().unwrap_or_default() {
            "csrf" => form.csrf = part.text().await.map_err(unreadable)?,
            "org" => form.org = part.text().await.map_err(unreadable)?,
            "accessModifier" => form.access_modifier = part.text().await.map_err(unreadable)?,
            "plugin" => form.archive = Some(part.bytes().await.map_err(unreadable)?),
            other => {
                return Err(Refusal::invalid(format!(
                    "unexpected part `{}` in the upload",
                    other.chars().take(40).collect::<String>()
                )))
            }
        }
    }
    Ok(form)
}

/// The API's upload body (`multipart/form-data`: `accessModifier`, `plugin`) and its
/// media type.
fn upload_body(access_modifier: &str, archive: &[u8]) -> (String, Bytes) {
    let boundary = format!("console-{}", uuid::Uuid::new_v4().simple());
    let mut body = Vec::with_capacity(archive.len() + 512);
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"accessModifier\"\r\n\r\n{access_modifier}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"plugin\"; filename=\"plugin.zip\"\r\nContent-Type: application/zip\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(archive);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (
        format!("multipart/form-data; boundary={boundary}"),
        Bytes::from(body),
    )
}

/// `POST /console/inventory/plugin`: a plugin's ZIP (`multipart/form-data`, with the
/// page's form token), uploaded through the API.
pub async fn upload(
    State(console): State<Console>,
    visitor: Visitor,
    multipart: Result<Multipart, MultipartRejection>,
) -> Response {
    let form = match multipart {
        Ok(multipart) => upload_form(multipart).await,
        Err(rejection) => Err(Refusal::invalid(rejection.body_text())),
    };
    let form = match form {
        Ok(form) => form,
        Err(refusal) => return page::failure(&refusal),
    };
    let token = HashMap::from([("csrf".to_owned(), form.csrf.clone())]);
    if let Err(forged) = visitor.posted(token) {
        return page::failure(&forged);
    }
    let mut kept = Kept::default();
    let outcome = async {
        let archive = form
            .archive
            .filter(|a| !a.is_empty())
            .ok_or_else(|| Refusal::invalid("plugin: choose the plugin's ZIP file"))?;
        let access = match form.access_modifier.trim() {
            "" => "private",
            given => given,
        };
        let uploaded: Plugin = api::send_naming(
            &visitor.api,
            Call {
                method: Some(Method::POST),
                uri: "/api/plugins",
                org: Some(&form.org),
                raw: Some(upload_body(access, &archive)),
                ..Call::default()
            },
        )
        .await
        .map_err(|named| kept.refused(named))?;
        Ok(format!(
            "plugin {}@{} uploaded ({}); its build is queued",
            uploaded.name,
            uploaded.version,
            api::wire(&uploaded.compliance.result)
        ))
    }
    .await;
    show(
        &console,
        &visitor,
        &page::again(form.org.clone()),
        (Some(outcome), kept),
    )
    .await
    .unwrap_or_else(page::refused)
}
