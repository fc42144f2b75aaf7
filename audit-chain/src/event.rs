//! The audit event: what an emitter supplies, and the sealed row that is stored.

use chrono::{DateTime, Datelike, SecondsFormat, SubsecRound, Timelike, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Error;

/// The deepest `details` may nest (the top-level object is depth 1).
pub const MAX_DETAILS_DEPTH: usize = 32;

/// Integers beyond ±2^53 lose precision in many JSON readers (and in JCS); in
/// `details` they are stored as strings.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// An event as an emitter describes it, before redaction and sealing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// The row's identifier, chosen by the caller (for example a UUID).
    pub id: String,
    /// `<area>.<entity>.<verb>`.
    pub action: String,
    /// Who acted.
    pub actor_id: String,
    /// Who acted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor_email: Option<String>,
    /// The actor's own organization.
    pub org_id: String,
    /// The organization operated on, when it differs from `orgId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affected_org_id: Option<String>,
    /// The kind of object acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_type: Option<String>,
    /// The object acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_id: Option<String>,
    /// Free-form context; redacted before hashing.
    #[serde(default)]
    pub details: Value,
    /// For example `success`, or `failure` on `authz.denied`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// When the action happened; never used for ordering.
    pub occurred_at: DateTime<Utc>,
    /// The emitting service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// The delivery's idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

impl AuditEvent {
    /// The chain the event belongs to: `affectedOrgId` if non-empty, else `orgId`.
    pub fn chain_key(&self) -> &str {
        match self.affected_org_id.as_deref() {
            Some(affected) if !affected.is_empty() => affected,
            _ => &self.org_id,
        }
    }
}

/// A sealed row: the event after redaction, with its place in the chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SealedEvent {
    /// The row's identifier.
    pub id: String,
    /// Position in the chain: 1, 2, 3, ...
    pub seq: u64,
    /// `affectedOrgId` if non-empty, else `orgId`.
    pub chain_key: String,
    /// The action.
    pub action: String,
    /// Who acted.
    pub actor_id: String,
    /// Who acted.
    pub actor_email: Option<String>,
    /// The actor's own organization; never redacted.
    pub org_id: String,
    /// The organization operated on; never redacted.
    pub affected_org_id: Option<String>,
    /// The kind of object acted on.
    pub target_type: Option<String>,
    /// The object acted on, redacted.
    pub target_id: Option<String>,
    /// Context, redacted.
    pub details: Value,
    /// The outcome.
    pub outcome: Option<String>,
    /// When the action happened (microsecond precision).
    pub occurred_at: DateTime<Utc>,
    /// Ingest time (microsecond precision); never decreases along a chain.
    pub created_at: DateTime<Utc>,
    /// The emitting service.
    pub service: Option<String>,
    /// The delivery's idempotency key.
    pub idempotency_key: Option<String>,
    /// The version of the redaction rules applied.
    pub redaction_version: u32,
    /// The previous row's hash; 64 zeros for the first row of a chain.
    pub prev_hash: String,
    /// Lowercase hex SHA-256 of `prevHash` followed by the canonical JSON.
    pub hash: String,
}

/// A timestamp as it is hashed and stored: RFC 3339, UTC, exactly six fractional digits.
pub fn format_timestamp(at: &DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// Appends `"<RFC 3339 with microseconds>"` (quoted, as a JSON string); the same text
/// as [`format_timestamp`] for years 0 to 9999, without chrono's formatter.
pub(crate) fn write_timestamp(out: &mut String, at: &DateTime<Utc>) {
    let at = at.naive_utc();
    let (year, month, day) = (at.year(), at.month(), at.day());
    if !(0..=9999).contains(&year) {
        out.push('"');
        out.push_str(&format_timestamp(&at.and_utc()));
        out.push('"');
        return;
    }
    let micros = at.nanosecond() % 1_000_000_000 / 1_000;
    // "YYYY-MM-DDTHH:MM:SS.ffffffZ", digits written by hand: this runs twice for
    // every row verified, and the formatting machinery would dominate it.
    let mut text = *b"\"0000-00-00T00:00:00.000000Z\"";
    let fields: [(usize, usize, u32); 7] = [
        (1, 4, year.unsigned_abs()),
        (6, 2, month),
        (9, 2, day),
        (12, 2, at.hour()),
        (15, 2, at.minute()),
        (18, 2, at.second()),
        (21, 6, micros),
    ];
    for (start, width, mut value) in fields {
        for slot in text.iter_mut().skip(start).take(width).rev() {
            *slot = b'0' + (value % 10) as u8;
            value /= 10;
        }
    }
    // Digits and ASCII punctuation only.
    out.push_str(std::str::from_utf8(&text).unwrap_or_default());
}

/// Truncates to the microsecond, the precision PostgreSQL's `timestamptz` keeps.
pub fn to_micros(at: DateTime<Utc>) -> DateTime<Utc> {
    at.trunc_subsecs(6)
}

/// Checks `details` and brings it to its stored form: an object (or null, stored as
/// `{}`), at most [`MAX_DETAILS_DEPTH`] deep, with unsafe integers turned into strings.
pub(crate) fn normalize_details(details: Value) -> Result<Value, Error> {
    let mut details = match details {
        Value::Null => Value::Object(Default::default()),
        Value::Object(map) => Value::Object(map),
        _ => return Err(Error::DetailsNotObject),
    };
    normalize_within(&mut details, 1)?;
    Ok(details)
}

/// Checks the depth of `value` (at `depth`) and turns its unsafe integers into
/// strings. Recursion stops at [`MAX_DETAILS_DEPTH`], however deep the value.
fn normalize_within(value: &mut Value, depth: usize) -> Result<(), Error> {
    match value {
        Value::Object(_) | Value::Array(_) if depth > MAX_DETAILS_DEPTH => {
            Err(Error::DetailsTooDeep {
                max: MAX_DETAILS_DEPTH,
            })
        }
        Value::Object(map) => map
            .values_mut()
            .try_for_each(|v| normalize_within(v, depth + 1)),
        Value::Array(items) => items
            .iter_mut()
            .try_for_each(|v| normalize_within(v, depth + 1)),
        Value::Number(n) => {
            let unsafe_int = n.as_u64().is_some_and(|u| u > MAX_SAFE_INTEGER)
                || n.as_i64()
                    .is_some_and(|i| i.unsigned_abs() > MAX_SAFE_INTEGER);
            if unsafe_int {
                *value = Value::String(n.to_string());
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
