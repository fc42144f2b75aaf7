//! Text a client sends that no store may keep: a NUL character. PostgreSQL refuses it
//! in `text` and `jsonb` (SQLite keeps it), so it is refused at the edge, on both
//! backends alike, before any handler, service or statement sees it.

/// Whether percent-encoded URI text (a path or a query) encodes a NUL (`%00`).
pub fn encodes_nul(uri_text: &str) -> bool {
    uri_text.as_bytes().windows(3).any(|w| w == b"%00")
}

/// Whether a JSON text holds a NUL anywhere in a string or a key. A NUL can only be
/// written as the escape `\u0000` (JSON has no other spelling of it), so the text is searched for one first
/// and parsed only when it may hold one; a text that does not parse is not judged
/// here (the parser that reads it answers).
pub fn json_holds_nul(body: &[u8]) -> bool {
    if body.contains(&0) {
        return true;
    }
    let may_hold = body.windows(6).any(|w| w == b"\\u0000");
    if !may_hold {
        return false;
    }
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(value) => value_holds_nul(&value),
        Err(_) => false,
    }
}

/// Whether a JSON value holds a NUL in a string or a key, at any depth (iterative,
/// so a deep document cannot overflow the stack).
pub fn value_holds_nul(value: &serde_json::Value) -> bool {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            serde_json::Value::String(s) if s.contains('\0') => return true,
            serde_json::Value::Array(items) => stack.extend(items),
            serde_json::Value::Object(map) => {
                for (key, item) in map {
                    if key.contains('\0') {
                        return true;
                    }
                    stack.push(item);
                }
            }
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nul_is_found_wherever_it_is_written() {
        assert!(encodes_nul("/api/plugins/a%00b"));
        assert!(encodes_nul("name=%00"));
        assert!(!encodes_nul("/api/plugins/a%100"));
        assert!(!encodes_nul("/api/plugins/abc"));
        assert!(json_holds_nul(br#"{"a":"x\u0000y"}"#));
        assert!(json_holds_nul(br#"{"a":["ok",{"b":"\u0000"}]}"#));
        assert!(json_holds_nul(br#"{"k\u0000":1}"#));
        assert!(json_holds_nul(b"{\"a\":\"\x00\"}"));
        // An escaped backslash followed by `u0000` is six ordinary characters.
        assert!(!json_holds_nul(br#"{"a":"\\u0000"}"#));
        assert!(!json_holds_nul(br#"{"a":"plain"}"#));
    }
}
