//! Members, Roles and the escalation guard, invitations.

use super::*;

async fn member_lifecycle(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let bob = app.token("bob", "bob@example.com");
    let members = format!("/api/organization/{acme}/members");
    let (status, body) = app
        .call(
            "POST",
            &members,
            &alice,
            None,
            Some(json!({"userId": "bob", "email": "bob@example.com"})),
        )
        .await;
    assert_eq!(
        (status, body["data"]["role"].as_str()),
        (StatusCode::CREATED, Some("member")),
        "{body}"
    );
    let (status, body) = app
        .call(
            "POST",
            &members,
            &alice,
            None,
            Some(json!({"userId": "bob"})),
        )
        .await;
    assert_eq!(code(status, &body), "CONFLICT");
    let (status, body) = app
        .call(
            "POST",
            &members,
            &alice,
            None,
            Some(json!({"userId": "x", "role": "owner"})),
        )
        .await;
    assert_eq!(code(status, &body), "VALIDATION_ERROR");
    // A Member holds pipelines:write, plugins:write, compliance:read, reports:read only.
    let (status, body) = app
        .call(
            "POST",
            &members,
            &bob,
            None,
            Some(json!({"userId": "mallory"})),
        )
        .await;
    assert_eq!(code(status, &body), "FORBIDDEN");
    assert_eq!(body["details"]["missing"], "members:manage");
    let (status, _) = app
        .call("GET", "/api/organization", &bob, Some(&acme), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    // Deactivated, bob is no member; activated again, he is.
    let (status, body) = app
        .call(
            "PATCH",
            &format!("{members}/bob/deactivate"),
            &alice,
            None,
            None,
        )
        .await;
    assert_eq!(
        (status, body["data"]["active"].as_bool()),
        (StatusCode::OK, Some(false))
    );
    let (status, body) = app
        .call("GET", "/api/organization", &bob, Some(&acme), None)
        .await;
    assert_eq!(code(status, &body), "TENANT_FORBIDDEN");
    app.call(
        "PATCH",
        &format!("{members}/bob/activate"),
        &alice,
        None,
        None,
    )
    .await;
    let (status, _) = app
        .call("GET", "/api/organization", &bob, Some(&acme), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    // Promoted to admin, bob holds the Admin Role and may manage members.
    let (status, body) = app
        .call(
            "PATCH",
            &format!("{members}/bob"),
            &alice,
            None,
            Some(json!({"role": "admin"})),
        )
        .await;
    assert_eq!(
        (status, body["data"]["role"].as_str()),
        (StatusCode::OK, Some("admin")),
        "{body}"
    );
    let (status, _) = app
        .call(
            "POST",
            &members,
            &bob,
            None,
            Some(json!({"userId": "carol"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, body) = app
        .call("DELETE", &format!("{members}/alice"), &bob, None, None)
        .await;
    assert_eq!(
        code(status, &body),
        "CONFLICT",
        "the owner cannot be removed"
    );
    let (status, body) = app
        .call(
            "PATCH",
            &format!("{members}/alice/deactivate"),
            &bob,
            None,
            None,
        )
        .await;
    assert_eq!(code(status, &body), "CONFLICT");
    let (status, _) = app
        .call("DELETE", &format!("{members}/carol"), &bob, None, None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = app
        .call("DELETE", &format!("{members}/carol"), &bob, None, None)
        .await;
    assert_eq!(code(status, &body), "NOT_FOUND");
    for action in [
        "org.member.add",
        "org.member.deactivate",
        "org.member.activate",
        "org.member.remove",
    ] {
        assert!(!app.audited(action).await.is_empty(), "{action}");
    }
}

async fn the_escalation_guard_holds_and_changes_nothing(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let roles = format!("/api/organization/{acme}/roles");
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
        &format!("/api/organization/{acme}/members"),
        &alice,
        None,
        Some(json!({"userId": "carol"})),
    )
    .await;
    // Bob gets a custom role that lets him manage roles and members, nothing else.
    let (status, body) = app
        .call(
            "POST",
            &roles,
            &alice,
            None,
            Some(
                json!({"name": "role managers", "permissions": ["roles:manage", "members:manage"]}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let managers = body["data"]["id"].as_str().unwrap().to_owned();
    let (status, _) = app
        .call(
            "POST",
            &format!("{roles}/{managers}/members"),
            &alice,
            None,
            Some(json!({"userId": "bob"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let bob = app.token("bob", "bob@example.com");

    let (status, body) = app.call("POST", &roles, &bob, None, Some(json!({"name": "sneaky", "permissions": ["members:manage", "org:settings", "billing:manage"]}))).await;
    assert_eq!(code(status, &body), "PERMISSION_ESCALATION");
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["details"]["permissions"],
        json!(["billing:manage", "org:settings"])
    );
    let (status, body) = app
        .call(
            "POST",
            &roles,
            &alice,
            None,
            Some(json!({"name": "registry", "permissions": ["registry:read"]})),
        )
        .await;
    assert_eq!(
        (status, code(status, &body).as_str()),
        (StatusCode::BAD_REQUEST, "PERMISSION_NOT_ASSIGNABLE")
    );
    let (status, body) = app
        .call(
            "POST",
            &roles,
            &bob,
            None,
            Some(json!({"name": "typo", "permissions": ["members:manag"]})),
        )
        .await;
    assert_eq!(code(status, &body), "VALIDATION_ERROR");

    // Assigning the built-in Admin Role hands out what bob lacks: refused.
    let (_, listed) = app
        .call("GET", &format!("{roles}?limit=100"), &alice, None, None)
        .await;
    let admin_role = listed["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "Admin")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = app
        .call(
            "POST",
            &format!("{roles}/{admin_role}/members"),
            &bob,
            None,
            Some(json!({"userId": "carol"})),
        )
        .await;
    assert_eq!(code(status, &body), "PERMISSION_ESCALATION");
    let (status, body) = app
        .call(
            "PATCH",
            &format!("/api/organization/{acme}/members/carol"),
            &bob,
            None,
            Some(json!({"role": "admin"})),
        )
        .await;
    assert_eq!(code(status, &body), "PERMISSION_ESCALATION");
    // Widening his own role through an update: refused too.
    let (status, body) = app
        .call(
            "PUT",
            &format!("{roles}/{managers}"),
            &bob,
            None,
            Some(json!({"permissions": ["roles:manage", "members:manage", "audit:read"]})),
        )
        .await;
    assert_eq!(code(status, &body), "PERMISSION_ESCALATION");
    // Nothing was stored.
    let (_, after) = app
        .call("GET", &format!("{roles}?limit=100"), &alice, None, None)
        .await;
    let all = after["roles"].as_array().unwrap();
    assert!(all
        .iter()
        .all(|r| r["name"] != "sneaky" && r["name"] != "registry"));
    assert!(all.iter().find(|r| r["name"] == "Admin").unwrap()["members"] == json!(["alice"]));
    let mine = all.iter().find(|r| r["id"] == managers.as_str()).unwrap();
    assert_eq!(
        mine["permissions"],
        json!(["members:manage", "roles:manage"])
    );

    // Within his permissions bob may define and hand out roles; removal is not guarded.
    let (status, body) = app
        .call(
            "POST",
            &roles,
            &bob,
            None,
            Some(json!({"name": "member managers", "permissions": ["members:manage"]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["data"]["id"].as_str().unwrap().to_owned();
    let (status, _) = app
        .call(
            "POST",
            &format!("{roles}/{id}/members"),
            &bob,
            None,
            Some(json!({"userId": "carol"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    // Built-in Roles are fixed.
    let (status, body) = app
        .call(
            "PUT",
            &format!("{roles}/{admin_role}"),
            &alice,
            None,
            Some(json!({"name": "Boss"})),
        )
        .await;
    assert_eq!(code(status, &body), "CONFLICT");
    let (status, body) = app
        .call(
            "DELETE",
            &format!("{roles}/{admin_role}"),
            &alice,
            None,
            None,
        )
        .await;
    assert_eq!(code(status, &body), "CONFLICT");
    // Removal is not guarded: bob may take the Admin Role from alice.
    let (status, _) = app
        .call(
            "DELETE",
            &format!("{roles}/{admin_role}/members/alice"),
            &bob,
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app
        .call("DELETE", &format!("{roles}/{id}"), &bob, None, None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = app
        .call(
            "POST",
            &roles,
            &bob,
            None,
            Some(json!({"name": "Role Managers", "permissions": []})),
        )
        .await;
    assert_eq!(
        code(status, &body),
        "CONFLICT",
        "role names are unique in an organization"
    );
}

async fn invitations(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let globex = app.org("bob", "globex").await;
    let alice = app.token("alice", "alice@example.com");
    let bob = app.token("bob", "bob@example.com");
    let (status, body) = app
        .call(
            "POST",
            "/api/invitation/send",
            &alice,
            Some(&acme),
            Some(json!({"email": "dana@example.com", "role": "admin"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["data"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (
            body["data"]["status"].as_str(),
            body["data"]["sentCount"].as_i64()
        ),
        (Some("pending"), Some(1))
    );
    let (status, body) = app
        .call(
            "POST",
            "/api/invitation/send",
            &alice,
            Some(&acme),
            Some(json!({"email": "not-an-email"})),
        )
        .await;
    assert_eq!(code(status, &body), "VALIDATION_ERROR");
    let (status, body) = app
        .call(
            "POST",
            &format!("/api/invitation/{id}/resend"),
            &alice,
            Some(&acme),
            None,
        )
        .await;
    assert_eq!(
        (status, body["data"]["sentCount"].as_i64()),
        (StatusCode::OK, Some(2))
    );
    let (_, body) = app
        .call("GET", "/api/invitation", &alice, Some(&acme), None)
        .await;
    assert_eq!(body["invitations"].as_array().unwrap().len(), 1);
    assert_eq!(body["pagination"]["total"], 1);
    // Another organization cannot see or touch it, even naming it by id.
    let (_, body) = app
        .call("GET", "/api/invitation", &bob, Some(&globex), None)
        .await;
    assert_eq!(body["pagination"]["total"], 0);
    let (status, body) = app
        .call(
            "DELETE",
            &format!("/api/invitation/{id}"),
            &bob,
            Some(&globex),
            None,
        )
        .await;
    assert_eq!(code(status, &body), "NOT_FOUND");
    let (status, body) = app
        .call("GET", "/api/invitation", &bob, Some(&acme), None)
        .await;
    assert_eq!(code(status, &body), "TENANT_FORBIDDEN");
    let (status, body) = app
        .call(
            "DELETE",
            &format!("/api/invitation/{id}"),
            &alice,
            Some(&acme),
            None,
        )
        .await;
    assert_eq!(
        (status, body["data"]["status"].as_str()),
        (StatusCode::OK, Some("revoked"))
    );
    let (status, body) = app
        .call(
            "DELETE",
            &format!("/api/invitation/{id}"),
            &alice,
            Some(&acme),
            None,
        )
        .await;
    assert_eq!(
        code(status, &body),
        "NOT_FOUND",
        "only a pending invitation can be revoked"
    );
    for action in ["invitation.send", "invitation.resend", "invitation.revoke"] {
        assert_eq!(app.audited(action).await.len(), 1, "{action}");
    }
}

/// The gate keeps each caller's facts between requests; a change of them (a role,
/// a deactivation, a removal) is what the very next request is judged by.
async fn the_gate_follows_each_change_at_once(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let bob = app.token("bob", "bob@example.com");
    let members = format!("/api/organization/{acme}/members");
    let (status, body) = app
        .call(
            "POST",
            &members,
            &alice,
            None,
            Some(json!({"userId": "bob"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let add = |user: &str| {
        let (members, bob) = (members.clone(), bob.clone());
        let body = json!({ "userId": user });
        async move { app.call("POST", &members, &bob, None, Some(body)).await }
    };
    // Twice, so that the second is judged by what the first kept.
    for _ in 0..2 {
        let (status, body) = add("carol").await;
        assert_eq!(code(status, &body), "FORBIDDEN", "{body}");
    }
    let (status, body) = app
        .call(
            "PATCH",
            &format!("{members}/bob"),
            &alice,
            None,
            Some(json!({"role": "admin"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = add("carol").await;
    assert_eq!(status, StatusCode::CREATED, "promoted at once: {body}");
    let (status, body) = app
        .call(
            "PATCH",
            &format!("{members}/bob"),
            &alice,
            None,
            Some(json!({"role": "member"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = add("dave").await;
    assert_eq!(code(status, &body), "FORBIDDEN", "demoted at once: {body}");
    for _ in 0..2 {
        let (status, _) = app
            .call("GET", "/api/organization", &bob, Some(&acme), None)
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, body) = app
        .call(
            "PATCH",
            &format!("{members}/bob/deactivate"),
            &alice,
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app
        .call("GET", "/api/organization", &bob, Some(&acme), None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "deactivated at once: {body}");
    let (status, _) = app
        .call(
            "PATCH",
            &format!("{members}/bob/activate"),
            &alice,
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app
        .call("GET", "/api/organization", &bob, Some(&acme), None)
        .await;
    assert_eq!(status, StatusCode::OK, "active again at once");
    let (status, body) = app
        .call("DELETE", &format!("{members}/bob"), &alice, None, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app
        .call("GET", "/api/organization", &bob, Some(&acme), None)
        .await;
    assert_eq!(code(status, &body), "TENANT_FORBIDDEN", "removed at once");
}

on_both_backends!(
    the_gate_follows_each_change_at_once,
    member_lifecycle,
    the_escalation_guard_holds_and_changes_nothing,
    invitations
);
