//! The action catalog and its naming rule.

use audit_chain::*;

#[test]
fn every_catalogued_action_follows_the_naming_rule() {
    for action in platform_actions() {
        validate_action_name(action).unwrap_or_else(|e| panic!("{e}"));
    }
    // Document 3 lists 59 platform-only actions and 43 that services may post; the
    // platform adds its own, after the naming rule: the image registry's copy and
    // delete, an announcement's edit. Services cannot post them.
    assert_eq!(
        (PLATFORM_AUTHORITY_ACTIONS.len(), REMOTE_ALLOW_LIST.len()),
        (62, 43)
    );
    for added in [
        "registry.tag.copy",
        "registry.tag.delete",
        "message.announcement.update",
    ] {
        assert!(is_platform_authority(added));
        assert!(matches!(
            check_remote_action(added),
            Err(ActionError::PlatformAuthority(_))
        ));
    }
}

#[test]
fn the_allow_list_is_a_subset_of_the_platform_set() {
    for action in REMOTE_ALLOW_LIST {
        assert!(is_platform_action(action), "{action}");
        assert!(check_remote_action(action).is_ok());
    }
    let unique: std::collections::HashSet<_> = platform_actions().collect();
    assert_eq!(
        unique.len(),
        platform_actions().count(),
        "an action is listed twice"
    );
}

#[test]
fn platform_authority_actions_cannot_be_posted() {
    for action in [
        "user.login",
        "org.ownership.transfer",
        "admin.superadmin.grant",
        "admin.impersonate.start",
        "org.create",
    ] {
        assert!(is_platform_authority(action), "{action}");
        assert_eq!(
            check_remote_action(action),
            Err(ActionError::PlatformAuthority(action.into()))
        );
    }
    assert!(!is_platform_authority("authz.denied"));
    assert_eq!(
        check_remote_action("made.up.action"),
        Err(ActionError::Unknown("made.up.action".into()))
    );
}

#[test]
fn malformed_names_are_refused() {
    for bad in [
        "",
        "login",
        "a..b",
        ".a.b",
        "a.b.",
        "a.1b",
        "a.b c",
        "a.b.c.d.e.f",
        "a/b.c",
        "é.b",
    ] {
        assert!(
            matches!(validate_action_name(bad), Err(ActionError::Malformed(_))),
            "{bad:?}"
        );
    }
    let long = format!("a.{}", "b".repeat(200));
    assert!(validate_action_name(&long).is_err());
}
