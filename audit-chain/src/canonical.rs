//! Canonical JSON (RFC 8785, JCS): object members sorted by the UTF-16 code units
//! of their names, no insignificant white space, strings escaped as ECMAScript's
//! `JSON.stringify` does, numbers as ECMAScript prints them.

use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

/// The canonical bytes of `value`.
///
/// ```
/// use audit_chain::canonical_json;
/// use serde_json::json;
/// let bytes = canonical_json(&json!({"b": [1.0, 1e21, 0.000001], "a": "é\n"}));
/// assert_eq!(String::from_utf8(bytes).unwrap(), r#"{"a":"é\n","b":[1,1e+21,0.000001]}"#);
/// ```
pub fn canonical_json(value: &Value) -> Vec<u8> {
    let mut out = String::new();
    write_value(&mut out, value);
    out.into_bytes()
}

/// Appends the canonical form of `value` to `out`. Recursion follows the value's
/// depth, which callers bound.
pub(crate) fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(out, map),
    }
}

fn write_object(out: &mut String, map: &Map<String, Value>) {
    out.push('{');
    let mut first = true;
    let mut member = |out: &mut String, key: &str, value: &Value| {
        if !first {
            out.push(',');
        }
        first = false;
        write_string(out, key);
        out.push(':');
        write_value(out, value);
    };
    let sorted = map
        .keys()
        .zip(map.keys().skip(1))
        .all(|(a, b)| key_lt(a, b));
    if sorted {
        for (key, value) in map {
            member(out, key, value);
        }
    } else {
        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
        entries.sort_by(|a, b| utf16_cmp(a.0, b.0));
        for (key, value) in entries {
            member(out, key, value);
        }
    }
    out.push('}');
}

fn key_lt(a: &str, b: &str) -> bool {
    // For ASCII, byte order is UTF-16 order. Compared inline: keys are short, and a
    // call to memcmp per pair costs more than the comparison.
    if a.is_ascii() && b.is_ascii() {
        for (x, y) in a.bytes().zip(b.bytes()) {
            if x != y {
                return x < y;
            }
        }
        a.len() < b.len()
    } else {
        utf16_cmp(a, b).is_lt()
    }
}

fn utf16_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Appends a JSON string literal the way JCS writes it.
pub(crate) fn write_string(out: &mut String, s: &str) {
    out.push('"');
    // No early exit, so that the scan vectorizes: strings here are short.
    let needs_escape = s.bytes().fold(false, |acc, b| {
        acc | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if !needs_escape {
        out.push_str(s);
        out.push('"');
        return;
    }
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let escape = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\u{8}' => "\\b",
            '\u{c}' => "\\f",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            c if (c as u32) < 0x20 => "",
            _ => continue,
        };
        out.push_str(s.get(start..i).unwrap_or_default());
        if escape.is_empty() {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push_str(escape);
        }
        start = i + c.len_utf8();
    }
    out.push_str(s.get(start..).unwrap_or_default());
    out.push('"');
}

fn write_number(out: &mut String, n: &Number) {
    if let Some(i) = n.as_i64() {
        let _ = write!(out, "{i}");
    } else if let Some(u) = n.as_u64() {
        let _ = write!(out, "{u}");
    } else if let Some(f) = n.as_f64() {
        write_f64(out, f);
    } else {
        out.push_str("null");
    }
}

/// ECMAScript's Number::toString for a finite double (RFC 8785 section 3.2.2.3).
fn write_f64(out: &mut String, f: f64) {
    if f == 0.0 {
        out.push('0');
        return;
    }
    if !f.is_finite() {
        out.push_str("null");
        return;
    }
    // Rust's `{:e}` gives the shortest digits that round-trip, like `-1.2345e-7`.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let k = digits.len() as i32;
    let n = exponent + 1;
    if f < 0.0 {
        out.push('-');
    }
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(n as usize);
        out.push_str(int);
        out.push('.');
        out.push_str(frac);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let e = n - 1;
        let _ = write!(out, "e{}{}", if e < 0 { '-' } else { '+' }, e.abs());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(v: Value) -> String {
        String::from_utf8(canonical_json(&v)).unwrap()
    }

    #[test]
    fn numbers_print_as_ecmascript_does() {
        let cases = [
            (json!(0.0), "0"),
            (json!(-0.0), "0"),
            (json!(1.5), "1.5"),
            (json!(-1.5), "-1.5"),
            (json!(100.0), "100"),
            (json!(1e20), "100000000000000000000"),
            (json!(1e21), "1e+21"),
            (json!(1.5e-7), "1.5e-7"),
            (json!(0.000001), "0.000001"),
            (json!(123.456), "123.456"),
            (json!(4.5e300), "4.5e+300"),
            (json!(9007199254740991i64), "9007199254740991"),
            (json!(-42), "-42"),
            (json!(0.1), "0.1"),
        ];
        for (value, expected) in cases {
            assert_eq!(text(value.clone()), expected, "{value}");
        }
    }

    #[test]
    fn strings_escape_only_what_jcs_escapes() {
        assert_eq!(
            text(json!("a\"b\\c\u{1}\u{1f}\t/é€😀")),
            "\"a\\\"b\\\\c\\u0001\\u001f\\t/é€😀\""
        );
    }

    #[test]
    fn members_sort_by_utf16_code_units() {
        // U+E000 sorts after U+1F600 in UTF-8 bytes' order but before it in UTF-16.
        let mut map = Map::new();
        map.insert("😀".into(), json!(1));
        map.insert("\u{e000}".into(), json!(2));
        map.insert("b".into(), json!(3));
        map.insert("B".into(), json!(4));
        assert_eq!(
            text(Value::Object(map)),
            "{\"B\":4,\"b\":3,\"😀\":1,\"\u{e000}\":2}"
        );
    }
}
