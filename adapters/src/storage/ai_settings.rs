//! An account root's own AI settings and the tokens its generations spent per
//! month. Statements only: the key arrives sealed, the services decide.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::decode::Decoder;
use super::{stamp, taken, Store, StoreError, StoreResult};

/// The settings as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AiSettingsRow {
    /// The account root.
    pub org_id: String,
    /// Provider -> the models it may use (`None`: the platform's).
    pub allowed: Option<BTreeMap<String, Vec<String>>>,
    /// The organization's own provider: (wire name, base URL, sealed key, hint).
    pub own: Option<OwnProviderRow>,
    /// The most tokens a calendar month's generations may spend.
    pub monthly_token_cap: Option<u64>,
    /// Raised by each change.
    pub version: i64,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
    /// Who changed it last.
    pub updated_by: String,
}

/// An organization's own provider, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnProviderRow {
    /// The wire format's name.
    pub provider: String,
    /// Where it answers.
    pub base_url: String,
    /// Its key, sealed (`None`: a provider without keys, such as Ollama).
    pub api_key: Option<String>,
    /// The key's last four characters.
    pub key_hint: Option<String>,
}

fn from_row(row: &sqlx::any::AnyRow) -> StoreResult<AiSettingsRow> {
    let d = Decoder::new(row, "org_ai_settings", &["org_id"]);
    let allowed = d
        .get::<Option<String>>("allowed")?
        .map(|text| {
            serde_json::from_str(&text).map_err(|e| {
                StoreError::Corrupt(format!("org_ai_settings.allowed does not decode: {e}"))
            })
        })
        .transpose()?;
    let own = match d.get::<Option<String>>("own_provider")? {
        None => None,
        Some(provider) => Some(OwnProviderRow {
            provider,
            base_url: d.get("own_base_url")?,
            api_key: d.get("own_api_key")?,
            key_hint: d.get("own_key_hint")?,
        }),
    };
    let cap: Option<i64> = d.get("monthly_token_cap")?;
    Ok(AiSettingsRow {
        org_id: d.get("org_id")?,
        allowed,
        own,
        monthly_token_cap: cap.map(i64::unsigned_abs),
        version: d.get("version")?,
        updated_at: d.stamp("updated_at")?,
        updated_by: d.get("updated_by")?,
    })
}

impl Store {
    /// An account root's AI settings, if it has any.
    pub async fn ai_settings(&self, org_id: &str) -> StoreResult<Option<AiSettingsRow>> {
        let row = sqlx::query(&self.sql("SELECT * FROM org_ai_settings WHERE org_id = $1"))
            .bind(org_id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// The tokens an account root's generations spent in `month` (`YYYY-MM`).
    pub async fn ai_tokens(&self, org_id: &str, month: &str) -> StoreResult<u64> {
        let row = sqlx::query(
            &self.sql("SELECT tokens FROM org_ai_tokens WHERE org_id = $1 AND month = $2"),
        )
        .bind(org_id)
        .bind(month)
        .fetch_optional(self.pool())
        .await?;
        Ok(row
            .map(|r| r.try_get::<i64, _>("tokens"))
            .transpose()?
            .map_or(0, i64::unsigned_abs))
    }

    /// Adds `tokens` to an account root's month, in one statement.
    pub async fn spend_ai_tokens(&self, org_id: &str, month: &str, tokens: u64) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "INSERT INTO org_ai_tokens (org_id, month, tokens) VALUES ($1, $2, $3)
             ON CONFLICT (org_id, month) DO UPDATE SET tokens = org_ai_tokens.tokens + excluded.tokens",
        ))
        .bind(org_id)
        .bind(month)
        .bind(i64::try_from(tokens).unwrap_or(i64::MAX))
        .execute(self.pool())
        .await?;
        Ok(())
    }
}

impl super::Transaction<'_> {
    /// Writes an account root's settings when its version is still `expected`
    /// (`None`: there were none); the new
    /// version is `expected + 1`. A version that moved meanwhile: conflict.
    pub async fn put_ai_settings(
        &mut self,
        row: &AiSettingsRow,
        expected: Option<i64>,
    ) -> StoreResult<()> {
        let allowed = row
            .allowed
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let own = row.own.as_ref();
        let cap = row
            .monthly_token_cap
            .map(|c| i64::try_from(c).unwrap_or(i64::MAX));

        let done = match expected {
            None => {
                sqlx::query(&self.store.sql(
                    "INSERT INTO org_ai_settings (org_id, allowed, own_provider, own_base_url, own_api_key,
                        own_key_hint, monthly_token_cap, version, updated_at, updated_by)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                ))
                .bind(&row.org_id)
                .bind(&allowed)
                .bind(own.map(|o| o.provider.as_str()))
                .bind(own.map(|o| o.base_url.as_str()))
                .bind(own.and_then(|o| o.api_key.as_deref()))
                .bind(own.and_then(|o| o.key_hint.as_deref()))
                .bind(cap)
                .bind(row.version)
                .bind(stamp(row.updated_at))
                .bind(&row.updated_by)
                .execute(&mut *self.tx)
                .await
                .map_err(taken(|| "the settings were written meanwhile: read them again"))?
            }
            Some(version) => {
                sqlx::query(&self.store.sql(
                    "UPDATE org_ai_settings SET allowed = $2, own_provider = $3, own_base_url = $4,
                        own_api_key = $5, own_key_hint = $6, monthly_token_cap = $7, version = $8,
                        updated_at = $9, updated_by = $10
                     WHERE org_id = $1 AND version = $11",
                ))
                .bind(&row.org_id)
                .bind(&allowed)
                .bind(own.map(|o| o.provider.as_str()))
                .bind(own.map(|o| o.base_url.as_str()))
                .bind(own.and_then(|o| o.api_key.as_deref()))
                .bind(own.and_then(|o| o.key_hint.as_deref()))
                .bind(cap)
                .bind(row.version)
                .bind(stamp(row.updated_at))
                .bind(&row.updated_by)
                .bind(version)
                .execute(&mut *self.tx)
                .await?
            }
        };
        if done.rows_affected() == 0 {
            return Err(StoreError::Conflict(
                "the settings were written meanwhile: read them again".to_owned(),
            ));
        }
        Ok(())
    }
}
