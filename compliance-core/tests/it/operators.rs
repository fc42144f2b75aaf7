//! Every operator and computed field over present, missing, null, wrong-type,
//! array-valued and wildcard fields (SEMANTICS.md 1.2 and 1.3).

use super::passes;
use serde_json::{json, Value};

/// (field, operator, value, holds) against one fixed document.
fn table() -> Vec<(&'static str, &'static str, Value, bool)> {
    vec![
        // eq / neq: deep equality, numbers numerically, no coercion; missing and null.
        ("name", "eq", json!("eslint"), true),
        ("name", "eq", json!("ESLint"), false),
        ("count", "eq", json!(3.0), true),
        ("count", "eq", json!("3"), false),
        ("numstr", "eq", json!(3), false),
        ("obj", "eq", json!({"b": [1, 2], "a": 1}), true),
        ("obj", "eq", json!({"a": 1}), false),
        ("missing", "eq", json!(null), false),
        ("nothing", "eq", json!(null), false),
        ("name", "neq", json!("other"), true),
        ("name", "neq", json!("eslint"), false),
        ("missing", "neq", json!("x"), true),
        ("nothing", "neq", json!("x"), true),
        // Wildcards: the operator must hold for every resolved value.
        ("steps.*.version", "eq", json!("1.0.0"), false),
        ("steps.*.kind", "eq", json!("build"), true),
        ("steps.*.version", "neq", json!("latest"), false),
        ("steps.*.version", "neq", json!("9.9.9"), true),
        ("steps.*.absent", "eq", json!(1), false),
        ("steps.*.absent", "neq", json!(1), true),
        // gt/gte/lt/lte: numbers and numeric strings; anything else fails.
        ("count", "gt", json!(2), true),
        ("count", "gt", json!(3), false),
        ("count", "gte", json!(3), true),
        ("count", "lt", json!(3.5), true),
        ("count", "lte", json!(2.99), false),
        ("numstr", "gt", json!(2.5), true),
        ("numstr", "lt", json!(3), false),
        ("name", "gt", json!(0), false),
        ("name", "lt", json!(0), false),
        ("flag", "gt", json!(0), false),
        ("inf", "gt", json!(0), false),
        ("missing", "gt", json!(0), false),
        ("missing", "lt", json!(0), false),
        ("steps.*.weight", "gte", json!(1), true),
        ("steps.*.weight", "gt", json!(1), false),
        // contains / notContains: substring, array element; wrong type fails.
        ("name", "contains", json!("lint"), true),
        ("name", "contains", json!("LINT"), false),
        ("tags", "contains", json!("security"), true),
        ("tags", "contains", json!("other"), false),
        ("nums", "contains", json!(2.0), true),
        ("count", "contains", json!(3), false),
        ("name", "contains", json!(1), false),
        ("missing", "contains", json!("x"), false),
        ("name", "notContains", json!("rm -rf"), true),
        ("tags", "notContains", json!("security"), false),
        ("missing", "notContains", json!("x"), true),
        ("count", "notContains", json!(3), true),
        // in / notIn: membership; an array field must be wholly in / wholly out.
        ("access", "in", json!(["private", "internal"]), true),
        ("access", "in", json!(["public"]), false),
        ("count", "in", json!([1, 3.0]), true),
        ("tags", "in", json!(["security", "lint", "extra"]), true),
        ("tags", "in", json!(["security"]), false),
        ("empty", "in", json!(["x"]), true),
        ("missing", "in", json!(["x"]), false),
        ("access", "notIn", json!(["public"]), true),
        ("access", "notIn", json!(["private"]), false),
        ("tags", "notIn", json!(["other", "lint"]), false),
        ("tags", "notIn", json!(["other"]), true),
        ("missing", "notIn", json!(["x"]), true),
        ("steps.*.kind", "in", json!(["build", "test"]), true),
        // regex: unanchored unless anchored; non-strings fail.
        ("version", "regex", json!(r"^\d+\.\d+\.\d+$"), true),
        ("name", "regex", json!("lin"), true),
        ("name", "regex", json!("^lin"), false),
        ("count", "regex", json!("3"), false),
        ("missing", "regex", json!(".*"), false),
        ("steps.*.version", "regex", json!(r"^\d"), false),
        ("steps.*.kind", "regex", json!("^build$"), true),
        // exists / notExists: null is absent.
        ("name", "exists", json!(null), true),
        ("flag", "exists", json!(null), true),
        ("missing", "exists", json!(null), false),
        ("nothing", "exists", json!(null), false),
        ("name", "notExists", json!(null), false),
        ("missing", "notExists", json!(null), true),
        ("nothing", "notExists", json!(null), true),
        ("steps.*.absent", "notExists", json!(null), true),
        ("steps.*.kind", "notExists", json!(null), false),
        // notEmpty: "", 0, false, [] and {} are empty.
        ("name", "notEmpty", json!(null), true),
        ("blank", "notEmpty", json!(null), false),
        ("zero", "notEmpty", json!(null), false),
        ("flag", "notEmpty", json!(null), false),
        ("empty", "notEmpty", json!(null), false),
        ("emptyObj", "notEmpty", json!(null), false),
        ("missing", "notEmpty", json!(null), false),
        ("nothing", "notEmpty", json!(null), false),
        ("count", "notEmpty", json!(null), true),
        // countGt / countLt: arrays and objects only.
        ("tags", "countGt", json!(1), true),
        ("tags", "countGt", json!(2), false),
        ("obj", "countLt", json!(3), true),
        ("obj", "countGt", json!(2), false),
        ("name", "countGt", json!(0), false),
        ("missing", "countLt", json!(5), false),
        // lengthGt / lengthLt: strings, in Unicode scalar values.
        ("name", "lengthGt", json!(5), true),
        ("name", "lengthLt", json!(6), false),
        ("unicode", "lengthLt", json!(6), true),
        ("unicode", "lengthGt", json!(4), true),
        ("tags", "lengthGt", json!(0), false),
        ("missing", "lengthLt", json!(100), false),
        // Array indexes.
        ("steps.0.version", "eq", json!("1.0.0"), true),
        ("steps.1.version", "eq", json!("latest"), true),
        ("steps.9.version", "exists", json!(null), false),
        // Computed fields.
        ("$count(steps)", "eq", json!(2), true),
        ("$count(obj)", "gte", json!(2), true),
        ("$count(name)", "exists", json!(null), false),
        ("$count(missing)", "notExists", json!(null), true),
        ("$length(name)", "eq", json!(6), true),
        ("$length(unicode)", "eq", json!(5), true),
        ("$length(count)", "exists", json!(null), false),
        ("$keys(obj)", "eq", json!(["a", "b"]), true),
        ("$keys(obj)", "eq", json!(["b", "a"]), false),
        ("$keys(obj)", "contains", json!("b"), true),
        ("$keys(obj)", "in", json!(["a", "b", "c"]), true),
        ("$keys(obj)", "notIn", json!(["secret"]), true),
        ("$keys(obj)", "countLt", json!(3), true),
        (
            "$keys(env)",
            "notContains",
            json!("AWS_SECRET_ACCESS_KEY"),
            false,
        ),
        ("$lines(script)", "eq", json!(3), true),
        ("$lines(blank)", "eq", json!(0), true),
        ("$lines(script)", "lt", json!(10), true),
        ("$lines(trailing)", "eq", json!(2), true),
        ("$count(steps.*.tags)", "gt", json!(0), false),
        ("$length(steps.*.kind)", "eq", json!(5), true),
    ]
}

fn document() -> Value {
    json!({
        "name": "eslint",
        "version": "1.2.3",
        "count": 3,
        "numstr": "3",
        "inf": "inf",
        "access": "private",
        "flag": false,
        "zero": 0,
        "blank": "",
        "empty": [],
        "emptyObj": {},
        "nothing": null,
        "tags": ["security", "lint"],
        "nums": [1, 2, 3],
        "obj": {"a": 1, "b": [1, 2]},
        "unicode": "héllo",
        "script": "a\n\nb",
        "trailing": "a\nb\n",
        "env": {"AWS_SECRET_ACCESS_KEY": "x", "PATH": "/bin"},
        "steps": [
            {"kind": "build", "version": "1.0.0", "weight": 1, "tags": ["x"]},
            {"kind": "build", "version": "latest", "weight": 2.5, "tags": []}
        ]
    })
}

#[test]
fn operator_table() {
    let doc = document();
    let mut failures = Vec::new();
    for (field, operator, value, expected) in table() {
        let got = passes(field, operator, value.clone(), &doc);
        if got != expected {
            failures.push(format!(
                "{field} {operator} {value}: expected {expected}, got {got}"
            ));
        }
    }
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
}

#[test]
fn table_covers_all_eighteen_operators() {
    let used: std::collections::HashSet<&str> = table().iter().map(|row| row.1).collect();
    for op in compliance_core::Operator::ALL {
        assert!(used.contains(op.as_str()), "{op} is not in the table");
    }
}
