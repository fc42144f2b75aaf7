//! tenancy: `authorize` for a member holding five Roles.

use std::collections::BTreeSet;

use chrono::{TimeZone, Utc};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use tenancy::*;

fn bench(c: &mut Criterion) {
    let org = Organization {
        id: "org-acme".into(),
        name: "acme".into(),
        parent_org_id: None,
        is_system: false,
    };
    let membership = Membership {
        user_id: "bob".into(),
        org_id: "org-acme".into(),
        role: MembershipRole::Member,
        active: true,
    };
    let roles: Vec<Role> = builtin_roles(false)
        .into_iter()
        .enumerate()
        .map(|(i, (name, permissions))| Role {
            id: i.to_string(),
            name: name.into(),
            permissions,
            built_in: true,
        })
        .chain([Role {
            id: "custom".into(),
            name: "Release Managers".into(),
            permissions: BTreeSet::from([Permission::PipelinesPublish]),
            built_in: false,
        }])
        .skip(1) // five Roles, not including Admin
        .collect();
    let access = OrgAccess {
        organization: Some(&org),
        membership: Some(&membership),
        roles: &roles,
        parent_membership: None,
        parent_roles: &[],
    };
    let bob = Principal {
        user_id: "bob".into(),
        super_admin: false,
        stepped_up_at: None,
    };
    let now = Utc
        .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default();
    let publish = Requirement {
        permission: Some(Permission::PipelinesPublish),
        super_admin_only: false,
        changes_state: true,
        step_up: false,
    };
    c.bench_function("tenancy/authorize_5_roles", |b| {
        b.iter(|| {
            authorize(
                black_box(&bob),
                black_box(&access),
                publish,
                now,
                DEFAULT_STEP_UP_WINDOW,
            )
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
