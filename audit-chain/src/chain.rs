//! Sealing events into a per-tenant SHA-256 hash chain.

use std::borrow::Cow;
use std::cell::RefCell;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::action::validate_action_name;
use crate::canonical::{write_string, write_value};
use crate::error::Error;
use crate::event::{normalize_details, to_micros, write_timestamp, AuditEvent, SealedEvent};
use crate::redact::{redact_details, redact_text, REDACTION_VERSION};

/// The `prevHash` of the first row of every chain: 64 zeros.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The end of a chain: what the next row links to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainHead {
    /// The chain.
    pub chain_key: String,
    /// The last row's `seq`; 0 for an empty chain.
    pub seq: u64,
    /// The last row's hash; [`GENESIS_HASH`] for an empty chain.
    pub hash: String,
    /// The last row's `createdAt`, so that the next one never goes back in time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
}

impl ChainHead {
    /// The head of an empty chain.
    pub fn genesis(chain_key: impl Into<String>) -> Self {
        ChainHead {
            chain_key: chain_key.into(),
            seq: 0,
            hash: GENESIS_HASH.to_owned(),
            created_at: None,
        }
    }

    /// The head after `row`.
    pub fn after(row: &SealedEvent) -> Self {
        ChainHead {
            chain_key: row.chain_key.clone(),
            seq: row.seq,
            hash: row.hash.clone(),
            created_at: Some(row.created_at),
        }
    }
}

/// Redacts `event`, links it after `head` and hashes it. `now` becomes `createdAt`
/// (never earlier than the head's). Returns the row to store and the new head.
///
/// ```
/// use audit_chain::{seal, AuditEvent, ChainHead, ChainVerifier};
/// use chrono::{TimeZone, Utc};
///
/// let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
/// let event = AuditEvent {
///     id: "e1".into(), action: "org.create".into(), actor_id: "u1".into(),
///     actor_email: None, org_id: "acme".into(), affected_org_id: None,
///     target_type: Some("organization".into()), target_id: Some("acme".into()),
///     details: serde_json::json!({"awsAccountId": "123456789012"}), outcome: None,
///     occurred_at: now, service: None, idempotency_key: None,
/// };
/// let (row, head) = seal(&ChainHead::genesis("acme"), event, now).unwrap();
/// assert_eq!(row.seq, 1);
/// assert_eq!(row.details["awsAccountId"], "[REDACTED]");
/// assert_eq!(head.hash, row.hash);
///
/// let mut verifier = ChainVerifier::new();
/// verifier.push(&row);
/// assert!(verifier.finish().ok);
/// ```
pub fn seal(
    head: &ChainHead,
    event: AuditEvent,
    now: DateTime<Utc>,
) -> Result<(SealedEvent, ChainHead), Error> {
    if event.id.is_empty() {
        return Err(Error::MissingId);
    }
    if event.org_id.is_empty() {
        return Err(Error::MissingOrgId);
    }
    validate_action_name(&event.action)?;
    let chain_key = event.chain_key().to_owned();
    if chain_key != head.chain_key {
        return Err(Error::WrongChain {
            event: chain_key,
            head: head.chain_key.clone(),
        });
    }
    let seq = head.seq.checked_add(1).ok_or(Error::SequenceExhausted)?;
    let mut details = normalize_details(event.details)?;
    redact_details(&mut details);
    let now = to_micros(now);
    let created_at = match head.created_at {
        Some(last) if last > now => last,
        _ => now,
    };
    let mut row = SealedEvent {
        id: event.id,
        seq,
        chain_key,
        action: event.action,
        actor_id: event.actor_id,
        actor_email: event.actor_email,
        org_id: event.org_id,
        affected_org_id: event.affected_org_id,
        target_type: event.target_type,
        target_id: event.target_id.map(|t| match redact_text(&t) {
            Cow::Borrowed(_) => t,
            Cow::Owned(redacted) => redacted,
        }),
        details,
        outcome: event.outcome,
        occurred_at: to_micros(event.occurred_at),
        created_at,
        service: event.service,
        idempotency_key: event.idempotency_key,
        redaction_version: REDACTION_VERSION,
        prev_hash: head.hash.clone(),
        hash: String::new(),
    };
    row.hash = row.compute_hash();
    let head = ChainHead::after(&row);
    Ok((row, head))
}

impl SealedEvent {
    /// The canonical JSON (RFC 8785) of the row's immutable fields.
    pub fn canonical_json(&self) -> String {
        let mut out = String::with_capacity(512);
        self.write_canonical(&mut out);
        out
    }

    /// What the row's hash should be, recomputed from its fields.
    pub fn compute_hash(&self) -> String {
        thread_local! {
            // The canonical bytes of the rows sealed on this thread, one after the
            // other: written without allocating once it has grown to a row's size.
            static BUFFER: RefCell<String> = RefCell::new(String::with_capacity(1024));
        }
        BUFFER.with(|buffer| match buffer.try_borrow_mut() {
            Ok(mut buffer) => {
                let hash = self.hash_with(&mut buffer);
                // A row with large details leaves no large buffer behind.
                if buffer.capacity() > 64 * 1024 {
                    buffer.clear();
                    buffer.shrink_to(1024);
                }
                hash
            }
            Err(_) => self.hash_with(&mut String::with_capacity(1024)),
        })
    }

    /// Recomputes the hash reusing `buffer` for the canonical bytes.
    pub(crate) fn hash_with(&self, buffer: &mut String) -> String {
        hex::encode(self.digest(buffer))
    }

    /// Whether the stored hash is what the fields hash to; allocates nothing once
    /// `buffer` has grown to a row's size.
    pub(crate) fn hash_matches(&self, buffer: &mut String) -> bool {
        let mut hex = [0u8; 64];
        self.hex_hash_into(buffer, &mut hex);
        hex.as_slice() == self.hash.as_bytes()
    }

    fn hex_hash_into(&self, buffer: &mut String, hex: &mut [u8; 64]) {
        // 32 bytes always fit 64 hex digits.
        let _ = hex::encode_to_slice(self.digest(buffer), hex);
    }

    /// SHA-256 of `prevHash` and the canonical bytes (written into `buffer`).
    fn digest(&self, buffer: &mut String) -> [u8; 32] {
        buffer.clear();
        self.write_canonical(buffer);
        let mut hasher = Sha256::new();
        hasher.update(self.prev_hash.as_bytes());
        hasher.update(buffer.as_bytes());
        hasher.finalize().into()
    }

    // Members in RFC 8785 order (UTF-16 code units of the names), checked against the
    // generic canonicalizer in the tests.
    fn write_canonical(&self, out: &mut String) {
        fn opt(out: &mut String, value: Option<&String>) {
            match value {
                Some(s) => write_string(out, s),
                None => out.push_str("null"),
            }
        }
        out.push_str("{\"action\":");
        write_string(out, &self.action);
        out.push_str(",\"actorEmail\":");
        opt(out, self.actor_email.as_ref());
        out.push_str(",\"actorId\":");
        write_string(out, &self.actor_id);
        out.push_str(",\"affectedOrgId\":");
        opt(out, self.affected_org_id.as_ref());
        out.push_str(",\"chainKey\":");
        write_string(out, &self.chain_key);
        out.push_str(",\"createdAt\":");
        write_timestamp(out, &self.created_at);
        out.push_str(",\"details\":");
        write_value(out, &self.details);
        out.push_str(",\"id\":");
        write_string(out, &self.id);
        out.push_str(",\"idempotencyKey\":");
        opt(out, self.idempotency_key.as_ref());
        out.push_str(",\"occurredAt\":");
        write_timestamp(out, &self.occurred_at);
        out.push_str(",\"orgId\":");
        write_string(out, &self.org_id);
        out.push_str(",\"outcome\":");
        opt(out, self.outcome.as_ref());
        out.push_str(",\"redactionVersion\":");
        push_integer(out, u64::from(self.redaction_version));
        out.push_str(",\"seq\":");
        push_integer(out, self.seq);
        out.push_str(",\"service\":");
        opt(out, self.service.as_ref());
        out.push_str(",\"targetId\":");
        opt(out, self.target_id.as_ref());
        out.push_str(",\"targetType\":");
        opt(out, self.target_type.as_ref());
        out.push('}');
    }
}

fn push_integer(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        if let Some(slot) = digits.get_mut(start) {
            *slot = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || start == 0 {
            break;
        }
    }
    out.extend(digits.iter().skip(start).map(|&b| char::from(b)));
}

impl SealedEvent {
    /// Whether this stored row records `event`: the check an ingest makes when an
    /// idempotency key it has seen arrives again. True for a redelivery of the same
    /// event (same chain, action, actor, organizations, target, outcome, and details
    /// after the redaction the row went through); false when the key is reused for
    /// another event. `occurredAt` is not compared (a sender that leaves it out gets
    /// the arrival time).
    ///
    /// ```
    /// use audit_chain::{seal, AuditEvent, ChainHead};
    /// use chrono::{TimeZone, Utc};
    /// let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    /// let event = AuditEvent {
    ///     id: "e1".into(), action: "plugin.upload".into(), actor_id: "u".into(),
    ///     actor_email: None, org_id: "org-a".into(), affected_org_id: None,
    ///     target_type: Some("plugin".into()), target_id: Some("p".into()),
    ///     details: serde_json::json!({"awsAccountId": "123456789012"}),
    ///     outcome: None, occurred_at: at, service: Some("plugin".into()),
    ///     idempotency_key: Some("k".into()),
    /// };
    /// let (row, _) = seal(&ChainHead::genesis("org-a"), event.clone(), at).unwrap();
    /// assert!(row.records(&event));
    /// let other = AuditEvent { org_id: "org-b".into(), ..event };
    /// assert!(!row.records(&other));
    /// ```
    pub fn records(&self, event: &AuditEvent) -> bool {
        let same_fields = self.chain_key == event.chain_key()
            && self.action == event.action
            && self.actor_id == event.actor_id
            && self.actor_email == event.actor_email
            && self.org_id == event.org_id
            && self.affected_org_id == event.affected_org_id
            && self.target_type == event.target_type
            && self.outcome == event.outcome
            && self.service == event.service
            && self.idempotency_key == event.idempotency_key
            && self.target_id.as_deref()
                == event
                    .target_id
                    .as_deref()
                    .map(|t| redact_text(t))
                    .as_deref();
        if !same_fields {
            return false;
        }
        match normalize_details(event.details.clone()) {
            Ok(mut details) => {
                redact_details(&mut details);
                details == self.details
            }
            Err(_) => false,
        }
    }
}
