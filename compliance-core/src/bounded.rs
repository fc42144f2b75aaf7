//! The bounded form of the values a violation reports.
//!
//! A violation describes what it found with a copy of the failing values, and that
//! copy is bounded by constants, never by the document: a hostile 1 MB string that
//! fails 100 rules yields 100 copies of at most [`MAX_ACTUAL_CHARS`] characters, not
//! 100 MB. What was cut is recorded beside the value (see [`Cut`]), so a reader
//! always knows that it sees a prefix and how large the original was.
//!
//! The bounds, applied while copying (the original is never cloned whole):
//! - a string keeps its first [`MAX_ACTUAL_CHARS`] characters (Unicode scalar values);
//! - an array keeps its first [`MAX_ACTUAL_ITEMS`] elements, an object its first
//!   [`MAX_ACTUAL_ITEMS`] entries in key order; an object key keeps its first
//!   [`MAX_ACTUAL_CHARS`] characters;
//! - one `actual` holds at most [`MAX_ACTUAL_NODES`] values in all (every string,
//!   number, array, object... counts one); a container met once the budget is spent
//!   is cut at that point;
//! - several failing values are reported as an array of them, bounded the same way.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::path::Resolved;
use crate::violation::Actual;

/// The most characters of a string a violation's `actual` keeps.
pub const MAX_ACTUAL_CHARS: usize = 256;
/// The most elements of an array (or entries of an object) a violation's `actual` keeps.
pub const MAX_ACTUAL_ITEMS: usize = 20;
/// The most values, at every level, one violation's `actual` holds.
pub const MAX_ACTUAL_NODES: usize = 64;
/// The longest rendering of a value inside a violation's message, in bytes (cut at a
/// character boundary, then marked with `…`).
pub const MAX_MESSAGE_VALUE_BYTES: usize = 120;

/// One place where a violation's `actual` was cut.
///
/// ```
/// use compliance_core::Cut;
/// let cut: Cut = serde_json::from_str(r#"{"at": "/2", "bytes": 999000}"#).unwrap();
/// assert_eq!(cut.bytes, Some(999000));
/// ```
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cut {
    /// Where, as a JSON pointer (RFC 6901) into `actual`: `""` is `actual` itself.
    pub at: String,
    /// The string there was this many bytes long (UTF-8); `actual` keeps its first
    /// [`MAX_ACTUAL_CHARS`] characters. Bytes, because counting characters would read
    /// the whole of a hostile string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// The array or object there had this many elements or entries; `actual` keeps
    /// the first of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<u64>,
    /// The object key there was this many bytes long; `actual` keeps a prefix of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_bytes: Option<u64>,
}

/// The failing values one predicate found, as borrowed references into the document:
/// the first [`MAX_ACTUAL_ITEMS`] of them and how many there were. Lives on the
/// stack; filling it allocates nothing.
#[derive(Clone, Copy)]
pub(crate) struct Failures<'a> {
    kept: [Resolved<'a>; MAX_ACTUAL_ITEMS],
    len: usize,
    total: usize,
}

impl<'a> Failures<'a> {
    pub fn new() -> Self {
        Failures {
            kept: [Resolved::Count(0); MAX_ACTUAL_ITEMS],
            len: 0,
            total: 0,
        }
    }

    pub fn clear(&mut self) {
        self.len = 0;
        self.total = 0;
    }

    pub fn push(&mut self, value: Resolved<'a>) {
        if let Some(slot) = self.kept.get_mut(self.len) {
            *slot = value;
            self.len += 1;
        }
        self.total += 1;
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    fn kept(&self) -> &[Resolved<'a>] {
        self.kept.get(..self.len).unwrap_or_default()
    }

    /// The failing values when they need no copy: none (the field is missing), or a
    /// single scalar or short string, kept inline.
    pub fn inline(&self) -> Option<Actual> {
        match self.kept() {
            [] => Some(Actual::Missing),
            [one] if self.total == 1 => match *one {
                Resolved::Json(Value::Null) => Some(Actual::Null),
                Resolved::Json(Value::Bool(b)) => Some(Actual::Bool(*b)),
                Resolved::Json(Value::Number(n)) => Some(Actual::Number(n.clone())),
                Resolved::Count(n) => Some(Actual::Number(n.into())),
                Resolved::Json(Value::String(s)) => Actual::string(s),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether `other` holds the very same failing values (the same places of the
    /// same document), so that its bounded copy is this one's too.
    pub fn same_as(&self, other: &Failures<'_>) -> bool {
        self.total == other.total
            && self.len == other.len
            && self
                .kept()
                .iter()
                .zip(other.kept())
                .all(|(a, b)| match (a, b) {
                    (Resolved::Json(a), Resolved::Json(b)) => std::ptr::eq(*a, *b),
                    (Resolved::Keys(a), Resolved::Keys(b)) => std::ptr::eq(*a, *b),
                    (Resolved::Count(a), Resolved::Count(b)) => a == b,
                    _ => false,
                })
    }

    /// The bounded copy of failing values that [`Failures::inline`] does not keep,
    /// written once as its JSON text (one allocation, however many values it holds),
    /// recording every cut in `cuts`.
    pub fn copy(&self, cuts: &mut Vec<Cut>) -> Actual {
        let kept = self.kept();
        let mut bounder = Bounder {
            nodes: MAX_ACTUAL_NODES,
            cuts,
            // Enough for a cut string and its quotes, so that most are written
            // without growing; a larger value grows a few times at most.
            out: String::with_capacity(MAX_ACTUAL_CHARS + 64),
        };
        match kept {
            [one] if self.total == 1 => bounder.resolved(*one, &Trail::Root),
            several => {
                bounder.nodes -= 1;
                bounder.out.push('[');
                let mut written = 0usize;
                for (i, value) in several.iter().enumerate() {
                    if bounder.nodes == 0 {
                        break;
                    }
                    if written > 0 {
                        bounder.out.push(',');
                    }
                    bounder.resolved(*value, &Trail::Index(&Trail::Root, i));
                    written += 1;
                }
                bounder.out.push(']');
                if written < self.total {
                    bounder.cut(&Trail::Root, |c| c.items = Some(self.total as u64));
                }
            }
        }
        Actual::Json(bounder.out)
    }
}

/// The way from `actual` down to a value, kept on the stack while copying; turned
/// into a JSON pointer only when something is cut.
enum Trail<'p> {
    Root,
    Index(&'p Trail<'p>, usize),
    Key(&'p Trail<'p>, &'p str),
}

impl Trail<'_> {
    fn pointer(&self, out: &mut String) {
        match self {
            Trail::Root => {}
            Trail::Index(parent, i) => {
                parent.pointer(out);
                let _ = write!(out, "/{i}");
            }
            Trail::Key(parent, key) => {
                parent.pointer(out);
                out.push('/');
                for c in key.chars() {
                    match c {
                        '~' => out.push_str("~0"),
                        '/' => out.push_str("~1"),
                        c => out.push(c),
                    }
                }
            }
        }
    }
}

/// Writes the bounded JSON text of failing values.
struct Bounder<'c> {
    /// Values that may still be copied.
    nodes: usize,
    cuts: &'c mut Vec<Cut>,
    out: String,
}

impl Bounder<'_> {
    fn cut(&mut self, trail: &Trail<'_>, set: impl FnOnce(&mut Cut)) {
        let mut at = String::new();
        trail.pointer(&mut at);
        let mut cut = Cut {
            at,
            bytes: None,
            items: None,
            key_bytes: None,
        };
        set(&mut cut);
        self.cuts.push(cut);
    }

    fn resolved(&mut self, value: Resolved<'_>, trail: &Trail<'_>) {
        match value {
            Resolved::Json(v) => self.value(v, trail),
            Resolved::Count(n) => {
                self.nodes = self.nodes.saturating_sub(1);
                let _ = write!(self.out, "{n}");
            }
            Resolved::Keys(map) => self.keys(map, trail),
        }
    }

    fn value(&mut self, value: &Value, trail: &Trail<'_>) {
        self.nodes = self.nodes.saturating_sub(1);
        match value {
            Value::String(s) => self.string(s, trail),
            Value::Array(items) => {
                self.out.push('[');
                let mut kept = 0usize;
                for (i, item) in items.iter().enumerate() {
                    if kept == MAX_ACTUAL_ITEMS || self.nodes == 0 {
                        break;
                    }
                    if kept > 0 {
                        self.out.push(',');
                    }
                    self.value(item, &Trail::Index(trail, i));
                    kept += 1;
                }
                self.out.push(']');
                if kept < items.len() {
                    self.cut(trail, |c| c.items = Some(items.len() as u64));
                }
            }
            Value::Object(map) => {
                self.out.push('{');
                let mut kept = 0usize;
                for (key, item) in map {
                    if kept == MAX_ACTUAL_ITEMS || self.nodes == 0 {
                        break;
                    }
                    if kept > 0 {
                        self.out.push(',');
                    }
                    let child = Trail::Key(trail, key);
                    let bounded_key = match prefix(key) {
                        Some(cut) => {
                            self.cut(&child, |c| c.key_bytes = Some(key.len() as u64));
                            cut
                        }
                        None => key.as_str(),
                    };
                    render_str(&mut self.out, bounded_key, &mut unlimited());
                    self.out.push(':');
                    self.value(item, &child);
                    kept += 1;
                }
                self.out.push('}');
                if kept < map.len() {
                    self.cut(trail, |c| c.items = Some(map.len() as u64));
                }
            }
            scalar => {
                render(&mut self.out, scalar, &mut unlimited());
            }
        }
    }

    fn string(&mut self, s: &str, trail: &Trail<'_>) {
        let kept = match prefix(s) {
            None => s,
            Some(kept) => {
                self.cut(trail, |c| c.bytes = Some(s.len() as u64));
                kept
            }
        };
        render_str(&mut self.out, kept, &mut unlimited());
    }

    /// `$keys` of an object: its keys sorted ascending, the first
    /// [`MAX_ACTUAL_ITEMS`] of them, chosen without sorting (or copying) them all.
    fn keys(&mut self, map: &Map<String, Value>, trail: &Trail<'_>) {
        self.nodes = self.nodes.saturating_sub(1);
        let mut smallest: [&str; MAX_ACTUAL_ITEMS] = [""; MAX_ACTUAL_ITEMS];
        let mut len = 0usize;
        for key in map.keys() {
            let key = key.as_str();
            let full = len == MAX_ACTUAL_ITEMS;
            if full && smallest.last().is_some_and(|last| key >= *last) {
                continue;
            }
            // Insertion into the sorted prefix; the largest falls off when full.
            let kept = smallest.get(..len).unwrap_or_default();
            let at = kept.partition_point(|k| *k < key);
            let end = if full { len - 1 } else { len };
            if let Some(window) = smallest.get_mut(at..=end) {
                window.rotate_right(1);
                if let Some(first) = window.first_mut() {
                    *first = key;
                }
            }
            if !full {
                len += 1;
            }
        }
        self.out.push('[');
        let mut written = 0usize;
        for (i, key) in smallest.iter().take(len).enumerate() {
            if self.nodes == 0 {
                break;
            }
            self.nodes -= 1;
            if written > 0 {
                self.out.push(',');
            }
            self.string(key, &Trail::Index(trail, i));
            written += 1;
        }
        self.out.push(']');
        if written < map.len() {
            self.cut(trail, |c| c.items = Some(map.len() as u64));
        }
    }
}

/// The first [`MAX_ACTUAL_CHARS`] characters of `s`, or `None` when it is no longer.
fn prefix(s: &str) -> Option<&str> {
    if s.len() <= MAX_ACTUAL_CHARS {
        return None;
    }
    // ASCII is one byte a character: the usual case needs no counting.
    if let Some(head) = s.get(..MAX_ACTUAL_CHARS) {
        if head.is_ascii() {
            return Some(head);
        }
    }
    let (end, _) = s.char_indices().nth(MAX_ACTUAL_CHARS)?;
    s.get(..end)
}

/// Appends the JSON text of `value` to `out`, at most `max` bytes of it (cut at a
/// character boundary), with `…` when it was longer. Writing stops as soon as the
/// budget is spent: nothing past it is visited.
pub(crate) fn write_short(out: &mut String, value: &Value, max: usize) {
    let mut left = max;
    if !render(out, value, &mut left) {
        out.push('…');
    }
}

/// A budget that never runs out, for text written whole.
fn unlimited() -> usize {
    usize::MAX
}

/// The whole JSON text of `value`, compact, as the bounded copies are written.
pub(crate) fn json_text(value: &Value) -> String {
    let mut out = String::new();
    render(&mut out, value, &mut unlimited());
    out
}

/// Appends the first `max` bytes of the JSON text `text` (cut at a character
/// boundary), with `…` when it was longer: what [`write_short`] writes of its value.
pub(crate) fn write_short_text(out: &mut String, text: &str, max: usize) {
    if text.len() <= max {
        out.push_str(text);
    } else {
        out.push_str(text.get(..floor_boundary(text, max)).unwrap_or_default());
        out.push('…');
    }
}

/// Writes JSON text while `left` bytes remain; false when it had to stop.
fn render(out: &mut String, value: &Value, left: &mut usize) -> bool {
    match value {
        Value::Null => take(out, "null", left),
        Value::Bool(true) => take(out, "true", left),
        Value::Bool(false) => take(out, "false", left),
        Value::Number(n) => {
            // Digits are ASCII: cutting at any byte is a character boundary.
            let before = out.len();
            let _ = write!(out, "{n}");
            let written = out.len() - before;
            if written <= *left {
                *left -= written;
                true
            } else {
                out.truncate(before + *left);
                *left = 0;
                false
            }
        }
        Value::String(s) => render_str(out, s, left),
        Value::Array(items) => {
            if !take(out, "[", left) {
                return false;
            }
            for (i, item) in items.iter().enumerate() {
                if (i > 0 && !take(out, ",", left)) || !render(out, item, left) {
                    return false;
                }
            }
            take(out, "]", left)
        }
        Value::Object(map) => {
            if !take(out, "{", left) {
                return false;
            }
            for (i, (key, item)) in map.iter().enumerate() {
                if (i > 0 && !take(out, ",", left))
                    || !render_str(out, key, left)
                    || !take(out, ":", left)
                    || !render(out, item, left)
                {
                    return false;
                }
            }
            take(out, "}", left)
        }
    }
}

/// Appends `text` whole if it fits in `left`, else as much of it as fits (at a
/// character boundary) and answers false.
fn take(out: &mut String, text: &str, left: &mut usize) -> bool {
    if text.len() <= *left {
        out.push_str(text);
        *left -= text.len();
        true
    } else {
        out.push_str(text.get(..floor_boundary(text, *left)).unwrap_or_default());
        *left = 0;
        false
    }
}

/// A JSON string literal, escaped, within the budget. Runs of characters that need
/// no escape are copied at once.
fn render_str(out: &mut String, s: &str, left: &mut usize) -> bool {
    if !take(out, "\"", left) {
        return false;
    }
    // Most strings need no escape: a scan eight bytes at a time finds out, and the
    // string is copied at once.
    if !any_needs_escape(s.as_bytes()) {
        return take(out, s, left) && take(out, "\"", left);
    }
    let mut start = 0usize;
    for (i, b) in s.bytes().enumerate() {
        if !needs_escape(b) {
            continue;
        }
        if !take(out, s.get(start..i).unwrap_or_default(), left) {
            return false;
        }
        let escaped = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            _ => "\\u00",
        };
        if !take(out, escaped, left) {
            return false;
        }
        if escaped == "\\u00" {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let pair = [
                HEX.get(usize::from(b >> 4)).copied().unwrap_or(b'0'),
                HEX.get(usize::from(b & 0xf)).copied().unwrap_or(b'0'),
            ];
            if !take(out, std::str::from_utf8(&pair).unwrap_or("00"), left) {
                return false;
            }
        }
        start = i + 1;
    }
    take(out, s.get(start..).unwrap_or_default(), left) && take(out, "\"", left)
}

/// Whether any byte needs an escape, eight bytes at a time: a byte below 0x20, a
/// quote or a backslash (the classic "has a byte less than / equal to" word tricks).
fn any_needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    const QUOTE: u64 = u64::from_ne_bytes([b'"'; 8]);
    const BACKSLASH: u64 = u64::from_ne_bytes([b'\\'; 8]);
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH != 0;
    let chunks = bytes.chunks_exact(8);
    let rest = chunks.remainder();
    for chunk in chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_ne_bytes(word);
        // Below 0x20: x - 0x20.. borrows into the high bit of a byte that was below
        // 0x20 (and not already high).
        let control = x.wrapping_sub(ONES * 0x20) & !x & HIGH != 0;
        if control || has_zero(x ^ QUOTE) || has_zero(x ^ BACKSLASH) {
            return true;
        }
    }
    rest.iter().any(|&b| needs_escape(b))
}

fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// The largest character boundary of `s` at or below `at`.
fn floor_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn actual_of(values: &[Resolved<'_>]) -> (Option<Value>, Vec<Cut>) {
        let mut failures = Failures::new();
        for v in values {
            failures.push(*v);
        }
        let mut cuts = Vec::new();
        let actual = failures
            .inline()
            .unwrap_or_else(|| failures.copy(&mut cuts));
        (actual.to_value(), cuts)
    }

    #[test]
    fn short_values_are_copied_whole() {
        let doc = json!({"a": [1, "x", {"b": null}]});
        let (actual, cuts) = actual_of(&[Resolved::Json(&doc)]);
        assert_eq!(actual, Some(doc.clone()));
        assert!(cuts.is_empty());
    }

    #[test]
    fn a_long_string_keeps_its_prefix_and_says_how_long_it_was() {
        let doc = json!("é".repeat(1000));
        let (actual, cuts) = actual_of(&[Resolved::Json(&doc)]);
        assert_eq!(actual, Some(json!("é".repeat(MAX_ACTUAL_CHARS))));
        assert_eq!(
            cuts,
            [Cut {
                at: String::new(),
                bytes: Some(2000),
                items: None,
                key_bytes: None
            }]
        );
    }

    #[test]
    fn keys_are_the_smallest_sorted() {
        let map: Map<String, Value> = (0..50)
            .rev()
            .map(|i| (format!("k{i:02}"), json!(i)))
            .collect();
        let (actual, cuts) = actual_of(&[Resolved::Keys(&map)]);
        let expected: Vec<String> = (0..20).map(|i| format!("k{i:02}")).collect();
        assert_eq!(actual, Some(json!(expected)));
        assert_eq!(cuts.len(), 1);
        assert_eq!(cuts[0].items, Some(50));
    }

    #[test]
    fn nested_cuts_are_pointed_at() {
        let doc = json!({"a/b": ["x".repeat(300)], "list": (0..30).collect::<Vec<_>>()});
        let (_, cuts) = actual_of(&[Resolved::Json(&doc)]);
        let at: Vec<&str> = cuts.iter().map(|c| c.at.as_str()).collect();
        assert_eq!(at, ["/a~1b/0", "/list"]);
    }

    #[test]
    fn the_node_budget_bounds_deep_wide_values() {
        let wide = json!((0..20)
            .map(|_| (0..20)
                .map(|_| (0..20).collect::<Vec<_>>())
                .collect::<Vec<_>>())
            .collect::<Vec<_>>());
        let (actual, _) = actual_of(&[Resolved::Json(&wide)]);
        let text = serde_json::to_string(&actual).unwrap();
        assert!(text.len() < 1000, "{} bytes", text.len());
    }

    #[test]
    fn rendering_within_the_budget_is_serde_json_text() {
        for value in [
            json!(null),
            json!([true, false, -1.5, 18446744073709551615u64]),
            json!({"a\u{1}b": "line\nbreak\t\"quoted\" \\ é \u{7f}", "k": {"n": [1, {}]}}),
        ] {
            let mut out = String::new();
            write_short(&mut out, &value, 10_000);
            assert_eq!(out, serde_json::to_string(&value).unwrap());
        }
    }

    #[test]
    fn short_rendering_stops_at_the_budget() {
        let mut out = String::new();
        write_short(&mut out, &json!("ü".repeat(500)), 10);
        assert_eq!(out, format!("\"{}…", "ü".repeat(4)));
        let mut out = String::new();
        write_short(&mut out, &json!("a\"b".repeat(10)), 10);
        assert_eq!(out, "\"a\\\"ba\\\"ba…");
        let mut out = String::new();
        write_short(&mut out, &json!([1, 2]), 10);
        assert_eq!(out, "[1,2]");
        let mut out = String::new();
        write_short(&mut out, &json!("short"), 10);
        assert_eq!(out, "\"short\"");
    }
}

#[cfg(test)]
mod escape_scan {
    use super::{any_needs_escape, needs_escape};

    #[test]
    fn the_word_scan_agrees_with_the_byte_test() {
        // Every byte value, at every position of a 17-byte string (two words and a
        // rest), among bytes that need no escape, including UTF-8 and 0x7f.
        for b in 0u8..=255 {
            for at in 0..17 {
                let mut bytes = vec![b'a'; 17];
                bytes[at] = b;
                if at > 0 {
                    bytes[at - 1] = 0xC3;
                }
                assert_eq!(
                    any_needs_escape(&bytes),
                    bytes.iter().any(|&x| needs_escape(x)),
                    "byte {b:#x} at {at}"
                );
            }
        }
        assert!(!any_needs_escape(
            "plain ascii, ünïcödé and ~DEL\u{7f}".as_bytes()
        ));
        assert!(any_needs_escape(b"12345678\""));
        assert!(any_needs_escape(b"1234567\\"));
        assert!(any_needs_escape(b"\x1f"));
    }
}
