//! The effective rule set of an organization (SEMANTICS.md 1.6).

use compliance_core::*;
use serde_json::json;

fn r(id: &str, version: u32, extra: serde_json::Value) -> Rule {
    let mut base = json!({"id": id, "name": id, "target": "plugin", "severity": "error",
                          "field": "x", "operator": "exists", "version": version});
    if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        base.extend(extra.clone());
    }
    serde_json::from_value(base).unwrap()
}

fn keys(rules: &[Rule]) -> Vec<String> {
    rules
        .iter()
        .map(|r| format!("{}@{}", r.id, r.version))
        .collect()
}

#[test]
fn own_rules_then_active_subscriptions_then_propagated_each_once() {
    let own = [
        r("own", 1, json!({})),
        r("tpl", 1, json!({"isTemplate": true})),
    ];
    let published = [
        r("pub", 1, json!({"scope": "published"})),
        r("pub", 2, json!({"scope": "published"})),
        r("pub", 3, json!({"scope": "published"})),
        r("pinned", 1, json!({"scope": "published"})),
        r("pinned", 2, json!({"scope": "published"})),
        r("inactive", 1, json!({"scope": "published"})),
        r("org-scoped", 1, json!({})),
    ];
    let subscriptions = [
        Subscription {
            rule_id: "pub".into(),
            active: true,
            pinned_version: None,
        },
        Subscription {
            rule_id: "pinned".into(),
            active: true,
            pinned_version: Some(1),
        },
        Subscription {
            rule_id: "inactive".into(),
            active: false,
            pinned_version: None,
        },
        Subscription {
            rule_id: "org-scoped".into(),
            active: true,
            pinned_version: None,
        },
    ];
    let parent = [
        r("inherited", 1, json!({"propagateToChildren": true})),
        r("private-to-parent", 1, json!({})),
        r("pub", 1, json!({"propagateToChildren": true})),
    ];
    let team = RuleSources {
        organization: OrganizationKind::Team,
        own_rules: &own,
        subscriptions: &subscriptions,
        published_versions: &published,
        parent_rules: &parent,
    };
    assert_eq!(
        keys(&effective_rules(&team)),
        ["own@1", "pub@3", "pinned@1", "inherited@1"]
    );

    let root = RuleSources {
        organization: OrganizationKind::Root,
        ..team
    };
    assert_eq!(
        keys(&effective_rules(&root)),
        ["own@1", "pub@3", "pinned@1"]
    );

    let system = RuleSources {
        organization: OrganizationKind::System,
        ..team
    };
    assert!(effective_rules(&system).is_empty());
}

#[test]
fn a_pin_on_a_missing_version_falls_back_to_the_latest() {
    let published = [
        r("p", 1, json!({"scope": "published"})),
        r("p", 4, json!({"scope": "published"})),
    ];
    let subscriptions = [Subscription {
        rule_id: "p".into(),
        active: true,
        pinned_version: Some(3),
    }];
    let sources = RuleSources {
        organization: OrganizationKind::Root,
        own_rules: &[],
        subscriptions: &subscriptions,
        published_versions: &published,
        parent_rules: &[],
    };
    assert_eq!(keys(&effective_rules(&sources)), ["p@4"]);
}
