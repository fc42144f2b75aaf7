//! A violation: one rule an entity did not satisfy, as cheap to build as it can be.
//!
//! What a violation says about its rule (id, name, severity, field, operator, expected
//! value, the start of its message) is the same for every entity that fails that
//! predicate, so it is built once, when the rule set is compiled, and shared by
//! reference ([`Facts`]). What a violation holds of its own is the bounded copy of the
//! values that failed ([`crate::bounded`]), kept inline when it is a scalar or a short
//! string, and the record of any cut. The one-line message is written from those, when
//! it is read or serialized, never while evaluating.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Number, Value};

use crate::bounded::{json_text, write_short, write_short_text, Cut, MAX_MESSAGE_VALUE_BYTES};
use crate::operator::Operator;
use crate::rule::Severity;

/// What every violation of one predicate of one rule shares.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Facts {
    pub rule_id: Box<str>,
    pub rule_name: Box<str>,
    pub severity: Severity,
    pub field: Box<str>,
    pub operator: Operator,
    pub value: Value,
    /// "{rule name}: `{field}` {expectation}; ", the start of the message.
    pub lead: Box<str>,
}

impl Facts {
    pub fn new(
        rule_id: &str,
        rule_name: &str,
        severity: Severity,
        field: &str,
        operator: Operator,
        value: &Value,
    ) -> Self {
        let mut lead = format!("{rule_name}: `{field}` {}", operator.phrase());
        if !operator.ignores_value() {
            lead.push(' ');
            write_short(&mut lead, value, MAX_MESSAGE_VALUE_BYTES);
            if matches!(operator, Operator::LengthGt | Operator::LengthLt) {
                lead.push_str(" characters");
            }
        }
        lead.push_str("; ");
        Facts {
            rule_id: rule_id.into(),
            rule_name: rule_name.into(),
            severity,
            field: field.into(),
            operator,
            value: value.clone(),
            lead: lead.into_boxed_str(),
        }
    }
}

/// The longest string kept inline in a violation, in bytes.
const INLINE_BYTES: usize = 22;

/// The bounded failing value(s): absent, inline (a scalar, a short string) or a value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Actual {
    Missing,
    Null,
    Bool(bool),
    Number(Number),
    Short {
        len: u8,
        bytes: [u8; INLINE_BYTES],
    },
    /// Compact JSON text, as [`crate::bounded`] writes it.
    Json(String),
}

impl Actual {
    /// A value already bounded, in its most compact form.
    pub fn from_value(value: Value) -> Self {
        match value {
            Value::Null => Actual::Null,
            Value::Bool(b) => Actual::Bool(b),
            Value::Number(n) => Actual::Number(n),
            Value::String(s) => {
                Actual::string(&s).unwrap_or_else(|| Actual::Json(json_text(&Value::String(s))))
            }
            other => Actual::Json(json_text(&other)),
        }
    }

    /// A string short enough to be kept inline.
    pub fn string(s: &str) -> Option<Self> {
        let len = u8::try_from(s.len())
            .ok()
            .filter(|&l| usize::from(l) <= INLINE_BYTES)?;
        let mut bytes = [0u8; INLINE_BYTES];
        bytes.get_mut(..s.len())?.copy_from_slice(s.as_bytes());
        Some(Actual::Short { len, bytes })
    }

    fn short(len: u8, bytes: &[u8; INLINE_BYTES]) -> &str {
        // Only ever filled from a whole `&str`: the bytes are UTF-8.
        bytes
            .get(..usize::from(len))
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or_default()
    }

    pub(crate) fn to_value(&self) -> Option<Value> {
        Some(match self {
            Actual::Missing => return None,
            Actual::Null => Value::Null,
            Actual::Bool(b) => Value::Bool(*b),
            Actual::Number(n) => Value::Number(n.clone()),
            Actual::Short { len, bytes } => Value::String(Actual::short(*len, bytes).to_owned()),
            // Written by this crate from a value: it reads back (or, never, as null).
            Actual::Json(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        })
    }
}

impl Serialize for Actual {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Actual::Missing | Actual::Null => serializer.serialize_unit(),
            Actual::Bool(b) => serializer.serialize_bool(*b),
            Actual::Number(n) => n.serialize(serializer),
            Actual::Short { len, bytes } => serializer.serialize_str(Actual::short(*len, bytes)),
            Actual::Json(_) => self.to_value().serialize(serializer),
        }
    }
}

/// One rule the entity did not satisfy.
///
/// Read through its accessors; serialized as the API's camelCase object
/// `{ruleId, ruleName, severity, field, operator, value, actual?, truncated?, message}`
/// (SEMANTICS 1.5), and read back from it.
///
/// ```
/// use compliance_core::*;
/// use serde_json::json;
/// let rules: Vec<Rule> = serde_json::from_value(json!([{"id": "pin", "name": "Pinned",
///     "target": "plugin", "severity": "error", "field": "version", "operator": "neq",
///     "value": "latest"}])).unwrap();
/// let set = RuleSet::compile(rules, &CompileOptions::default()).unwrap();
/// let doc = json!({"version": "latest"});
/// let attrs = Attributes::new(&doc, &AttributeLimits::default()).unwrap();
/// let result = set.evaluate(Target::Plugin, &attrs, &Waivers::none());
/// let v = &result.violations[0];
/// assert_eq!((v.rule_id(), v.field(), v.actual()), ("pin", "version", Some(json!("latest"))));
/// assert_eq!(v.message(), "Pinned: `version` must not equal \"latest\"; found \"latest\"");
/// let wire = serde_json::to_value(v).unwrap();
/// assert_eq!(wire["message"], v.message());
/// assert_eq!(&serde_json::from_value::<Violation>(wire).unwrap(), v);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    facts: Arc<Facts>,
    actual: Actual,
    truncated: Vec<Cut>,
}

impl Violation {
    pub(crate) fn new(facts: &Arc<Facts>, actual: Actual, truncated: Vec<Cut>) -> Self {
        Violation {
            facts: Arc::clone(facts),
            actual,
            truncated,
        }
    }

    /// A violation of `facts` whose failing values are those of `earlier`: their
    /// bounded copy is taken as it is, not written again.
    pub(crate) fn sharing(facts: &Arc<Facts>, earlier: &Violation) -> Self {
        Violation {
            facts: Arc::clone(facts),
            actual: earlier.actual.clone(),
            truncated: earlier.truncated.clone(),
        }
    }

    /// The rule's id (its name when it has none).
    pub fn rule_id(&self) -> &str {
        &self.facts.rule_id
    }

    /// The rule's name.
    pub fn rule_name(&self) -> &str {
        &self.facts.rule_name
    }

    /// The rule's severity.
    pub fn severity(&self) -> Severity {
        self.facts.severity
    }

    /// The field of the predicate that failed.
    pub fn field(&self) -> &str {
        &self.facts.field
    }

    /// The operator of the predicate that failed.
    pub fn operator(&self) -> Operator {
        self.facts.operator
    }

    /// The expected value of the predicate that failed.
    pub fn value(&self) -> &Value {
        &self.facts.value
    }

    /// The value that failed, or an array of them when the field resolved to several;
    /// `None` when the field is missing. Bounded: at most
    /// [`MAX_ACTUAL_CHARS`](crate::MAX_ACTUAL_CHARS) characters of a string and
    /// [`MAX_ACTUAL_ITEMS`](crate::MAX_ACTUAL_ITEMS) elements of an array.
    pub fn actual(&self) -> Option<Value> {
        self.actual.to_value()
    }

    /// Where `actual` was cut and how large the original was; empty when nothing was.
    pub fn truncated(&self) -> &[Cut] {
        &self.truncated
    }

    /// One line for a human, written from the bounded `actual` (as `Display` writes it).
    pub fn message(&self) -> String {
        self.to_string()
    }
}

/// The message: what the predicate expected, then what was found.
impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.facts.lead)?;
        let mut found = String::with_capacity(MAX_MESSAGE_VALUE_BYTES + 4);
        match &self.actual {
            Actual::Missing => return f.write_str("the field is missing"),
            Actual::Json(text) => write_short_text(&mut found, text, MAX_MESSAGE_VALUE_BYTES),
            inline => {
                let value = inline.to_value().unwrap_or(Value::Null);
                write_short(&mut found, &value, MAX_MESSAGE_VALUE_BYTES);
            }
        }
        write!(f, "found {found}")
    }
}

/// The wire form's schema, for servers that document their API (feature `schema`).
#[cfg(feature = "schema")]
mod schema {
    use serde::Serialize;
    use serde_json::Value;

    use crate::{Cut, Operator, Severity};

    /// A rule an entity failed, as the API answers it.
    #[derive(Serialize, utoipa::ToSchema)]
    #[serde(rename_all = "camelCase")]
    #[schema(as = Violation)]
    pub(super) struct Wire {
        /// The rule's id.
        rule_id: String,
        /// The rule's name.
        rule_name: String,
        severity: Severity,
        /// The rule's field expression.
        field: String,
        operator: Operator,
        /// The rule's value.
        value: Value,
        /// What the check found there (left out when the field is missing), bounded.
        #[serde(skip_serializing_if = "Option::is_none")]
        actual: Option<Value>,
        /// Where `actual` was cut (left out when nothing was).
        #[serde(skip_serializing_if = "Option::is_none")]
        truncated: Option<Vec<Cut>>,
        /// One line for a human.
        message: String,
    }
}

#[cfg(feature = "schema")]
impl utoipa::PartialSchema for Violation {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        <schema::Wire as utoipa::PartialSchema>::schema()
    }
}

#[cfg(feature = "schema")]
impl utoipa::ToSchema for Violation {
    fn name() -> std::borrow::Cow<'static, str> {
        <schema::Wire as utoipa::ToSchema>::name()
    }

    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        <schema::Wire as utoipa::ToSchema>::schemas(schemas)
    }
}

/// The wire form, read field by field.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    rule_id: String,
    rule_name: String,
    severity: Severity,
    field: String,
    operator: Operator,
    #[serde(default)]
    value: Value,
    #[serde(default)]
    actual: Option<Value>,
    #[serde(default)]
    truncated: Vec<Cut>,
}

/// The message, serialized straight from `Display` (no string in between).
struct Message<'v>(&'v Violation);

impl Serialize for Message<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self.0)
    }
}

impl Serialize for Violation {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.serialize_form(serializer, true)
    }
}

impl Violation {
    fn serialize_form<S: Serializer>(
        &self,
        serializer: S,
        with_message: bool,
    ) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let present = !matches!(self.actual, Actual::Missing);
        let fields = 6
            + usize::from(with_message)
            + usize::from(present)
            + usize::from(!self.truncated.is_empty());
        let mut s = serializer.serialize_struct("Violation", fields)?;
        s.serialize_field("ruleId", &*self.facts.rule_id)?;
        s.serialize_field("ruleName", &*self.facts.rule_name)?;
        s.serialize_field("severity", &self.facts.severity)?;
        s.serialize_field("field", &*self.facts.field)?;
        s.serialize_field("operator", &self.facts.operator)?;
        s.serialize_field("value", &self.facts.value)?;
        if present {
            s.serialize_field("actual", &self.actual)?;
        }
        if !self.truncated.is_empty() {
            s.serialize_field("truncated", &self.truncated)?;
        }
        if with_message {
            s.serialize_field("message", &Message(self))?;
        }
        s.end()
    }
}

/// Violations as a store keeps them: the wire form without the message, which is a
/// function of the other fields and is written again when they are read back (a third
/// or more of a failing check's bytes). Reads back into the same violations.
///
/// ```
/// use compliance_core::{StoredViolations, Violation};
/// let wire = r#"[{"ruleId":"r1","ruleName":"Pinned","severity":"error","field":"version","operator":"neq","value":"latest","actual":"latest","message":"x"}]"#;
/// let violations: Vec<Violation> = serde_json::from_str(wire).unwrap();
/// let stored = serde_json::to_string(&StoredViolations(&violations)).unwrap();
/// assert!(!stored.contains("message"));
/// let back: Vec<Violation> = serde_json::from_str(&stored).unwrap();
/// assert_eq!(back, violations);
/// assert_eq!(back[0].message(), "Pinned: `version` must not equal \"latest\"; found \"latest\"");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct StoredViolations<'v>(pub &'v [Violation]);

impl Serialize for StoredViolations<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        struct One<'v>(&'v Violation);
        impl Serialize for One<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                self.0.serialize_form(serializer, false)
            }
        }
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for violation in self.0 {
            seq.serialize_element(&One(violation))?;
        }
        seq.end()
    }
}

/// Read back from the wire form; the message is written again from the fields (it is
/// a function of them), so a violation read back equals the one written.
impl<'de> Deserialize<'de> for Violation {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Wire::deserialize(deserializer)?;
        let facts = Facts::new(
            &wire.rule_id,
            &wire.rule_name,
            wire.severity,
            &wire.field,
            wire.operator,
            &wire.value,
        );
        Ok(Violation {
            facts: Arc::new(facts),
            actual: wire.actual.map_or(Actual::Missing, Actual::from_value),
            truncated: wire.truncated,
        })
    }
}
