//! AI generation (issue 34): fake providers on loopback, one per wire format
//! (OpenAI-compatible server-sent events, Anthropic Messages events, Ollama's JSON
//! lines), each replaying a script; a Git repository served on loopback by `git
//! http-backend`. What is checked: the answer is validated and dry-run, retried with
//! its problems at most twice, charged once; streams end in an error (never a
//! result) when the provider fails after its 200 or cuts its stream; keep-alives
//! while the model is slow; a client that goes away closes the provider's
//! connection; the tier gate, the quota, tenant isolation, and the key never in an
//! answer or a log.

use crate::api::{pagination, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::{
    AiProvider, GeneratedPipelineAnswer, GeneratedPluginAnswer, QuotaStatus,
};
use adapters::services::ai_settings::AiSettings;
use adapters::services::pipelines::PipelineInput;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use ::generation::Wire;
use axum::body::Bytes;
use axum::http::HeaderMap;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::billing::{override_limits, set_tier};
use super::*;
use crate::code_of;

const KEY: &str = "sk-test-9f8e7d6c5b4a3210";

/// What a fake answers one request with.
#[derive(Debug, Clone)]
enum Reply {
    /// The text in pieces, then the end marker.
    Answer(String),
    /// The pieces, then an error event in the 200 stream.
    ErrorAfter(String, &'static str),
    /// The pieces, then the connection ends without the end marker.
    Cut(String),
    /// The pieces with a pause before each.
    Slow(String, Duration),
    /// One piece, then nothing until the client goes away.
    Hang(String),
    /// A refusal: the status and the body.
    Status(u16, String),
    /// The start of a frame, then this many bytes without a line's end (in chunks
    /// of 64 KiB), then nothing until the client goes away.
    Flood(usize),
}

struct Fake {
    wire: Wire,
    base: String,
    seen: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
    replies: Arc<Mutex<VecDeque<Reply>>>,
    closed: Arc<AtomicUsize>,
    /// The bytes of answers sent so far.
    sent: Arc<AtomicUsize>,
}

#[derive(Clone)]
struct FakeState {
    wire: Wire,
    seen: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
    replies: Arc<Mutex<VecDeque<Reply>>>,
    closed: Arc<AtomicUsize>,
    sent: Arc<AtomicUsize>,
}

/// `text` in three pieces (at character boundaries).
fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let third = chars.len().div_ceil(3).max(1);
    chars
        .chunks(third)
        .map(|c| c.iter().collect::<String>())
        .collect()
}

fn frame(wire: Wire, piece: &str) -> String {
    match wire {
        Wire::OpenAi => format!(
            "data: {}\n\n",
            json!({"id": "c1", "object": "chat.completion.chunk", "model": "m",
                   "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]})
        ),
        // The forced tool's input, as Anthropic streams it.
        Wire::Anthropic => format!(
            "event: content_block_delta\ndata: {}\n\n",
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "input_json_delta", "partial_json": piece}})
        ),
        Wire::Ollama => format!(
            "{}\n",
            json!({"model": "m", "created_at": "2026-11-26T00:00:00Z",
                   "message": {"role": "assistant", "content": piece}, "done": false})
        ),
    }
}

fn opening(wire: Wire) -> String {
    match wire {
        Wire::OpenAi => format!(
            "data: {}\n\n",
            json!({"id": "c1", "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        ),
        Wire::Anthropic => format!(
            "event: message_start\ndata: {}\n\nevent: content_block_start\ndata: {}\n\nevent: ping\ndata: {{\"type\": \"ping\"}}\n\n",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "m",
                   "usage": {"input_tokens": 30, "output_tokens": 0}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "answer", "input": {}}})
        ),
        Wire::Ollama => String::new(),
    }
}

fn ending(wire: Wire) -> String {
    match wire {
        // Each format's usage, as its provider reports it: 50 tokens an answer.
        Wire::OpenAi => format!(
            "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
            json!({"id": "c1", "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            json!({"id": "c1", "object": "chat.completion.chunk", "choices": [],
                   "usage": {"prompt_tokens": 30, "completion_tokens": 20, "total_tokens": 50}})
        ),
        Wire::Anthropic => "event: content_block_stop\ndata: {\"type\": \"content_block_stop\", \"index\": 0}\n\nevent: message_delta\ndata: {\"type\": \"message_delta\", \"delta\": {\"stop_reason\": \"tool_use\"}, \"usage\": {\"output_tokens\": 20}}\n\nevent: message_stop\ndata: {\"type\": \"message_stop\"}\n\n".to_owned(),
        Wire::Ollama => format!(
            "{}\n",
            json!({"model": "m", "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop",
                   "prompt_eval_count": 30, "eval_count": 20})
        ),
    }
}

fn error_frame(wire: Wire, message: &str) -> String {
    match wire {
        Wire::OpenAi => format!(
            "data: {}\n\n",
            json!({"error": {"message": message, "type": "server_error"}})
        ),
        Wire::Anthropic => format!(
            "event: error\ndata: {}\n\n",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": message}})
        ),
        Wire::Ollama => format!("{}\n", json!({"error": message})),
    }
}

async fn fake_handler(
    axum::extract::State(state): axum::extract::State<FakeState>,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    state.seen.lock().unwrap().push((headers, request));
    let reply = state
        .replies
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Reply::Status(500, "{\"error\": \"no script\"}".to_owned()));
    let wire = state.wire;
    if let Reply::Status(status, body) = reply {
        return axum::response::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body))
            .unwrap();
    }
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(4);
    let closed = state.closed.clone();
    let sent = state.sent.clone();
    tokio::spawn(async move {
        let send = |text: String| {
            let tx = tx.clone();
            let sent = sent.clone();
            async move {
                let n = text.len();
                let ok = tx.send(Ok(Bytes::from(text))).await.is_ok();
                if ok {
                    sent.fetch_add(n, Ordering::SeqCst);
                }
                ok
            }
        };
        let mut frames = vec![(opening(wire), Duration::ZERO)];
        let mut hang = false;
        match &reply {
            Reply::Answer(text) => {
                frames.extend(
                    pieces(text)
                        .iter()
                        .map(|p| (frame(wire, p), Duration::ZERO)),
                );
                frames.push((ending(wire), Duration::ZERO));
            }
            Reply::ErrorAfter(text, message) => {
                frames.extend(
                    pieces(text)
                        .iter()
                        .map(|p| (frame(wire, p), Duration::ZERO)),
                );
                frames.push((error_frame(wire, message), Duration::ZERO));
            }
            Reply::Cut(text) => {
                frames.extend(
                    pieces(text)
                        .iter()
                        .map(|p| (frame(wire, p), Duration::ZERO)),
                );
            }
            Reply::Slow(text, gap) => {
                frames.extend(pieces(text).iter().map(|p| (frame(wire, p), *gap)));
                frames.push((ending(wire), Duration::ZERO));
            }
            Reply::Hang(text) => {
                frames.push((frame(wire, text), Duration::ZERO));
                hang = true;
            }
            Reply::Flood(bytes) => {
                // A frame's start, and no end to its line.
                let start = match wire {
                    Wire::Ollama => "{\"model\": \"m\", \"message\": {\"content\": \"".to_owned(),
                    _ => "data: {\"choices\": [{\"delta\": {\"content\": \"".to_owned(),
                };
                frames.push((start, Duration::ZERO));
                let chunk = "x".repeat(64 * 1024);
                frames.extend((0..bytes / chunk.len()).map(|_| (chunk.clone(), Duration::ZERO)));
                hang = true;
            }
            Reply::Status(..) => {}
        }
        for (text, pause) in frames {
            tokio::time::sleep(pause).await;
            if text.is_empty() {
                continue;
            }
            if !send(text).await {
                closed.fetch_add(1, Ordering::SeqCst);
                return;
            }
        }
        if hang {
            tx.closed().await;
            closed.fetch_add(1, Ordering::SeqCst);
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let content_type = if wire.is_event_stream() {
        "text/event-stream"
    } else {
        "application/x-ndjson"
    };
    axum::response::Response::builder()
        .status(200)
        .header("content-type", content_type)
        .body(axum::body::Body::from_stream(stream))
        .unwrap()
}

impl Fake {
    async fn start(wire: Wire) -> Fake {
        let state = FakeState {
            wire,
            seen: Arc::default(),
            replies: Arc::default(),
            closed: Arc::default(),
            sent: Arc::default(),
        };
        let path = match wire {
            Wire::OpenAi => "/v1/chat/completions",
            Wire::Anthropic => "/v1/messages",
            Wire::Ollama => "/api/chat",
        };
        let app = axum::Router::new()
            .route(path, axum::routing::post(fake_handler))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let base = match wire {
            Wire::OpenAi => format!("http://{address}/v1"),
            _ => format!("http://{address}"),
        };
        Fake {
            wire,
            base,
            seen: state.seen,
            replies: state.replies,
            closed: state.closed,
            sent: state.sent,
        }
    }

    fn script(&self, replies: Vec<Reply>) {
        *self.replies.lock().unwrap() = replies.into();
        self.seen.lock().unwrap().clear();
    }

    fn requests(&self) -> Vec<(HeaderMap, Value)> {
        self.seen.lock().unwrap().clone()
    }

    /// The text of every message of request `n`.
    fn said(&self, n: usize) -> String {
        let (_, body) = &self.requests()[n];
        let mut text = body["system"].as_str().unwrap_or_default().to_owned();
        for message in body["messages"].as_array().unwrap() {
            text.push_str(message["content"].as_str().unwrap_or_default());
            text.push('\n');
        }
        text
    }

    fn variables(&self) -> Vec<(String, String)> {
        let prefix = match self.wire {
            Wire::OpenAi => "AI_OPENAI",
            Wire::Anthropic => "AI_ANTHROPIC",
            Wire::Ollama => "AI_OLLAMA",
        };
        let mut vars = vec![
            (format!("{prefix}_BASE_URL"), self.base.clone()),
            (format!("{prefix}_MODELS"), "model-a, model-b".to_owned()),
        ];
        if self.wire != Wire::Ollama {
            vars.push((format!("{prefix}_API_KEY"), KEY.to_owned()));
        }
        vars
    }
}

struct Fakes {
    openai: Fake,
    anthropic: Fake,
    ollama: Fake,
}

impl Fakes {
    async fn start() -> Fakes {
        Fakes {
            openai: Fake::start(Wire::OpenAi).await,
            anthropic: Fake::start(Wire::Anthropic).await,
            ollama: Fake::start(Wire::Ollama).await,
        }
    }

    fn each(&self) -> [&Fake; 3] {
        [&self.openai, &self.anthropic, &self.ollama]
    }

    fn variables(&self, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut vars: Vec<(String, String)> =
            self.each().iter().flat_map(|f| f.variables()).collect();
        vars.extend([
            ("AI_STREAM_KEEPALIVE_SECONDS".to_owned(), "1".to_owned()),
            ("AI_ALLOW_PRIVATE_URLS".to_owned(), "true".to_owned()),
            ("AI_TIMEOUT_SECONDS".to_owned(), "20".to_owned()),
        ]);
        vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        vars
    }

    /// A server beside `app` with these providers.
    async fn server(&self, app: &TestApp, extra: &[(&str, &str)]) -> TestApp {
        let vars = self.variables(extra);
        let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        app.beside(&refs).await
    }
}

fn pipeline(access: &str) -> Value {
    json!({
        "project": "shop",
        "organization": "acme",
        "pipelineName": "shop-ci",
        "accessModifier": access,
        "props": {
            "synth": {"source": {"type": "github", "options": {"repo": "acme/shop", "branch": "main"}},
                      "plugin": {"name": "cdk-synth", "version": "1.0.0"}},
            "stages": [{"stageName": "build", "steps": [{"name": "test", "plugin": {"name": "cargo", "version": "1.2.0"}}]}]
        }
    })
}

/// A pipeline body as the server decodes it.
fn input(body: Value) -> PipelineInput {
    serde_json::from_value(body).unwrap()
}

/// The end of the organization's own provider's key, as answered.
fn hint(settings: &AiSettings) -> Option<&str> {
    settings
        .own_provider
        .as_ref()
        .and_then(|p| p.api_key_hint.as_deref())
}

fn plugin(name: &str) -> Value {
    json!({
        "name": name,
        "version": "1.0.0",
        "commands": ["cargo clippy -- -D warnings"],
        "installCommands": ["rustup component add clippy"],
        "dockerfile": "FROM rust:1.85\nRUN rustup component add clippy\n"
    })
}

/// An organization of `sub` on the Pro tier (AI generation is Pro and up).
async fn pro_org(app: &TestApp, sub: &str, name: &str) -> (String, String) {
    let org = app.org(sub, name).await;
    set_tier(app, &org, "pro").await;
    (org, app.token(sub, &format!("{sub}@example.com")))
}

/// The rule that blocks public pipelines.
async fn private_only(app: &TestApp, token: &str, org: &str) {
    app.by(token)
        .org(org)
        .post("/api/compliance/rules")
        .json(
            json!({"name": "Private only", "target": "pipeline", "severity": "error",
                        "field": "accessModifier", "operator": "eq", "value": "private"}),
        )
        .await
        .expect(StatusCode::CREATED);
}

async fn ai_used(app: &TestApp, token: &str, org: &str) -> i64 {
    let status: QuotaStatus = app
        .by(token)
        .get(format!("/api/quotas/{org}/aiCalls"))
        .await
        .expect(StatusCode::OK)
        .data();
    status.used as i64
}

fn ask(provider: &str, prompt: &str) -> Value {
    json!({"prompt": prompt, "provider": provider, "model": "model-b"})
}

/// `POST /api/pipelines/generate` with `provider`'s second model and `prompt`.
async fn generate_pipeline(
    server: &TestApp,
    token: &str,
    org: &str,
    provider: &str,
    prompt: &str,
) -> Answer {
    server
        .by(token)
        .org(org)
        .post("/api/pipelines/generate")
        .json(ask(provider, prompt))
        .await
}

/// A stream request; its status and body.
async fn open(
    app: &TestApp,
    path: &str,
    token: &str,
    org: &str,
    body: Value,
) -> (StatusCode, Body) {
    let request = Request::builder()
        .method("POST")
        .uri(path)
        .header("authorization", format!("Bearer {token}"))
        .header("x-org-id", org)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = app.router.clone().oneshot(request).await.unwrap();
    (response.status(), response.into_body())
}

/// Every event of a stream until it ends (or `within` passes): (name, data), and
/// the raw text (keep-alive comments included).
async fn read_events(body: &mut Body, within: Duration) -> (Vec<(String, Value)>, String) {
    let deadline = Instant::now() + within;
    let mut raw = String::new();
    while Instant::now() < deadline {
        match tokio::time::timeout(deadline - Instant::now(), body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Some(bytes) = frame.data_ref() {
                    raw.push_str(&String::from_utf8_lossy(bytes));
                }
            }
            _ => break,
        }
    }
    let mut parsed = Vec::new();
    for block in raw.split("\n\n") {
        let name = block.lines().find_map(|l| l.strip_prefix("event: "));
        let data = block.lines().find_map(|l| l.strip_prefix("data: "));
        if let (Some(name), Some(data)) = (name, data) {
            parsed.push((name.to_owned(), serde_json::from_str(data).unwrap()));
        }
    }
    (parsed, raw)
}

fn names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(n, _)| n.as_str()).collect()
}

/// Per wire format: a cut JSON answer, then a valid one; the second request tells
/// the model what was wrong; the result is a body a create accepts; one unit charged.
async fn each_format_retries_broken_json_and_answers_a_creatable_body(app: &TestApp) {
    let fakes = Fakes::start().await;
    let server = fakes.server(app, &[]).await;
    let (acme, alice) = pro_org(&server, "alice", "acme").await;
    let valid = pipeline("private").to_string();
    for (n, fake) in fakes.each().into_iter().enumerate() {
        let cut = format!("```json\n{}", &valid[..valid.len() / 2]);
        fake.script(vec![
            Reply::Answer(cut),
            Reply::Answer(format!("Here you are:\n```json\n{valid}\n```")),
        ]);
        let provider = fake.wire.name();
        let generated: GeneratedPipelineAnswer = server
            .by(&alice)
            .org(&acme)
            .post("/api/pipelines/generate")
            .json(ask(provider, "a Rust shop"))
            .await
            .expect(StatusCode::OK)
            .data();
        assert_eq!(generated.pipeline, input(pipeline("private")), "{provider}");
        assert_eq!(
            (
                generated.attempts,
                generated.provider.as_str(),
                generated.model.as_str()
            ),
            (2, provider, "model-b")
        );
        let requests = fake.requests();
        assert_eq!(requests.len(), 2, "{provider}");
        let (headers, first) = &requests[0];
        assert_eq!(first["model"], "model-b");
        assert_eq!(first["stream"], true);
        match fake.wire {
            Wire::OpenAi => {
                assert_eq!(headers["authorization"], format!("Bearer {KEY}").as_str());
                assert_eq!(first["response_format"]["type"], "json_schema");
                assert!(first["response_format"]["json_schema"]["schema"]["$defs"]
                    ["PipelineProps"]
                    .is_object());
            }
            Wire::Anthropic => {
                assert_eq!(headers["x-api-key"], KEY);
                assert_eq!(headers["anthropic-version"], "2023-06-01");
                assert!(first["system"].as_str().unwrap().contains("pipelineName"));
                // The schema is enforced through a forced tool.
                assert_eq!(
                    first["tool_choice"],
                    json!({"type": "tool", "name": "answer"})
                );
                assert_eq!(first["tools"][0]["name"], "answer");
                assert!(first["tools"][0]["input_schema"]["$defs"]["PipelineProps"].is_object());
            }
            Wire::Ollama => {
                assert!(headers.get("authorization").is_none());
                assert_eq!(first["format"]["required"][2], "pipelineName");
            }
        }
        assert!(fake.said(0).contains("a Rust shop"));
        let retry = fake.said(1);
        assert!(
            retry.contains("cut off before its end"),
            "{provider}: {retry}"
        );
        assert_eq!(
            ai_used(&server, &alice, &acme).await,
            n as i64 + 1,
            "one unit per request, retries included"
        );
    }
    // The answer is a create body as it stands.
    let generated = {
        fakes.openai.script(vec![Reply::Answer(valid.clone())]);
        generate_pipeline(&server, &alice, &acme, "openai", "again")
            .await
            .data::<GeneratedPipelineAnswer>()
            .pipeline
    };
    server
        .by(&alice)
        .org(&acme)
        .post("/api/pipelines")
        .json(serde_json::to_value(generated).unwrap())
        .await
        .expect(StatusCode::CREATED);
    server.stop().await;
}

/// An answer the validation refuses (a value of the wrong kind, an unknown field),
/// then a non-compliant one, then a compliant one: each problem goes back to the
/// model, with the field or the rule; the organization's warning comes with the result.
async fn invalid_then_non_compliant_then_compliant(app: &TestApp) {
    let fakes = Fakes::start().await;
    let server = fakes.server(app, &[]).await;
    let (acme, alice) = pro_org(&server, "alice", "acme").await;
    private_only(&server, &alice, &acme).await;
    server
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/rules")
        .json(
            json!({"name": "Named by convention", "target": "pipeline", "severity": "warning",
                        "field": "pipelineName", "operator": "regex", "value": "^[a-z]+$"}),
        )
        .await
        .expect(StatusCode::CREATED);
    let mut invalid = pipeline("private");
    invalid["pipelineName"] = json!(42);
    fakes.anthropic.script(vec![
        Reply::Answer(invalid.to_string()),
        Reply::Answer(pipeline("public").to_string()),
        Reply::Answer(pipeline("private").to_string()),
    ]);
    let generated: GeneratedPipelineAnswer =
        generate_pipeline(&server, &alice, &acme, "anthropic", "shop")
            .await
            .expect(StatusCode::OK)
            .data();
    assert_eq!(generated.attempts, 3);
    assert_eq!(
        generated.warnings.first().map(|w| w.rule_name()),
        Some("Named by convention")
    );
    let second = fakes.anthropic.said(1);
    assert!(second.contains("- invalid: pipelineName:"), "{second}");
    let third = fakes.anthropic.said(2);
    assert!(
        third.contains("- blocked by a compliance rule: accessModifier:"),
        "{third}"
    );
    // Nothing was stored, nothing checked into the log.
    let Answer(_, listed) = server.by(&alice).org(&acme).get("/api/pipelines").await;
    assert_eq!(pagination(&listed).total, 0);
    let Answer(_, log) = server
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/audit")
        .await;
    assert_eq!(
        pagination(&log).total,
        0,
        "a dry run records nothing: {log}"
    );
    server.stop().await;
}

/// Always non-compliant: three answers, then 422 GENERATION_FAILED with the last
/// problems; charged once. Another organization without the rule gets the same
/// answer through at once (its own rules, not acme's).
async fn always_non_compliant_fails_after_two_retries_charged_once(app: &TestApp) {
    let fakes = Fakes::start().await;
    let server = fakes.server(app, &[]).await;
    let (acme, alice) = pro_org(&server, "alice", "acme").await;
    private_only(&server, &alice, &acme).await;
    let public = pipeline("public").to_string();
    fakes.ollama.script(vec![Reply::Answer(public.clone()); 4]);
    let Answer(status, body) = generate_pipeline(&server, &alice, &acme, "ollama", "shop").await;
    assert_eq!(code(status, &body), ErrorCode::GenerationFailed, "{body}");
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["details"]["attempts"], 3);
    let problem = &body["details"]["problems"][0];
    assert_eq!(problem["kind"], "compliance");
    assert_eq!(problem["field"], "accessModifier");
    assert_eq!(problem["severity"], "error");
    assert!(problem["ruleId"].as_str().is_some(), "{body}");
    assert_eq!(
        fakes.ollama.requests().len(),
        3,
        "the first and two retries"
    );
    assert_eq!(ai_used(&server, &alice, &acme).await, 1);

    // Tenant isolation: bob's organization has no such rule.
    let (other, bob) = pro_org(&server, "bob", "other").await;
    fakes.ollama.script(vec![Reply::Answer(public)]);
    let generated: GeneratedPipelineAnswer =
        generate_pipeline(&server, &bob, &other, "ollama", "shop")
            .await
            .expect(StatusCode::OK)
            .data();
    assert_eq!(generated.attempts, 1);
    assert_eq!(ai_used(&server, &bob, &other).await, 1);
    assert_eq!(
        ai_used(&server, &alice, &acme).await,
        1,
        "acme's count is its own"
    );
    // Alice cannot generate in bob's organization, nor charge it.
    let Answer(status, body) = generate_pipeline(&server, &alice, &other, "ollama", "shop").await;
    assert_eq!(code(status, &body), ErrorCode::TenantForbidden, "{body}");
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(ai_used(&server, &bob, &other).await, 1);
    server.stop().await;
}

/// Plugins: a Dockerfile-less answer is refused by the upload's checks and retried;
/// the result deploys as it stands; streamed too.
async fn plugins_are_checked_like_uploads_and_deploy(app: &TestApp) {
    let fakes = Fakes::start().await;
    let server = fakes.server(app, &[]).await;
    let (acme, alice) = pro_org(&server, "alice", "acme").await;
    let mut no_dockerfile = plugin("clippy");
    no_dockerfile["dockerfile"] = json!("  ");
    let bad_name = plugin("../clippy");
    fakes.openai.script(vec![
        Reply::Answer(no_dockerfile.to_string()),
        Reply::Answer(bad_name.to_string()),
        Reply::Answer(plugin("clippy").to_string()),
    ]);
    let generated: GeneratedPluginAnswer = server
        .by(&alice)
        .org(&acme)
        .post("/api/plugins/generate")
        .json(ask("openai", "a clippy step"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(
        generated.plugin,
        serde_json::from_value(plugin("clippy")).unwrap()
    );
    assert_eq!(generated.attempts, 3);
    assert!(
        fakes.openai.said(1).contains("dockerfile"),
        "{}",
        fakes.openai.said(1)
    );
    assert!(
        fakes.openai.said(2).contains("name"),
        "{}",
        fakes.openai.said(2)
    );
    let first = &fakes.openai.requests()[0].1;
    assert!(
        first["response_format"]["json_schema"]["schema"]["properties"]["dockerfile"].is_object()
    );
    server
        .by(&alice)
        .org(&acme)
        .post("/api/plugins/deploy-generated")
        .json(serde_json::to_value(&generated.plugin).unwrap())
        .await
        .expect(StatusCode::CREATED);

    fakes
        .anthropic
        .script(vec![Reply::Answer(plugin("fmt").to_string())]);
    let (status, mut stream) = open(
        &server,
        "/api/plugins/generate/stream",
        &alice,
        &acme,
        ask("anthropic", "fmt"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (events, _) = read_events(&mut stream, Duration::from_secs(10)).await;
    assert_eq!(names(&events).first(), Some(&"started"));
    assert_eq!(names(&events).last(), Some(&"result"), "{events:?}");
    assert_eq!(events.last().unwrap().1["plugin"], plugin("fmt"));
    server.stop().await;
}

/// The stream: the model's text as it comes, each attempt, then the result; a
/// provider error after the 200 and a cut stream end in an error event, never a
/// result; a slow model gets keep-alives.
async fn streams_carry_text_attempts_and_end_in_result_or_error(app: &TestApp) {
    let fakes = Fakes::start().await;
    let server = fakes.server(app, &[]).await;
    let (acme, alice) = pro_org(&server, "alice", "acme").await;
    let valid = pipeline("private").to_string();
    for fake in fakes.each() {
        let provider = fake.wire.name();
        fake.script(vec![
            Reply::Answer("{\"project\": ".to_owned()),
            Reply::Answer(valid.clone()),
        ]);
        let (status, mut stream) = open(
            &server,
            "/api/pipelines/generate/stream",
            &alice,
            &acme,
            ask(provider, "shop"),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        let (events, _) = read_events(&mut stream, Duration::from_secs(10)).await;
        let shown = names(&events);
        assert_eq!(shown.first(), Some(&"started"), "{provider}: {shown:?}");
        assert_eq!(
            events[0].1,
            json!({"provider": provider, "model": "model-b", "maxAttempts": 3})
        );
        let attempts: Vec<&Value> = events
            .iter()
            .filter(|(n, _)| n == "attempt")
            .map(|(_, d)| d)
            .collect();
        assert_eq!(attempts.len(), 2, "{provider}: {shown:?}");
        assert_eq!(attempts[0]["ok"], false);
        assert_eq!(attempts[0]["problems"][0]["kind"], "json");
        assert_eq!(
            attempts[1],
            &json!({"attempt": 2, "ok": true, "problems": []})
        );
        let second_text: String = events
            .iter()
            .filter(|(n, d)| n == "text" && d["attempt"] == 2)
            .map(|(_, d)| d["text"].as_str().unwrap())
            .collect();
        assert_eq!(
            second_text, valid,
            "{provider}: the text as the model wrote it"
        );
        assert_eq!(shown.last(), Some(&"result"));
        assert_eq!(events.last().unwrap().1["pipeline"], pipeline("private"));

        // 200, some text, then an error event.
        fake.script(vec![Reply::ErrorAfter(valid.clone(), "Overloaded")]);
        let (_, mut stream) = open(
            &server,
            "/api/pipelines/generate/stream",
            &alice,
            &acme,
            ask(provider, "shop"),
        )
        .await;
        let (events, _) = read_events(&mut stream, Duration::from_secs(10)).await;
        assert!(
            !names(&events).contains(&"result"),
            "{provider}: {events:?}"
        );
        let (last, error) = events.last().unwrap();
        assert_eq!(last, "error");
        assert_eq!(code_of(error), ErrorCode::AiProviderError, "{error}");
        assert_eq!(error["statusCode"], 502);
        assert!(error["message"].as_str().unwrap().contains("Overloaded"));

        // A stream cut before its end marker: the whole JSON arrived, still an error.
        fake.script(vec![Reply::Cut(valid.clone())]);
        let (_, mut stream) = open(
            &server,
            "/api/pipelines/generate/stream",
            &alice,
            &acme,
            ask(provider, "shop"),
        )
        .await;
        let (events, _) = read_events(&mut stream, Duration::from_secs(10)).await;
        assert!(
            !names(&events).contains(&"result"),
            "{provider}: {events:?}"
        );
        assert_eq!(
            code_of(&events.last().unwrap().1),
            ErrorCode::AiStreamTruncated,
            "{events:?}"
        );
        assert_eq!(fake.requests().len(), 1, "a broken stream is not retried");
    }
    // The JSON endpoint says the same.
    fakes.openai.script(vec![Reply::Cut(valid.clone())]);
    let Answer(status, body) = generate_pipeline(&server, &alice, &acme, "openai", "shop").await;
    assert_eq!(code(status, &body), ErrorCode::AiStreamTruncated, "{body}");
    assert_eq!(status, StatusCode::BAD_GATEWAY);

    // A slow model: keep-alive comments while it thinks.
    fakes.ollama.script(vec![Reply::Slow(
        valid.clone(),
        Duration::from_millis(1300),
    )]);
    let (_, mut stream) = open(
        &server,
        "/api/pipelines/generate/stream",
        &alice,
        &acme,
        ask("ollama", "shop"),
    )
    .await;
    let (events, raw) = read_events(&mut stream, Duration::from_secs(15)).await;
    assert!(raw.contains(": keep-alive"), "{raw}");
    assert_eq!(names(&events).last(), Some(&"result"));
    server.stop().await;
}

/// A client that goes away mid-stream: the provider's connection is closed.
async fn a_client_that_leaves_cancels_the_provider_call(app: &TestApp) {
    let fakes = Fakes::start().await;
    let server = fakes.server(app, &[]).await;
    let (acme, alice) = pro_org(&server, "alice", "acme").await;
    for fake in fakes.each() {
        fake.script(vec![Reply::Hang("{\"project\"".to_owned())]);
        let (status, mut stream) = open(
            &server,
            "/api/pipelines/generate/stream",
            &alice,
            &acme,
            ask(fake.wire.name(), "shop"),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        // Read until the model's first text has arrived, then leave.
        let mut seen = String::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !seen.contains("event: text") && Instant::now() < deadline {
            if let Ok(Some(Ok(frame))) =
                tokio::time::timeout(Duration::from_secs(5), stream.frame()).await
            {
                if let Some(bytes) = frame.data_ref() {
                    seen.push_str(&String::from_utf8_lossy(bytes));
                }
            }
        }
        assert!(seen.contains("event: text"), "{seen}");
        assert_eq!(fake.closed.load(Ordering::SeqCst), 0);
        drop(stream);
        let deadline = Instant::now() + Duration::from_secs(5);
        while fake.closed.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            fake.closed.load(Ordering::SeqCst),
            1,
            "{}: the provider's connection was closed",
            fake.wire.name()
        );
    }
    server.stop().await;
}

/// A provider that streams one line without its end (14 MB) is cut off while it is
/// read, in every wire format: the answer is too large (502 AI_OUTPUT_TOO_LARGE), the
/// provider's connection is closed, and what was read stays near the bound (twice
/// AI_OUTPUT_MAX_BYTES a line, plus what the sockets buffer), never the whole flood.
async fn a_provider_flooding_one_line_is_cut_off_as_it_is_read(app: &TestApp) {
    let fakes = Fakes::start().await;
    let server = fakes.server(app, &[("AI_OUTPUT_MAX_BYTES", "65536")]).await;
    let (acme, alice) = pro_org(&server, "alice", "acme").await;
    for fake in fakes.each() {
        fake.script(vec![Reply::Flood(14 * 1024 * 1024)]);
        let started = Instant::now();
        let Answer(status, body) =
            generate_pipeline(&server, &alice, &acme, fake.wire.name(), "shop").await;
        assert_eq!(code(status, &body), ErrorCode::AiOutputTooLarge, "{body}");
        assert_eq!(status, StatusCode::BAD_GATEWAY);
        assert!(started.elapsed() < Duration::from_secs(20));
        let deadline = Instant::now() + Duration::from_secs(5);
        while fake.closed.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            fake.closed.load(Ordering::SeqCst),
            1,
            "{}",
            fake.wire.name()
        );
        let sent = fake.sent.load(Ordering::SeqCst);
        // (What the sockets hold between the two ends counts as taken.)
        assert!(
            sent < 7 * 1024 * 1024,
            "{}: {sent} bytes were taken from the provider",
            fake.wire.name()
        );
    }
    server.stop().await;
}

/// AI_GENERATIONS_PER_ORG bounds what one organization runs at once, on all
/// replicas together: past it 429 RATE_LIMITED before anything is charged; a place
/// is given back when its generation ends, even by a client that leaves.
async fn an_organization_runs_a_bounded_number_of_generations_at_once(app: &TestApp) {
    let fakes = Fakes::start().await;
    let server = fakes.server(app, &[("AI_GENERATIONS_PER_ORG", "1")]).await;
    let (acme, alice) = pro_org(&server, "alice", "acme").await;
    let (other, bob) = pro_org(&server, "bob", "other").await;
    fakes.openai.script(vec![
        Reply::Hang("{".to_owned()),
        Reply::Answer(pipeline("private").to_string()),
    ]);
    let path = "/api/pipelines/generate/stream";
    let (status, held) = open(&server, path, &alice, &acme, ask("openai", "shop")).await;
    assert_eq!(status, StatusCode::OK);
    let Answer(status, body) = generate_pipeline(&server, &alice, &acme, "openai", "shop").await;
    assert_eq!(code(status, &body), ErrorCode::RateLimited, "{body}");
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["details"]["limit"], 1);
    // Another replica on the same database counts the same places.
    let replica = fakes.server(app, &[("AI_GENERATIONS_PER_ORG", "1")]).await;
    let Answer(status, body) = generate_pipeline(&replica, &alice, &acme, "openai", "shop").await;
    assert_eq!(code(status, &body), ErrorCode::RateLimited, "{body}");
    replica.stop().await;
    assert_eq!(
        ai_used(&server, &alice, &acme).await,
        1,
        "the refused one was not charged"
    );
    // Another organization is not held back by acme's.
    fakes
        .ollama
        .script(vec![Reply::Answer(pipeline("private").to_string())]);
    let Answer(status, body) = generate_pipeline(&server, &bob, &other, "ollama", "shop").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The held stream's client leaves: its place is given back.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let Answer(status, body) =
            generate_pipeline(&server, &alice, &acme, "openai", "shop").await;
        if status == StatusCode::OK {
            break;
        }
        assert_eq!(code(status, &body), ErrorCode::RateLimited, "{body}");
        assert!(Instant::now() < deadline, "the place was not given back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.stop().await;
}

/// The tier gate comes first (Developer: 403 with the feature, nothing charged, no
/// provider called); then the provider, the model, the prompt (400 naming each,
/// nothing charged); the quota (429, no provider called); a provider failure is
/// not refunded.
async fn gates_checks_and_quota_come_before_the_provider(app: &TestApp) {
    let fakes = Fakes::start().await;
    let server = fakes.server(app, &[]).await;
    let acme = server.org("alice", "acme").await;
    let alice = server.token("alice", "alice@example.com");
    for (path, feature) in [
        ("/api/pipelines/generate", "ai_pipeline_generation"),
        ("/api/pipelines/generate/stream", "ai_pipeline_generation"),
        ("/api/plugins/generate", "ai_plugin_generation"),
        ("/api/plugins/generate/stream", "ai_plugin_generation"),
    ] {
        let Answer(status, body) = server
            .by(&alice)
            .org(&acme)
            .post(path)
            .json(ask("openai", "x"))
            .await;
        assert_eq!(
            code(status, &body),
            ErrorCode::FeatureNotAvailable,
            "{path}: {body}"
        );
        assert_eq!(
            body["details"],
            json!({"feature": feature, "tier": "developer"})
        );
    }
    let Answer(status, body) = server
        .by(&alice)
        .org(&acme)
        .post("/api/pipelines/generate/from-url/stream")
        .json(json!({"url": "https://example.com/r.git", "provider": "openai", "model": "model-a"}))
        .await;
    assert_eq!(
        code(status, &body),
        ErrorCode::FeatureNotAvailable,
        "{body}"
    );
    set_tier(&server, &acme, "pro").await;
    for (body, field, words) in [
        (
            json!({"prompt": "x", "provider": "gemini", "model": "model-a"}),
            "provider",
            "`gemini`",
        ),
        (
            json!({"prompt": "x", "provider": "openai", "model": "gpt-9"}),
            "model",
            "`gpt-9`",
        ),
        (
            json!({"prompt": "x", "provider": "openai", "model": "m".repeat(1_000)}),
            "model",
            "at most 200 characters",
        ),
        (
            json!({"prompt": "  ", "provider": "openai", "model": "model-a"}),
            "prompt",
            "blank",
        ),
        (
            json!({"prompt": "x".repeat(8001), "provider": "openai", "model": "model-a"}),
            "prompt",
            "8000",
        ),
        (
            json!({"prompt": "bell\u{7}byte", "provider": "openai", "model": "model-a"}),
            "prompt",
            "control",
        ),
    ] {
        for path in ["/api/pipelines/generate", "/api/plugins/generate/stream"] {
            let Answer(status, answer) = server
                .by(&alice)
                .org(&acme)
                .post(path)
                .json(body.clone())
                .await;
            assert_eq!(
                code(status, &answer),
                ErrorCode::ValidationError,
                "{path} {body}: {answer}"
            );
            assert_eq!(answer["details"]["field"], field, "{answer}");
            assert!(
                answer["message"].as_str().unwrap().contains(words),
                "{answer}"
            );
            assert!(answer.to_string().len() < 1_000, "bounded: {answer}");
        }
    }
    let Answer(status, body) = server
        .by(&alice)
        .org(&acme)
        .post("/api/pipelines/generate")
        .json(json!({"prompt": "x", "provider": "openai", "model": "model-a", "temperature": 2}))
        .await;
    assert_eq!(code(status, &body), ErrorCode::ValidationError, "{body}");
    // A NUL byte is refused for the whole body, before any field.
    server
        .by(&alice)
        .org(&acme)
        .post("/api/pipelines/generate")
        .json(json!({"prompt": "nul\u{0}byte", "provider": "openai", "model": "model-a"}))
        .await
        .refused(ErrorCode::ValidationError);
    assert!(
        fakes.each().iter().all(|f| f.requests().is_empty()),
        "no provider was called"
    );
    assert_eq!(ai_used(&server, &alice, &acme).await, 0, "nothing charged");

    // A provider that fails: 502, the unit spent.
    fakes.openai.script(vec![Reply::Status(
        500,
        "{\"error\": {\"message\": \"upstream down\"}}".to_owned(),
    )]);
    let Answer(status, body) = generate_pipeline(&server, &alice, &acme, "openai", "shop").await;
    assert_eq!(code(status, &body), ErrorCode::AiProviderError, "{body}");
    assert_eq!(body["details"]["providerStatus"], 500);
    assert_eq!(ai_used(&server, &alice, &acme).await, 1, "not refunded");

    // The quota: one unit left, then 429 before any provider call.
    override_limits(&server, &acme, json!({"aiCalls": 2})).await;
    fakes
        .openai
        .script(vec![Reply::Answer(pipeline("private").to_string())]);
    let Answer(status, body) = generate_pipeline(&server, &alice, &acme, "openai", "shop").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for path in [
        "/api/pipelines/generate",
        "/api/pipelines/generate/stream",
        "/api/plugins/generate",
    ] {
        let Answer(status, body) = server
            .by(&alice)
            .org(&acme)
            .post(path)
            .json(ask("openai", "shop"))
            .await;
        assert_eq!(
            code(status, &body),
            ErrorCode::QuotaExceeded,
            "{path}: {body}"
        );
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    }
    assert_eq!(
        fakes.openai.requests().len(),
        1,
        "refused before the provider"
    );
    assert_eq!(ai_used(&server, &alice, &acme).await, 2);
    server.stop().await;
}

/// The providers endpoints list names and models, never a key; a provider's message
/// that echoes the key is answered with the key taken out.
async fn providers_are_listed_and_keys_never_shown(app: &TestApp) {
    let fakes = Fakes::start().await;
    let server = fakes.server(app, &[]).await;
    let (acme, alice) = pro_org(&server, "alice", "acme").await;
    for path in ["/api/pipelines/providers", "/api/plugins/providers"] {
        let answer = server
            .by(&alice)
            .org(&acme)
            .get(path)
            .await
            .expect(StatusCode::OK);
        let listed: Vec<(String, Vec<String>)> = answer
            .data::<Vec<AiProvider>>()
            .into_iter()
            .map(|p| (p.name, p.models))
            .collect();
        let models = vec!["model-a".to_owned(), "model-b".to_owned()];
        assert_eq!(
            listed,
            [
                ("openai".to_owned(), models.clone()),
                ("anthropic".to_owned(), models.clone()),
                ("ollama".to_owned(), models),
            ]
        );
        assert!(!answer.body().to_string().contains(KEY));
    }
    let echo =
        json!({"error": {"message": format!("Incorrect API key provided: {KEY}")}}).to_string();
    fakes.anthropic.script(vec![Reply::Status(401, echo)]);
    let Answer(status, body) = generate_pipeline(&server, &alice, &acme, "anthropic", "shop").await;
    assert_eq!(code(status, &body), ErrorCode::AiProviderError, "{body}");
    assert!(!body.to_string().contains(KEY), "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("Incorrect API key provided: ***"),
        "{body}"
    );
    // A server without providers lists none.
    let bare = app.beside(&[]).await;
    let listed: Vec<AiProvider> = bare
        .by(&alice)
        .org(&acme)
        .get("/api/pipelines/providers")
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(listed.is_empty());
    bare.stop().await;
    server.stop().await;
}

/// A Git repository served over smart HTTP on loopback by `git http-backend`.
struct GitServer {
    base: String,
    _root: tempdir::Dir,
}

mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn run_git(dir: &std::path::Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

async fn backend(
    axum::extract::State(root): axum::extract::State<std::path::PathBuf>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    if uri.path().starts_with("/private/") {
        return axum::response::Response::builder()
            .status(401)
            .header("www-authenticate", "Basic realm=\"git\"")
            .body(axum::body::Body::empty())
            .unwrap();
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let mut child = tokio::process::Command::new("git")
        .arg("http-backend")
        .env("GIT_PROJECT_ROOT", &root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("PATH_INFO", uri.path())
        .env("QUERY_STRING", uri.query().unwrap_or(""))
        .env("REQUEST_METHOD", method.as_str())
        .env("CONTENT_TYPE", header("content-type"))
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
        .env("GIT_PROTOCOL", header("git-protocol"))
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&body).await.unwrap();
    }
    let output = child.wait_with_output().await.unwrap();
    let out = output.stdout;
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| (p, 4))
        .or_else(|| out.windows(2).position(|w| w == b"\n\n").map(|p| (p, 2)))
        .unwrap();
    let head = String::from_utf8_lossy(&out[..split.0]).into_owned();
    let mut response = axum::response::Response::builder().status(200);
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if name.eq_ignore_ascii_case("status") {
            let code: u16 = value.trim()[..3].parse().unwrap();
            response = response.status(code);
        } else {
            response = response.header(name.trim(), value.trim());
        }
    }
    response
        .body(axum::body::Body::from(out[split.0 + split.1..].to_vec()))
        .unwrap()
}

impl GitServer {
    /// Serves `app.git`: a Rust service with a workflow, on `main` and tag `v1`.
    async fn start() -> GitServer {
        let root = std::env::temp_dir().join(format!("generation-git-{}", adapters::new_id()));
        let work = root.join("work");
        std::fs::create_dir_all(work.join("src")).unwrap();
        std::fs::create_dir_all(work.join(".github/workflows")).unwrap();
        std::fs::write(
            work.join("Cargo.toml"),
            "[package]\nname = \"shop\"\nversion = \"0.1.0\"\n",
        )
        .unwrap();
        std::fs::write(work.join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(
            work.join(".github/workflows/ci.yml"),
            "on: push\njobs:\n  test:\n    steps:\n      - run: cargo test --locked\n",
        )
        .unwrap();
        run_git(&work, &["init", "-q"]);
        run_git(&work, &["add", "."]);
        run_git(&work, &["commit", "-qm", "first"]);
        run_git(&work, &["tag", "v1"]);
        run_git(&root, &["clone", "-q", "--bare", "work", "app.git"]);
        let app = axum::Router::new()
            .fallback(backend)
            .with_state(root.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        GitServer {
            base: format!("http://{address}"),
            _root: tempdir::Dir(root),
        }
    }
}

fn from_url(url: &str, reference: Option<&str>) -> Value {
    json!({"url": url, "ref": reference, "provider": "openai", "model": "model-a"})
}

/// From a Git URL: the repository's survey, then a pipeline; the model was shown
/// the build file and the workflow. A ref that is not there, a private repository,
/// nothing listening, a repository over the size bound: clear errors. Without
/// AI_ALLOW_PRIVATE_URLS a loopback URL is refused before anything is charged.
async fn a_git_url_is_surveyed_within_bounds(app: &TestApp) {
    let fakes = Fakes::start().await;
    let git = GitServer::start().await;
    let server = fakes.server(app, &[]).await;
    let (acme, alice) = pro_org(&server, "alice", "acme").await;
    let path = "/api/pipelines/generate/from-url/stream";
    let url = format!("{}/app.git", git.base);
    for reference in [None, Some("main"), Some("v1")] {
        fakes
            .openai
            .script(vec![Reply::Answer(pipeline("private").to_string())]);
        let (status, mut stream) =
            open(&server, path, &alice, &acme, from_url(&url, reference)).await;
        assert_eq!(status, StatusCode::OK);
        let (events, _) = read_events(&mut stream, Duration::from_secs(20)).await;
        assert_eq!(names(&events)[..2], ["started", "repository"], "{events:?}");
        assert_eq!(
            events[1].1,
            json!({"files": 3, "truncated": false, "languages": [{"name": "Rust", "files": 1}],
                   "buildFiles": ["Cargo.toml"], "ciFiles": [".github/workflows/ci.yml"]})
        );
        assert_eq!(names(&events).last(), Some(&"result"), "{events:?}");
        let said = fakes.openai.said(0);
        assert!(said.contains("name = \"shop\""), "{said}");
        assert!(said.contains("cargo test --locked"), "{said}");
    }
    let used = ai_used(&server, &alice, &acme).await;
    for (body, words) in [
        (from_url(&url, Some("nope")), "`nope`"),
        (
            from_url(&format!("{}/private/app.git", git.base), None),
            "private",
        ),
        (
            from_url(&format!("{}/absent.git", git.base), None),
            "no Git repository",
        ),
        (
            from_url(
                // The discard port: nothing listens there (a port picked as free could be
                // taken by another test's server before the fetch).
                "http://127.0.0.1:9/app.git",
                None,
            ),
            "cannot be fetched",
        ),
    ] {
        let (status, mut stream) = open(&server, path, &alice, &acme, body.clone()).await;
        assert_eq!(status, StatusCode::OK);
        let (events, _) = read_events(&mut stream, Duration::from_secs(20)).await;
        let (last, error) = events.last().unwrap();
        assert_eq!(last, "error", "{body}: {events:?}");
        assert_eq!(
            code_of(error),
            ErrorCode::RepositoryUnavailable,
            "{body}: {error}"
        );
        assert!(
            error["message"].as_str().unwrap().contains(words),
            "{body}: {error}"
        );
    }
    assert_eq!(
        ai_used(&server, &alice, &acme).await,
        used + 4,
        "charged when started"
    );
    let small = fakes.server(app, &[("AI_GIT_MAX_BYTES", "200")]).await;
    let (_, mut stream) = open(&small, path, &alice, &acme, from_url(&url, None)).await;
    let (events, _) = read_events(&mut stream, Duration::from_secs(20)).await;
    assert_eq!(
        code_of(&events.last().unwrap().1),
        ErrorCode::RepositoryTooLarge,
        "{events:?}"
    );
    small.stop().await;

    // The address rule, as for webhooks.
    let vars: Vec<(String, String)> = fakes
        .variables(&[])
        .into_iter()
        .filter(|(k, _)| k != "AI_ALLOW_PRIVATE_URLS")
        .collect();
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let strict = app.beside(&refs).await;
    let before = ai_used(&strict, &alice, &acme).await;
    for (bad, words) in [
        (url.clone(), "not globally routable"),
        (
            "http://10.0.0.8/app.git".to_owned(),
            "not globally routable",
        ),
        ("file:///etc/passwd".to_owned(), "http or https"),
        (
            format!(
                "http://user:pw@{}/app.git",
                git.base.trim_start_matches("http://")
            ),
            "credentials",
        ),
    ] {
        let Answer(status, body) = strict
            .by(&alice)
            .org(&acme)
            .post(path)
            .json(from_url(&bad, None))
            .await;
        assert_eq!(
            code(status, &body),
            ErrorCode::ValidationError,
            "{bad}: {body}"
        );
        assert_eq!(body["details"]["field"], "url");
        assert!(
            body["message"].as_str().unwrap().contains(words),
            "{bad}: {body}"
        );
    }
    for reference in ["--upload-pack=touch /tmp/x", "a..b"] {
        let Answer(status, body) = strict
            .by(&alice)
            .org(&acme)
            .post(path)
            .json(from_url(&url, Some(reference)))
            .await;
        assert_eq!(
            code(status, &body),
            ErrorCode::ValidationError,
            "{reference}: {body}"
        );
        assert_eq!(body["details"]["field"], "ref");
    }
    assert_eq!(
        ai_used(&strict, &alice, &acme).await,
        before,
        "nothing charged"
    );
    strict.stop().await;
    server.stop().await;
}

/// 24 generations of one organization asked at once through two replicas, with
/// AI_GENERATIONS_PER_ORG 3: exactly three run, the others are refused (429) and not
/// charged.
async fn concurrent_generations_on_two_replicas_take_exactly_the_places(app: &TestApp) {
    let fakes = Fakes::start().await;
    let first = fakes.server(app, &[("AI_GENERATIONS_PER_ORG", "3")]).await;
    let second = fakes.server(app, &[("AI_GENERATIONS_PER_ORG", "3")]).await;
    let (acme, alice) = pro_org(&first, "alice", "acme").await;
    fakes
        .openai
        .script((0..24).map(|_| Reply::Hang("{".to_owned())).collect());
    let path = "/api/pipelines/generate/stream";
    let opened = futures_util::future::join_all((0..24).map(|i| {
        let server = if i % 2 == 0 { &first } else { &second };
        open(server, path, &alice, &acme, ask("openai", "shop"))
    }))
    .await;
    let running = opened
        .iter()
        .filter(|(status, _)| *status == StatusCode::OK)
        .count();
    let refused = opened
        .iter()
        .filter(|(status, _)| *status == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!((running, refused), (3, 21));
    assert_eq!(
        ai_used(&first, &alice, &acme).await,
        3,
        "only the three were charged"
    );
    drop(opened);
    first.stop().await;
    second.stop().await;
}

/// An account root's own AI settings: its allow-list, its own provider (the key
/// sealed, never answered back), its monthly token cap spent by what each provider
/// reports; refusals change nothing; audited without the key.
async fn an_organizations_own_settings_choose_its_provider_and_cap_its_tokens(app: &TestApp) {
    use base64::Engine as _;
    let fakes = Fakes::start().await;
    let own = Fake::start(Wire::OpenAi).await;
    let sealing = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    let server = fakes
        .server(app, &[("SECRETS_ENCRYPTION_KEY", sealing.as_str())])
        .await;
    let (system, root) = server.system().await;
    let (acme, alice) = pro_org(&server, "alice", "acme").await;
    let admin_path = format!("/api/admin/organizations/{acme}/ai");
    let settings: AiSettings = server
        .by(&alice)
        .get(format!("/api/organization/{acme}/ai"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!((settings.providers, settings.version), (None, 0));
    let secret = "sk-own-secret-0123456789-wxyz";
    let good = json!({
        "providers": {"openai": ["gpt-own"], "anthropic": ["model-a"]},
        "ownProvider": {"provider": "openai", "baseUrl": own.base, "apiKey": secret},
        "monthlyTokenCap": 120
    });
    // Refusals change nothing.
    let Answer(status, body) = server.by(&alice).put(&admin_path).json(good.clone()).await;
    assert_eq!(code(status, &body), ErrorCode::Forbidden);
    let mut cases = Vec::new();
    let mut bad = good.clone();
    bad["providers"]["gemini"] = json!(["x"]);
    cases.push((bad, "providers"));
    let mut bad = good.clone();
    bad["providers"]["anthropic"] = json!(["not-offered"]);
    cases.push((bad, "providers"));
    let mut bad = good.clone();
    bad["providers"] = json!({"anthropic": ["model-a"]});
    cases.push((bad, "providers"));
    let mut bad = good.clone();
    bad["ownProvider"]["baseUrl"] = json!("file:///etc/passwd");
    cases.push((bad, "ownProvider.baseUrl"));
    let mut bad = good.clone();
    bad["ownProvider"]["apiKey"] = Value::Null;
    cases.push((bad, "ownProvider.apiKey"));
    let mut bad = good.clone();
    bad["monthlyTokenCap"] = json!(0);
    cases.push((bad, "monthlyTokenCap"));
    for (body, field) in cases {
        let Answer(status, answer) = server.by(&root).put(&admin_path).json(body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["details"]["field"], field, "{answer}");
    }
    assert!(server
        .audited("admin.org.ai-config.update")
        .await
        .is_empty());

    // Put: the key is sealed and only its end is shown.
    let answer = server
        .by(&root)
        .put(&admin_path)
        .json(good.clone())
        .await
        .expect(StatusCode::OK);
    let settings: AiSettings = answer.data();
    assert_eq!(hint(&settings), Some("wxyz"));
    assert_eq!(settings.version, 1);
    assert!(!answer.body().to_string().contains(secret));
    let stored = super::signin::text(
        &server,
        &format!("SELECT own_api_key FROM org_ai_settings WHERE org_id = '{acme}'"),
    )
    .await
    .unwrap();
    assert!(
        stored.starts_with("enc:v2:") && !stored.contains(secret),
        "{stored}"
    );
    let Answer(_, body) = server
        .by(&alice)
        .get(format!("/api/organization/{acme}/ai"))
        .await;
    assert!(!body.to_string().contains(secret));

    // The own provider answers for `openai`, with the organization's key.
    let valid = pipeline("private").to_string();
    own.script(vec![Reply::Answer(valid.clone())]);
    fakes.openai.script(vec![]);
    let generate = |provider: &'static str, model: &'static str| {
        let alice = alice.clone();
        let acme = acme.clone();
        let server = &server;
        async move {
            server
                .by(&alice)
                .org(&acme)
                .post("/api/pipelines/generate")
                .json(json!({"prompt": "a Rust shop", "provider": provider, "model": model}))
                .await
        }
    };
    let Answer(status, body) = generate("openai", "gpt-own").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(own.requests().len(), 1);
    assert_eq!(
        own.requests()[0].0["authorization"],
        format!("Bearer {secret}").as_str()
    );
    assert_eq!(own.requests()[0].1["stream_options"]["include_usage"], true);
    assert!(fakes.openai.requests().is_empty());
    // Outside the allow-list: refused before any provider is called.
    let Answer(status, body) = generate("ollama", "model-a").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["details"]["field"], "provider");
    let Answer(status, body) = generate("anthropic", "model-b").await;
    assert_eq!(body["details"]["field"], "model", "{status} {body}");
    // A platform provider within the list.
    fakes.anthropic.script(vec![Reply::Answer(valid.clone())]);
    let Answer(status, body) = generate("anthropic", "model-a").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let settings: AiSettings = server.by(&root).get(&admin_path).await.data();
    assert_eq!(settings.tokens_this_month, 100, "{settings:?}");
    // The cap: 100 of 120 spent, one more runs, then 429.
    own.script(vec![Reply::Answer(valid.clone())]);
    let Answer(status, body) = generate("openai", "gpt-own").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let Answer(status, body) = generate("openai", "gpt-own").await;
    assert_eq!(code(status, &body), ErrorCode::QuotaExceeded, "{body}");
    assert_eq!(body["details"]["dimension"], "aiTokens");
    assert_eq!(body["details"]["used"], 150);

    // A stale version is 409; without a new key the stored one stays.
    let mut again = good.clone();
    again["version"] = json!(0);
    server
        .by(&root)
        .put(&admin_path)
        .json(again.clone())
        .await
        .refused(ErrorCode::Conflict);
    again["version"] = json!(1);
    again["ownProvider"]["apiKey"] = Value::Null;
    again["monthlyTokenCap"] = Value::Null;
    let settings: AiSettings = server
        .by(&root)
        .put(&admin_path)
        .json(again)
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(hint(&settings), Some("wxyz"));
    // Audited where acme sees it, naming the fields, never the key.
    let events: Vec<_> = server
        .audited("admin.org.ai-config.update")
        .await
        .into_iter()
        .filter(|e| e.chain_key == acme)
        .collect();
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].details["changed"], json!(["monthlyTokenCap"]));
    assert!(events[0].details["changed"]
        .as_array()
        .unwrap()
        .contains(&json!("ownProvider.apiKey")));
    for event in server.audited("admin.org.ai-config.update").await {
        assert!(!event.details.to_string().contains(secret));
    }
    assert_eq!(
        server
            .audited("admin.org.ai-config.update")
            .await
            .iter()
            .filter(|e| e.chain_key == system)
            .count(),
        2
    );
    // A team's settings are its root's.
    let team = server
        .by(&alice)
        .post("/api/organization")
        .json(json!({"name": "platform", "parentOrgId": acme}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    server
        .by(&root)
        .get(format!("/api/admin/organizations/{team}/ai"))
        .await
        .refused(ErrorCode::Conflict);
    server.stop().await;
}

on_both_backends!(
    an_organizations_own_settings_choose_its_provider_and_cap_its_tokens,
    concurrent_generations_on_two_replicas_take_exactly_the_places,
    each_format_retries_broken_json_and_answers_a_creatable_body,
    invalid_then_non_compliant_then_compliant,
    always_non_compliant_fails_after_two_retries_charged_once,
    plugins_are_checked_like_uploads_and_deploy,
    streams_carry_text_attempts_and_end_in_result_or_error,
    a_client_that_leaves_cancels_the_provider_call,
    a_provider_flooding_one_line_is_cut_off_as_it_is_read,
    an_organization_runs_a_bounded_number_of_generations_at_once,
    gates_checks_and_quota_come_before_the_provider,
    providers_are_listed_and_keys_never_shown,
    a_git_url_is_surveyed_within_bounds,
);

/// The binary as operators run it: `compliance generate` streams a generation to the
/// terminal (the model's text on standard error, the body on standard output), a
/// refusal exits 1 with its code; the provider's key is in no line the server logs,
/// at debug level, even when the provider echoes it.
#[tokio::test]
async fn the_command_line_streams_a_generation_and_the_key_stays_out_of_the_log() {
    let fake = Fake::start(Wire::OpenAi).await;
    let dir = std::env::temp_dir().join(format!("generation-cli-{}", adapters::new_id()));
    std::fs::create_dir_all(&dir).unwrap();
    let database = format!("sqlite://{}", dir.join("server.db").display());
    let log = dir.join("server.log");
    let port = crash::free_port();
    let mut vars = fake.variables();
    vars.push((
        "BOOTSTRAP_SUPERADMIN_EMAILS".to_owned(),
        ROOT_EMAIL.to_owned(),
    ));
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let server = crash::start_logged(&database, port, &refs, &log);
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    crash::wait_healthy(&http, &base).await;
    let root = TokenKeys::hs256(SECRET)
        .sign(&Claims::user(
            "root",
            Some(ROOT_EMAIL),
            Utc::now(),
            Duration::from_secs(3600),
        ))
        .unwrap();
    crash::create_org(&http, &base, &root, "system").await;
    let alice = crash::user_token("alice");
    let acme = crash::create_org(&http, &base, &alice, "acme").await;
    let tiered = http
        .put(format!("{base}/api/quotas/{acme}"))
        .bearer_auth(&root)
        .json(&json!({"tier": "pro"}))
        .send()
        .await
        .unwrap();
    assert_eq!(tiered.status(), 200, "{}", tiered.text().await.unwrap());

    let generate = |prompt: &'static str| {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_compliance"))
            .args([
                "generate",
                "pipeline",
                "--prompt",
                prompt,
                "--provider",
                "openai",
            ])
            .args([
                "--model",
                "model-a",
                "--organization",
                &acme,
                "--url",
                &base,
            ])
            .env("PLATFORM_TOKEN", &alice)
            .output()
    };
    let valid = pipeline("private").to_string();
    fake.script(vec![
        Reply::Answer("{\"project\":".to_owned()),
        Reply::Answer(valid.clone()),
    ]);
    let out = generate("a shop").await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        serde_json::from_str::<Value>(&stdout).unwrap(),
        pipeline("private")
    );
    assert!(
        stderr.contains(&valid),
        "the model's text as it came: {stderr}"
    );
    assert!(stderr.contains("[attempt 1: problems]"), "{stderr}");
    assert!(stderr.contains("[attempt 2: accepted]"), "{stderr}");

    // The provider refuses and echoes the key: exit 1 with the code, key hidden.
    let echo =
        json!({"error": {"message": format!("Incorrect API key provided: {KEY}")}}).to_string();
    fake.script(vec![Reply::Status(401, echo)]);
    let out = generate("again").await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("AI_PROVIDER_ERROR"), "{stderr}");
    assert!(!stderr.contains(KEY), "{stderr}");
    // A refusal before the stream (a provider not configured): exit 1 too.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_compliance"))
        .args([
            "generate",
            "plugin",
            "--prompt",
            "x",
            "--provider",
            "ollama",
            "--model",
            "m",
        ])
        .args(["--organization", &acme, "--url", &base])
        .env("PLATFORM_TOKEN", &alice)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("400 VALIDATION_ERROR"), "{stderr}");
    assert!(stderr.contains("`ollama`"), "{stderr}");

    crash::terminate(&server);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("generate"),
        "the requests were logged: {logged}"
    );
    assert!(!logged.contains(KEY), "the key is in the log");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
