//! Organizations and teams: creation, bootstrap, step-up, isolation, export.

use super::*;

async fn the_creator_owns_the_organization_with_the_admin_role(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let (status, body) = app
        .call(
            "GET",
            &format!("/api/organization/{org}"),
            &alice,
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (
            body["data"]["ownerId"].as_str(),
            body["data"]["tier"].as_str()
        ),
        (Some("alice"), Some("developer"))
    );
    let (_, members) = app
        .call(
            "GET",
            &format!("/api/organization/{org}/members"),
            &alice,
            None,
            None,
        )
        .await;
    assert_eq!(members["members"][0]["role"], "owner");
    let (_, roles) = app
        .call(
            "GET",
            &format!("/api/organization/{org}/roles?limit=100&sortOrder=asc"),
            &alice,
            None,
            None,
        )
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
    let (status, body) = app
        .call(
            "POST",
            "/api/organization",
            &alice,
            None,
            Some(json!({"name": "ACME"})),
        )
        .await;
    assert_eq!(
        code(status, &body),
        "CONFLICT",
        "names are unique, whatever the case"
    );
}

async fn bootstrap_of_the_system_organization(app: &TestApp) {
    let eve = app.token("eve", "eve@example.com");
    let (status, body) = app
        .call(
            "POST",
            "/api/organization",
            &eve,
            None,
            Some(json!({"name": "system"})),
        )
        .await;
    assert_eq!(
        (status, code(status, &body).as_str()),
        (StatusCode::FORBIDDEN, "FORBIDDEN")
    );
    let root = app.token("root", "Root@Example.com");
    let (status, body) = app
        .call(
            "POST",
            "/api/organization",
            &root,
            None,
            Some(json!({"name": "System"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        (
            body["data"]["isSystem"].as_bool(),
            body["data"]["name"].as_str()
        ),
        (Some(true), Some("system"))
    );
    let (status, body) = app
        .call(
            "POST",
            "/api/organization",
            &root,
            None,
            Some(json!({"name": "system"})),
        )
        .await;
    assert_eq!(code(status, &body), "CONFLICT");
    // The bootstrap identifier is now a super-admin: it sees any organization.
    let acme = app.org("alice", "acme").await;
    let (status, _) = app
        .call(
            "GET",
            &format!("/api/organization/{acme}"),
            &root,
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = app
        .call(
            "PUT",
            &format!("/api/organization/{acme}"),
            &root,
            None,
            Some(json!({"displayName": "Acme Corp"})),
        )
        .await;
    assert_eq!(
        (status, body["data"]["displayName"].as_str()),
        (StatusCode::OK, Some("Acme Corp"))
    );
    let alice = app.token("alice", "alice@example.com");
    let (status, body) = app
        .call(
            "PUT",
            &format!("/api/organization/{acme}"),
            &alice,
            None,
            Some(json!({"displayName": "Mine"})),
        )
        .await;
    assert_eq!(
        code(status, &body),
        "FORBIDDEN",
        "updating an organization is for super-admins"
    );
}

async fn teams_nest_one_level_and_managers_reach_them(app: &TestApp) {
    let root = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let (status, body) = app
        .call(
            "POST",
            "/api/organization",
            &alice,
            None,
            Some(json!({"name": "platform", "parentOrgId": root})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let team = body["data"]["id"].as_str().unwrap().to_owned();
    let (status, body) = app
        .call(
            "POST",
            "/api/organization",
            &alice,
            None,
            Some(json!({"name": "sub", "parentOrgId": team})),
        )
        .await;
    assert_eq!(
        code(status, &body),
        "VALIDATION_ERROR",
        "no team under a team"
    );
    let (_, body) = app
        .call(
            "GET",
            &format!("/api/organization/{root}/teams"),
            &alice,
            None,
            None,
        )
        .await;
    assert_eq!(body["teams"][0]["id"], team.as_str());
    assert_eq!(body["pagination"]["total"], 1);

    // Bob is a plain member of the root: he neither manages the team nor sees it.
    app.call(
        "POST",
        &format!("/api/organization/{root}/members"),
        &alice,
        None,
        Some(json!({"userId": "bob"})),
    )
    .await;
    let bob = app.token("bob", "bob@example.com");
    let (status, body) = app
        .call(
            "GET",
            &format!("/api/organization/{team}"),
            &bob,
            None,
            None,
        )
        .await;
    assert_eq!(code(status, &body), "NOT_FOUND");
    let (status, body) = app
        .call(
            "POST",
            "/api/organization",
            &bob,
            None,
            Some(json!({"name": "rogue", "parentOrgId": root})),
        )
        .await;
    assert_eq!(
        code(status, &body),
        "FORBIDDEN",
        "a team needs org:settings in its parent"
    );

    // Carol is an admin of the root: she manages the team without being a member.
    app.call(
        "POST",
        &format!("/api/organization/{root}/members"),
        &alice,
        None,
        Some(json!({"userId": "carol", "role": "admin"})),
    )
    .await;
    let carol = app.token("carol", "carol@example.com");
    let (status, _) = app
        .call(
            "GET",
            &format!("/api/organization/{team}/members"),
            &carol,
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    // Bulk-add: one user into the teams of this root, all or nothing.
    let (_, body) = app
        .call(
            "POST",
            "/api/organization",
            &alice,
            None,
            Some(json!({"name": "data", "parentOrgId": root})),
        )
        .await;
    let team2 = body["data"]["id"].as_str().unwrap().to_owned();
    let other = app.org("zed", "elsewhere").await;
    let (status, body) = app
        .call(
            "POST",
            &format!("/api/organization/{root}/members/bulk-add"),
            &alice,
            None,
            Some(json!({"userId": "dave", "teamIds": [team, other]})),
        )
        .await;
    assert_eq!(code(status, &body), "VALIDATION_ERROR");
    let (_, members) = app
        .call(
            "GET",
            &format!("/api/organization/{team}/members"),
            &alice,
            None,
            None,
        )
        .await;
    assert_eq!(members["pagination"]["total"], 1, "nothing was added");
    let (status, body) = app
        .call(
            "POST",
            &format!("/api/organization/{root}/members/bulk-add"),
            &alice,
            None,
            Some(json!({"userId": "dave", "teamIds": [team, team2]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let dave = app.token("dave", "dave@example.com");
    for t in [&team, &team2] {
        let (status, _) = app
            .call("GET", "/api/organization", &dave, Some(t), None)
            .await;
        assert_eq!(status, StatusCode::OK);
    }
}

async fn step_up_guards_delete_tier_and_transfer(app: &TestApp) {
    let root = app.token("root", ROOT_EMAIL);
    app.call(
        "POST",
        "/api/organization",
        &root,
        None,
        Some(json!({"name": "system"})),
    )
    .await;
    let acme = app.org("alice", "acme").await;
    let tier = format!("/api/organization/{acme}/tier");
    let cases = [
        (None, "STEP_UP_REQUIRED"),
        (Some(app.step_up("root", 600)), "STEP_UP_REQUIRED"),
        (Some(app.step_up("alice", 0)), "UNAUTHORIZED"),
    ];
    for (step, expected) in cases {
        let (status, body) = app
            .stepped("PATCH", &tier, &root, step, Some(json!({"tier": "pro"})))
            .await;
        assert_eq!(code(status, &body), expected);
    }
    let (status, body) = app
        .stepped(
            "PATCH",
            &tier,
            &root,
            Some(app.step_up("root", 10)),
            Some(json!({"tier": "team"})),
        )
        .await;
    assert_eq!(
        (status, body["data"]["tier"].as_str()),
        (StatusCode::OK, Some("team")),
        "{body}"
    );
    let (status, body) = app
        .stepped(
            "PATCH",
            &tier,
            &root,
            Some(app.step_up("root", 10)),
            Some(json!({"tier": "gold"})),
        )
        .await;
    assert_eq!(code(status, &body), "VALIDATION_ERROR");
    assert_eq!(
        app.audited("admin.org.tier.update").await[0]
            .affected_org_id
            .as_deref(),
        Some(acme.as_str())
    );

    // Ownership transfer: org:settings and step-up.
    let alice = app.token("alice", "alice@example.com");
    app.call(
        "POST",
        &format!("/api/organization/{acme}/members"),
        &alice,
        None,
        Some(json!({"userId": "bob"})),
    )
    .await;
    let transfer = format!("/api/organization/{acme}/transfer-owner");
    let (status, body) = app
        .stepped(
            "PATCH",
            &transfer,
            &alice,
            None,
            Some(json!({"userId": "bob"})),
        )
        .await;
    assert_eq!(code(status, &body), "STEP_UP_REQUIRED");
    let (status, body) = app
        .stepped(
            "PATCH",
            &transfer,
            &alice,
            Some(app.step_up("alice", 5)),
            Some(json!({"userId": "nobody"})),
        )
        .await;
    assert_eq!(code(status, &body), "VALIDATION_ERROR");
    let (status, body) = app
        .stepped(
            "PATCH",
            &transfer,
            &alice,
            Some(app.step_up("alice", 5)),
            Some(json!({"userId": "bob"})),
        )
        .await;
    assert_eq!(
        (status, body["data"]["ownerId"].as_str()),
        (StatusCode::OK, Some("bob")),
        "{body}"
    );

    // Delete: super-admin and step-up; afterwards the organization is gone.
    let delete = format!("/api/organization/{acme}");
    let (status, body) = app
        .stepped(
            "DELETE",
            &delete,
            &alice,
            Some(app.step_up("alice", 5)),
            None,
        )
        .await;
    assert_eq!(code(status, &body), "FORBIDDEN");
    let (status, body) = app.stepped("DELETE", &delete, &root, None, None).await;
    assert_eq!(code(status, &body), "STEP_UP_REQUIRED");
    let (status, _) = app
        .stepped("DELETE", &delete, &root, Some(app.step_up("root", 5)), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = app.call("GET", &delete, &root, None, None).await;
    assert_eq!(code(status, &body), "NOT_FOUND");
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
    let (_, body) = app
        .call(
            "POST",
            &format!("/api/organization/{acme}/roles"),
            &alice,
            None,
            Some(json!({"name": "readers", "permissions": ["reports:read"]})),
        )
        .await;
    let role = body["data"]["id"].as_str().unwrap().to_owned();
    app.call(
        "POST",
        &format!("/api/organization/{acme}/members"),
        &alice,
        None,
        Some(json!({"userId": "carol"})),
    )
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
        let (status, response) = app.call(method, &path, &bob, None, body).await;
        assert_eq!(code(status, &response), "NOT_FOUND", "{method} {path}");
    }
    assert!(
        app.audited("authz.denied").await.len() > before,
        "denied state changes are audited"
    );
    // Nothing changed.
    let (_, members) = app
        .call(
            "GET",
            &format!("/api/organization/{acme}/members"),
            &alice,
            None,
            None,
        )
        .await;
    assert_eq!(members["pagination"]["total"], 2);
    let (status, body) = app
        .call(
            "GET",
            &format!("/api/organization/{acme}/roles?limit=100"),
            &alice,
            None,
            None,
        )
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
    app.call(
        "POST",
        &format!("/api/organization/{acme}/members"),
        &alice,
        None,
        Some(json!({"userId": "bob"})),
    )
    .await;
    app.call(
        "POST",
        "/api/invitation/send",
        &alice,
        Some(&acme),
        Some(json!({"email": "new@example.com"})),
    )
    .await;
    let (status, body) = app
        .call(
            "GET",
            &format!("/api/organization/{acme}/export"),
            &alice,
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let data = &body["data"];
    assert_eq!(data["organization"]["id"], acme.as_str());
    assert_eq!(data["members"].as_array().unwrap().len(), 2);
    assert_eq!(data["invitations"].as_array().unwrap().len(), 1);
    assert_eq!(data["roles"].as_array().unwrap().len(), 5);
    let bob = app.token("bob", "bob@example.com");
    let (status, body) = app
        .call(
            "GET",
            &format!("/api/organization/{acme}/export"),
            &bob,
            None,
            None,
        )
        .await;
    assert_eq!(
        code(status, &body),
        "FORBIDDEN",
        "a member lacks org:settings"
    );
}

async fn the_caller_finds_their_organizations(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let other = app.org("bob", "other").await;
    let bob = app.token("bob", "bob@example.com");
    app.call(
        "POST",
        &format!("/api/organization/{other}/members"),
        &bob,
        None,
        Some(json!({"userId": "alice"})),
    )
    .await;
    let alice = app.token("alice", "alice@example.com");
    // Without x-org-id the active organization cannot be named ...
    let (status, _) = app
        .call("GET", "/api/organization", &alice, None, None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // ... but the caller's organizations can be listed, with the roles held there.
    let (status, body) = app
        .call("GET", "/api/me/organizations", &alice, None, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["pagination"]["total"], 2);
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
    let (_, body) = app
        .call("GET", "/api/me/organizations", &bob, None, None)
        .await;
    assert_eq!(body["pagination"]["total"], 1);
    let (status, _) = app
        .call("GET", "/api/me/organizations?limit=0", &bob, None, None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
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
