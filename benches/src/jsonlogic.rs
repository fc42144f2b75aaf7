//! The evaluator's second yardstick: the rules of `data/` translated to JSONLogic and
//! judged by datalogic-rs, a JSONLogic engine that compiles a rule once and evaluates
//! it over an arena. Each rule becomes one expression that is true when the rule
//! fails, following the same semantics as `walk` (SEMANTICS.md 1.2 to 1.4: every
//! resolved value must hold, a missing field decides by the operator, `null` is
//! absent); the benchmark asserts that it finds the same failing rules as
//! compliance-core.
//!
//! JSONLogic has no wildcard paths, computed fields or regular expressions, so two
//! operators are added the way an embedder of datalogic-rs would add them:
//! `resolve` (the values a path with `*` leads to, with a computed field applied) and
//! `matches` (a regular expression, compiled once when the rules are). Plain paths
//! use JSONLogic's own `var`. The document is parsed once into datalogic's own
//! representation (as compliance-core is handed a parsed `serde_json::Value`), and
//! only the verdict of each rule is asked for, not its failing values: the leanest
//! use of the engine, so the strictest yardstick.

use std::collections::HashMap;

use datalogic_rs::bumpalo::Bump;
use datalogic_rs::operator::EvalContext;
use datalogic_rs::{ArenaExt, CustomOperator, DataValue, Engine, Logic, ParsedData};
use regex::Regex;
use serde_json::{json, Value};

/// The rules of a workload as compiled JSONLogic, with the engine that runs them.
pub struct JsonLogic {
    engine: Engine,
    rules: Vec<(String, Logic)>,
}

impl JsonLogic {
    /// Translates and compiles the rules of a workload file (a JSON array of rules);
    /// `None` when a rule is not of the shapes of `data/`.
    pub fn new(rules: &Value) -> Option<JsonLogic> {
        let mut patterns = HashMap::new();
        let mut translated = Vec::new();
        for rule in rules.as_array()? {
            let mut holds = vec![predicate(rule, &mut patterns)?];
            for condition in rule
                .get("conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                holds.push(predicate(condition, &mut patterns)?);
            }
            let any = rule.get("conditionMode").and_then(Value::as_str) == Some("any");
            let joined = if any {
                json!({ "or": holds })
            } else {
                json!({ "and": holds })
            };
            let id = rule.get("id")?.as_str()?.to_owned();
            translated.push((id, json!({ "!": joined })));
        }
        let engine = Engine::builder()
            .add_operator("resolve", Resolve)
            .add_operator("matches", Matches { patterns })
            .build();
        let rules = translated
            .into_iter()
            .map(|(id, expression)| Some((id, engine.compile(&expression.to_string()).ok()?)))
            .collect::<Option<Vec<_>>>()?;
        Some(JsonLogic { engine, rules })
    }

    /// The document, parsed once into the engine's representation.
    pub fn document(text: &str) -> Option<ParsedData> {
        ParsedData::from_json(text).ok()
    }

    /// The ids of the rules the document fails; `arena` is reused between calls.
    pub fn failing<'r>(&'r self, document: &ParsedData, arena: &mut Bump) -> Vec<&'r str> {
        arena.reset();
        let arena = &*arena;
        self.rules
            .iter()
            .filter(|(_, logic)| {
                self.engine
                    .evaluate(logic, document, arena)
                    .is_ok_and(|verdict| self.engine.truthy(verdict))
            })
            .map(|(id, _)| id.as_str())
            .collect()
    }
}

/// The expression that is true when a predicate (a rule's own, or a condition) holds.
fn predicate(source: &Value, patterns: &mut HashMap<String, Regex>) -> Option<Value> {
    let field = source.get("field")?.as_str()?;
    let (computed, path) = match field.strip_prefix('$') {
        Some(call) => {
            let (name, rest) = call.split_once('(')?;
            (name, rest.strip_suffix(')')?)
        }
        None => ("", field),
    };
    let operator = source.get("operator")?.as_str()?;
    let expected = source.get("value").cloned().unwrap_or(Value::Null);
    if operator == "regex" {
        let pattern = expected.as_str()?;
        patterns.insert(pattern.to_owned(), Regex::new(pattern).ok()?);
    }
    // A missing field holds for the negative operators only.
    let holds_when_missing = matches!(operator, "neq" | "notContains" | "notIn" | "notExists");
    if computed.is_empty() && !path.split('.').any(|s| s == "*") {
        let value = json!({ "var": path });
        let present = json!({ "!==": [value, null] });
        let check = holds(operator, &value, &expected)?;
        return Some(if holds_when_missing {
            json!({ "or": [{ "!": present }, check] })
        } else {
            json!({ "and": [present, check] })
        });
    }
    let values = json!({ "resolve": [{ "var": "" }, path, computed] });
    let check = holds(operator, &json!({ "var": "" }), &expected)?;
    Some(if holds_when_missing {
        json!({ "none": [values, { "!": check }] })
    } else {
        json!({ "all": [values, check] })
    })
}

/// The expression that is true when `value` (present) satisfies `operator` and
/// `expected`.
fn holds(operator: &str, value: &Value, expected: &Value) -> Option<Value> {
    let is = |kind: &str| json!({ "===": [{ "type": value }, kind] });
    let count_of = || {
        json!({ "if": [is("array"), { "length": value },
                       is("object"), { "length": { "keys": value } },
                       null] })
    };
    let compare = |symbol: &str, measured: Value, kind: Value| json!({ "and": [kind, { symbol: [measured, expected] }] });
    let member = json!({ "in": [value, expected] });
    Some(match operator {
        "eq" => json!({ "===": [value, expected] }),
        "neq" => json!({ "!==": [value, expected] }),
        "gt" | "gte" | "lt" | "lte" => {
            let symbol = match operator {
                "gt" => ">",
                "gte" => ">=",
                "lt" => "<",
                _ => "<=",
            };
            let numeric = json!({ "or": [is("number"), is("string")] });
            compare(symbol, value.clone(), numeric)
        }
        "contains" => json!({ "in": [expected, value] }),
        "notContains" => json!({ "!": { "in": [expected, value] } }),
        "in" => json!({ "if": [is("array"),
                                { "all": [value, { "in": [{ "var": "" }, expected] }] },
                                member] }),
        "notIn" => json!({ "if": [is("array"),
                                   { "none": [value, { "in": [{ "var": "" }, expected] }] },
                                   { "!": member }] }),
        "regex" => json!({ "matches": [value, expected] }),
        "exists" => json!(true),
        "notExists" => json!(false),
        "notEmpty" => json!({ "!!": value }),
        "countGt" => compare(
            ">",
            count_of(),
            json!({ "or": [is("array"), is("object")] }),
        ),
        "countLt" => compare(
            "<",
            count_of(),
            json!({ "or": [is("array"), is("object")] }),
        ),
        "lengthGt" => compare(">", json!({ "length": value }), is("string")),
        "lengthLt" => compare("<", json!({ "length": value }), is("string")),
        _ => return None,
    })
}

/// `{"resolve": [document, path, computed]}`: every non-null value `path` (with `*`
/// for every element or member) leads to, with the computed field (`count`,
/// `length`, `lines`, `keys`, or `""` for none) applied.
struct Resolve;

impl CustomOperator for Resolve {
    fn evaluate<'a>(
        &self,
        args: &[&'a DataValue<'a>],
        _ctx: &mut EvalContext<'_, 'a>,
        arena: &'a Bump,
    ) -> datalogic_rs::Result<&'a DataValue<'a>> {
        let (Some(document), Some(DataValue::String(path)), Some(DataValue::String(computed))) =
            (args.first(), args.get(1), args.get(2))
        else {
            return Ok(arena.array(&[]));
        };
        let segments: Vec<&str> = path.split('.').collect();
        let mut found = Vec::new();
        resolve(document, &segments, &mut found);
        if computed.is_empty() {
            return Ok(arena.array(&found));
        }
        let values: Vec<DataValue<'a>> = found
            .iter()
            .filter_map(|v| apply(computed, v, arena))
            .collect();
        Ok(arena.array(&values))
    }
}

fn resolve<'a>(v: &DataValue<'a>, path: &[&str], out: &mut Vec<DataValue<'a>>) {
    let Some((first, rest)) = path.split_first() else {
        if !matches!(v, DataValue::Null) {
            out.push(*v);
        }
        return;
    };
    match v {
        DataValue::Array(items) if *first == "*" => {
            items.iter().for_each(|i| resolve(i, rest, out));
        }
        DataValue::Object(pairs) if *first == "*" => {
            pairs.iter().for_each(|(_, i)| resolve(i, rest, out));
        }
        DataValue::Object(pairs) => {
            if let Some((_, next)) = pairs.iter().find(|(k, _)| k == first) {
                resolve(next, rest, out);
            }
        }
        DataValue::Array(items) => {
            if let Some(next) = first.parse::<usize>().ok().and_then(|i| items.get(i)) {
                resolve(next, rest, out);
            }
        }
        _ => {}
    }
}

fn apply<'a>(name: &str, v: &DataValue<'a>, arena: &'a Bump) -> Option<DataValue<'a>> {
    let count = |n: usize| DataValue::from_i64(i64::try_from(n).unwrap_or(i64::MAX));
    match (name, v) {
        ("count", DataValue::Array(items)) => Some(count(items.len())),
        ("count", DataValue::Object(pairs)) => Some(count(pairs.len())),
        ("length", DataValue::String(s)) => Some(count(s.chars().count())),
        ("lines", DataValue::String(s)) => Some(count(s.lines().count())),
        ("keys", DataValue::Object(pairs)) => {
            let mut keys: Vec<&str> = pairs.iter().map(|(k, _)| *k).collect();
            keys.sort_unstable();
            let keys: Vec<DataValue<'a>> = keys.into_iter().map(DataValue::String).collect();
            Some(*arena.array(&keys))
        }
        _ => None,
    }
}

/// `{"matches": [value, pattern]}`: whether a string matches a regular expression
/// compiled when the rules were.
struct Matches {
    patterns: HashMap<String, Regex>,
}

impl CustomOperator for Matches {
    fn evaluate<'a>(
        &self,
        args: &[&'a DataValue<'a>],
        _ctx: &mut EvalContext<'_, 'a>,
        arena: &'a Bump,
    ) -> datalogic_rs::Result<&'a DataValue<'a>> {
        let matched = match (args.first(), args.get(1)) {
            (Some(DataValue::String(value)), Some(DataValue::String(pattern))) => self
                .patterns
                .get(*pattern)
                .is_some_and(|regex| regex.is_match(value)),
            _ => false,
        };
        Ok(arena.bool(matched))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_data;
    use crate::walk::Walk;

    fn failing(rules: &str, document: &str) -> (Vec<String>, Vec<String>) {
        let rules = json_data(rules);
        let (Some(logic), Some(walk), Some(parsed)) = (
            JsonLogic::new(&rules),
            Walk::new(&rules),
            JsonLogic::document(document),
        ) else {
            panic!("the workload does not translate");
        };
        let mut arena = Bump::new();
        let mut logical: Vec<String> = logic
            .failing(&parsed, &mut arena)
            .into_iter()
            .map(str::to_owned)
            .collect();
        let mut walked: Vec<String> = walk
            .evaluate(&json_data(document))
            .iter()
            .map(|v| v.rule_id.to_owned())
            .collect();
        logical.sort();
        walked.sort();
        (logical, walked)
    }

    #[test]
    fn the_translation_fails_the_rules_the_walk_fails() {
        let rules = include_str!("../data/rules-mixed-100.json");
        let (logical, walked) = failing(rules, include_str!("../data/pipeline-failing.json"));
        assert_eq!(logical.len(), 30);
        assert_eq!(logical, walked);
        let (logical, walked) = failing(rules, include_str!("../data/pipeline.json"));
        assert!(logical.is_empty(), "{logical:?}");
        assert!(walked.is_empty());
    }

    #[test]
    fn missing_fields_decide_by_the_operator() {
        let rules = r#"[
            {"id": "eq", "field": "a.b", "operator": "eq", "value": 1},
            {"id": "neq", "field": "a.b", "operator": "neq", "value": 1},
            {"id": "wild", "field": "s.*.n", "operator": "gt", "value": 1},
            {"id": "notin", "field": "s.*.n", "operator": "notIn", "value": [1]},
            {"id": "count", "field": "$count(s)", "operator": "eq", "value": 2},
            {"id": "re", "field": "name", "operator": "regex", "value": "^x"}
        ]"#;
        let (logical, walked) = failing(rules, r#"{"s": [{"n": 2}, {"n": 1}], "name": "y"}"#);
        assert_eq!(logical, ["eq", "notin", "re", "wild"]);
        assert_eq!(logical, walked);
    }
}
