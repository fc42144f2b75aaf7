//! AI generation's settings (`AI_*`): the providers, one set of variables each, and
//! the limits of a generation and of a repository's fetch.

use std::time::Duration;

use super::{Reader, Secret};

/// One AI provider: its wire format, where it answers, its key, the models offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSettings {
    /// The wire format (and the provider's name in a request).
    pub wire: generation::Wire,
    /// `AI_<P>_BASE_URL`: OpenAI's default `https://api.openai.com/v1` (the chat call
    /// is `<base>/chat/completions`), Anthropic's `https://api.anthropic.com`
    /// (`<base>/v1/messages`); Ollama's has none (`<base>/api/chat`).
    pub base_url: String,
    /// `AI_<P>_API_KEY` (Ollama: none).
    pub api_key: Option<Secret>,
    /// `AI_<P>_MODELS`: the models a request may name, comma-separated.
    pub models: Vec<String>,
}

/// AI generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AiSettings {
    /// The configured providers: OpenAI-compatible when `AI_OPENAI_API_KEY` is set,
    /// Anthropic when `AI_ANTHROPIC_API_KEY` is, Ollama when `AI_OLLAMA_BASE_URL` is.
    pub providers: Vec<ProviderSettings>,
    /// `AI_ALLOW_PRIVATE_URLS` (false): let a Git URL reach loopback and private
    /// addresses (tests). Provider base URLs are the operator's and are not checked.
    pub allow_private_urls: bool,
    /// `AI_TIMEOUT_SECONDS` (120): the longest one answer of a provider may take.
    pub timeout: Duration,
    /// `AI_PROMPT_MAX_CHARS` (8000): the longest prompt.
    pub prompt_max_chars: usize,
    /// `AI_OUTPUT_MAX_BYTES` (262144): the longest answer read from a provider.
    pub output_max_bytes: usize,
    /// `AI_STREAM_KEEPALIVE_SECONDS` (10): how often a quiet generation stream sends a
    /// keep-alive comment.
    pub keep_alive: Duration,
    /// `AI_GENERATIONS_PER_ORG` (4): the most generations of one organization
    /// running at once, on all replicas together (429 `RATE_LIMITED` past it).
    pub generations_per_org: usize,
    /// `AI_GIT_TIMEOUT_SECONDS` (30): the longest a repository's fetch may take.
    pub git_timeout: Duration,
    /// `AI_GIT_MAX_BYTES` (52428800): the most a fetched repository may hold.
    pub git_max_bytes: u64,
    /// `AI_GIT_MAX_FILES` (10000): the most files of a repository listed.
    pub git_max_files: usize,
}

impl AiSettings {
    /// The configured provider named `name`.
    pub fn provider(&self, name: &str) -> Option<&ProviderSettings> {
        self.providers.iter().find(|p| p.wire.name() == name)
    }
}

/// The AI providers and limits (`AI_*`).
pub(super) fn ai_settings(r: &mut Reader<'_>) -> AiSettings {
    use generation::Wire;
    let mut providers = Vec::new();
    for (wire, prefix, default_base) in [
        (Wire::OpenAi, "AI_OPENAI", Some("https://api.openai.com/v1")),
        (
            Wire::Anthropic,
            "AI_ANTHROPIC",
            Some("https://api.anthropic.com"),
        ),
        (Wire::Ollama, "AI_OLLAMA", None),
    ] {
        let base = r
            .raw(&format!("{prefix}_BASE_URL"))
            .filter(|v| !v.is_empty())
            .map(str::to_owned);
        let api_key = r
            .raw(&format!("{prefix}_API_KEY"))
            .filter(|v| !v.is_empty())
            .map(str::to_owned);
        // Configured by its key; Ollama, which has none, by its URL.
        let configured = match wire {
            Wire::Ollama => base.is_some(),
            _ => api_key.is_some(),
        };
        if !configured {
            continue;
        }
        let Some(base_url) = base.or(default_base.map(str::to_owned)) else {
            continue;
        };
        let parsed = reqwest::Url::parse(&base_url);
        if !parsed
            .as_ref()
            .is_ok_and(|u| ["http", "https"].contains(&u.scheme()) && u.host_str().is_some())
        {
            r.fail(
                &format!("{prefix}_BASE_URL"),
                format!("`{base_url}` is not an http(s) address with a host"),
            );
        }
        let models: Vec<String> = r
            .raw(&format!("{prefix}_MODELS"))
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(str::to_owned)
            .collect();
        if models.is_empty() {
            r.fail(
                &format!("{prefix}_MODELS"),
                "list the models this provider offers, comma-separated".to_owned(),
            );
        }
        providers.push(ProviderSettings {
            wire,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key: api_key.map(Secret::new),
            models,
        });
    }
    AiSettings {
        providers,
        allow_private_urls: r.flag("AI_ALLOW_PRIVATE_URLS"),
        timeout: Duration::from_secs(r.positive("AI_TIMEOUT_SECONDS", 120).min(3_600)),
        prompt_max_chars: usize::try_from(r.positive("AI_PROMPT_MAX_CHARS", 8_000).min(100_000))
            .unwrap_or(8_000),
        output_max_bytes: usize::try_from(
            r.positive("AI_OUTPUT_MAX_BYTES", 262_144)
                .min(4 * 1024 * 1024),
        )
        .unwrap_or(262_144),
        keep_alive: Duration::from_secs(r.positive("AI_STREAM_KEEPALIVE_SECONDS", 10).min(300)),
        generations_per_org: usize::try_from(r.positive("AI_GENERATIONS_PER_ORG", 4).min(1_000))
            .unwrap_or(4),
        git_timeout: Duration::from_secs(r.positive("AI_GIT_TIMEOUT_SECONDS", 30).min(600)),
        git_max_bytes: r.positive("AI_GIT_MAX_BYTES", 52_428_800),
        git_max_files: usize::try_from(r.positive("AI_GIT_MAX_FILES", 10_000).min(1_000_000))
            .unwrap_or(10_000),
    }
}
