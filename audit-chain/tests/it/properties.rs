//! Laws of the chain (proptest).

use super::*;
use proptest::prelude::*;

fn details() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(Value::from),
        "[a-z0-9 :-]{0,16}".prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
    ];
    let nested = leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,8}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    prop::collection::btree_map("[a-z]{1,8}", nested, 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

fn sealed(all_details: Vec<Value>) -> Vec<SealedEvent> {
    let mut head = ChainHead::genesis("acme");
    all_details
        .into_iter()
        .enumerate()
        .map(|(i, d)| {
            let (row, next) = seal(&head, event(&format!("e{i}"), "acme", d), t(i as i64)).unwrap();
            head = next;
            row
        })
        .collect()
}

/// Flips one byte of one field of a row.
fn tamper(row: &mut SealedEvent, field: usize, at: usize) {
    fn flip(s: &mut String, at: usize) {
        let mut bytes = std::mem::take(s).into_bytes();
        if bytes.is_empty() {
            bytes.push(b'x');
        } else {
            let i = at % bytes.len();
            bytes[i] = if bytes[i] == b'a' { b'b' } else { b'a' };
        }
        *s = String::from_utf8_lossy(&bytes).into_owned();
    }
    match field % 9 {
        0 => flip(&mut row.action, at),
        1 => flip(&mut row.actor_id, at),
        2 => row.details = json!({"tampered": at}),
        3 => flip(row.target_id.get_or_insert_with(String::new), at),
        4 => row.occurred_at += chrono::Duration::microseconds(1),
        5 => row.created_at += chrono::Duration::microseconds(1),
        6 => flip(&mut row.id, at),
        7 => flip(&mut row.prev_hash, at),
        _ => flip(row.outcome.get_or_insert_with(String::new), at),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_sealed_chain_verifies(all in prop::collection::vec(details(), 0..12)) {
        let rows = sealed(all);
        let v = verify(&rows);
        prop_assert!(v.ok);
        prop_assert_eq!(v.count, rows.len() as u64);
    }

    #[test]
    fn tampering_with_a_row_that_has_a_successor_is_caught_there_or_at_its_successor(
        all in prop::collection::vec(details(), 2..10), which in any::<prop::sample::Index>(),
        field in 0usize..9, at in any::<usize>(),
    ) {
        let mut rows = sealed(all);
        let i = which.index(rows.len() - 1);
        let before = rows[i].clone();
        tamper(&mut rows[i], field, at);
        prop_assume!(rows[i] != before);
        let v = verify(&rows);
        prop_assert!(!v.ok);
        let broken = v.broken_at.unwrap().seq;
        prop_assert!(broken == before.seq || broken == before.seq + 1, "broken at {} for row {}", broken, before.seq);
    }

    #[test]
    fn deleting_an_inner_row_is_caught_and_deleting_a_prefix_is_not(
        all in prop::collection::vec(details(), 3..10), which in any::<prop::sample::Index>(),
    ) {
        let rows = sealed(all);
        let cut = which.index(rows.len());
        prop_assert!(verify(&rows[cut..]).ok);
        let inner = 1 + which.index(rows.len() - 2);
        let mut removed = rows.clone();
        removed.remove(inner);
        prop_assert!(!verify(&removed).ok);
    }

    #[test]
    fn swapping_two_rows_is_caught(all in prop::collection::vec(details(), 2..10), a in any::<prop::sample::Index>(), b in any::<prop::sample::Index>()) {
        let mut rows = sealed(all);
        let (a, b) = (a.index(rows.len()), b.index(rows.len()));
        prop_assume!(a != b);
        rows.swap(a, b);
        prop_assert!(!verify(&rows).ok);
    }

    #[test]
    fn redaction_is_idempotent_on_any_details(d in details(), extra in "[0-9 a-z:-]{0,40}") {
        let mut once = d;
        if let Value::Object(map) = &mut once {
            map.insert(extra.clone(), Value::String(extra));
        }
        redact_details(&mut once);
        let mut twice = once.clone();
        redact_details(&mut twice);
        prop_assert_eq!(once, twice);
    }
}
