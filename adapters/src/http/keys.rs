//! Customer-managed keys: `GET|PUT|DELETE /admin/organizations/{id}/kms` (super-admin;
//! step-up to change) and `GET /organization/{id}/kms` (the organization's admins:
//! status only). No answer ever holds a credential.

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::http::error::ApiError;
use crate::http::extract::Json;
use crate::http::gate::Granted;
use crate::http::response::Answer;
use crate::http::state::{AppState, Caller};
use crate::services::keys::{self, KeyChoice, KeyConfigRow, ProviderName};

/// A customer key to put an organization's secrets under.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PutKeyConfiguration {
    provider: ProviderName,
    /// `aws-kms`: the key's ARN (`arn:aws:kms:<region>:<account>:key/<id>`);
    /// `vault-transit`: the transit key's name.
    #[schema(min_length = 1, max_length = 2048)]
    key_ref: String,
    /// `vault-transit`: Vault's address (`https://vault.example.com:8200`).
    #[schema(max_length = 2048)]
    address: Option<String>,
    /// `vault-transit`: a token allowed to encrypt and decrypt with the key and read
    /// it; stored sealed, never answered.
    #[schema(max_length = 4096, write_only)]
    token: Option<String>,
}

impl std::fmt::Debug for PutKeyConfiguration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PutKeyConfiguration")
            .field("provider", &self.provider)
            .field("key_ref", &self.key_ref)
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// An organization's keys, as a super-admin sees them.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyConfiguration {
    pub org_id: String,
    /// `aws-kms` or `vault-transit` (a key the customer holds), `local` (the platform
    /// key), or `none` (no platform key is set: secrets are stored as they are).
    pub provider: String,
    /// The ARN or transit key name; `local:<fingerprint>` for the platform key.
    pub key_ref: Option<String>,
    /// Vault's address.
    pub address: Option<String>,
    /// Whether a Vault token is stored (it is never answered).
    pub has_token: bool,
    /// `active`, or `orphaned` (the key failed three checks in a row: operations that
    /// need one of the organization's secrets answer 503 `KMS_UNAVAILABLE`).
    pub state: String,
    /// Failed checks in a row.
    pub failures: u32,
    /// The last failure: its class and what the provider said.
    pub last_error: Option<String>,
    pub checked_at: Option<DateTime<Utc>>,
    pub orphaned_at: Option<DateTime<Utc>>,
    /// How many versions of the organization's data key exist.
    pub data_key_versions: u32,
    pub updated_at: Option<DateTime<Utc>>,
}

/// An organization's keys, as its admins see them.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyStatus {
    pub org_id: String,
    /// `aws-kms`, `vault-transit`, `local` or `none`.
    pub provider: String,
    /// `active` or `orphaned`.
    pub state: String,
    /// The class of the last failure (`disabled`, `pending_deletion`,
    /// `access_denied`, `not_found`, `unreachable`, `refused`).
    pub last_error_class: Option<String>,
    pub checked_at: Option<DateTime<Utc>>,
    pub orphaned_at: Option<DateTime<Utc>>,
}

fn configuration(
    org_id: &str,
    (config, platform, versions): (Option<KeyConfigRow>, Option<String>, u32),
) -> KeyConfiguration {
    match config {
        Some(c) => KeyConfiguration {
            org_id: c.org_id,
            provider: c.provider,
            key_ref: Some(c.key_ref),
            address: c.address,
            has_token: c.token.is_some(),
            state: c.state,
            failures: c.failures,
            last_error: c.last_error,
            checked_at: c.checked_at,
            orphaned_at: c.orphaned_at,
            data_key_versions: versions,
            updated_at: Some(c.updated_at),
        },
        None => KeyConfiguration {
            org_id: org_id.to_owned(),
            provider: if platform.is_some() { "local" } else { "none" }.to_owned(),
            key_ref: platform,
            address: None,
            has_token: false,
            state: "active".to_owned(),
            failures: 0,
            last_error: None,
            checked_at: None,
            orphaned_at: None,
            data_key_versions: versions,
            updated_at: None,
        },
    }
}

/// `GET /admin/organizations/{id}/kms`.
pub(crate) async fn get(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<KeyConfiguration>, ApiError> {
    let status = keys::status(&state.infra.store, &state.config, &granted.org).await?;
    Ok(Answer::ok(configuration(&granted.org.id, status)))
}

/// `PUT /admin/organizations/{id}/kms`.
pub(crate) async fn put(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<PutKeyConfiguration>,
) -> Result<Answer<KeyConfiguration>, ApiError> {
    let choice = KeyChoice {
        provider: body.provider,
        key_ref: body.key_ref,
        address: body.address,
        token: body.token,
    };
    keys::configure(
        &state.infra.store,
        &state.config,
        &state.outbound.keyring,
        &caller,
        &granted.org,
        choice,
        Utc::now(),
    )
    .await?;
    let status = keys::status(&state.infra.store, &state.config, &granted.org).await?;
    Ok(Answer::ok(configuration(&granted.org.id, status)))
}

/// `DELETE /admin/organizations/{id}/kms`.
pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
) -> Result<Answer<KeyConfiguration>, ApiError> {
    keys::remove(
        &state.infra.store,
        &state.config,
        &state.outbound.keyring,
        &caller,
        &granted.org,
        Utc::now(),
    )
    .await?;
    let status = keys::status(&state.infra.store, &state.config, &granted.org).await?;
    Ok(Answer::ok(configuration(&granted.org.id, status)))
}

/// `GET /organization/{id}/kms`.
pub(crate) async fn org_status(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<KeyStatus>, ApiError> {
    let c = configuration(
        &granted.org.id,
        keys::status(&state.infra.store, &state.config, &granted.org).await?,
    );
    Ok(Answer::ok(KeyStatus {
        org_id: c.org_id,
        provider: c.provider,
        state: c.state,
        last_error_class: c
            .last_error
            .and_then(|e| e.split(':').next().map(str::to_owned)),
        checked_at: c.checked_at,
        orphaned_at: c.orphaned_at,
    }))
}
