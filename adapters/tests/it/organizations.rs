//! Organizations and teams: creation, bootstrap, step-up, isolation, export.

use super::*;
use crate::api::{pagination, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::{Organization, OrganizationExport};
use entitlements::Tier;

async fn the_creator_owns_the_organization_with_the_admin_role(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let read: Organization = app
        .by(&alice)
        .get(format!("/api/organization/{org}"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(
        (read.owner_id.as_str(), read.tier),
        ("alice", Tier::Developer)
    );
    let Answer(_, members) = app
        .by(&alice)
        .get(format!("/api/organization/{org}/members"))
        .await;
    assert_eq!(members["members"][0]["role"], "owner");
    let Answer(_, roles) = app
        .by(&alice)
        .get(format!(
            "/api/organization/{org}/roles?limit=100&sortOrder=asc"
        ))
        .await;
    let names: Vec<&str> = roles["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "Admin",
            "Compliance Admin",
            "Compliance Editor",
            "Compliance Viewer",
            "Member"
        ]
    );
    let admin = roles["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "Admin")
        .unwrap();
    assert_eq!(admin["members"], json!(["alice"]));
    assert!(!admin["permissions"]
        .as_array()
        .unwrap()
        .contains(&json!("registry:write")));
    assert_eq!(app.audited("org.create").await.len(), 1);
    let Answer(status, body) = app
        .by(&alice)
        .post("/api/organization")
        .json(json!({"name": "ACME"}))
        .await;
    assert_eq!(
        code(status, &body),
        ErrorCode::Conflict,
        "names are unique, whatever the case"
    );
}

async fn bootstrap_of_the_system_organization(app: &TestApp) {
    let eve = app.token("eve", "eve@example.com");
    let Answer(status, body) = app
        .by(&eve)
        .post("/api/organization")
        .json(json!({"name": "system"}))
        .await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::FORBIDDEN, ErrorCode::Forbidden)
    );
    let root = app.token("root", "Root@Example.com");
    let system: Organization = app
        .by(&root)
        .post("/api/organization")
        .json(json!({"name": "System"}))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!((system.is_system, system.name.as_str()), (true, "system"));
    app.by(&root)
        .post("/api/organization")
        .json(json!({"name": "system"}))
        .await
        .refused(ErrorCode::Conflict);
    // The bootstrap identifier is now a super-admin: it sees any organization.
    let acme = app.org("alice", "acme").await;
    app.by(&root)
        .get(format!("/api/organization/{acme}"))
        .await
        .expect(StatusCode::OK);
    let renamed: Organization = app
        .by(&root)
        .put(format!("/api/organization/{acme}"))
        .json(json!({"displayName": "Acme Corp"}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(renamed.display_name.as_deref(), Some("Acme Corp"));
    let alice = app.token("alice", "alice@example.com");
    let Answer(status, body) = app
        .by(&alice)
        .put(format!("/api/organization/{acme}"))
        .json(json!({"displayName": "Mine"}))
        .await;
    assert_eq!(
        code(status, &body),
        ErrorCode::Forbidden,
        "updating an organization is for super-admins"
    );
}

async fn teams_nest_one_level_and_managers_reach_them(app: &TestApp) {
    let root = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let team = app
        .by(&alice)
        .post("/api/organization")
        .json(json!({"name": "platform", "parentOrgId": root}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    let Answer(status, body) = app
        .by(&alice)
        .post("/api/organization")
        .json(json!({"name": "sub", "parentOrgId": team}))
        .await;
    assert_eq!(
        code(status, &body),
        ErrorCode::ValidationError,
        "no team under a team"
    );
    let Answer(_, body) = app
        .by(&alice)
        .get(format!("/api/organization/{root}/teams"))
        .await;
    assert_eq!(body["teams"][0]["id"], team.as_str());
    assert_eq!(pagination(&body).total, 1);

    // Bob is a plain member of the root: he neither manages the team nor sees it.
    app.by(&alice)
        .post(format!("/api/organization/{root}/members"))
        .json(json!({"userId": "bob"}))
        .await;
    let bob = app.token("bob", "bob@example.com");
    app.by(&bob)
        .get(format!("/api/organization/{team}"))
        .await
        .refused(ErrorCode::NotFound);
    let Answer(status, body) = app
        .by(&bob)
        .post("/api/organization")
        .json(json!({"name": "rogue", "parentOrgId": root}))
        .await;
    assert_eq!(
        code(status, &body),
        ErrorCode::Forbidden,
        "a team needs org:settings in its parent"
    );

    // Carol is an admin of the root: she manages the team without being a member.
    app.by(&alice)
        .post(format!("/api/organization/{root}/members"))
        .json(json!({"userId": "carol", "role": "admin"}))
        .await;
    let carol = app.token("carol", "carol@example.com");
    app.by(&carol)
        .get(format!("/api/organization/{team}/members"))
        .await
        .expect(StatusCode::OK);

    // Bulk-add: one user into the teams of this root, all or nothing.
    let team2 = app
        .by(&alice)
        .post("/api/organization")
        .json(json!({"name": "data", "parentOrgId": root}))
        .await
        .id();
    let other = app.org("zed", "elsewhere").await;
    app.by(&alice)
        .post(format!("/api/organization/{root}/members/bulk-add"))
        .json(json!({"userId": "dave", "teamIds": [team, other]}))
        .await
        .refused(ErrorCode::ValidationError);
    let Answer(_, members) = app
        .by(&alice)
        .get(format!("/api/organization/{team}/members"))
        .await;
    assert_eq!(pagination(&members).total, 1, "nothing was added");
    app.by(&alice)
        .post(format!("/api/organization/{root}/members/bulk-add"))
        .json(json!({"userId": "dave", "teamIds": [team, team2]}))
        .await
        .expect(StatusCode::CREATED);
    let dave = app.token("dave", "dave@example.com");
    for t in [&team, &team2] {
        app.by(&dave)
            .org(t)
            .get("/api/organization")
            .await
            .expect(StatusCode::OK);
    }
}

async fn step_up_guards_delete_tier_and_transfer(app: &TestApp) {
    let root = app.token("root", ROOT_EMAIL);
    app.by(&root)
        .post("/api/organization")
        .json(json!({"name": "system"}))
        .await;
    let acme = app.org("alice", "acme").await;
    let tier = format!("/api/organization/{acme}/tier");
    let cases = [
        (None, ErrorCode::StepUpRequired),
        (Some(app.step_up("root", 600)), ErrorCode::StepUpRequired),
        (Some(app.step_up("alice", 0)), ErrorCode::Unauthorized),
    ];
    for (step, expected) in cases {
        app.by(&root)
            .step_up_opt(step)
            .patch(&tier)
            .json(json!({"tier": "pro"}))
            .await
            .refused(expected);
    }
    let changed: Organization = app
        .by(&root)
        .step_up(app.step_up("root", 10))
        .patch(&tier)
        .json(json!({"tier": "team"}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(changed.tier, Tier::Team);
    app.by(&root)
        .step_up(app.step_up("root", 10))
        .patch(&tier)
        .json(json!({"tier": "gold"}))
        .await
        .refused(ErrorCode::ValidationError);
    assert_eq!(
        app.audited("admin.org.tier.update").await[0]
            .affected_org_id
            .as_deref(),
        Some(acme.as_str())
    );

    // Ownership transfer: org:settings and step-up.
    let alice = app.token("alice", "alice@example.com");
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": "bob"}))
        .await;
    let transfer = format!("/api/organization/{acme}/transfer-owner");
    app.by(&alice)
        .patch(&transfer)
        .json(json!({"userId": "bob"}))
        .await
        .refused(ErrorCode::StepUpRequired);
    app.by(&alice)
        .step_up(app.step_up("alice", 5))
        .patch(&transfer)
        .json(json!({"userId": "nobody"}))
        .await
        .refused(ErrorCode::ValidationError);
    let transferred: Organization = app
        .by(&alice)
        .step_up(app.step_up("alice", 5))
        .patch(&transfer)
        .json(json!({"userId": "bob"}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(transferred.owner_id, "bob");

    // Delete: super-admin and step-up; afterwards the organization is gone.
    let delete = format!("/api/organization/{acme}");
    app.by(&alice)
        .step_up(app.step_up("alice", 5))
        .delete(&delete)
        .await
        .refused(ErrorCode::Forbidden);
    app.by(&root)
        .delete(&delete)
        .await
        .refused(ErrorCode::StepUpRequired);
    app.by(&root)
        .step_up(app.step_up("root", 5))
        .delete(&delete)
        .await
        .expect(StatusCode::OK);
    app.by(&root)
        .get(&delete)
        .await
        .refused(ErrorCode::NotFound);
    assert!(
        !app.audited("authz.denied").await.is_empty(),
        "denied state changes are audited"
    );
}

async fn another_organization_cannot_see_change_or_delete(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let _globex = app.org("bob", "globex").await;
    let alice = app.token("alice", "alice@example.com");
    let bob = app.token("bob", "bob@example.com");
    let role = app
        .by(&alice)
        .post(format!("/api/organization/{acme}/roles"))
        .json(json!({"name": "readers", "permissions": ["reports:read"]}))
        .await
        .id();
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": "carol"}))
        .await;
    let before = app.audited("authz.denied").await.len();
    let attempts: Vec<(&str, String, Option<Value>)> = vec![
        ("GET", format!("/api/organization/{acme}"), None),
        ("GET", format!("/api/organization/{acme}/members"), None),
        ("GET", format!("/api/organization/{acme}/roles"), None),
        ("GET", format!("/api/organization/{acme}/teams"), None),
        ("GET", format!("/api/organization/{acme}/export"), None),
        (
            "POST",
            format!("/api/organization/{acme}/members"),
            Some(json!({"userId": "bob"})),
        ),
        (
            "DELETE",
            format!("/api/organization/{acme}/members/carol"),
            None,
        ),
        (
            "PATCH",
            format!("/api/organization/{acme}/members/carol/deactivate"),
            None,
        ),
        (
            "PUT",
            format!("/api/organization/{acme}/roles/{role}"),
            Some(json!({"name": "mine"})),
        ),
        (
            "DELETE",
            format!("/api/organization/{acme}/roles/{role}"),
            None,
        ),
        (
            "POST",
            format!("/api/organization/{acme}/roles/{role}/members"),
            Some(json!({"userId": "bob"})),
        ),
        (
            "POST",
            "/api/organization".to_owned(),
            Some(json!({"name": "sneaky-team", "parentOrgId": acme})),
        ),
    ];
    for (method, path, body) in attempts {
        let Answer(status, response) = app.by(&bob).method(method, &path).json_opt(body).await;
        assert_eq!(
            code(status, &response),
            ErrorCode::NotFound,
            "{method} {path}"
        );
    }
    assert!(
        app.audited("authz.denied").await.len() > before,
        "denied state changes are audited"
    );
    // Nothing changed.
    let Answer(_, members) = app
        .by(&alice)
        .get(format!("/api/organization/{acme}/members"))
        .await;
    assert_eq!(pagination(&members).total, 2);
    let Answer(status, body) = app
        .by(&alice)
        .get(format!("/api/organization/{acme}/roles?limit=100"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(body["roles"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"] == "readers"));
}

async fn export_holds_the_organizations_data(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": "bob"}))
        .await;
    app.by(&alice)
        .org(&acme)
        .post("/api/invitation/send")
        .json(json!({"email": "new@example.com"}))
        .await;
    let export: OrganizationExport = app
        .by(&alice)
        .get(format!("/api/organization/{acme}/export"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(export.organization.id, acme);
    assert_eq!(
        (
            export.members.len(),
            export.invitations.len(),
            export.roles.len()
        ),
        (2, 1, 5)
    );
    let bob = app.token("bob", "bob@example.com");
    let Answer(status, body) = app
        .by(&bob)
        .get(format!("/api/organization/{acme}/export"))
        .await;
    assert_eq!(
        code(status, &body),
        ErrorCode::Forbidden,
        "a member lacks org:settings"
    );
}

async fn the_caller_finds_their_organizations(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let other = app.org("bob", "other").await;
    let bob = app.token("bob", "bob@example.com");
    app.by(&bob)
        .post(format!("/api/organization/{other}/members"))
        .json(json!({"userId": "alice"}))
        .await;
    let alice = app.token("alice", "alice@example.com");
    // Without x-org-id the active organization cannot be named ...
    app.by(&alice)
        .get("/api/organization")
        .await
        .expect(StatusCode::FORBIDDEN);
    // ... but the caller's organizations can be listed, with the roles held there.
    let Answer(status, body) = app.by(&alice).get("/api/me/organizations").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(pagination(&body).total, 2);
    let mine = body["organizations"].as_array().unwrap();
    assert_eq!(mine[0]["id"], acme.as_str());
    assert_eq!(
        (mine[0]["role"].as_str(), mine[0]["roles"].clone()),
        (Some("owner"), json!(["Admin"]))
    );
    assert_eq!(
        (mine[1]["id"].as_str(), mine[1]["role"].as_str()),
        (Some(other.as_str()), Some("member"))
    );
    assert_eq!(mine[1]["roles"], json!(["Member"]));
    // Someone else's list holds only their own.
    let Answer(_, body) = app.by(&bob).get("/api/me/organizations").await;
    assert_eq!(pagination(&body).total, 1);
    app.by(&bob)
        .get("/api/me/organizations?limit=0")
        .await
        .expect(StatusCode::BAD_REQUEST);
}

on_both_backends!(
    the_caller_finds_their_organizations,
    the_creator_owns_the_organization_with_the_admin_role,
    bootstrap_of_the_system_organization,
    teams_nest_one_level_and_managers_reach_them,
    step_up_guards_delete_tier_and_transfer,
    another_organization_cannot_see_change_or_delete,
    export_holds_the_organizations_data,
);
