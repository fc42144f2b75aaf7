//! The yardstick of the evaluator benchmarks: the same rules checked by a plain,
//! hand-written walk over `serde_json::Value`, the way an embedder would write it
//! without compliance-core. Paths are split and regexes compiled once, rules are
//! taken highest priority first; each evaluation walks every path from the root,
//! and a failing rule keeps its failing values by reference (no copy: the leanest
//! walk, so the strictest yardstick; compliance-core's result owns a bounded copy). It follows SEMANTICS.md
//! 1.2 to 1.4 (every resolved value must hold; a missing field decides by the
//! operator; `null` is absent) for the rules of `data/`, which have no
//! `dependsOnRule`; the benchmark asserts that it finds the same failing rules as
//! compliance-core, so that the two do the same work.

use std::borrow::Cow;

use regex::Regex;
use serde_json::{Map, Value};

/// A rule checked by the walk.
pub struct WalkRule {
    /// The rule's id.
    pub id: String,
    priority: i64,
    any: bool,
    predicates: Vec<WalkPredicate>,
}

struct WalkPredicate {
    computed: Option<String>,
    path: Vec<String>,
    operator: String,
    value: Value,
    regex: Option<Regex>,
}

/// A failing rule: its id and the values that failed.
pub struct WalkViolation<'r, 'a> {
    /// The rule's id.
    pub rule_id: &'r str,
    /// The failing values.
    pub actual: Vec<Cow<'a, Value>>,
}

/// The rules of a workload, prepared once.
pub struct Walk {
    rules: Vec<WalkRule>,
}

impl Walk {
    /// Prepares the rules of a workload file (a JSON array of rules); `None` when a
    /// rule is not of the shapes of `data/`.
    pub fn new(rules: &Value) -> Option<Walk> {
        let mut prepared = Vec::new();
        for rule in rules.as_array()? {
            let mut predicates = vec![predicate(rule)?];
            for condition in rule
                .get("conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                predicates.push(predicate(condition)?);
            }
            prepared.push(WalkRule {
                id: rule.get("id")?.as_str()?.to_owned(),
                priority: rule.get("priority").and_then(Value::as_i64).unwrap_or(0),
                any: rule.get("conditionMode").and_then(Value::as_str) == Some("any"),
                predicates,
            });
        }
        prepared.sort_by_key(|r| std::cmp::Reverse(r.priority));
        Some(Walk { rules: prepared })
    }

    /// Checks every rule against the document: the failing ones.
    pub fn evaluate<'r, 'a>(&'r self, document: &'a Value) -> Vec<WalkViolation<'r, 'a>> {
        let mut violations = Vec::new();
        for rule in &self.rules {
            let mut failed: Option<Vec<Cow<'a, Value>>> = None;
            let mut passed_any = false;
            for (i, predicate) in rule.predicates.iter().enumerate() {
                match predicate.failing(document) {
                    None if rule.any => {
                        passed_any = true;
                        break;
                    }
                    None => {}
                    Some(values) => {
                        if i == 0 || !rule.any {
                            failed = Some(values);
                        }
                        if !rule.any {
                            break;
                        }
                    }
                }
            }
            if let (Some(actual), false) = (failed, passed_any) {
                violations.push(WalkViolation {
                    rule_id: &rule.id,
                    actual,
                });
            }
        }
        violations
    }
}

fn predicate(source: &Value) -> Option<WalkPredicate> {
    let field = source.get("field")?.as_str()?;
    let (computed, path) = match field.strip_prefix('$') {
        Some(call) => {
            let (name, rest) = call.split_once('(')?;
            (Some(name.to_owned()), rest.strip_suffix(')')?)
        }
        None => (None, field),
    };
    let operator = source.get("operator")?.as_str()?.to_owned();
    let value = source.get("value").cloned().unwrap_or(Value::Null);
    let regex = if operator == "regex" {
        Some(Regex::new(value.as_str()?).ok()?)
    } else {
        None
    };
    Some(WalkPredicate {
        computed,
        path: path.split('.').map(str::to_owned).collect(),
        operator,
        value,
        regex,
    })
}

impl WalkPredicate {
    /// `None` when the predicate holds; otherwise copies of the failing values
    /// (none when the field is missing).
    fn failing<'a>(&self, document: &'a Value) -> Option<Vec<Cow<'a, Value>>> {
        let mut found = Vec::new();
        resolve(document, &self.path, &mut found);
        let values: Vec<Cow<'a, Value>> = match self.computed.as_deref() {
            None => found.into_iter().map(Cow::Borrowed).collect(),
            Some(name) => found
                .into_iter()
                .filter_map(|v| computed(name, v).map(Cow::Owned))
                .collect(),
        };
        if values.is_empty() {
            let holds = matches!(
                self.operator.as_str(),
                "neq" | "notContains" | "notIn" | "notExists"
            );
            return if holds { None } else { Some(Vec::new()) };
        }
        let failing: Vec<Cow<'a, Value>> = values.into_iter().filter(|v| !self.holds(v)).collect();
        (!failing.is_empty()).then_some(failing)
    }

    fn holds(&self, v: &Value) -> bool {
        let expected = &self.value;
        match self.operator.as_str() {
            "eq" => equal(v, expected),
            "neq" => !equal(v, expected),
            "gt" | "gte" | "lt" | "lte" => match (number(v), expected.as_f64()) {
                (Some(a), Some(b)) => match self.operator.as_str() {
                    "gt" => a > b,
                    "gte" => a >= b,
                    "lt" => a < b,
                    _ => a <= b,
                },
                _ => false,
            },
            "contains" => contains(v, expected),
            "notContains" => !contains(v, expected),
            "in" => member(v, expected),
            "notIn" => match v {
                Value::Array(items) => !items.iter().any(|i| one_of(i, expected)),
                _ => !one_of(v, expected),
            },
            "regex" => match (v, &self.regex) {
                (Value::String(s), Some(re)) => re.is_match(s),
                _ => false,
            },
            "exists" => true,
            "notExists" => false,
            "notEmpty" => {
                !matches!(v, Value::Null | Value::Bool(false))
                    && v.as_str() != Some("")
                    && v.as_f64() != Some(0.0)
                    && v.as_array().is_none_or(|a| !a.is_empty())
                    && v.as_object().is_none_or(|o| !o.is_empty())
            }
            "countGt" | "countLt" => {
                let count = match v {
                    Value::Array(a) => a.len(),
                    Value::Object(o) => o.len(),
                    _ => return false,
                } as f64;
                let Some(bound) = expected.as_f64() else {
                    return false;
                };
                if self.operator == "countGt" {
                    count > bound
                } else {
                    count < bound
                }
            }
            "lengthGt" | "lengthLt" => {
                let (Some(s), Some(bound)) = (v.as_str(), expected.as_f64()) else {
                    return false;
                };
                let length = s.chars().count() as f64;
                if self.operator == "lengthGt" {
                    length > bound
                } else {
                    length < bound
                }
            }
            _ => false,
        }
    }
}

/// Every non-null value `path` leads to from `v`.
fn resolve<'a>(v: &'a Value, path: &[String], out: &mut Vec<&'a Value>) {
    let Some((first, rest)) = path.split_first() else {
        if !v.is_null() {
            out.push(v);
        }
        return;
    };
    if first == "*" {
        match v {
            Value::Array(items) => items.iter().for_each(|i| resolve(i, rest, out)),
            Value::Object(map) => map.values().for_each(|i| resolve(i, rest, out)),
            _ => {}
        }
        return;
    }
    let next = match v {
        Value::Object(map) => map.get(first.as_str()),
        Value::Array(items) => first.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    };
    if let Some(next) = next {
        resolve(next, rest, out);
    }
}

fn computed(name: &str, v: &Value) -> Option<Value> {
    match (name, v) {
        ("count", Value::Array(a)) => Some(Value::from(a.len())),
        ("count", Value::Object(o)) => Some(Value::from(o.len())),
        ("length", Value::String(s)) => Some(Value::from(s.chars().count())),
        ("lines", Value::String(s)) => Some(Value::from(s.lines().count())),
        ("keys", Value::Object(o)) => Some(keys(o)),
        _ => None,
    }
}

fn keys(map: &Map<String, Value>) -> Value {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    Value::Array(keys.into_iter().map(|k| Value::String(k.clone())).collect())
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|n| n.is_finite()),
        _ => None,
    }
}

fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| equal(a, b)))
        }
        _ => a == b,
    }
}

fn contains(v: &Value, expected: &Value) -> bool {
    match (v, expected) {
        (Value::String(s), Value::String(part)) => s.contains(part.as_str()),
        (Value::Array(items), _) => items.iter().any(|i| equal(i, expected)),
        _ => false,
    }
}

fn one_of(v: &Value, expected: &Value) -> bool {
    expected
        .as_array()
        .is_some_and(|set| set.iter().any(|e| equal(v, e)))
}

fn member(v: &Value, expected: &Value) -> bool {
    match v {
        Value::Array(items) => items.iter().all(|i| one_of(i, expected)),
        _ => one_of(v, expected),
    }
}
