//! AI providers over their own wire formats ([`generation::Wire`]): a streamed chat
//! call, read event by event, bounded in size. The formats are the pure crate's; this
//! client sends the request with the provider's credentials, decodes the stream
//! (server-sent events, or Ollama's JSON lines) and says when it failed: a refusal
//! before the stream, an error event within it, a stream that ends before its end
//! marker. A provider's message is returned with the key taken out, should a
//! provider echo it.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use generation::{Conversation, EventReader, LineBuffer, Step, Wire};
use serde_json::Value;

use crate::config::{ProviderSettings, Secret};

/// Anthropic's API version header.
const ANTHROPIC_VERSION: &str = "2023-06-01";
/// The most of a refusal's body read for its message.
const REFUSAL_BYTES: usize = 4 * 1024;

/// Why a provider gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AiError {
    /// The provider could not be reached.
    #[error("the {provider} provider cannot be reached: {cause}")]
    Unreachable {
        /// The provider's name.
        provider: &'static str,
        /// Why.
        cause: String,
    },
    /// The provider refused the request (a status other than 2xx).
    #[error("the {provider} provider refused the request ({status}): {message}")]
    Refused {
        /// The provider's name.
        provider: &'static str,
        /// Its status.
        status: u16,
        /// Its message.
        message: String,
    },
    /// The provider answered 200, then reported an error within the stream.
    #[error("the {provider} provider failed during its answer: {message}")]
    Failed {
        /// The provider's name.
        provider: &'static str,
        /// Its message.
        message: String,
    },
    /// The stream ended (or broke off) before its end marker.
    #[error("the {provider} provider's stream ended before the answer was complete")]
    Truncated {
        /// The provider's name.
        provider: &'static str,
    },
    /// The answer grew past the bound.
    #[error("the {provider} provider's answer is longer than {max} bytes")]
    TooLarge {
        /// The provider's name.
        provider: &'static str,
        /// The bound.
        max: usize,
    },
}

type Events = Pin<Box<dyn Stream<Item = Result<(String, String), Unread>> + Send>>;

/// Why the stream could not be read further.
#[derive(Debug)]
enum Unread {
    /// The connection broke.
    Broken,
    /// More was sent than the bound allows.
    TooLarge,
}

/// How many times the answer's bound the whole stream may be, framing included.
const STREAM_FRAMING: usize = 16;

/// The client of every provider (one connection pool).
#[derive(Debug, Clone)]
pub struct AiClient {
    http: reqwest::Client,
}

impl Default for AiClient {
    fn default() -> Self {
        AiClient::new()
    }
}

impl AiClient {
    /// A client that follows no redirect and connects within 10 seconds.
    pub fn new() -> AiClient {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        AiClient { http }
    }

    /// Starts a streamed answer of `model` to `conversation`, asking for output that
    /// follows `schema` where the format can; at most `max_bytes` of text are read.
    pub async fn answer(
        &self,
        provider: &ProviderSettings,
        model: &str,
        conversation: &Conversation,
        schema: &Value,
        max_bytes: usize,
    ) -> Result<Answering, AiError> {
        let wire = provider.wire;
        let name = wire.name();
        let url = format!("{}{}", provider.base_url, wire.path());
        let mut request = self
            .http
            .post(url)
            .json(&wire.body(model, conversation, schema));
        request = match (wire, &provider.api_key) {
            (Wire::OpenAi, Some(key)) => request.bearer_auth(key.expose()),
            (Wire::Anthropic, Some(key)) => request
                .header("x-api-key", key.expose())
                .header("anthropic-version", ANTHROPIC_VERSION),
            _ => request,
        };
        if wire.is_event_stream() {
            request = request.header(reqwest::header::ACCEPT, "text/event-stream");
        }
        let response = request.send().await.map_err(|e| AiError::Unreachable {
            provider: name,
            cause: without_url(&e),
        })?;
        let status = response.status();
        if !status.is_success() {
            let message = redacted(
                refusal_message(response).await,
                provider.api_key.as_ref().map(Secret::expose),
            );
            return Err(AiError::Refused {
                provider: name,
                status: status.as_u16(),
                message,
            });
        }
        // What is read from the provider is bounded as it arrives, before any
        // framing is buffered: one line or event at most twice the answer's bound
        // (its text, JSON-escaped, plus the frame), the whole stream at most
        // `STREAM_FRAMING` times it (a token per event costs a hundred bytes of
        // frame). Past either, the answer is too large.
        let line_max = max_bytes.saturating_mul(2).saturating_add(4096);
        let stream_max = max_bytes.saturating_mul(STREAM_FRAMING);
        let mut read = 0usize;
        let mut sse = EventReader::new(line_max);
        let mut lines = LineBuffer::new(line_max);
        let event_stream = wire.is_event_stream();
        let events: Events = Box::pin(
            response
                .bytes_stream()
                .map(move |chunk| {
                    let bytes = chunk.map_err(|_| Unread::Broken)?;
                    read = read.saturating_add(bytes.len());
                    if read > stream_max {
                        return Err(Unread::TooLarge);
                    }
                    if event_stream {
                        sse.push(&bytes)
                            .map(|events| events.into_iter().map(|e| (e.name, e.data)).collect())
                            .map_err(|_| Unread::TooLarge)
                    } else {
                        lines
                            .push(&bytes)
                            .map(|lines| lines.into_iter().map(|l| (String::new(), l)).collect())
                            .map_err(|_| Unread::TooLarge)
                    }
                })
                .flat_map(|batch: Result<Vec<(String, String)>, Unread>| match batch {
                    Ok(events) => {
                        futures_util::stream::iter(events.into_iter().map(Ok)).left_stream()
                    }
                    Err(error) => futures_util::stream::iter(vec![Err(error)]).right_stream(),
                }),
        );
        Ok(Answering {
            wire,
            events,
            pending: VecDeque::new(),
            read: 0,
            max_bytes,
            key: provider.api_key.as_ref().map(|key| key.expose().to_owned()),
            tokens: 0,
        })
    }
}

/// An answer being streamed.
pub struct Answering {
    wire: Wire,
    events: Events,
    pending: VecDeque<Step>,
    read: usize,
    max_bytes: usize,
    key: Option<String>,
    tokens: u64,
}

impl Answering {
    /// The tokens the provider counted so far (its `usage`).
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// The next piece of the answer's text; `None` once the provider marked its
    /// end. An error event, a stream that ends or breaks off before the end marker,
    /// and text past the bound are errors.
    pub async fn next(&mut self) -> Result<Option<String>, AiError> {
        let provider = self.wire.name();
        loop {
            match self.pending.pop_front() {
                Some(Step::Text(text)) => {
                    self.read = self.read.saturating_add(text.len());
                    if self.read > self.max_bytes {
                        return Err(AiError::TooLarge {
                            provider,
                            max: self.max_bytes,
                        });
                    }
                    return Ok(Some(text));
                }
                Some(Step::Done) => return Ok(None),
                Some(Step::Usage(tokens)) => {
                    self.tokens = self.tokens.saturating_add(tokens);
                    continue;
                }
                Some(Step::Failed(message)) => {
                    let message = redacted(message, self.key.as_deref());
                    return Err(AiError::Failed { provider, message });
                }
                None => {}
            }
            match self.events.next().await {
                Some(Ok((event, data))) => {
                    self.pending.extend(self.wire.event(&event, &data));
                }
                Some(Err(Unread::TooLarge)) => {
                    return Err(AiError::TooLarge {
                        provider,
                        max: self.max_bytes,
                    })
                }
                Some(Err(Unread::Broken)) | None => return Err(AiError::Truncated { provider }),
            }
        }
    }
}

/// `text` with the provider's key taken out, should the provider echo it.
fn redacted(text: String, key: Option<&str>) -> String {
    match key {
        Some(key) if !key.is_empty() => text.replace(key, "***"),
        _ => text,
    }
}

/// A transport error's words without the URL (which holds nothing secret, but is
/// the operator's, not the caller's).
fn without_url(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    kind.to_owned()
}

/// The message of a refusal: its JSON `error.message` (or `error`, or `message`),
/// else the start of its body.
async fn refusal_message(mut response: reqwest::Response) -> String {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() >= REFUSAL_BYTES {
            body.truncate(REFUSAL_BYTES);
            break;
        }
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    let parsed: Option<Value> = serde_json::from_str(&text).ok();
    let from_json = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("error"))
            .or_else(|| v.get("message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    from_json.unwrap_or_else(|| text.chars().take(300).collect())
}
