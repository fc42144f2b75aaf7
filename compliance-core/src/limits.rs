//! Limits on the attribute document, checked on the whole document before any rule
//! runs (SEMANTICS.md 1.1). Both checks are iterative: a hostile document nested
//! 100,000 deep is refused without a stack overflow.

use serde::Serialize;
use serde_json::Value;

use crate::error::Error;

/// Default `COMPLIANCE_MAX_ATTRIBUTE_DEPTH`.
pub const DEFAULT_MAX_DEPTH: usize = 10;
/// Default `COMPLIANCE_MAX_ATTRIBUTE_KEYS`.
pub const DEFAULT_MAX_KEYS: usize = 100;

/// How deep and how wide an attribute document may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttributeLimits {
    /// The top-level object is depth 1; each nested object or array adds 1.
    pub max_depth: usize,
    /// Object keys counted over the whole document, at every level.
    pub max_keys: usize,
}

impl Default for AttributeLimits {
    fn default() -> Self {
        AttributeLimits {
            max_depth: DEFAULT_MAX_DEPTH,
            max_keys: DEFAULT_MAX_KEYS,
        }
    }
}

/// Which limit a document went over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LimitKind {
    /// Nesting depth.
    Depth,
    /// Total number of object keys.
    Keys,
}

/// A document over a limit: the API's `details: {limit, max, actual}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("the attribute document exceeds the {} limit: {actual} > {max}", match limit { LimitKind::Depth => "depth", LimitKind::Keys => "keys" })]
pub struct LimitExceeded {
    /// Which limit.
    pub limit: LimitKind,
    /// The limit in force.
    pub max: usize,
    /// What the document has (for depth, at least this much).
    pub actual: usize,
}

/// The shape of a document: its depth and its total number of object keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DocumentShape {
    /// The deepest nesting; a scalar is depth 0, `{}` depth 1.
    pub depth: usize,
    /// Object keys over the whole document.
    pub keys: usize,
}

/// Measures `value` without recursion.
pub fn shape(value: &Value) -> DocumentShape {
    let mut result = DocumentShape::default();
    let mut stack: Vec<(&Value, usize)> = vec![(value, 1)];
    while let Some((value, depth)) = stack.pop() {
        match value {
            Value::Object(map) => {
                result.depth = result.depth.max(depth);
                result.keys += map.len();
                stack.extend(map.values().map(|child| (child, depth + 1)));
            }
            Value::Array(items) => {
                result.depth = result.depth.max(depth);
                stack.extend(items.iter().map(|child| (child, depth + 1)));
            }
            _ => {}
        }
    }
    result
}

impl AttributeLimits {
    /// Checks a document against the limits. Depth is reported before keys.
    pub fn check(&self, value: &Value) -> Result<DocumentShape, LimitExceeded> {
        let shape = shape(value);
        if shape.depth > self.max_depth {
            return Err(LimitExceeded {
                limit: LimitKind::Depth,
                max: self.max_depth,
                actual: shape.depth,
            });
        }
        if shape.keys > self.max_keys {
            return Err(LimitExceeded {
                limit: LimitKind::Keys,
                max: self.max_keys,
                actual: shape.keys,
            });
        }
        Ok(shape)
    }
}

/// The nesting depth of JSON text, measured without parsing it: each `{` or `[`
/// outside a string opens a level. A server calls this before handing a body to a
/// parser with a recursion limit, so that a too-deep document is reported as a
/// depth-limit error with its real depth rather than as a parse failure.
///
/// ```
/// use compliance_core::json_text_depth;
/// assert_eq!(json_text_depth(r#"{"a": [1, {"b": "[{"}]}"#), 3);
/// ```
pub fn json_text_depth(text: &str) -> usize {
    let mut depth = 0usize;
    let mut max = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for byte in text.bytes() {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// An attribute document that is a JSON object within the limits: the only thing
/// a rule set evaluates. Once built, nothing checks it again.
///
/// ```
/// use compliance_core::{AttributeLimits, Attributes};
/// use serde_json::json;
///
/// let doc = json!({"name": "eslint", "version": "1.2.0"});
/// assert!(Attributes::new(&doc, &AttributeLimits::default()).is_ok());
/// assert!(Attributes::new(&json!([1, 2]), &AttributeLimits::default()).is_err());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    root: &'a Value,
}

impl<'a> Attributes<'a> {
    /// Accepts `value` if it is an object within `limits`.
    pub fn new(value: &'a Value, limits: &AttributeLimits) -> Result<Self, Error> {
        if !value.is_object() {
            return Err(Error::AttributesNotObject);
        }
        limits.check(value)?;
        Ok(Attributes { root: value })
    }

    /// The document.
    pub fn root(&self) -> &'a Value {
        self.root
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn depth_counts_objects_and_arrays() {
        assert_eq!(shape(&json!({})).depth, 1);
        assert_eq!(shape(&json!({"a": [1]})).depth, 2);
        assert_eq!(shape(&json!({"a": [{"b": {}}]})).depth, 4);
        assert_eq!(
            shape(&json!({"a": 1, "b": {"c": 1, "d": [{"e": 1}]}})).keys,
            5
        );
    }

    #[test]
    fn limits_are_exact() {
        let limits = AttributeLimits {
            max_depth: 2,
            max_keys: 2,
        };
        assert!(limits.check(&json!({"a": {"b": 1}})).is_ok());
        assert_eq!(
            limits.check(&json!({"a": {"b": []}})),
            Err(LimitExceeded {
                limit: LimitKind::Depth,
                max: 2,
                actual: 3
            })
        );
        assert_eq!(
            limits.check(&json!({"a": 1, "b": 2, "c": 3})),
            Err(LimitExceeded {
                limit: LimitKind::Keys,
                max: 2,
                actual: 3
            })
        );
    }

    #[test]
    fn text_depth_ignores_brackets_in_strings() {
        assert_eq!(json_text_depth(r#""[[[""#), 0);
        assert_eq!(json_text_depth(r#"{"a\"[": [[]]}"#), 3);
        assert_eq!(json_text_depth(&"[".repeat(100_000)), 100_000);
    }
}
