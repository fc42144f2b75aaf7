//! The three providers' wire formats: the body of a streamed request made from a
//! [`Conversation`], and what one event of the answer's stream means.
//!
//! - OpenAI-compatible chat completions (`POST {base}/chat/completions`, server-sent
//!   events of `chat.completion.chunk` objects ending with `data: [DONE]`): OpenAI,
//!   vLLM, llama.cpp's server, LiteLLM and other gateways. Structured output through
//!   `response_format` `json_schema`.
//! - Anthropic Messages (`POST {base}/v1/messages`, server-sent events from
//!   `message_start` to `message_stop`; an `error` event may come after a 200).
//!   Structured output through a forced tool: the schema is the `input_schema` of
//!   the one tool offered, `tool_choice` names it, and the tool's input (streamed as
//!   `input_json_delta` pieces) is the answer.
//! - Ollama's native chat (`POST {base}/api/chat`, one JSON object a line, the last
//!   with `done: true`; an `{"error": ...}` line may come after a 200). Structured
//!   output through `format`.
//!
//! A stream that ends before its end marker is cut: the caller treats it as a failure,
//! never as an answer.

use serde_json::{json, Map, Value};

use crate::conversation::Conversation;

/// A provider's wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Wire {
    /// OpenAI-compatible chat completions.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// Ollama's native chat.
    Ollama,
}

/// What one event of a stream means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// More of the answer's text.
    Text(String),
    /// The answer is complete.
    Done,
    /// The provider reports an error within the stream (after its 200).
    Failed(String),
    /// Tokens the provider counted for the call (its `usage`), to be added up: the
    /// monthly token cap of an organization's settings is spent by them.
    Usage(u64),
}

/// The name of the one tool an Anthropic request offers and forces: its input is
/// the answer.
pub const ANSWER_TOOL: &str = "answer";

/// The most an answer may be, in tokens, where the format needs a number
/// (Anthropic's `max_tokens`).
pub const MAX_TOKENS: u32 = 8192;

impl Wire {
    /// Every format, in the order providers are listed.
    pub const ALL: [Wire; 3] = [Wire::OpenAi, Wire::Anthropic, Wire::Ollama];

    /// The provider's name in a request: `openai`, `anthropic` or `ollama`.
    pub fn name(self) -> &'static str {
        match self {
            Wire::OpenAi => "openai",
            Wire::Anthropic => "anthropic",
            Wire::Ollama => "ollama",
        }
    }

    /// The format named `name`.
    pub fn parse(name: &str) -> Option<Wire> {
        Wire::ALL.into_iter().find(|w| w.name() == name)
    }

    /// The path of the chat call under the configured base URL.
    pub fn path(self) -> &'static str {
        match self {
            Wire::OpenAi => "/chat/completions",
            Wire::Anthropic => "/v1/messages",
            Wire::Ollama => "/api/chat",
        }
    }

    /// Whether the answer is a stream of server-sent events (else lines of JSON).
    pub fn is_event_stream(self) -> bool {
        !matches!(self, Wire::Ollama)
    }

    /// The body of a streamed request for `model`, asking for output that follows
    /// `schema` where the format can.
    pub fn body(self, model: &str, conversation: &Conversation, schema: &Value) -> Value {
        let turns = conversation
            .turns
            .iter()
            .map(|t| json!({"role": t.role.name(), "content": t.content}));
        let with_system = || {
            std::iter::once(json!({"role": "system", "content": conversation.system}))
                .chain(turns.clone())
                .collect::<Vec<_>>()
        };
        match self {
            Wire::OpenAi => json!({
                "model": model,
                "stream": true,
                // The last chunk then carries the call's `usage`.
                "stream_options": {"include_usage": true},
                "messages": with_system(),
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": schema, "strict": false},
                },
            }),
            Wire::Anthropic => json!({
                "model": model,
                "stream": true,
                "max_tokens": MAX_TOKENS,
                "system": conversation.system,
                "messages": turns.collect::<Vec<_>>(),
                "tools": [{
                    "name": ANSWER_TOOL,
                    "description": "Give the answer: the body, as the schema describes it.",
                    "input_schema": schema,
                }],
                "tool_choice": {"type": "tool", "name": ANSWER_TOOL},
            }),
            Wire::Ollama => json!({
                "model": model,
                "stream": true,
                "messages": with_system(),
                "format": schema,
            }),
        }
    }

    /// What one piece of a stream means: a server-sent event (`event` name, `data`)
    /// of an OpenAI-compatible or Anthropic stream, or one line of an Ollama stream
    /// (`data`; it has no event names). Nothing for the pieces that carry no text.
    pub fn event(self, event: &str, data: &str) -> Vec<Step> {
        match self {
            Wire::OpenAi => openai(data),
            Wire::Anthropic => anthropic(event, data),
            Wire::Ollama => ollama(data),
        }
    }
}

fn parsed(data: &str) -> Result<Map<String, Value>, Step> {
    match serde_json::from_str::<Value>(data) {
        Ok(Value::Object(object)) => Ok(object),
        _ => Err(Step::Failed(format!(
            "the provider sent an event that is not a JSON object: {}",
            clip(data)
        ))),
    }
}

/// The message of an `error` member (an object with `message`, or a string).
fn error_of(object: &Map<String, Value>) -> Option<String> {
    match object.get("error")? {
        Value::String(message) => Some(message.clone()),
        Value::Object(error) => Some(
            error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the provider reported an error")
                .to_owned(),
        ),
        Value::Null => None,
        other => Some(clip(&other.to_string())),
    }
}

fn openai(data: &str) -> Vec<Step> {
    if data.trim() == "[DONE]" {
        return vec![Step::Done];
    }
    let object = match parsed(data) {
        Ok(object) => object,
        Err(step) => return vec![step],
    };
    if let Some(message) = error_of(&object) {
        return vec![Step::Failed(message)];
    }
    let mut steps: Vec<Step> = object
        .get("choices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|choice| choice.pointer("/delta/content").and_then(Value::as_str))
        .filter(|text| !text.is_empty())
        .map(|text| Step::Text(text.to_owned()))
        .collect();
    if let Some(total) = object
        .get("usage")
        .and_then(|u| u.get("total_tokens"))
        .and_then(Value::as_u64)
    {
        steps.push(Step::Usage(total));
    }
    steps
}

/// The tokens an Anthropic event counts: the input's at `message_start`, the
/// output's at `message_delta`.
fn anthropic_usage(object: &Map<String, Value>) -> u64 {
    let usage = object
        .get("usage")
        .or_else(|| object.get("message").and_then(|m| m.get("usage")));
    ["input_tokens", "output_tokens"]
        .iter()
        .filter_map(|k| usage.and_then(|u| u.get(*k)).and_then(Value::as_u64))
        .sum()
}

fn anthropic(event: &str, data: &str) -> Vec<Step> {
    let object = match parsed(data) {
        Ok(object) => object,
        Err(step) => return vec![step],
    };
    // The data's `type` names the event (some gateways drop the `event:` line).
    let kind = object.get("type").and_then(Value::as_str).unwrap_or(event);
    match kind {
        // The forced tool's input arrives as pieces of JSON text (`input_json_delta`);
        // a provider that answers in text instead (`text_delta`) is read the same way,
        // the answer being the first JSON object of the text.
        "content_block_delta" => object
            .get("delta")
            .and_then(|d| match d.get("type").and_then(Value::as_str) {
                Some("input_json_delta") => d.get("partial_json"),
                Some("text_delta") => d.get("text"),
                _ => None,
            })
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
            .map(|text| vec![Step::Text(text.to_owned())])
            .unwrap_or_default(),
        "message_start" | "message_delta" => match anthropic_usage(&object) {
            0 => Vec::new(),
            tokens => vec![Step::Usage(tokens)],
        },
        "message_stop" => vec![Step::Done],
        "error" => {
            vec![Step::Failed(error_of(&object).unwrap_or_else(|| {
                "the provider reported an error".to_owned()
            }))]
        }
        _ => Vec::new(),
    }
}

fn ollama(line: &str) -> Vec<Step> {
    let object = match parsed(line) {
        Ok(object) => object,
        Err(step) => return vec![step],
    };
    if let Some(message) = error_of(&object) {
        return vec![Step::Failed(message)];
    }
    let mut steps = Vec::new();
    if let Some(text) = object
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
    {
        steps.push(Step::Text(text.to_owned()));
    }
    if object.get("done").and_then(Value::as_bool) == Some(true) {
        let tokens: u64 = ["prompt_eval_count", "eval_count"]
            .iter()
            .filter_map(|k| object.get(*k).and_then(Value::as_u64))
            .sum();
        if tokens > 0 {
            steps.push(Step::Usage(tokens));
        }
        steps.push(Step::Done);
    }
    steps
}

/// At most 200 characters of what a provider sent, for a message.
fn clip(text: &str) -> String {
    text.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Kind;

    fn conversation() -> Conversation {
        let mut c = Conversation::new(Kind::Plugin, "{}", "a linter");
        c.retry("{", &[crate::Problem::json("cut off")]);
        c
    }

    #[test]
    fn bodies_follow_each_format() {
        let schema = json!({"type": "object"});
        let openai = Wire::OpenAi.body("gpt", &conversation(), &schema);
        assert_eq!(openai["messages"][0]["role"], "system");
        assert_eq!(openai["messages"][2]["role"], "assistant");
        assert_eq!(openai["response_format"]["json_schema"]["schema"], schema);
        assert_eq!(openai["stream"], true);
        let anthropic = Wire::Anthropic.body("claude", &conversation(), &schema);
        assert_eq!(
            anthropic["messages"][0]["role"], "user",
            "the system is apart"
        );
        assert_eq!(anthropic["messages"].as_array().map(Vec::len), Some(3));
        assert_eq!(anthropic["max_tokens"], MAX_TOKENS);
        assert!(anthropic["system"].as_str().unwrap().contains("dockerfile"));
        // The schema is enforced through the one tool, which the request forces.
        assert_eq!(anthropic["tools"][0]["name"], ANSWER_TOOL);
        assert_eq!(anthropic["tools"][0]["input_schema"], schema);
        assert_eq!(
            anthropic["tool_choice"],
            json!({"type": "tool", "name": ANSWER_TOOL})
        );
        let ollama = Wire::Ollama.body("llama3", &conversation(), &schema);
        assert_eq!(ollama["format"], schema);
        assert_eq!(Wire::parse("anthropic"), Some(Wire::Anthropic));
        assert_eq!(Wire::parse("gemini"), None);
    }

    #[test]
    fn openai_chunks_done_and_errors() {
        let chunk = r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"{\"a\""},"finish_reason":null}]}"#;
        assert_eq!(
            Wire::OpenAi.event("", chunk),
            [Step::Text("{\"a\"".to_owned())]
        );
        assert_eq!(
            Wire::OpenAi.event("", r#"{"choices":[{"delta":{"role":"assistant"}}]}"#),
            []
        );
        assert_eq!(Wire::OpenAi.event("", "[DONE]"), [Step::Done]);
        assert_eq!(
            Wire::OpenAi.event(
                "",
                r#"{"error":{"message":"overloaded","type":"server_error"}}"#
            ),
            [Step::Failed("overloaded".to_owned())]
        );
        assert!(matches!(
            Wire::OpenAi.event("", "{nope")[..],
            [Step::Failed(_)]
        ));
    }

    #[test]
    fn anthropic_events() {
        let delta =
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#;
        assert_eq!(
            Wire::Anthropic.event("content_block_delta", delta),
            [Step::Text("hi".to_owned())]
        );
        assert_eq!(Wire::Anthropic.event("ping", r#"{"type":"ping"}"#), []);
        // The forced tool's input, in pieces of JSON text: the answer.
        let start = r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"answer","input":{}}}"#;
        assert_eq!(Wire::Anthropic.event("content_block_start", start), []);
        let piece = r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"name\": \"x"}}"#;
        assert_eq!(
            Wire::Anthropic.event("content_block_delta", piece),
            [Step::Text("{\"name\": \"x".to_owned())]
        );
        let empty = r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}"#;
        assert_eq!(Wire::Anthropic.event("content_block_delta", empty), []);
        assert_eq!(
            Wire::Anthropic.event("message_stop", r#"{"type":"message_stop"}"#),
            [Step::Done]
        );
        assert_eq!(
            Wire::Anthropic.event(
                "error",
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            [Step::Failed("Overloaded".to_owned())]
        );
    }

    #[test]
    fn ollama_lines() {
        assert_eq!(
            Wire::Ollama.event(
                "",
                r#"{"model":"m","message":{"role":"assistant","content":"x"},"done":false}"#
            ),
            [Step::Text("x".to_owned())]
        );
        assert_eq!(
            Wire::Ollama.event("", r#"{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}"#),
            [Step::Done]
        );
        assert_eq!(
            Wire::Ollama.event("", r#"{"error":"model 'x' not found"}"#),
            [Step::Failed("model 'x' not found".to_owned())]
        );
    }

    #[test]
    fn each_format_counts_its_tokens() {
        assert_eq!(
            Wire::OpenAi.event("", r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}"#),
            vec![Step::Usage(12)]
        );
        assert_eq!(
            Wire::Anthropic.event("message_start", r#"{"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":1}}}"#),
            vec![Step::Usage(10)]
        );
        assert_eq!(
            Wire::Anthropic.event(
                "message_delta",
                r#"{"type":"message_delta","usage":{"output_tokens":30}}"#
            ),
            vec![Step::Usage(30)]
        );
        assert_eq!(
            Wire::Ollama.event(
                "",
                r#"{"message":{"content":""},"done":true,"prompt_eval_count":4,"eval_count":6}"#
            ),
            vec![Step::Usage(10), Step::Done]
        );
        assert_eq!(
            Wire::OpenAi.body("m", &conversation(), &json!({}))["stream_options"]["include_usage"],
            true
        );
    }
}
