//! The attribute document's limits (SEMANTICS.md 1.1).

use compliance_core::*;
use serde_json::{json, Map, Value};

fn nested(depth: usize) -> Value {
    let mut value = json!(1);
    for _ in 0..depth {
        let mut map = Map::new();
        map.insert("a".into(), value);
        value = Value::Object(map);
    }
    value
}

/// Takes a deep value apart without recursion, so that dropping it cannot overflow.
fn dismantle(value: Value) {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
}

#[test]
fn the_defaults_are_ten_deep_and_a_hundred_keys() {
    let limits = AttributeLimits::default();
    assert!(Attributes::new(&nested(10), &limits).is_ok());
    assert_eq!(
        Attributes::new(&nested(11), &limits).unwrap_err(),
        Error::AttributeLimitExceeded(LimitExceeded {
            limit: LimitKind::Depth,
            max: 10,
            actual: 11
        })
    );
    let wide: Map<String, Value> = (0..100).map(|i| (format!("k{i}"), json!(i))).collect();
    assert!(Attributes::new(&Value::Object(wide.clone()), &limits).is_ok());
    let mut wider = wide;
    wider.insert("one-more".into(), json!({}));
    let err = Attributes::new(&Value::Object(wider), &limits).unwrap_err();
    assert_eq!(
        err,
        Error::AttributeLimitExceeded(LimitExceeded {
            limit: LimitKind::Keys,
            max: 100,
            actual: 101
        })
    );
}

#[test]
fn keys_count_at_every_level_and_arrays_add_depth() {
    let limits = AttributeLimits {
        max_depth: 3,
        max_keys: 4,
    };
    let doc = json!({"a": [{"b": 1, "c": 2}], "d": 1});
    assert_eq!(shape(&doc), DocumentShape { depth: 3, keys: 4 });
    assert!(Attributes::new(&doc, &limits).is_ok());
    let deeper = json!({"a": [[{}]]});
    assert!(matches!(
        Attributes::new(&deeper, &limits),
        Err(Error::AttributeLimitExceeded(LimitExceeded {
            limit: LimitKind::Depth,
            actual: 4,
            ..
        }))
    ));
}

#[test]
fn a_document_nested_100_000_deep_is_refused_without_overflow() {
    let doc = nested(100_000);
    let err = Attributes::new(&doc, &AttributeLimits::default()).unwrap_err();
    assert_eq!(
        err,
        Error::AttributeLimitExceeded(LimitExceeded {
            limit: LimitKind::Depth,
            max: 10,
            actual: 100_000
        })
    );
    dismantle(doc);

    let arrays = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(
        json_text_depth(&format!(r#"{{"attributes": {arrays}}}"#)),
        100_001
    );
    // serde_json's own recursion limit refuses the text, rather than overflowing.
    assert!(serde_json::from_str::<Value>(&arrays).is_err());
}

#[test]
fn only_objects_are_attribute_documents() {
    for not_object in [json!([]), json!("x"), json!(1), json!(null), json!(true)] {
        assert_eq!(
            Attributes::new(&not_object, &AttributeLimits::default()).unwrap_err(),
            Error::AttributesNotObject
        );
    }
}
