//! tenancy's behaviour, read against document 2 and SEMANTICS.md section 4.

// Test code: a panic is how a test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod gate;
mod properties;
mod roles_and_tables;

use std::collections::BTreeSet;

use chrono::{DateTime, TimeZone, Utc};
use tenancy::*;

pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap()
}

pub fn org(id: &str, parent: Option<&str>) -> Organization {
    Organization {
        id: id.into(),
        name: id.into(),
        parent_org_id: parent.map(Into::into),
        is_system: false,
    }
}

pub fn member(user: &str, org: &str, role: MembershipRole) -> Membership {
    Membership {
        user_id: user.into(),
        org_id: org.into(),
        role,
        active: true,
    }
}

pub fn role(name: &str, permissions: &[Permission]) -> Role {
    Role {
        id: name.into(),
        name: name.into(),
        permissions: permissions.iter().copied().collect::<BTreeSet<_>>(),
        built_in: false,
    }
}

pub fn user(id: &str) -> Principal {
    Principal {
        user_id: id.into(),
        super_admin: false,
        stepped_up_at: None,
    }
}
