//! `compliance generate pipeline|plugin`: a generation on the platform at
//! `PLATFORM_URL`, streamed: the model's text goes to standard error as it comes
//! (with each checked attempt and its problems), the result's body to standard output
//! as JSON, so that `> pipeline.json` keeps only the body. A refusal or a failed
//! generation prints its code and message and exits 1.

use std::io::Write;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{json, Value};

use super::platform::Platform;
use super::{bad_input, Failure};

/// What to generate, and from what.
#[derive(Debug, Clone)]
pub struct Request {
    /// `pipeline` or `plugin`.
    pub kind: String,
    /// The prompt.
    pub prompt: Option<String>,
    /// A Git repository's URL (pipelines).
    pub url: Option<String>,
    /// Its branch or tag.
    pub reference: Option<String>,
    /// `openai`, `anthropic` or `ollama`.
    pub provider: String,
    /// The model.
    pub model: String,
    /// The organization (x-org-id).
    pub organization: String,
}

/// `value[key]`, or null.
fn at<'v>(value: &'v Value, key: &str) -> &'v Value {
    value.get(key).unwrap_or(&Value::Null)
}

fn failed(message: String) -> Failure {
    Failure { message, code: 1 }
}

/// Runs the generation; answers the generated body.
pub async fn generate(platform: &Platform, request: &Request) -> Result<Value, Failure> {
    let (path, body) = match (request.kind.as_str(), &request.prompt, &request.url) {
        ("pipeline" | "plugin", Some(prompt), None) => (
            format!("/api/{}s/generate/stream", request.kind),
            json!({"prompt": prompt, "provider": request.provider, "model": request.model}),
        ),
        ("pipeline", None, Some(url)) => (
            "/api/pipelines/generate/from-url/stream".to_owned(),
            json!({"url": url, "ref": request.reference, "provider": request.provider, "model": request.model}),
        ),
        ("plugin", None, Some(_)) => {
            return Err(bad_input("--repository generates pipelines only"));
        }
        ("pipeline" | "plugin", _, _) => {
            return Err(bad_input("give exactly one of --prompt and --repository"));
        }
        (other, _, _) => {
            return Err(bad_input(format!("`{other}` is not pipeline or plugin")));
        }
    };
    let url = format!("{}{path}", platform.url.trim_end_matches('/'));
    let response = reqwest::Client::new()
        .post(&url)
        .bearer_auth(&platform.token)
        .header("x-org-id", &request.organization)
        .json(&body)
        .send()
        .await
        .map_err(|e| failed(format!("{url}: {e}")))?;
    let status = response.status();
    if !status.is_success() {
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        return Err(failed(envelope_line(status.as_u16(), &answer)));
    }
    let mut events = response.bytes_stream().eventsource();
    let mut err = std::io::stderr();
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| failed(format!("the stream broke off: {e}")))?;
        let data: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
        match event.event.as_str() {
            "text" => {
                let _ = write!(err, "{}", at(&data, "text").as_str().unwrap_or_default());
                let _ = err.flush();
            }
            "attempt" => {
                let problems: Vec<String> = at(&data, "problems")
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| {
                        let field = at(p, "field")
                            .as_str()
                            .map(|f| format!("{f}: "))
                            .unwrap_or_default();
                        format!(
                            "  - {field}{}",
                            at(p, "message").as_str().unwrap_or_default()
                        )
                    })
                    .collect();
                if problems.is_empty() {
                    let _ = writeln!(err, "\n[attempt {}: accepted]", at(&data, "attempt"));
                } else {
                    let _ = writeln!(
                        err,
                        "\n[attempt {}: problems]\n{}",
                        at(&data, "attempt"),
                        problems.join("\n")
                    );
                }
            }
            "repository" => {
                let _ = writeln!(
                    err,
                    "[repository: {} files; build files {}; CI {}]",
                    at(&data, "files"),
                    at(&data, "buildFiles"),
                    at(&data, "ciFiles")
                );
            }
            "result" => {
                let body = data
                    .get(request.kind.as_str())
                    .cloned()
                    .unwrap_or(Value::Null);
                return Ok(body);
            }
            "error" => {
                let status = at(&data, "statusCode").as_u64().unwrap_or(0);
                return Err(failed(envelope_line(
                    u16::try_from(status).unwrap_or(0),
                    &data,
                )));
            }
            _ => {}
        }
    }
    Err(failed("the stream ended without a result".to_owned()))
}

/// `STATUS CODE: message`, with the last problems of a failed generation.
fn envelope_line(status: u16, body: &Value) -> String {
    let code = at(body, "code").as_str().unwrap_or("ERROR");
    let message = at(body, "message").as_str().unwrap_or("refused");
    let problems: Vec<&str> = body
        .pointer("/details/problems")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| at(p, "message").as_str())
        .collect();
    if problems.is_empty() {
        format!("{status} {code}: {message}")
    } else {
        format!(
            "{status} {code}: {message}; problems: {}",
            problems.join("; ")
        )
    }
}
