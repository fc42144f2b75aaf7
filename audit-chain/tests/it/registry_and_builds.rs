//! Registry log events and the terminal build outcome.

use audit_chain::*;
use serde_json::Value;

#[test]
fn promotion_to_system_is_computed_from_the_target_repository() {
    let copy = |target: &str| TagCopy {
        actor: "admin".into(),
        source: "acme/app:1".into(),
        target: target.into(),
        source_digest: "sha256:a".into(),
        target_digest: "sha256:a".into(),
        mounted: Mounted {
            manifests: 1,
            blobs: 2,
        },
    };
    assert!(copy("system/app:1").is_promotion_to_system());
    assert!(copy("system/app@sha256:abc").is_promotion_to_system());
    assert!(!copy("acme/system/app:1").is_promotion_to_system());
    assert!(!copy("systems/app:1").is_promotion_to_system());
    assert_eq!(
        repository_of("registry:5000/system/app"),
        "registry:5000/system/app"
    );
    assert_eq!(
        repository_of("registry:5000/system/app:2"),
        "registry:5000/system/app"
    );
}

#[test]
fn the_delete_log_line_has_the_documented_fields() {
    let line = RegistryEvent::TagDelete(TagDelete {
        actor: "admin".into(),
        repo: "acme/app".into(),
        reference: "1.0".into(),
        digest: "sha256:b".into(),
    })
    .to_log_line("image-registry");
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["event"], "registry.tag.delete");
    assert_eq!(v["eventCategory"], "audit");
    assert_eq!(v["service_name"], "image-registry");
    assert_eq!(v["ref"], "1.0");
    assert_eq!(v["repo"], "acme/app");
    assert_eq!(v["digest"], "sha256:b");
    assert!(v.get("isPromotionToSystem").is_none());
}

#[test]
fn a_build_has_exactly_one_terminal_outcome() {
    use Attempt::*;
    let run = |attempts: &[Attempt]| {
        let mut build = BuildOutcome::new();
        attempts
            .iter()
            .map(|a| build.record(*a))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(&[Succeeded]), [Ok(Some("plugin.build.completed"))]);
    assert_eq!(
        run(&[
            Failed {
                final_attempt: false
            },
            Failed {
                final_attempt: true
            },
            Failed {
                final_attempt: false
            },
            Succeeded
        ]),
        [
            Ok(None),
            Ok(None),
            Ok(None),
            Ok(Some("plugin.build.completed"))
        ]
    );
    assert_eq!(
        run(&[
            TimedOut {
                final_attempt: true
            },
            Failed {
                final_attempt: true
            }
        ]),
        [Ok(None), Ok(Some("plugin.build.failed"))]
    );
    assert_eq!(
        run(&[
            Failed {
                final_attempt: true
            },
            TimedOut {
                final_attempt: true
            },
            Succeeded
        ]),
        [
            Ok(None),
            Ok(Some("plugin.build.timeout")),
            Err(AlreadyEnded(BuildState::TimedOut))
        ]
    );
}

#[test]
fn the_five_metric_names() {
    assert_eq!(
        metrics::ALL,
        [
            "audit_emitted_total",
            "audit_dropped_total",
            "audit_spool_enqueued_total",
            "audit_spool_dropped_total",
            "audit_spool_redelivered_total"
        ]
    );
}
