//! Exact integers in `details`: SEMANTICS.md 2 stores an integer beyond ±2^53 as its
//! decimal string, never as a float. A JSON parser without arbitrary precision turns
//! `18446744073709551616` into `1.8446744073709552e19` before any code sees it, so
//! the rule is applied to the JSON text, before parsing.

use std::borrow::Cow;

/// The largest integer every JSON reader keeps exactly (2^53 - 1), as digits.
const MAX_SAFE_DIGITS: &str = "9007199254740991";

/// The JSON text with every integer literal beyond ±(2^53 - 1) turned into a string
/// literal of the same digits; everything else (strings, floats, small integers,
/// whitespace) is left byte for byte. Borrowed when nothing changed.
///
/// ```
/// use audit_chain::quote_unsafe_integers;
/// let text = r#"{"big": 18446744073709551616, "neg": -9223372036854775813, "small": 42, "f": 1.5e300, "s": "123456789012345678901"}"#;
/// let parsed: serde_json::Value = serde_json::from_str(&quote_unsafe_integers(text)).unwrap();
/// assert_eq!(parsed["big"], "18446744073709551616");
/// assert_eq!(parsed["neg"], "-9223372036854775813");
/// assert_eq!(parsed["small"], 42);
/// assert_eq!(parsed["f"], 1.5e300);
/// ```
pub fn quote_unsafe_integers(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let at = |i: usize| bytes.get(i).copied().unwrap_or(0);
    let mut out: Option<String> = None;
    let mut copied = 0usize;
    let mut i = 0usize;
    while i < bytes.len() {
        match at(i) {
            b'"' => {
                i += 1;
                while i < bytes.len() {
                    match at(i) {
                        b'\\' => i += 2,
                        b'"' => {
                            i += 1;
                            break;
                        }
                        _ => i += 1,
                    }
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                i += 1;
                while matches!(at(i), b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                    i += 1;
                }
                let token = text.get(start..i).unwrap_or_default();
                if is_unsafe_integer(token) {
                    let out = out.get_or_insert_with(|| String::with_capacity(text.len() + 16));
                    out.push_str(text.get(copied..start).unwrap_or_default());
                    out.push('"');
                    out.push_str(token);
                    out.push('"');
                    copied = i;
                }
            }
            _ => i += 1,
        }
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut out) => {
            out.push_str(text.get(copied..).unwrap_or_default());
            Cow::Owned(out)
        }
    }
}

/// Whether `token` is an integer literal whose magnitude exceeds 2^53 - 1.
fn is_unsafe_integer(token: &str) -> bool {
    let digits = token.strip_prefix('-').unwrap_or(token);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let digits = digits.trim_start_matches('0');
    digits.len() > MAX_SAFE_DIGITS.len()
        || (digits.len() == MAX_SAFE_DIGITS.len() && digits > MAX_SAFE_DIGITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unsafe_integer_literals_are_quoted() {
        let cases = [
            ("9007199254740991", "9007199254740991"),
            ("9007199254740992", "\"9007199254740992\""),
            ("-9007199254740992", "\"-9007199254740992\""),
            ("10000000000000000000000", "\"10000000000000000000000\""),
            ("1e22", "1e22"),
            ("12345678901234567890.5", "12345678901234567890.5"),
            (r#""99999999999999999999""#, r#""99999999999999999999""#),
            (
                r#"["a\"1", 99999999999999999999]"#,
                r#"["a\"1", "99999999999999999999"]"#,
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(quote_unsafe_integers(input), expected, "{input}");
        }
    }
}
