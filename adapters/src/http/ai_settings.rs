//! An account root's own AI settings: `GET|PUT /admin/organizations/{id}/ai`
//! (super-admins) and `GET /organization/{id}/ai` (its admins, `org:settings`).

use std::collections::BTreeMap;

use axum::extract::State;
use chrono::Utc;
use serde::Deserialize;

use crate::http::error::ApiError;
use crate::http::extract::Json;
use crate::http::gate::Granted;
use crate::http::response::Answer;
use crate::http::state::{AppState, Caller};
use crate::services::ai_settings::{self, AiSettings, Put};

/// The settings a super-admin puts: the whole of them (a field left out is
/// cleared; the key alone is kept when left out for the same provider).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PutAiSettings {
    /// Provider (`openai`, `anthropic`, `ollama`) -> the 1 to 20 models the
    /// organization may use; left out or `null`: the platform's providers and models.
    #[schema(example = json!({"openai": ["gpt-4o-mini"]}))]
    providers: Option<BTreeMap<String, Vec<String>>>,
    /// The organization's own provider, used instead of the platform's for its
    /// name (its models listed in `providers`).
    own_provider: Option<OwnProviderBody>,
    /// The most tokens the organization's generations may spend in a calendar month
    /// (UTC); past it, 429 QUOTA_EXCEEDED (`aiTokens`). Left out: no cap.
    #[schema(minimum = 1)]
    monthly_token_cap: Option<u64>,
    /// The version read; another is 409.
    version: Option<i64>,
}

/// An organization's own provider.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct OwnProviderBody {
    #[schema(example = "openai")]
    provider: String,
    /// `http(s)://`, no credentials, resolving to public addresses (as a Git URL of
    /// a generation; `AI_ALLOW_PRIVATE_URLS` for loopback).
    #[schema(max_length = 2048)]
    base_url: String,
    /// Its key: sealed under the organization's data key, never answered back
    /// (only its last four characters). Left out: the stored one of the same
    /// provider stays.
    #[schema(max_length = 4096)]
    api_key: Option<String>,
}

/// `GET /admin/organizations/{id}/ai` and `GET /organization/{id}/ai`.
pub(crate) async fn get(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<AiSettings>, ApiError> {
    Ok(Answer::ok(
        ai_settings::get(&state.infra.store, &granted.org, Utc::now()).await?,
    ))
}

/// `PUT /admin/organizations/{id}/ai`.
pub(crate) async fn put(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<PutAiSettings>,
) -> Result<Answer<AiSettings>, ApiError> {
    let put = Put {
        providers: body.providers,
        own: body
            .own_provider
            .map(|own| (own.provider, own.base_url, own.api_key)),
        monthly_token_cap: body.monthly_token_cap,
        version: body.version,
    };
    Ok(Answer::ok(
        ai_settings::put(
            &state.infra.store,
            &state.config,
            &state.outbound.keyring,
            &caller,
            &granted.org,
            put,
            Utc::now(),
        )
        .await?,
    ))
}
