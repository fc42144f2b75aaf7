//! Where a report's rows are read: the reporting standby while its replay is recent,
//! else the primary, and the instant the data are of.

use super::*;

/// Which database a report's rows come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReadFrom {
    /// The primary: no standby is configured, or it lags by more than
    /// `REPORTING_MAX_LAG_SECONDS`, or it does not answer.
    Primary,
    /// The streaming standby of `REPORTING_DATABASE_URL`.
    Standby,
}

/// Where a report reads, and how fresh that is.
#[derive(Debug, Clone)]
pub struct Reading {
    /// The database read.
    pub source: crate::storage::Store,
    /// The data are those of this instant or later: the standby's last replayed
    /// heartbeat, or now on the primary.
    pub as_of: DateTime<Utc>,
    /// Which database it is.
    pub read_from: ReadFrom,
}

impl std::ops::Deref for Reading {
    type Target = crate::storage::Store;

    fn deref(&self) -> &crate::storage::Store {
        &self.source
    }
}

/// How long the standby may take to say how far behind it is.
pub(super) const STANDBY_ASKED_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Where a report reads now: the standby when one is configured and its last
/// heartbeat is at most `REPORTING_MAX_LAG_SECONDS` old, else the primary.
pub async fn reading(store: &Store, config: &Config, reporting: &Option<Store>) -> Reading {
    let now = Utc::now();
    if let Some(standby) = reporting {
        let max_lag =
            chrono::Duration::from_std(config.reporting.max_lag).unwrap_or(chrono::Duration::MAX);
        match tokio::time::timeout(STANDBY_ASKED_WITHIN, standby.last_beat()).await {
            Ok(Ok(Some(beat))) if now - beat <= max_lag => {
                return Reading {
                    source: standby.clone(),
                    as_of: beat.min(now),
                    read_from: ReadFrom::Standby,
                };
            }
            Ok(Ok(Some(beat))) => {
                tracing::debug!(%beat, "the reporting standby lags: reading the primary")
            }
            Ok(Ok(None)) => {
                tracing::debug!("the reporting standby has no heartbeat yet: reading the primary")
            }
            Ok(Err(error)) => {
                tracing::debug!(%error, "the reporting standby fails: reading the primary")
            }
            Err(_) => tracing::debug!("the reporting standby does not answer: reading the primary"),
        }
    }
    Reading {
        source: store.clone(),
        as_of: now,
        read_from: ReadFrom::Primary,
    }
}
