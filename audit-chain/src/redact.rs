//! Redaction of cloud-account identifiers, run before an event is hashed and stored.
//!
//! Version 1 replaces with `[REDACTED]`:
//! - the value of every key in `details` whose name contains `account` (any case);
//! - the account segment of a cloud resource name,
//!   `arn:<partition>:<service>:<region>:<account>:...`;
//! - every account-shaped token: a run of exactly 12 digits (not part of a longer run
//!   of digits), or 12 digits written `dddd-dddd-dddd`, in strings, in numbers (the
//!   whole number is replaced) and in object keys.
//!
//! `orgId` and `affectedOrgId` are never redacted. Redaction is idempotent. The
//! version is hashed with every event, so that a later change of these rules cannot
//! silently change what old hashes mean.

use std::borrow::Cow;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::{Map, Value};

/// The version of the redaction rules this crate applies.
pub const REDACTION_VERSION: u32 = 1;

/// What a redacted value or segment becomes.
pub const REDACTED: &str = "[REDACTED]";

fn arn_pattern() -> Option<&'static Regex> {
    static ARN: OnceLock<Option<Regex>> = OnceLock::new();
    ARN.get_or_init(|| {
        Regex::new(r"arn:([A-Za-z0-9-]+):([A-Za-z0-9-]*):([A-Za-z0-9-]*):([^:\s/]+):").ok()
    })
    .as_ref()
}

/// Redacts account-shaped tokens and ARN account segments in one string.
///
/// ```
/// use audit_chain::redact_text;
/// assert_eq!(redact_text("arn:aws:iam::123456789012:role/x"), "arn:aws:iam::[REDACTED]:role/x");
/// assert_eq!(redact_text("acct 1234-5678-9012 ok"), "acct [REDACTED] ok");
/// assert_eq!(redact_text("order 1234567890123"), "order 1234567890123");
/// ```
pub fn redact_text(text: &str) -> Cow<'_, str> {
    let without_arn_accounts = match arn_pattern() {
        Some(arn) if text.contains("arn:") => {
            arn.replace_all(text, |caps: &regex::Captures<'_>| {
                let partition = caps.get(1).map_or("", |m| m.as_str());
                let service = caps.get(2).map_or("", |m| m.as_str());
                let region = caps.get(3).map_or("", |m| m.as_str());
                format!("arn:{partition}:{service}:{region}:{REDACTED}:")
            })
        }
        _ => Cow::Borrowed(text),
    };
    match without_arn_accounts {
        Cow::Borrowed(text) => redact_digit_runs(text),
        Cow::Owned(text) => Cow::Owned(redact_digit_runs(&text).into_owned()),
    }
}

/// Replaces maximal runs of exactly 12 digits, and `dddd-dddd-dddd`, with [`REDACTED`].
fn redact_digit_runs(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    if bytes.iter().filter(|b| b.is_ascii_digit()).count() < 12 {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        if !bytes.get(i).is_some_and(u8::is_ascii_digit)
            || (i > 0 && bytes.get(i - 1).is_some_and(u8::is_ascii_digit))
        {
            i += 1;
            continue;
        }
        let run = bytes.get(i..).map_or(0, |rest| {
            rest.iter().take_while(|b| b.is_ascii_digit()).count()
        });
        let end = if run == 12 {
            Some(i + 12)
        } else if run == 4 && is_dashed_account(bytes, i) {
            Some(i + 14)
        } else {
            None
        };
        match end {
            Some(end) => {
                out.push_str(text.get(copied..i).unwrap_or_default());
                out.push_str(REDACTED);
                copied = end;
                i = end;
            }
            None => i += run.max(1),
        }
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(text.get(copied..).unwrap_or_default());
    Cow::Owned(out)
}

/// Whether a key's name contains `account`, in any case.
fn names_an_account(key: &str) -> bool {
    key.as_bytes()
        .windows(7)
        .any(|w| w.eq_ignore_ascii_case(b"account"))
}

fn is_dashed_account(bytes: &[u8], at: usize) -> bool {
    let Some(window) = bytes.get(at..at + 14) else {
        return false;
    };
    let shape_ok = window.iter().enumerate().all(|(k, b)| match k {
        4 | 9 => *b == b'-',
        _ => b.is_ascii_digit(),
    });
    shape_ok && !bytes.get(at + 14).is_some_and(u8::is_ascii_digit)
}

/// Redacts a `details` value in place. Recursion follows the value's depth, which
/// the caller bounds (see [`crate::MAX_DETAILS_DEPTH`]).
pub fn redact_details(value: &mut Value) {
    match value {
        Value::String(s) => {
            if let Cow::Owned(redacted) = redact_text(s) {
                *s = redacted;
            }
        }
        Value::Number(n) => {
            let text = n.to_string();
            if matches!(redact_digit_runs(&text), Cow::Owned(_)) {
                *value = Value::String(REDACTED.to_owned());
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_details),
        Value::Object(map) => {
            let keys_change = map.keys().any(|k| matches!(redact_text(k), Cow::Owned(_)));
            if !keys_change {
                for (key, child) in map.iter_mut() {
                    if names_an_account(key) {
                        *child = Value::String(REDACTED.to_owned());
                    } else {
                        redact_details(child);
                    }
                }
                return;
            }
            let old = std::mem::take(map);
            let mut new = Map::with_capacity(old.len());
            for (key, mut child) in old {
                if names_an_account(&key) {
                    child = Value::String(REDACTED.to_owned());
                } else {
                    redact_details(&mut child);
                }
                let mut key = redact_text(&key).into_owned();
                // Two keys may redact to the same text; keep both values.
                let base = key.clone();
                let mut n = 1;
                while new.contains_key(&key) {
                    key = format!("{base}#{n}");
                    n += 1;
                }
                new.insert(key, child);
            }
            *map = new;
        }
        Value::Null | Value::Bool(_) => {}
    }
}
