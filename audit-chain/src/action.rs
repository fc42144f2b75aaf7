//! The action catalog of document 3: the platform action set, the remote allow-list,
//! and the naming rule `<area>.<entity>.<verb>`.

/// The platform-authority actions: recorded only by the platform itself, never
/// accepted from a service. With [`REMOTE_ALLOW_LIST`] they make the platform action
/// set.
pub const PLATFORM_AUTHORITY_ACTIONS: &[&str] = &[
    // User lifecycle.
    "user.register",
    "user.login",
    "user.login.failed",
    "user.logout",
    "user.delete",
    "user.profile.update",
    "user.password.change",
    "user.email.verified",
    "user.token.create",
    "user.tokens.revoke-all",
    // Organization.
    "org.create",
    "org.update",
    "org.soft_delete",
    "org.restore",
    "org.switch",
    "org.member.add",
    "org.member.remove",
    "org.member.deactivate",
    "org.member.activate",
    "org.ownership.transfer",
    // Invitations.
    "invitation.send",
    "invitation.accept",
    "invitation.revoke",
    "invitation.resend",
    // Permission roles.
    "org.role.create",
    "org.role.update",
    "org.role.delete",
    "org.role.member.add",
    "org.role.member.remove",
    // Dashboards and alerts.
    "dashboard.create",
    "dashboard.update",
    "dashboard.delete",
    "dashboard.clone",
    "alert.destination.create",
    "alert.destination.update",
    "alert.destination.delete",
    "alert.destination.test",
    "alert.rule.create",
    "alert.rule.update",
    "alert.rule.delete",
    // Administration.
    "admin.user.create",
    "admin.user.update",
    "admin.user.delete",
    "admin.org.delete",
    "admin.org.export",
    "admin.org-idp.upsert",
    "admin.org-idp.delete",
    "admin.superadmin.grant",
    "admin.superadmin.revoke",
    "admin.org.kms-config.upsert",
    "admin.org.kms-config.delete",
    "org.kms.orphaned",
    "admin.org.tier.update",
    "admin.org.seatLimit.update",
    "admin.org.quota.override",
    "admin.org.ai-config.update",
    "admin.user.features.update",
    "admin.impersonate.start",
    "admin.org.namespace.render",
    // The image registry's copy and delete, made by this platform itself: named
    // after document 3's registry log events (registry.tag.copy, registry.tag.delete).
    "registry.tag.copy",
    "registry.tag.delete",
    // An announcement's edit (document 3 audits its creation and deletion).
    "message.announcement.update",
];

/// The actions a remote service may post through the ingest endpoint.
pub const REMOTE_ALLOW_LIST: &[&str] = &[
    "plugin.build.completed",
    "plugin.build.failed",
    "plugin.build.timeout",
    "plugin.delete",
    "plugin.upload",
    "plugin.deploy",
    "plugin.bulk.update",
    "plugin.bulk.delete",
    "plugin.dlq.purge",
    "pipeline.create",
    "pipeline.update",
    "pipeline.delete",
    "pipeline.execution.start",
    "pipeline.execution.cancel",
    "pipeline.registry.register",
    "pipeline.registry.deregister",
    "quota.reset",
    "quota.limit.update",
    "quota.delete",
    "compliance.exemption.approve",
    "compliance.exemption.revoke",
    "compliance.rule.toggle",
    "compliance.rule.create",
    "compliance.rule.update",
    "compliance.rule.delete",
    "compliance.policy.create",
    "compliance.policy.update",
    "compliance.policy.delete",
    "compliance.scan-schedule.create",
    "compliance.scan-schedule.update",
    "compliance.scan-schedule.delete",
    "compliance.template.apply",
    "compliance.scan.cancel",
    "registry.gc",
    "registry.image.delete",
    "message.announcement.create",
    "message.delete",
    "billing.subscription.cancel",
    "billing.subscription.delete",
    "billing.tier.override",
    "billing.addon.add",
    "billing.addon.remove",
    "authz.denied",
];

/// The most segments and characters an action name may have.
const MAX_SEGMENTS: usize = 5;
const MAX_LENGTH: usize = 128;

/// Why an action name or an ingest was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    /// Not of the form `<area>.<entity>.<verb>`.
    #[error("action `{0}` is not a dot-separated name such as `area.entity.verb`")]
    Malformed(String),
    /// Well-formed, but not in the platform action set.
    #[error("action `{0}` is not in the platform action set")]
    Unknown(String),
    /// A platform-authority action: only the platform itself records it.
    #[error("action `{0}` is a platform-authority action that a service cannot post")]
    PlatformAuthority(String),
}

/// Checks the naming rule: two to five dot-separated segments, each starting with
/// a letter and made of letters, digits, `-` and `_` (the catalog itself uses
/// `org.soft_delete`, `user.tokens.revoke-all` and `admin.org.seatLimit.update`).
///
/// ```
/// use audit_chain::validate_action_name;
/// assert!(validate_action_name("compliance.rule.create").is_ok());
/// assert!(validate_action_name("compliance..create").is_err());
/// ```
pub fn validate_action_name(action: &str) -> Result<(), ActionError> {
    let malformed = || ActionError::Malformed(action.to_owned());
    if action.len() > MAX_LENGTH {
        return Err(malformed());
    }
    // One pass over the bytes (this runs for every event sealed): each segment starts
    // with an ASCII letter and goes on with letters, digits, `-` or `_`.
    let mut segments = 1;
    let mut at_start = true;
    for b in action.bytes() {
        let fits = if b == b'.' {
            segments += 1;
            let was_empty = at_start;
            at_start = true;
            !was_empty
        } else if at_start {
            at_start = false;
            b.is_ascii_alphabetic()
        } else {
            b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
        };
        if !fits {
            return Err(malformed());
        }
    }
    if at_start || !(2..=MAX_SEGMENTS).contains(&segments) {
        return Err(malformed());
    }
    Ok(())
}

/// The platform action set: every action the platform records.
pub fn platform_actions() -> impl Iterator<Item = &'static str> {
    PLATFORM_AUTHORITY_ACTIONS
        .iter()
        .chain(REMOTE_ALLOW_LIST)
        .copied()
}

/// Whether `action` is in the platform action set.
pub fn is_platform_action(action: &str) -> bool {
    PLATFORM_AUTHORITY_ACTIONS.contains(&action) || REMOTE_ALLOW_LIST.contains(&action)
}

/// Whether `action` is one that only the platform records (in the platform action
/// set, not on the remote allow-list): `user.login`, `org.ownership.transfer`,
/// `admin.superadmin.grant` and the like.
pub fn is_platform_authority(action: &str) -> bool {
    PLATFORM_AUTHORITY_ACTIONS.contains(&action)
}

/// Whether a remote service may post `action`; the error says why not.
///
/// ```
/// use audit_chain::{check_remote_action, ActionError};
/// assert!(check_remote_action("plugin.upload").is_ok());
/// assert!(matches!(check_remote_action("user.login"), Err(ActionError::PlatformAuthority(_))));
/// ```
pub fn check_remote_action(action: &str) -> Result<(), ActionError> {
    validate_action_name(action)?;
    if REMOTE_ALLOW_LIST.contains(&action) {
        Ok(())
    } else if is_platform_action(action) {
        Err(ActionError::PlatformAuthority(action.to_owned()))
    } else {
        Err(ActionError::Unknown(action.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The naming rule as it reads: split, count, check each segment.
    fn by_the_rule(action: &str) -> bool {
        let segments: Vec<&str> = action.split('.').collect();
        action.len() <= MAX_LENGTH
            && (2..=MAX_SEGMENTS).contains(&segments.len())
            && segments.iter().all(|segment| {
                let mut chars = segment.chars();
                chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                    && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            })
    }

    #[test]
    fn names_follow_the_rule() {
        let cases = [
            ("org.soft_delete", true),
            ("user.tokens.revoke-all", true),
            ("admin.org.seatLimit.update", true),
            ("a.b.c.d.e", true),
            ("a.b.c.d.e.f", false),
            ("compliance", false),
            ("", false),
            (".a", false),
            ("a.", false),
            ("a..b", false),
            ("a.1b", false),
            ("a.b1", true),
            ("a.-b", false),
            ("a.b c", false),
            ("a.é", false),
            ("é.a", false),
        ];
        for (action, valid) in cases {
            assert_eq!(validate_action_name(action).is_ok(), valid, "{action:?}");
            assert_eq!(by_the_rule(action), valid, "{action:?}");
        }
    }

    proptest! {
        #[test]
        fn the_one_pass_check_is_the_rule(action in "[a-c1_. é-]{0,12}") {
            prop_assert_eq!(validate_action_name(&action).is_ok(), by_the_rule(&action));
        }
    }
}
