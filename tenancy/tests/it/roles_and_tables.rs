//! The built-in Roles, the permission catalog, the escalation
//! guard, bootstrap and team nesting.

use super::*;
use Permission::*;

#[test]
fn the_catalog_and_what_organizations_may_assign() {
    let names: Vec<&str> = Permission::ALL.iter().map(|p| p.as_str()).collect();
    for named in [
        "pipelines:write",
        "pipelines:publish",
        "plugins:publish",
        "members:manage",
        "roles:manage",
        "compliance:write",
        "billing:manage",
        "reports:rollup",
        "reports:read",
        "org:settings",
        "invitations:manage",
        "registry:read",
        "registry:write",
        "plugins:write",
        "compliance:read",
        "compliance:review",
        "audit:read",
        "messages:manage",
        "dashboards:write",
        "alerts:write",
    ] {
        assert!(names.contains(&named), "{named}");
        assert_eq!(Permission::parse(named).unwrap().as_str(), named);
    }
    assert_eq!(Permission::org_assignable().count(), 18);
    assert!(MessagesManage.is_org_assignable());
    assert!(DashboardsWrite.is_org_assignable() && AlertsWrite.is_org_assignable());
    assert!(!RegistryRead.is_org_assignable() && !RegistryWrite.is_org_assignable());
    assert!(Permission::parse("Pipelines:Write").is_err());
    let json: Vec<Permission> = serde_json::from_str(r#"["audit:read","reports:read"]"#).unwrap();
    assert_eq!(json, [AuditRead, ReportsRead]);
    assert!(serde_json::from_str::<Permission>(r#""root:all""#).is_err());
}

#[test]
fn built_in_roles() {
    let table: Vec<(&str, BTreeSet<Permission>)> = vec![
        ("Admin", Permission::org_assignable().collect()),
        (
            "Member",
            [PipelinesWrite, PluginsWrite, ComplianceRead, ReportsRead].into(),
        ),
        ("Compliance Viewer", [ComplianceRead].into()),
        (
            "Compliance Editor",
            [ComplianceRead, ComplianceWrite].into(),
        ),
        (
            "Compliance Admin",
            [ComplianceRead, ComplianceWrite, ComplianceReview].into(),
        ),
    ];
    assert_eq!(builtin_roles(false), table);
    let mut system = table;
    system.push(("Super Admin", Permission::ALL.into_iter().collect()));
    assert_eq!(builtin_roles(true), system);
    assert!(
        !builtin_roles(false)[0].1.contains(&RegistryWrite),
        "Admin never holds registry:*"
    );
}

#[test]
fn the_escalation_guard() {
    let held: BTreeSet<Permission> = [PipelinesWrite, RolesManage, ComplianceRead].into();
    let author = Author {
        super_admin: false,
        permissions: &held,
    };
    assert!(guard_role_definition(author, &[PipelinesWrite, ComplianceRead].into()).is_ok());
    let err = guard_role_definition(author, &[PipelinesWrite, BillingManage, OrgSettings].into())
        .unwrap_err();
    assert_eq!(
        err,
        TenancyError::Escalation(vec![BillingManage, OrgSettings])
    );
    let super_author = Author {
        super_admin: true,
        permissions: &held,
    };
    let err = guard_role_definition(super_author, &[RegistryRead].into()).unwrap_err();
    assert_eq!(
        err,
        TenancyError::NotAssignable(vec![RegistryRead]),
        "not even a super-admin puts registry:* in a custom role"
    );
    // Assignment: hand out only what you hold.
    assert!(guard_role_assignment(author, &role("viewer", &[ComplianceRead])).is_ok());
    assert!(
        guard_role_assignment(author, &role("admin", &[ComplianceRead, MembersManage])).is_err()
    );
    assert!(guard_role_assignment(super_author, &role("sa", &Permission::ALL)).is_ok());
    let mut builtin = role("Admin", &[]);
    builtin.built_in = true;
    assert_eq!(
        guard_role_mutation(&builtin).unwrap_err(),
        TenancyError::BuiltInRole("Admin".to_owned())
    );
}

#[test]
fn bootstrap_and_team_nesting() {
    let list = BootstrapList::parse("root@example.com");
    assert!(check_bootstrap(&list, "ROOT@example.com", false).is_ok());
    assert_eq!(
        check_bootstrap(&list, "eve@example.com", false),
        Err(TenancyError::NotBootstrapIdentifier)
    );
    assert_eq!(
        check_bootstrap(&list, "root@example.com", true),
        Err(TenancyError::SystemExists)
    );
    assert_eq!(
        check_bootstrap(&BootstrapList::parse(""), "", false),
        Err(TenancyError::NotBootstrapIdentifier)
    );
    assert!(is_reserved_name(" System "));
    assert!(check_team_parent(&org("root", None)).is_ok());
    assert_eq!(
        check_team_parent(&org("team", Some("root"))),
        Err(TenancyError::TeamUnderTeam)
    );
    let system = Organization {
        is_system: true,
        ..org("sys", None)
    };
    assert_eq!(
        check_team_parent(&system),
        Err(TenancyError::TeamUnderSystem)
    );
}
