//! Members, Roles and the escalation guard, invitations.

use super::*;
use crate::api::{pagination, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::{Invitation, InvitationStatus, Member};
use tenancy::MembershipRole;

async fn member_lifecycle(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let bob = app.token("bob", "bob@example.com");
    let members = format!("/api/organization/{acme}/members");
    let added: Member = app
        .by(&alice)
        .post(&members)
        .json(json!({"userId": "bob", "email": "bob@example.com"}))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!(added.role, MembershipRole::Member);
    app.by(&alice)
        .post(&members)
        .json(json!({"userId": "bob"}))
        .await
        .refused(ErrorCode::Conflict);
    app.by(&alice)
        .post(&members)
        .json(json!({"userId": "x", "role": "owner"}))
        .await
        .refused(ErrorCode::ValidationError);
    // A Member holds pipelines:write, plugins:write, compliance:read, reports:read only.
    let Answer(status, body) = app
        .by(&bob)
        .post(&members)
        .json(json!({"userId": "mallory"}))
        .await;
    assert_eq!(code(status, &body), ErrorCode::Forbidden);
    assert_eq!(body["details"]["missing"], "members:manage");
    app.by(&bob)
        .org(&acme)
        .get("/api/organization")
        .await
        .expect(StatusCode::OK);
    // Deactivated, bob is no member; activated again, he is.
    let deactivated: Member = app
        .by(&alice)
        .patch(format!("{members}/bob/deactivate"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(!deactivated.active);
    app.by(&bob)
        .org(&acme)
        .get("/api/organization")
        .await
        .refused(ErrorCode::TenantForbidden);
    app.by(&alice)
        .patch(format!("{members}/bob/activate"))
        .await;
    app.by(&bob)
        .org(&acme)
        .get("/api/organization")
        .await
        .expect(StatusCode::OK);
    // Promoted to admin, bob holds the Admin Role and may manage members.
    let promoted: Member = app
        .by(&alice)
        .patch(format!("{members}/bob"))
        .json(json!({"role": "admin"}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(promoted.role, MembershipRole::Admin);
    app.by(&bob)
        .post(&members)
        .json(json!({"userId": "carol"}))
        .await
        .expect(StatusCode::CREATED);
    let Answer(status, body) = app.by(&bob).delete(format!("{members}/alice")).await;
    assert_eq!(
        code(status, &body),
        ErrorCode::Conflict,
        "the owner cannot be removed"
    );
    app.by(&bob)
        .patch(format!("{members}/alice/deactivate"))
        .await
        .refused(ErrorCode::Conflict);
    app.by(&bob)
        .delete(format!("{members}/carol"))
        .await
        .expect(StatusCode::OK);
    app.by(&bob)
        .delete(format!("{members}/carol"))
        .await
        .refused(ErrorCode::NotFound);
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
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": "bob"}))
        .await;
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": "carol"}))
        .await;
    // Bob gets a custom role that lets him manage roles and members, nothing else.
    let managers = app
        .by(&alice)
        .post(&roles)
        .json(json!({"name": "role managers", "permissions": ["roles:manage", "members:manage"]}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    app.by(&alice)
        .post(format!("{roles}/{managers}/members"))
        .json(json!({"userId": "bob"}))
        .await
        .expect(StatusCode::CREATED);
    let bob = app.token("bob", "bob@example.com");

    let Answer(status, body) = app.by(&bob).post(&roles).json(json!({"name": "sneaky", "permissions": ["members:manage", "org:settings", "billing:manage"]})).await;
    assert_eq!(code(status, &body), ErrorCode::PermissionEscalation);
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["details"]["permissions"],
        json!(["billing:manage", "org:settings"])
    );
    let Answer(status, body) = app
        .by(&alice)
        .post(&roles)
        .json(json!({"name": "registry", "permissions": ["registry:read"]}))
        .await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::BAD_REQUEST, ErrorCode::PermissionNotAssignable)
    );
    app.by(&bob)
        .post(&roles)
        .json(json!({"name": "typo", "permissions": ["members:manag"]}))
        .await
        .refused(ErrorCode::ValidationError);

    // Assigning the built-in Admin Role hands out what bob lacks: refused.
    let Answer(_, listed) = app.by(&alice).get(format!("{roles}?limit=100")).await;
    let admin_role = listed["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "Admin")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.by(&bob)
        .post(format!("{roles}/{admin_role}/members"))
        .json(json!({"userId": "carol"}))
        .await
        .refused(ErrorCode::PermissionEscalation);
    app.by(&bob)
        .patch(format!("/api/organization/{acme}/members/carol"))
        .json(json!({"role": "admin"}))
        .await
        .refused(ErrorCode::PermissionEscalation);
    // Widening his own role through an update: refused too.
    app.by(&bob)
        .put(format!("{roles}/{managers}"))
        .json(json!({"permissions": ["roles:manage", "members:manage", "audit:read"]}))
        .await
        .refused(ErrorCode::PermissionEscalation);
    // Nothing was stored.
    let Answer(_, after) = app.by(&alice).get(format!("{roles}?limit=100")).await;
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
    let id = app
        .by(&bob)
        .post(&roles)
        .json(json!({"name": "member managers", "permissions": ["members:manage"]}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    app.by(&bob)
        .post(format!("{roles}/{id}/members"))
        .json(json!({"userId": "carol"}))
        .await
        .expect(StatusCode::CREATED);
    // Built-in Roles are fixed.
    app.by(&alice)
        .put(format!("{roles}/{admin_role}"))
        .json(json!({"name": "Boss"}))
        .await
        .refused(ErrorCode::Conflict);
    app.by(&alice)
        .delete(format!("{roles}/{admin_role}"))
        .await
        .refused(ErrorCode::Conflict);
    // Removal is not guarded: bob may take the Admin Role from alice.
    app.by(&bob)
        .delete(format!("{roles}/{admin_role}/members/alice"))
        .await
        .expect(StatusCode::OK);
    app.by(&bob)
        .delete(format!("{roles}/{id}"))
        .await
        .expect(StatusCode::OK);
    let Answer(status, body) = app
        .by(&bob)
        .post(&roles)
        .json(json!({"name": "Role Managers", "permissions": []}))
        .await;
    assert_eq!(
        code(status, &body),
        ErrorCode::Conflict,
        "role names are unique in an organization"
    );
}

async fn invitations(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let globex = app.org("bob", "globex").await;
    let alice = app.token("alice", "alice@example.com");
    let bob = app.token("bob", "bob@example.com");
    let invitation: Invitation = app
        .by(&alice)
        .org(&acme)
        .post("/api/invitation/send")
        .json(json!({"email": "dana@example.com", "role": "admin"}))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!(
        (invitation.status, invitation.sent_count),
        (InvitationStatus::Pending, 1)
    );
    let id = invitation.id;
    app.by(&alice)
        .org(&acme)
        .post("/api/invitation/send")
        .json(json!({"email": "not-an-email"}))
        .await
        .refused(ErrorCode::ValidationError);
    let resent: Invitation = app
        .by(&alice)
        .org(&acme)
        .post(format!("/api/invitation/{id}/resend"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(resent.sent_count, 2);
    let Answer(_, body) = app.by(&alice).org(&acme).get("/api/invitation").await;
    assert_eq!(body["invitations"].as_array().unwrap().len(), 1);
    assert_eq!(pagination(&body).total, 1);
    // Another organization cannot see or touch it, even naming it by id.
    let Answer(_, body) = app.by(&bob).org(&globex).get("/api/invitation").await;
    assert_eq!(pagination(&body).total, 0);
    app.by(&bob)
        .org(&globex)
        .delete(format!("/api/invitation/{id}"))
        .await
        .refused(ErrorCode::NotFound);
    app.by(&bob)
        .org(&acme)
        .get("/api/invitation")
        .await
        .refused(ErrorCode::TenantForbidden);
    let revoked: Invitation = app
        .by(&alice)
        .org(&acme)
        .delete(format!("/api/invitation/{id}"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(revoked.status, InvitationStatus::Revoked);
    let Answer(status, body) = app
        .by(&alice)
        .org(&acme)
        .delete(format!("/api/invitation/{id}"))
        .await;
    assert_eq!(
        code(status, &body),
        ErrorCode::NotFound,
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
    app.by(&alice)
        .post(&members)
        .json(json!({"userId": "bob"}))
        .await
        .expect(StatusCode::CREATED);
    let add = |user: &str| {
        let (members, bob) = (members.clone(), bob.clone());
        let body = json!({ "userId": user });
        async move { app.by(&bob).post(&members).json(body).await }
    };
    // Twice, so that the second is judged by what the first kept.
    for _ in 0..2 {
        let Answer(status, body) = add("carol").await;
        assert_eq!(code(status, &body), ErrorCode::Forbidden, "{body}");
    }
    app.by(&alice)
        .patch(format!("{members}/bob"))
        .json(json!({"role": "admin"}))
        .await
        .expect(StatusCode::OK);
    let Answer(status, body) = add("carol").await;
    assert_eq!(status, StatusCode::CREATED, "promoted at once: {body}");
    app.by(&alice)
        .patch(format!("{members}/bob"))
        .json(json!({"role": "member"}))
        .await
        .expect(StatusCode::OK);
    let Answer(status, body) = add("dave").await;
    assert_eq!(
        code(status, &body),
        ErrorCode::Forbidden,
        "demoted at once: {body}"
    );
    for _ in 0..2 {
        app.by(&bob)
            .org(&acme)
            .get("/api/organization")
            .await
            .expect(StatusCode::OK);
    }
    app.by(&alice)
        .patch(format!("{members}/bob/deactivate"))
        .await
        .expect(StatusCode::OK);
    let Answer(status, body) = app.by(&bob).org(&acme).get("/api/organization").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "deactivated at once: {body}");
    app.by(&alice)
        .patch(format!("{members}/bob/activate"))
        .await
        .expect(StatusCode::OK);
    let Answer(status, _) = app.by(&bob).org(&acme).get("/api/organization").await;
    assert_eq!(status, StatusCode::OK, "active again at once");
    app.by(&alice)
        .delete(format!("{members}/bob"))
        .await
        .expect(StatusCode::OK);
    let Answer(status, body) = app.by(&bob).org(&acme).get("/api/organization").await;
    assert_eq!(
        code(status, &body),
        ErrorCode::TenantForbidden,
        "removed at once"
    );
}

on_both_backends!(
    the_gate_follows_each_change_at_once,
    member_lifecycle,
    the_escalation_guard_holds_and_changes_nothing,
    invitations
);
