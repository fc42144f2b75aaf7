//! The 18 operators: what each expects as its `value`, and when it holds for one
//! resolved value (SEMANTICS.md 1.3).

use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};
use serde_json::{Number, Value};

use crate::path::Resolved;

/// Default cap on a regex pattern's length, in characters (`COMPLIANCE_MAX_REGEX_LENGTH`).
pub const DEFAULT_MAX_REGEX_LENGTH: usize = 100;
/// Default bound on a compiled regex's size, in bytes.
pub const DEFAULT_REGEX_SIZE_LIMIT: usize = 256 * 1024;

/// One of the 18 operators of document 1.
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Operator {
    /// Deep JSON equality; numbers compare numerically.
    Eq,
    /// Not `eq`.
    Neq,
    /// Numeric greater than.
    Gt,
    /// Numeric greater than or equal.
    Gte,
    /// Numeric less than.
    Lt,
    /// Numeric less than or equal.
    Lte,
    /// Substring of a string, or element of an array.
    Contains,
    /// Not `contains`.
    NotContains,
    /// Member of the expected set.
    In,
    /// Not a member of the expected set.
    NotIn,
    /// The pattern matches somewhere in the string.
    Regex,
    /// The field is present.
    Exists,
    /// The field is absent.
    NotExists,
    /// Present and not `""`, `0`, `false`, `[]` or `{}`.
    NotEmpty,
    /// More array elements or object keys than the value.
    CountGt,
    /// Fewer array elements or object keys than the value.
    CountLt,
    /// A longer string than the value.
    LengthGt,
    /// A shorter string than the value.
    LengthLt,
}

impl Operator {
    /// All 18 operators.
    pub const ALL: [Operator; 18] = [
        Operator::Eq,
        Operator::Neq,
        Operator::Gt,
        Operator::Gte,
        Operator::Lt,
        Operator::Lte,
        Operator::Contains,
        Operator::NotContains,
        Operator::In,
        Operator::NotIn,
        Operator::Regex,
        Operator::Exists,
        Operator::NotExists,
        Operator::NotEmpty,
        Operator::CountGt,
        Operator::CountLt,
        Operator::LengthGt,
        Operator::LengthLt,
    ];

    /// The wire name, for example `notContains`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::Eq => "eq",
            Operator::Neq => "neq",
            Operator::Gt => "gt",
            Operator::Gte => "gte",
            Operator::Lt => "lt",
            Operator::Lte => "lte",
            Operator::Contains => "contains",
            Operator::NotContains => "notContains",
            Operator::In => "in",
            Operator::NotIn => "notIn",
            Operator::Regex => "regex",
            Operator::Exists => "exists",
            Operator::NotExists => "notExists",
            Operator::NotEmpty => "notEmpty",
            Operator::CountGt => "countGt",
            Operator::CountLt => "countLt",
            Operator::LengthGt => "lengthGt",
            Operator::LengthLt => "lengthLt",
        }
    }

    /// Whether the predicate holds when the field is missing (the last column of
    /// SEMANTICS.md 1.3): only the negative operators do.
    pub fn holds_when_missing(self) -> bool {
        matches!(
            self,
            Operator::Neq | Operator::NotContains | Operator::NotIn | Operator::NotExists
        )
    }

    /// Whether the operator ignores its `value`.
    pub fn ignores_value(self) -> bool {
        matches!(
            self,
            Operator::Exists | Operator::NotExists | Operator::NotEmpty
        )
    }

    /// A short phrase for messages: "must match", "must be one of".
    pub(crate) fn phrase(self) -> &'static str {
        match self {
            Operator::Eq => "must equal",
            Operator::Neq => "must not equal",
            Operator::Gt => "must be greater than",
            Operator::Gte => "must be at least",
            Operator::Lt => "must be less than",
            Operator::Lte => "must be at most",
            Operator::Contains => "must contain",
            Operator::NotContains => "must not contain",
            Operator::In => "must be one of",
            Operator::NotIn => "must not be one of",
            Operator::Regex => "must match",
            Operator::Exists => "must be present",
            Operator::NotExists => "must be absent",
            Operator::NotEmpty => "must not be empty",
            Operator::CountGt => "must have more elements than",
            Operator::CountLt => "must have fewer elements than",
            Operator::LengthGt => "must be longer than",
            Operator::LengthLt => "must be shorter than",
        }
    }
}

impl std::fmt::Display for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Limits applied when a rule's regex is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegexLimits {
    /// The longest pattern accepted, in characters.
    pub max_length: usize,
    /// The largest compiled program accepted, in bytes.
    pub size_limit: usize,
}

impl Default for RegexLimits {
    fn default() -> Self {
        RegexLimits {
            max_length: DEFAULT_MAX_REGEX_LENGTH,
            size_limit: DEFAULT_REGEX_SIZE_LIMIT,
        }
    }
}

/// An operator's `value`, checked and prepared once when the rule set is built.
#[derive(Debug, Clone)]
pub(crate) enum Expected {
    /// eq, neq, contains, notContains: any JSON value.
    Any(Value),
    /// gt, gte, lt, lte: a finite number.
    Number(f64),
    /// in, notIn: the set's elements.
    Set(Vec<Value>),
    /// regex: compiled once.
    Pattern(Regex),
    /// countGt, countLt, lengthGt, lengthLt: a non-negative integer.
    Count(u64),
    /// exists, notExists, notEmpty.
    Ignored,
}

impl Expected {
    /// Checks `value` against what `operator` expects; the error says why, in the
    /// user's words.
    pub(crate) fn compile(
        operator: Operator,
        value: &Value,
        regex: RegexLimits,
    ) -> Result<Self, String> {
        match operator {
            Operator::Eq | Operator::Neq | Operator::Contains | Operator::NotContains => {
                Ok(Expected::Any(value.clone()))
            }
            Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte => value
                .as_f64()
                .filter(|n| n.is_finite())
                .map(Expected::Number)
                .ok_or_else(|| format!("`{operator}` expects a number, got {}", kind(value))),
            Operator::In | Operator::NotIn => match value {
                Value::Array(items) => Ok(Expected::Set(items.clone())),
                other => Err(format!(
                    "`{operator}` expects an array, got {}",
                    kind(other)
                )),
            },
            Operator::Regex => {
                let Value::String(pattern) = value else {
                    return Err(format!("`regex` expects a string, got {}", kind(value)));
                };
                let length = pattern.chars().count();
                if length > regex.max_length {
                    return Err(format!(
                        "the pattern is {length} characters long; at most {} are allowed",
                        regex.max_length
                    ));
                }
                RegexBuilder::new(pattern)
                    .size_limit(regex.size_limit)
                    .dfa_size_limit(regex.size_limit)
                    .build()
                    .map(Expected::Pattern)
                    .map_err(|e| format!("the pattern does not compile: {}", one_line(&e)))
            }
            Operator::Exists | Operator::NotExists | Operator::NotEmpty => Ok(Expected::Ignored),
            Operator::CountGt | Operator::CountLt | Operator::LengthGt | Operator::LengthLt => {
                non_negative_integer(value)
                    .map(Expected::Count)
                    .ok_or_else(|| {
                        format!(
                            "`{operator}` expects a non-negative integer, got {}",
                            describe(value)
                        )
                    })
            }
        }
    }
}

/// Whether `operator` holds for one resolved value `v` given the compiled `expected`.
pub(crate) fn holds(operator: Operator, expected: &Expected, v: Resolved<'_>) -> bool {
    match (operator, expected) {
        (Operator::Eq, Expected::Any(e)) => resolved_eq(v, e),
        (Operator::Neq, Expected::Any(e)) => !resolved_eq(v, e),
        (Operator::Gt, Expected::Number(e)) => number_of(v).is_some_and(|n| n > *e),
        (Operator::Gte, Expected::Number(e)) => number_of(v).is_some_and(|n| n >= *e),
        (Operator::Lt, Expected::Number(e)) => number_of(v).is_some_and(|n| n < *e),
        (Operator::Lte, Expected::Number(e)) => number_of(v).is_some_and(|n| n <= *e),
        (Operator::Contains, Expected::Any(e)) => contains(v, e),
        (Operator::NotContains, Expected::Any(e)) => !contains(v, e),
        (Operator::In, Expected::Set(set)) => is_in(v, set),
        (Operator::NotIn, Expected::Set(set)) => is_not_in(v, set),
        (Operator::Regex, Expected::Pattern(re)) => match v {
            Resolved::Json(Value::String(s)) => re.is_match(s),
            _ => false,
        },
        (Operator::Exists, _) => true,
        (Operator::NotExists, _) => false,
        (Operator::NotEmpty, _) => !is_empty(v),
        (Operator::CountGt, Expected::Count(e)) => count_of(v).is_some_and(|n| n > *e),
        (Operator::CountLt, Expected::Count(e)) => count_of(v).is_some_and(|n| n < *e),
        (Operator::LengthGt, Expected::Count(e)) => length_of(v).is_some_and(|n| n > *e),
        (Operator::LengthLt, Expected::Count(e)) => length_of(v).is_some_and(|n| n < *e),
        // INVARIANT: Expected::compile pairs each operator with its own variant, so
        // this arm is unreachable; failing closed keeps a rule from passing by accident.
        _ => false,
    }
}

/// Deep JSON equality in which numbers compare numerically (1 == 1.0) and nothing
/// is coerced between types.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => number_eq(x, y),
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| json_eq(x, y))
        }
        (Value::Object(xs), Value::Object(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .all(|(k, x)| ys.get(k).is_some_and(|y| json_eq(x, y)))
        }
        _ => a == b,
    }
}

fn number_eq(x: &Number, y: &Number) -> bool {
    if let (Some(a), Some(b)) = (x.as_i64(), y.as_i64()) {
        return a == b;
    }
    if let (Some(a), Some(b)) = (x.as_u64(), y.as_u64()) {
        return a == b;
    }
    match (x.as_f64(), y.as_f64()) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

fn resolved_eq(v: Resolved<'_>, expected: &Value) -> bool {
    match v {
        Resolved::Json(value) => json_eq(value, expected),
        Resolved::Count(n) => expected
            .as_f64()
            .is_some_and(|e| e == n as f64 && e.fract() == 0.0),
        // The keys form a sorted array, so the expected array must list exactly the
        // same keys in ascending order. Checked without building the array.
        Resolved::Keys(map) => match expected {
            Value::Array(items) => {
                items.len() == map.len()
                    && items
                        .iter()
                        .all(|item| item.as_str().is_some_and(|k| map.contains_key(k)))
                    && items
                        .windows(2)
                        .all(|w| matches!(w, [Value::String(a), Value::String(b)] if a < b))
            }
            _ => false,
        },
    }
}

fn number_of(v: Resolved<'_>) -> Option<f64> {
    match v {
        Resolved::Json(Value::Number(n)) => n.as_f64(),
        Resolved::Json(Value::String(s)) => s.parse::<f64>().ok().filter(|n| n.is_finite()),
        Resolved::Count(n) => Some(n as f64),
        _ => None,
    }
}

fn count_of(v: Resolved<'_>) -> Option<u64> {
    match v {
        Resolved::Json(Value::Array(items)) => Some(items.len() as u64),
        Resolved::Json(Value::Object(map)) | Resolved::Keys(map) => Some(map.len() as u64),
        _ => None,
    }
}

fn length_of(v: Resolved<'_>) -> Option<u64> {
    match v {
        Resolved::Json(Value::String(s)) => Some(s.chars().count() as u64),
        _ => None,
    }
}

fn contains(v: Resolved<'_>, expected: &Value) -> bool {
    match (v, expected) {
        (Resolved::Json(Value::String(s)), Value::String(e)) => s.contains(e.as_str()),
        (Resolved::Json(Value::Array(items)), e) => items.iter().any(|item| json_eq(item, e)),
        (Resolved::Keys(map), Value::String(e)) => map.contains_key(e),
        _ => false,
    }
}

fn member(v: &Value, set: &[Value]) -> bool {
    set.iter().any(|item| json_eq(v, item))
}

fn is_in(v: Resolved<'_>, set: &[Value]) -> bool {
    match v {
        Resolved::Json(Value::Array(items)) => items.iter().all(|item| member(item, set)),
        Resolved::Json(value) => member(value, set),
        Resolved::Count(n) => set.iter().any(|item| resolved_eq(Resolved::Count(n), item)),
        Resolved::Keys(map) => map
            .keys()
            .all(|k| set.iter().any(|item| item.as_str() == Some(k.as_str()))),
    }
}

fn is_not_in(v: Resolved<'_>, set: &[Value]) -> bool {
    match v {
        Resolved::Json(Value::Array(items)) => !items.iter().any(|item| member(item, set)),
        Resolved::Json(value) => !member(value, set),
        Resolved::Count(n) => !set.iter().any(|item| resolved_eq(Resolved::Count(n), item)),
        Resolved::Keys(map) => !map
            .keys()
            .any(|k| set.iter().any(|item| item.as_str() == Some(k.as_str()))),
    }
}

fn is_empty(v: Resolved<'_>) -> bool {
    match v {
        Resolved::Json(Value::String(s)) => s.is_empty(),
        Resolved::Json(Value::Number(n)) => n.as_f64() == Some(0.0),
        Resolved::Json(Value::Bool(b)) => !b,
        Resolved::Json(Value::Array(items)) => items.is_empty(),
        Resolved::Json(Value::Object(map)) | Resolved::Keys(map) => map.is_empty(),
        Resolved::Json(Value::Null) => true,
        Resolved::Count(n) => n == 0,
    }
}

fn non_negative_integer(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|n| n.is_finite() && *n >= 0.0 && n.fract() == 0.0 && *n <= u64::MAX as f64)
            .map(|n| n as u64)
    })
}

pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Number(n) => format!("`{n}`"),
        other => kind(other).to_owned(),
    }
}

fn one_line(error: &regex::Error) -> String {
    error
        .to_string()
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("invalid pattern")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_equality_is_numeric_and_deep() {
        assert!(json_eq(&json!(1), &json!(1.0)));
        assert!(json_eq(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
        assert!(!json_eq(&json!("1"), &json!(1)));
        assert!(!json_eq(&json!([1, 2]), &json!([2, 1])));
        assert!(!json_eq(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(json_eq(&json!(u64::MAX), &json!(u64::MAX)));
        assert!(!json_eq(&json!(-1), &json!(u64::MAX)));
    }

    #[test]
    fn value_types_are_checked_per_operator() {
        let limits = RegexLimits::default();
        assert!(Expected::compile(Operator::In, &json!("a"), limits).is_err());
        assert!(Expected::compile(Operator::Gt, &json!("5"), limits).is_err());
        assert!(Expected::compile(Operator::CountGt, &json!(-1), limits).is_err());
        assert!(Expected::compile(Operator::CountGt, &json!(1.5), limits).is_err());
        assert!(Expected::compile(Operator::CountGt, &json!(2.0), limits).is_ok());
        assert!(Expected::compile(Operator::Regex, &json!("("), limits).is_err());
        assert!(Expected::compile(Operator::Regex, &json!(5), limits).is_err());
        let long = "a".repeat(101);
        let err = Expected::compile(Operator::Regex, &json!(long), limits).unwrap_err();
        assert!(err.contains("101 characters"), "{err}");
        assert!(Expected::compile(Operator::Regex, &json!("a".repeat(100)), limits).is_ok());
        assert!(Expected::compile(Operator::Exists, &json!(null), limits).is_ok());
    }

    #[test]
    fn huge_compiled_regexes_are_refused() {
        // Short to type, enormous once its Unicode classes and repetitions expand.
        let limits = RegexLimits::default();
        let err = Expected::compile(Operator::Regex, &json!(r"\w{1000}\w{1000}"), limits);
        assert!(err.is_err());
    }
}
