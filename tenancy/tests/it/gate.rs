//! The permission gate and tenant scope.

use super::*;
use chrono::Duration;
use Permission::*;

fn requirement(permission: Option<Permission>) -> Requirement {
    Requirement {
        permission,
        super_admin_only: false,
        changes_state: true,
        step_up: false,
    }
}

#[test]
fn members_pass_with_a_granting_role_and_the_decision_says_which() {
    let o = org("o1", None);
    let m = member("bob", "o1", MembershipRole::Member);
    let roles = [
        role("Member", &[PipelinesWrite, ReportsRead]),
        role("Pipeline Publisher", &[PipelinesWrite, PipelinesPublish]),
    ];
    let access = OrgAccess {
        organization: Some(&o),
        membership: Some(&m),
        roles: &roles,
        parent_membership: None,
        parent_roles: &[],
    };
    let d = authorize(
        &user("bob"),
        &access,
        requirement(Some(PipelinesWrite)),
        now(),
        DEFAULT_STEP_UP_WINDOW,
    );
    assert!(d.allowed);
    assert_eq!(d.reason, Reason::Granted);
    assert_eq!(d.granted_by, ["Member", "Pipeline Publisher"]);
    assert_eq!(d.standing, Some(Standing::Member));

    let d = authorize(
        &user("bob"),
        &access,
        requirement(Some(RolesManage)),
        now(),
        DEFAULT_STEP_UP_WINDOW,
    );
    assert!(!d.allowed);
    assert_eq!(
        (d.reason, d.missing, d.audit_as_denied),
        (Reason::PermissionMissing, Some(RolesManage), true)
    );
    let read = Requirement {
        changes_state: false,
        ..requirement(Some(RolesManage))
    };
    assert!(
        !authorize(&user("bob"), &access, read, now(), DEFAULT_STEP_UP_WINDOW).audit_as_denied,
        "reads are not audited"
    );

    let d = authorize(
        &user("bob"),
        &access,
        requirement(None),
        now(),
        DEFAULT_STEP_UP_WINDOW,
    );
    assert_eq!((d.allowed, d.reason), (true, Reason::Membership));
}

#[test]
fn no_baseline_a_member_without_roles_holds_nothing() {
    let o = org("o1", None);
    let m = member("bob", "o1", MembershipRole::Owner);
    let access = OrgAccess {
        organization: Some(&o),
        membership: Some(&m),
        roles: &[],
        parent_membership: None,
        parent_roles: &[],
    };
    assert!(
        !authorize(
            &user("bob"),
            &access,
            requirement(Some(ReportsRead)),
            now(),
            DEFAULT_STEP_UP_WINDOW
        )
        .allowed
    );
}

#[test]
fn strangers_deactivated_members_and_missing_organizations_get_the_same_answer() {
    let o = org("o1", None);
    let stranger = OrgAccess {
        organization: Some(&o),
        membership: None,
        roles: &[],
        parent_membership: None,
        parent_roles: &[],
    };
    let missing = OrgAccess {
        organization: None,
        ..stranger
    };
    let mut inactive_m = member("bob", "o1", MembershipRole::Admin);
    inactive_m.active = false;
    let admin_roles = [role(
        "Admin",
        &Permission::org_assignable().collect::<Vec<_>>(),
    )];
    let inactive = OrgAccess {
        membership: Some(&inactive_m),
        roles: &admin_roles,
        ..stranger
    };
    let someone_elses_m = member("carol", "o1", MembershipRole::Admin);
    let wrong_user = OrgAccess {
        membership: Some(&someone_elses_m),
        roles: &admin_roles,
        ..stranger
    };
    for access in [stranger, missing, inactive, wrong_user] {
        assert_eq!(access.standing(&user("bob")), Err(NotYourOrganization));
        let d = authorize(
            &user("bob"),
            &access,
            requirement(Some(ReportsRead)),
            now(),
            DEFAULT_STEP_UP_WINDOW,
        );
        assert_eq!(
            (d.allowed, d.reason, d.standing),
            (false, Reason::NotYourOrganization, None)
        );
    }
}

#[test]
fn managers_of_the_parent_act_on_its_teams_with_their_parent_roles() {
    let team = org("team", Some("root"));
    let admin_of_root = member("ann", "root", MembershipRole::Admin);
    let member_of_root = member("max", "root", MembershipRole::Member);
    let parent_roles = [role("Admin", &[MembersManage, PipelinesWrite])];
    let managed = OrgAccess {
        organization: Some(&team),
        membership: None,
        roles: &[],
        parent_membership: Some(&admin_of_root),
        parent_roles: &parent_roles,
    };
    assert_eq!(managed.standing(&user("ann")), Ok(Standing::Manager));
    let d = authorize(
        &user("ann"),
        &managed,
        requirement(Some(MembersManage)),
        now(),
        DEFAULT_STEP_UP_WINDOW,
    );
    assert!(d.allowed && d.granted_by == ["Admin"]);
    assert!(
        !authorize(
            &user("ann"),
            &managed,
            requirement(Some(BillingManage)),
            now(),
            DEFAULT_STEP_UP_WINDOW
        )
        .allowed
    );
    // A plain member of the parent is not a manager of its teams.
    let not_managed = OrgAccess {
        parent_membership: Some(&member_of_root),
        ..managed
    };
    assert_eq!(not_managed.standing(&user("max")), Err(NotYourOrganization));
    // Management does not reach a root organization from a membership elsewhere.
    let root = org("other-root", None);
    let elsewhere = OrgAccess {
        organization: Some(&root),
        ..managed
    };
    assert_eq!(elsewhere.standing(&user("ann")), Err(NotYourOrganization));
}

#[test]
fn super_admins_pass_everything_and_only_they_pass_super_admin_operations() {
    let o = org("o1", None);
    let m = member("bob", "o1", MembershipRole::Owner);
    let all = [role(
        "Admin",
        &Permission::org_assignable().collect::<Vec<_>>(),
    )];
    let access = OrgAccess {
        organization: Some(&o),
        membership: Some(&m),
        roles: &all,
        parent_membership: None,
        parent_roles: &[],
    };
    let system_admin = Requirement {
        super_admin_only: true,
        ..requirement(None)
    };
    let d = authorize(
        &user("bob"),
        &access,
        system_admin,
        now(),
        DEFAULT_STEP_UP_WINDOW,
    );
    assert_eq!((d.allowed, d.reason), (false, Reason::SuperAdminOnly));
    let root = Principal {
        super_admin: true,
        ..user("root")
    };
    let nowhere = OrgAccess {
        membership: None,
        roles: &[],
        ..access
    };
    for r in [system_admin, requirement(Some(RegistryWrite))] {
        let d = authorize(&root, &nowhere, r, now(), DEFAULT_STEP_UP_WINDOW);
        assert_eq!(
            (d.allowed, d.reason, d.standing),
            (true, Reason::SuperAdmin, Some(Standing::SuperAdmin))
        );
    }
}

#[test]
fn step_up_must_be_fresh() {
    let o = org("o1", None);
    let access = OrgAccess {
        organization: Some(&o),
        membership: None,
        roles: &[],
        parent_membership: None,
        parent_roles: &[],
    };
    let delete = Requirement {
        super_admin_only: true,
        step_up: true,
        ..requirement(None)
    };
    let at = |offset: Option<i64>| Principal {
        super_admin: true,
        stepped_up_at: offset.map(|s| now() - Duration::seconds(s)),
        ..user("root")
    };
    let cases = [
        (None, false, StepUp::Missing),
        (Some(0), true, StepUp::Fresh),
        (Some(300), true, StepUp::Fresh),
        (Some(301), false, StepUp::Stale),
        (Some(-60), false, StepUp::Stale),
    ];
    for (offset, allowed, status) in cases {
        let d = authorize(&at(offset), &access, delete, now(), DEFAULT_STEP_UP_WINDOW);
        assert_eq!((d.allowed, d.step_up), (allowed, status), "{offset:?}");
        if !allowed {
            assert_eq!(d.reason, Reason::StepUpRequired);
            assert!(d.audit_as_denied);
        }
    }
    let longer = authorize(
        &at(Some(600)),
        &access,
        delete,
        now(),
        Duration::minutes(15),
    );
    assert!(longer.allowed, "the window is configurable");
}
