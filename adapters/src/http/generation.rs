//! AI generation: `GET /pipelines/providers` and `/plugins/providers`, `POST
//! /pipelines/generate` and `/plugins/generate` (one JSON answer), their `/stream`
//! forms and `POST /pipelines/generate/from-url/stream` (server-sent events).
//!
//! The events of a stream, each's data one JSON object:
//! - `started`: `{provider, model, maxAttempts}`;
//! - `repository` (from a URL): the repository's survey `{files, truncated,
//!   languages: [{name, files}], buildFiles, ciFiles}`;
//! - `text`: `{attempt, text}`, the model's text as it comes;
//! - `attempt`: `{attempt, ok, problems}`, each answer checked;
//! - `result`: what the JSON endpoint answers in `data`;
//! - `error`: the error envelope the JSON endpoint would answer (`code`, `message`,
//!   `details`); the last event. A provider that fails after its 200, or a stream cut
//!   short, ends here, never in a result.
//!
//! Keep-alive comments (`: keep-alive`) while the model is quiet. Refusals before
//! the generation starts (feature, provider, model, prompt, URL, quota) answer as
//! any other request, not as a stream.

use std::convert::Infallible;

use ::generation::{Kind, Problem, MAX_ATTEMPTS};
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use chrono::Utc;
use compliance_core::Violation;
use futures_util::{stream, Stream, StreamExt};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::http::error::ApiError;
use crate::http::extract::Json;
use crate::http::gate::Granted;
use crate::http::response::Answer;
use crate::http::state::AppState;
use crate::services::generation::{self, Ask, Body, Generated, Progress, Source};
use crate::services::pipelines::PipelineInput;
use crate::services::plugins::GeneratedPlugin;

/// A generation from a prompt.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct GenerateBody {
    /// What to generate, in words (at most `AI_PROMPT_MAX_CHARS`, 8000 by default).
    #[schema(min_length = 1)]
    prompt: String,
    /// `openai`, `anthropic` or `ollama`: one of `GET .../providers`.
    #[schema(max_length = 200)]
    provider: String,
    /// One of the provider's models.
    #[schema(max_length = 200)]
    model: String,
}

/// A generation from a Git repository.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct FromUrlBody {
    /// The repository's `http(s)` URL (public; globally routable).
    #[schema(min_length = 1, max_length = 2048)]
    url: String,
    /// `openai`, `anthropic` or `ollama`.
    #[schema(max_length = 200)]
    provider: String,
    /// One of the provider's models.
    #[schema(max_length = 200)]
    model: String,
    /// A branch or tag (else the default branch).
    #[serde(default, rename = "ref")]
    #[schema(max_length = 200)]
    reference: Option<String>,
}

/// A configured provider.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct AiProvider {
    /// `openai`, `anthropic` or `ollama`.
    pub name: String,
    /// The models a request may name.
    pub models: Vec<String>,
}

/// A generated pipeline: a `POST /api/pipelines` body that passed the organization's
/// rules in a dry run.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GeneratedPipelineAnswer {
    /// The body to create.
    pub pipeline: PipelineInput,
    /// The provider.
    pub provider: String,
    /// The model.
    pub model: String,
    /// How many answers it took (1 to 3).
    pub attempts: u32,
    /// Violations of warning severity (they do not block).
    pub warnings: Vec<Violation>,
}

/// A generated plugin: a `POST /api/plugins/deploy-generated` body that passed the
/// organization's rules in a dry run.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GeneratedPluginAnswer {
    /// The body to deploy.
    pub plugin: GeneratedPlugin,
    /// The provider.
    pub provider: String,
    /// The model.
    pub model: String,
    /// How many answers it took (1 to 3).
    pub attempts: u32,
    /// Violations of warning severity (they do not block).
    pub warnings: Vec<Violation>,
}

/// The data of an `attempt` event.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct AttemptEvent {
    pub attempt: u32,
    pub ok: bool,
    pub problems: Vec<Problem>,
}

/// A generation's answer: the pipeline's or the plugin's.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum GeneratedAnswer {
    Pipeline(GeneratedPipelineAnswer),
    Plugin(GeneratedPluginAnswer),
}

impl From<Generated> for GeneratedAnswer {
    fn from(generated: Generated) -> Self {
        let Generated {
            body,
            provider,
            model,
            attempts,
            warnings,
        } = generated;
        match body {
            Body::Pipeline(pipeline) => GeneratedAnswer::Pipeline(GeneratedPipelineAnswer {
                pipeline,
                provider: provider.to_owned(),
                model,
                attempts,
                warnings,
            }),
            Body::Plugin(plugin) => GeneratedAnswer::Plugin(GeneratedPluginAnswer {
                plugin,
                provider: provider.to_owned(),
                model,
                attempts,
                warnings,
            }),
        }
    }
}

/// `GET /pipelines/providers` and `GET /plugins/providers`: the configured
/// providers and their models (never a key).
pub(crate) async fn providers(State(state): State<AppState>) -> Answer<Vec<AiProvider>> {
    Answer::ok(
        generation::providers(&state.config)
            .into_iter()
            .map(|(name, models)| AiProvider {
                name: name.to_owned(),
                models,
            })
            .collect(),
    )
}

async fn generate(
    state: AppState,
    granted: Granted,
    ask: Ask,
) -> Result<Answer<GeneratedAnswer>, ApiError> {
    let started = generation::begin(&state, &granted.org, ask, Utc::now()).await?;
    let generated = generation::run(&state, &granted.org, started, None).await?;
    Ok(Answer::ok(generated.into()))
}

fn prompt_ask(kind: Kind, body: GenerateBody) -> Ask {
    Ask {
        kind,
        provider: body.provider,
        model: body.model,
        source: Source::Prompt(body.prompt),
    }
}

/// `POST /pipelines/generate` (`pipelines:write`, feature `ai_pipeline_generation`).
pub(crate) async fn generate_pipeline(
    State(state): State<AppState>,
    granted: Granted,
    Json(body): Json<GenerateBody>,
) -> Result<Answer<GeneratedAnswer>, ApiError> {
    generate(state, granted, prompt_ask(Kind::Pipeline, body)).await
}

/// `POST /plugins/generate` (`plugins:write`, feature `ai_plugin_generation`).
pub(crate) async fn generate_plugin(
    State(state): State<AppState>,
    granted: Granted,
    Json(body): Json<GenerateBody>,
) -> Result<Answer<GeneratedAnswer>, ApiError> {
    generate(state, granted, prompt_ask(Kind::Plugin, body)).await
}

/// `POST /pipelines/generate/stream`.
pub(crate) async fn stream_pipeline(
    State(state): State<AppState>,
    granted: Granted,
    Json(body): Json<GenerateBody>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    streamed(state, granted, prompt_ask(Kind::Pipeline, body)).await
}

/// `POST /plugins/generate/stream`.
pub(crate) async fn stream_plugin(
    State(state): State<AppState>,
    granted: Granted,
    Json(body): Json<GenerateBody>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    streamed(state, granted, prompt_ask(Kind::Plugin, body)).await
}

/// `POST /pipelines/generate/from-url/stream`.
pub(crate) async fn stream_pipeline_from_url(
    State(state): State<AppState>,
    granted: Granted,
    Json(body): Json<FromUrlBody>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let ask = Ask {
        kind: Kind::Pipeline,
        provider: body.provider,
        model: body.model,
        source: Source::Repository {
            url: body.url,
            reference: body.reference,
        },
    };
    streamed(state, granted, ask).await
}

fn event(name: &'static str, data: &impl Serialize) -> Event {
    let data = serde_json::to_string(data).unwrap_or_else(|_| "{}".to_owned());
    Event::default().event(name).data(data)
}

/// Checks and charges (refusals answer as usual), then runs the generation in a
/// task of its own and streams its progress; the reader's going away drops the
/// stream's receiver, which ends the task and its provider call.
async fn streamed(
    state: AppState,
    granted: Granted,
    ask: Ask,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let provider = ask.provider.clone();
    let model = ask.model.clone();
    let started = generation::begin(&state, &granted.org, ask, Utc::now()).await?;
    let keep_alive = state.config.ai.keep_alive;
    let (progress, received) = mpsc::channel::<Progress>(64);
    let (finish, finished) = oneshot::channel();
    let org = granted.org;
    tokio::spawn(async move {
        let outcome = generation::run(&state, &org, started, Some(progress)).await;
        let _ = finish.send(outcome);
    });
    let first = stream::once(async move {
        Ok(event(
            "started",
            &serde_json::json!({"provider": provider, "model": model, "maxAttempts": MAX_ATTEMPTS}),
        ))
    });
    let progress = stream::unfold(received, |mut received| async move {
        let item = received.recv().await?;
        let sent = match item {
            Progress::Repository(survey) => event("repository", &survey),
            Progress::Text { attempt, text } => event(
                "text",
                &serde_json::json!({"attempt": attempt, "text": text}),
            ),
            Progress::Attempt { attempt, problems } => event(
                "attempt",
                &AttemptEvent {
                    attempt,
                    ok: problems.is_empty(),
                    problems,
                },
            ),
        };
        Some((Ok(sent), received))
    });
    let last = stream::once(async move {
        Ok(match finished.await {
            Ok(Ok(generated)) => event("result", &GeneratedAnswer::from(generated)),
            Ok(Err(error)) => event("error", &ApiError::from(error).body()),
            Err(_) => event(
                "error",
                &ApiError::internal("the generation stopped").body(),
            ),
        })
    });
    Ok(Sse::new(first.chain(progress).chain(last))
        .keep_alive(KeepAlive::new().interval(keep_alive).text("keep-alive")))
}
