//! Laws of roles and the gate (proptest).

use super::*;
use proptest::prelude::*;

fn permissions() -> impl Strategy<Value = BTreeSet<Permission>> {
    prop::collection::btree_set(prop::sample::select(Permission::ALL.to_vec()), 0..10)
}

#[derive(Debug, Clone)]
enum Op {
    Create(BTreeSet<Permission>),
    Update(usize, BTreeSet<Permission>),
    Assign(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        permissions().prop_map(Op::Create),
        (0usize..8, permissions()).prop_map(|(r, p)| Op::Update(r, p)),
        (0usize..8, 0usize..4).prop_map(|(r, u)| Op::Assign(r, u)),
    ]
}

proptest! {
    #[test]
    fn no_sequence_of_role_changes_hands_out_what_the_author_lacks(
        held in permissions(), ops in prop::collection::vec(op(), 0..30),
    ) {
        let author = Author { super_admin: false, permissions: &held };
        let mut roles: Vec<Role> = Vec::new();
        let mut assigned: Vec<Vec<usize>> = vec![Vec::new(); 4];
        for op in ops {
            match op {
                Op::Create(p) => {
                    if guard_role_definition(author, &p).is_ok() {
                        roles.push(Role { id: roles.len().to_string(), name: format!("r{}", roles.len()), permissions: p, built_in: false });
                    }
                }
                Op::Update(r, p) => {
                    if let Some(role) = roles.get_mut(r) {
                        if guard_role_mutation(role).is_ok() && guard_role_definition(author, &p).is_ok() {
                            role.permissions = p;
                        }
                    }
                }
                Op::Assign(r, u) => {
                    if let Some(role) = roles.get(r) {
                        if guard_role_assignment(author, role).is_ok() {
                            assigned[u].push(r);
                        }
                    }
                }
            }
        }
        // Whatever any user now holds through these roles, the author held.
        for user_roles in &assigned {
            let granted = union_of(user_roles.iter().filter_map(|&r| roles.get(r)));
            prop_assert!(granted.is_subset(&held), "{:?} not within {:?}", granted, held);
            prop_assert!(granted.iter().all(|p| p.is_org_assignable()));
        }
    }

    #[test]
    fn union_is_monotone(a in permissions(), b in permissions(), c in permissions()) {
        let roles = [role("a", &a.iter().copied().collect::<Vec<_>>()), role("b", &b.iter().copied().collect::<Vec<_>>())];
        let more = role("c", &c.iter().copied().collect::<Vec<_>>());
        let before = union_of(&roles);
        let after = union_of(roles.iter().chain([&more]));
        prop_assert!(before.is_subset(&after));
        prop_assert_eq!(after, a.union(&b).chain(c.iter()).copied().collect::<BTreeSet<_>>());
    }

    #[test]
    fn a_non_member_is_refused_everywhere_but_the_teams_they_manage(
        parent_role in prop::sample::select(vec![MembershipRole::Owner, MembershipRole::Admin, MembershipRole::Member]),
        active in any::<bool>(),
        team_of_managed in any::<bool>(),
        wanted in prop::option::of(prop::sample::select(Permission::ALL.to_vec())),
    ) {
        let all: Vec<Permission> = Permission::ALL.to_vec();
        let roles = [role("everything", &all)];
        let parent = Membership { active, ..member("eve", "root", parent_role) };
        let target = if team_of_managed { org("team", Some("root")) } else { org("elsewhere", Some("other-root")) };
        let access = OrgAccess { organization: Some(&target), membership: None, roles: &roles, parent_membership: Some(&parent), parent_roles: &roles };
        let d = authorize(&user("eve"), &access, Requirement { permission: wanted, super_admin_only: false, changes_state: true, step_up: false }, now(), DEFAULT_STEP_UP_WINDOW);
        let manages = team_of_managed && active && parent_role != MembershipRole::Member;
        prop_assert_eq!(d.allowed, manages);
        if !manages {
            prop_assert_eq!(d.reason, Reason::NotYourOrganization);
        }
    }
}
