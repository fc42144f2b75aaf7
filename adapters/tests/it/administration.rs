//! Platform administration (issue 54): accounts, a user's own features, the active
//! organization, the build namespace and a super-admin's delete of an
//! organization, on both backends; each refusal, and the audit events in the chains
//! of the organizations affected.

use crate::api::{pagination, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::{ChainVerdict, Me, Organization, PersonalToken, UserFeatures};
use adapters::services::accounts::{Account, Session};
use adapters::services::admin::impersonation::Started;
use adapters::services::admin::users::AdminUser;
use adapters::storage::AccountState;
use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::signin::{
    link_token, login_as, me_status, public, refresh, register, session, PASSWORD,
};
use super::*;

/// The events of `action` chained in `chain` (an organization's id).
async fn in_chain(app: &TestApp, action: &str, chain: &str) -> Vec<SealedEvent> {
    app.audited(action)
        .await
        .into_iter()
        .filter(|e| e.chain_key == chain)
        .collect()
}

/// A root organization owned by the registered account `access` signs in as.
async fn org_of(app: &TestApp, access: &str, name: &str) -> String {
    app.by(access)
        .post("/api/organization")
        .json(json!({"name": name}))
        .await
        .expect(StatusCode::CREATED)
        .id()
}

/// The id of the account of `email`, from the administration list.
async fn answer_id(app: &TestApp, root: &str, email: &str) -> String {
    let Answer(status, answer) = app
        .by(root)
        .get(format!("/api/admin/users?email={email}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["users"][0]["userId"].as_str().unwrap().to_owned()
}

/// A session of `email` with `password`: (access token, refresh token).
async fn signed_in(app: &TestApp, email: &str, password: &str) -> (String, String) {
    let session = app.login(email, password).await;
    (session.access_token, session.refresh_token)
}

async fn add_member(app: &TestApp, owner: &str, org: &str, user_id: &str) {
    app.by(owner)
        .post(format!("/api/organization/{org}/members"))
        .json(json!({"userId": user_id}))
        .await
        .expect(StatusCode::CREATED);
}

async fn accounts_are_created_changed_disabled_and_deleted(app: &TestApp) {
    let (system, root) = app.system().await;
    let alice_id = register(app, "alice@example.com").await;
    let (alice, _) = session(app, "alice@example.com").await;
    let acme = org_of(app, &alice, "acme").await;

    // Only a super-admin.
    for (method, path, body) in [
        ("GET", "/api/admin/users".to_owned(), None),
        (
            "POST",
            "/api/admin/users".to_owned(),
            Some(json!({"email": "x@example.com"})),
        ),
        (
            "PATCH",
            format!("/api/admin/users/{alice_id}"),
            Some(json!({"disabled": true})),
        ),
    ] {
        let Answer(status, answer) = app.by(&alice).method(method, &path).json_opt(body).await;
        assert_eq!(
            code(status, &answer),
            ErrorCode::Forbidden,
            "{method} {path}"
        );
    }

    // Bad input changes nothing.
    for (body, field) in [
        (json!({"email": "not-an-address"}), "email"),
        (
            json!({"email": "b@example.com", "password": "short"}),
            "password",
        ),
        (
            json!({"email": "b@example.com", "password": "b@example.com"}),
            "password",
        ),
        (
            json!({"email": "b@example.com", "name": "x".repeat(201)}),
            "name",
        ),
    ] {
        let Answer(status, answer) = app
            .by(&root)
            .post("/api/admin/users")
            .json(body.clone())
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["details"]["field"], field, "{answer}");
    }
    app.by(&root)
        .post("/api/admin/users")
        .json(json!({"email": "b@example.com", "superAdmin": true}))
        .await
        .expect(StatusCode::BAD_REQUEST);
    app.by(&root)
        .get("/api/admin/users?state=frozen")
        .await
        .expect(StatusCode::BAD_REQUEST);
    app.by(&root)
        .post("/api/admin/users")
        .json(json!({"email": "ALICE@example.com", "password": PASSWORD}))
        .await
        .refused(ErrorCode::Conflict);

    // With a password: verified, and bound to change it first.
    let created: AdminUser = app
        .by(&root)
        .post("/api/admin/users")
        .json(json!({"email": "Bob@Example.com", "password": PASSWORD, "name": "Bob"}))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!(created.email, "bob@example.com");
    assert_eq!(created.state, AccountState::Active);
    assert!(created.password_change_required);
    let bob_id = created.user_id;
    let (bob, _) = session(app, "bob@example.com").await;
    app.by(&bob)
        .get("/api/me/organizations")
        .await
        .refused(ErrorCode::PasswordChangeRequired);
    let me: Account = app
        .by(&bob)
        .get("/api/me")
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(me.password_change_required);
    let bob = app
        .by(&bob)
        .put("/api/me/password")
        .json(json!({"currentPassword": PASSWORD, "newPassword": "a brand new secret"}))
        .await
        .expect(StatusCode::OK)
        .data::<Session>()
        .access_token;
    app.by(&bob)
        .get("/api/me/organizations")
        .await
        .expect(StatusCode::OK);

    // Without a password: an invitation, whose link sets it.
    let carol: AdminUser = app
        .by(&root)
        .post("/api/admin/users")
        .json(json!({"email": "carol@example.com"}))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!(carol.state, AccountState::Unverified);
    let token = link_token(app, "carol@example.com").await;
    let Answer(status, answer) = login_as(app, "carol@example.com", PASSWORD).await;
    assert_eq!(code(status, &answer), ErrorCode::InvalidCredentials);
    let Answer(status, answer) =
        public(app, "/api/auth/verify-email", json!({"token": token})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["details"]["field"], "password");
    let verified: Account = public(
        app,
        "/api/auth/verify-email",
        json!({"token": token, "password": "carol's own secret"}),
    )
    .await
    .expect(StatusCode::OK)
    .data();
    assert!(!verified.password_change_required);
    let Answer(status, answer) = login_as(app, "carol@example.com", "carol's own secret").await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    // The list: searched, filtered, paged.
    add_member(app, &alice, &acme, &bob_id).await;
    let Answer(status, answer) = app.by(&root).get("/api/admin/users?email=BO&limit=5").await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(pagination(&answer).total, 1, "{answer}");
    assert_eq!(answer["users"][0]["userId"], bob_id.as_str());
    assert_eq!(answer["users"][0]["organizations"], 1);
    let Answer(_, answer) = app
        .by(&root)
        .get(format!("/api/admin/users?orgId={acme}"))
        .await;
    let members: Vec<&str> = answer["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["userId"].as_str().unwrap())
        .collect();
    assert_eq!(members.len(), 2, "{answer}");
    assert!(members.contains(&bob_id.as_str()) && members.contains(&alice_id.as_str()));
    let Answer(_, answer) = app.by(&root).get("/api/admin/users?email=%25").await;
    assert_eq!(
        pagination(&answer).total,
        0,
        "a wildcard is taken literally: {answer}"
    );
    let Answer(_, answer) = app.by(&root).get("/api/admin/users?limit=1&offset=1").await;
    assert_eq!(answer["users"].as_array().unwrap().len(), 1);
    assert_eq!(pagination(&answer).total, 3, "alice, bob, carol: {answer}");

    // Disabled: every session, token and sign-in ends at once.
    let soon = (Utc::now() + chrono::Duration::days(3)).to_rfc3339();
    let pat: PersonalToken = app
        .by(&bob)
        .post("/api/me/tokens")
        .json(json!({"name": "cli", "expiresAt": soon}))
        .await
        .data();
    let pat = pat.token.expect("the secret, this once");
    let (bob_session, bob_refresh) = signed_in(app, "bob@example.com", "a brand new secret").await;
    for token in [&bob, &pat, &bob_session] {
        assert_eq!(me_status(app, token).await, StatusCode::OK);
    }
    let disabled: AdminUser = app
        .by(&root)
        .patch(format!("/api/admin/users/{bob_id}"))
        .json(json!({"disabled": true}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(disabled.state, AccountState::Disabled);
    for token in [&bob, &pat, &bob_session] {
        assert_eq!(me_status(app, token).await, StatusCode::UNAUTHORIZED);
    }
    let Answer(status, answer) = refresh(app, &bob_refresh).await;
    assert_eq!(code(status, &answer), ErrorCode::Unauthorized);
    let Answer(status, answer) = login_as(app, "bob@example.com", "a brand new secret").await;
    assert_eq!(
        code(status, &answer),
        ErrorCode::AccountDisabled,
        "{answer}"
    );
    let Answer(_, answer) = app.by(&root).get("/api/admin/users?state=disabled").await;
    assert_eq!(pagination(&answer).total, 1);
    // Audited in the system chain and in acme's, where bob is a member.
    let system_events = in_chain(app, "admin.user.update", &system).await;
    assert_eq!(system_events.len(), 1);
    let acme_events = in_chain(app, "admin.user.update", &acme).await;
    assert_eq!(acme_events.len(), 1);
    assert_eq!(acme_events[0].target_id.as_deref(), Some(bob_id.as_str()));
    assert_eq!(acme_events[0].details["changed"], json!(["disabled"]));
    // Never a super-admin (revoke the flag first).
    let carol_id = answer_id(app, &root, "carol@example.com").await;
    app.by(&root)
        .step_up(app.step_up("root", 1))
        .put(format!("/api/admin/super-admins/{carol_id}"))
        .await
        .expect(StatusCode::OK);
    app.by(&root)
        .patch(format!("/api/admin/users/{carol_id}"))
        .json(json!({"disabled": true}))
        .await
        .refused(ErrorCode::Conflict);
    let (carol, _) = signed_in(app, "carol@example.com", "carol's own secret").await;
    let Answer(status, answer) = app
        .by(&carol)
        .patch(format!("/api/admin/users/{carol_id}"))
        .json(json!({"disabled": true}))
        .await;
    assert_eq!(
        code(status, &answer),
        ErrorCode::Conflict,
        "not oneself either: {answer}"
    );
    // Enabled again: sign-in works.
    let enabled: AdminUser = app
        .by(&root)
        .patch(format!("/api/admin/users/{bob_id}"))
        .json(json!({"disabled": false, "name": "Robert"}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(enabled.name.as_deref(), Some("Robert"));
    let Answer(status, _) = login_as(app, "bob@example.com", "a brand new secret").await;
    assert_eq!(status, StatusCode::OK);
    // A new address (the administrator vouches for it); one another account holds: 409.
    app.by(&root)
        .patch(format!("/api/admin/users/{bob_id}"))
        .json(json!({"email": "alice@example.com"}))
        .await
        .refused(ErrorCode::Conflict);
    let moved: AdminUser = app
        .by(&root)
        .patch(format!("/api/admin/users/{bob_id}"))
        .json(json!({"email": "Robert@Example.com"}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(
        (moved.email.as_str(), moved.state),
        ("robert@example.com", AccountState::Active)
    );
    let Answer(status, _) = login_as(app, "bob@example.com", "a brand new secret").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let Answer(status, answer) = login_as(app, "robert@example.com", "a brand new secret").await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    // Deleted: step-up first; the last Owner cannot be.
    let bob_path = format!("/api/admin/users/{bob_id}");
    app.by(&root)
        .delete(&bob_path)
        .await
        .refused(ErrorCode::StepUpRequired);
    let Answer(status, answer) = app
        .by(&root)
        .step_up(app.step_up("root", 1))
        .delete(format!("/api/admin/users/{alice_id}"))
        .await;
    assert_eq!(code(status, &answer), ErrorCode::Conflict, "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains(&acme),
        "{answer}"
    );
    app.by(&root)
        .step_up(app.step_up("root", 1))
        .delete(&bob_path)
        .await
        .expect(StatusCode::OK);
    let Answer(status, answer) = login_as(app, "robert@example.com", "a brand new secret").await;
    assert_eq!(code(status, &answer), ErrorCode::InvalidCredentials);
    let Answer(_, answer) = app.by(&root).get("/api/admin/users?state=deleted").await;
    assert_eq!(answer["users"][0]["userId"], bob_id.as_str());
    assert_eq!(
        answer["users"][0]["email"],
        format!("deleted-{bob_id}@ghost.invalid")
    );
    assert_eq!(answer["users"][0]["name"], Value::Null);
    assert_eq!(answer["users"][0]["organizations"], 0);
    let Answer(_, answer) = app
        .by(&alice)
        .get(format!("/api/organization/{acme}/members"))
        .await;
    assert_eq!(
        pagination(&answer).total,
        1,
        "bob's membership ended: {answer}"
    );
    let deleted = in_chain(app, "admin.user.delete", &acme).await;
    assert_eq!(deleted.len(), 1);
    assert_eq!(deleted[0].actor_id, "root");
    // What bob did stays attributed to his id, and the chains still verify.
    assert!(!in_chain(app, "user.password.change", "accounts")
        .await
        .is_empty());
    for chain in [&system, &acme] {
        let verdict: ChainVerdict = app
            .by(&root)
            .get(format!("/api/audit/verify?orgId={chain}"))
            .await
            .expect(StatusCode::OK)
            .data();
        assert!(verdict.ok, "{verdict:?}");
    }
    // Deleted already, or never there: 404.
    app.by(&root)
        .step_up(app.step_up("root", 1))
        .delete(&bob_path)
        .await
        .refused(ErrorCode::NotFound);
    assert_eq!(in_chain(app, "admin.user.create", &system).await.len(), 2);
}

async fn a_users_own_flags_take_features_away_and_open_previews(app: &TestApp) {
    // The tiers' features as document 2 has them (no feature opened for all tiers).
    let gated = app.beside(&[("FEATURES_FOR_ALL_TIERS", "")]).await;
    flags_on(&gated).await;
    gated.stop().await;
}

async fn flags_on(app: &TestApp) {
    let (system, root) = app.system().await;
    let dana_id = register(app, "dana@example.com").await;
    let (dana, _) = session(app, "dana@example.com").await;
    let team = org_of(app, &dana, "team-org").await;
    let free = org_of(app, &dana, "free-org").await;
    app.by(&root)
        .step_up(app.step_up("root", 1))
        .patch(format!("/api/organization/{team}/tier"))
        .json(json!({"tier": "team"}))
        .await
        .expect(StatusCode::OK);
    let audit_status = |org: String| {
        let dana = dana.clone();
        async move { app.by(&dana).org(&org).get("/api/audit").await }
    };
    assert_eq!(audit_status(team.clone()).await.0, StatusCode::OK);
    let features = format!("/api/admin/users/{dana_id}/features");

    // Unknown names change nothing; only a super-admin sets them.
    let Answer(status, answer) = app
        .by(&root)
        .put(&features)
        .json(json!({"features": {"audit_log": false, "teleport": true}}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("teleport"));
    app.by(&dana)
        .put(&features)
        .json(json!({"features": {"dashboards": true}}))
        .await
        .refused(ErrorCode::Forbidden);
    let flags: UserFeatures = app.by(&root).get(&features).await.data();
    assert!(flags.features.is_empty());

    // Taken away: the tier's feature is refused to dana alone.
    app.by(&root)
        .put(&features)
        .json(json!({"features": {"audit_log": false, "dashboards": true}}))
        .await
        .expect(StatusCode::OK);
    let Answer(status, answer) = audit_status(team.clone()).await;
    assert_eq!(
        code(status, &answer),
        ErrorCode::FeatureNotAvailable,
        "{answer}"
    );
    let me: Me = app.by(&dana).org(&team).get("/api/me").await.data();
    let has = |name: &str| me.features.iter().any(|f| f == name);
    assert!(has("dashboards") && has("bulk_operations"), "{me:?}");
    assert!(!has("audit_log"), "{me:?}");
    assert_eq!(me.features_org_id.as_deref(), Some(team.as_str()));

    // `true` on a tier feature never opens what the organization lacks.
    app.by(&root)
        .put(&features)
        .json(json!({"features": {"audit_log": true, "bulk_operations": true}}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(audit_status(team.clone()).await.0, StatusCode::OK);
    let Answer(status, answer) = audit_status(free.clone()).await;
    assert_eq!(
        code(status, &answer),
        ErrorCode::FeatureNotAvailable,
        "{answer}"
    );
    let me: Me = app.by(&dana).org(&free).get("/api/me").await.data();
    assert!(me.features.is_empty(), "{me:?}");

    // Audited with the old and new flags, in the system chain and dana's organizations'.
    let events = in_chain(app, "admin.user.features.update", &system).await;
    assert_eq!(events.len(), 2);
    assert_eq!(
        events[1].details["old"],
        json!({"audit_log": false, "dashboards": true})
    );
    assert_eq!(
        events[1].details["new"],
        json!({"audit_log": true, "bulk_operations": true})
    );
    assert_eq!(
        in_chain(app, "admin.user.features.update", &team)
            .await
            .len(),
        2
    );
    assert_eq!(
        in_chain(app, "admin.user.features.update", &free)
            .await
            .len(),
        2
    );
}

async fn the_active_organization_is_carried_by_tokens_minted_afterwards(app: &TestApp) {
    register(app, "erin@example.com").await;
    let (erin, erin_refresh) = session(app, "erin@example.com").await;
    let first = org_of(app, &erin, "first").await;
    let second = org_of(app, &erin, "second").await;
    let other = app.org("mallory", "elsewhere").await;
    // No `x-org-id` and no active organization: refused as before.
    app.by(&erin)
        .get("/api/organization")
        .await
        .expect(StatusCode::FORBIDDEN);
    // Not one of erin's: refused, nothing recorded.
    let Answer(status, answer) = app
        .by(&erin)
        .put("/api/me/active-organization")
        .json(json!({"orgId": other}))
        .await;
    assert!(
        status == StatusCode::FORBIDDEN || status == StatusCode::NOT_FOUND,
        "{answer}"
    );
    app.by(&erin)
        .put("/api/me/active-organization")
        .json(json!({"orgId": second}))
        .await
        .expect(StatusCode::OK);
    // The token in hand is as it was; the next one carries the choice.
    app.by(&erin)
        .get("/api/organization")
        .await
        .expect(StatusCode::FORBIDDEN);
    let fresh = refresh(app, &erin_refresh)
        .await
        .expect(StatusCode::OK)
        .data::<Session>()
        .access_token;
    let active: Organization = app
        .by(&fresh)
        .get("/api/organization")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(active.id, second);
    // `x-org-id` still wins for one request.
    let named: Organization = app
        .by(&fresh)
        .org(&first)
        .get("/api/organization")
        .await
        .data();
    assert_eq!(named.id, first);
    let me: Me = app.by(&fresh).get("/api/me").await.data();
    assert_eq!(me.account.active_org_id.as_deref(), Some(second.as_str()));
    let switched = in_chain(app, "org.switch", &second).await;
    assert_eq!(switched.len(), 1);
    // A new sign-in carries it too.
    let (signed_in, _) = session(app, "erin@example.com").await;
    let active: Organization = app.by(&signed_in).get("/api/organization").await.data();
    assert_eq!(active.id, second);
}

/// A raw GET: (status, headers, body text).
async fn raw_get(
    app: &TestApp,
    path: &str,
    token: &str,
) -> (StatusCode, axum::http::HeaderMap, String) {
    let request = Request::builder()
        .method("GET")
        .uri(path)
        .header("authorization", format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap();
    let response = app.router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8(bytes.to_vec()).unwrap())
}

async fn the_build_namespace_is_rendered_the_same_way_each_time(app: &TestApp) {
    let (system, root) = app.system().await;
    let acme = app.org("alice", "Acme Builds").await;
    let alice = app.token("alice", "alice@example.com");
    let path = format!("/api/admin/organizations/{acme}/namespace");
    let (status, _, body) = raw_get(app, &path, &alice).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _, body) = raw_get(app, "/api/admin/organizations/nope/namespace", &root).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, headers, first) = raw_get(app, &path, &root).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/yaml"));
    let digest = headers["x-content-sha256"].to_str().unwrap().to_owned();
    assert_eq!(
        digest,
        hex::encode(sha2::Sha256::digest(first.as_bytes())),
        "the digest is of the bytes answered"
    );
    let (_, _, second) = raw_get(app, &path, &root).await;
    assert_eq!(first, second, "deterministic");
    for expected in [
        "kind: Namespace",
        &format!("name: org-{acme}"),
        "kind: ResourceQuota",
        "kind: LimitRange",
        "kind: NetworkPolicy",
        "kind: ServiceAccount",
        "compliance.dev/tier: developer",
        "pods: '2'",
    ] {
        assert!(first.contains(expected), "{expected} in\n{first}");
    }
    // kubectl reads them as the objects they are meant to be.
    let names = kubectl_dry_run(&first).await;
    assert_eq!(
        names,
        [
            format!("namespace/org-{acme}"),
            "resourcequota/builds".to_owned(),
            "limitrange/builds".to_owned(),
            "networkpolicy.networking.k8s.io/default-deny-except-registry".to_owned(),
            "serviceaccount/builder".to_owned(),
        ]
    );
    // Audited in the organization's chain and the system organization's.
    assert_eq!(
        in_chain(app, "admin.org.namespace.render", &acme)
            .await
            .len(),
        2
    );
    assert_eq!(
        in_chain(app, "admin.org.namespace.render", &system)
            .await
            .len(),
        2
    );
}

async fn a_super_admins_delete_of_an_organization_is_an_administration_action(app: &TestApp) {
    let (system, root) = app.system().await;
    let acme = app.org("alice", "acme").await;
    app.by(&root)
        .step_up(app.step_up("root", 1))
        .delete(format!("/api/organization/{acme}"))
        .await
        .expect(StatusCode::OK);
    let events = in_chain(app, "admin.org.delete", &system).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].target_id.as_deref(), Some(acme.as_str()));
    assert_eq!(in_chain(app, "org.soft_delete", &acme).await.len(), 1);
    assert_eq!(in_chain(app, "org.soft_delete", &system).await.len(), 1);
}

async fn impersonation_sees_as_the_user_and_ends_everywhere(app: &TestApp) {
    let (system, root) = app.system().await;
    let ada_id = register(app, "ada@example.com").await;
    let (ada, _) = session(app, "ada@example.com").await;
    let acme = org_of(app, &ada, "acme").await;
    let sam_id = register(app, "sam@example.com").await;
    app.by(&root)
        .step_up(app.step_up("root", 1))
        .put(format!("/api/admin/super-admins/{sam_id}"))
        .await
        .expect(StatusCode::OK);
    let ask = |user: &str, reason: &str, minutes: u32| json!({"userId": user, "reason": reason, "minutes": minutes});
    let start = |body: Value| {
        let root = root.clone();
        async move {
            app.by(&root)
                .step_up(app.step_up("root", 1))
                .post("/api/admin/impersonations")
                .json(body)
                .await
        }
    };
    let reason = "ticket 4711: her pipeline is blocked";

    // Refusals, none of which starts anything.
    app.by(&ada)
        .post("/api/admin/impersonations")
        .json(ask(&ada_id, reason, 10))
        .await
        .refused(ErrorCode::Forbidden);
    app.by(&root)
        .post("/api/admin/impersonations")
        .json(ask(&ada_id, reason, 10))
        .await
        .refused(ErrorCode::StepUpRequired);
    for (body, field) in [
        (ask(&ada_id, "too short", 10), "reason"),
        (ask(&ada_id, reason, 61), "minutes"),
        (ask(&ada_id, reason, 0), "minutes"),
        (ask("root", reason, 10), "userId"),
    ] {
        let Answer(status, answer) = start(body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["details"]["field"], field, "{answer}");
    }
    let Answer(status, answer) = start(ask(&sam_id, reason, 10)).await;
    assert_eq!(
        code(status, &answer),
        ErrorCode::Forbidden,
        "a super-admin: {answer}"
    );
    let Answer(status, answer) = start(ask("nobody", reason, 10)).await;
    assert_eq!(code(status, &answer), ErrorCode::NotFound, "{answer}");
    let closed = app.beside(&[("IMPERSONATION_ENABLED", "false")]).await;
    let Answer(status, answer) = closed
        .by(&root)
        .step_up(app.step_up("root", 1))
        .post("/api/admin/impersonations")
        .json(ask(&ada_id, reason, 10))
        .await;
    assert_eq!(code(status, &answer), ErrorCode::Forbidden, "{answer}");
    assert!(answer["message"]
        .as_str()
        .unwrap()
        .contains("IMPERSONATION_ENABLED"));
    closed.stop().await;
    assert!(app.audited("admin.impersonate.start").await.is_empty());

    // Started: the token is ada's, with root as its actor.
    let started: Started = start(ask(&ada_id, reason, 15))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!(started.expires_in, 900);
    let (id, seen) = (started.id, started.access_token);
    let claims = app.keys.verify(&seen).await.unwrap();
    assert_eq!(claims.sub, ada_id);
    assert_eq!(claims.act.map(|a| a.sub), Some("root".to_owned()));
    assert_eq!(claims.sid, None, "no family: it cannot be refreshed");
    let me: Me = app
        .by(&seen)
        .get("/api/me")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(me.account.email, "ada@example.com");
    // What it writes names both.
    app.by(&seen)
        .post(format!("/api/organization/{acme}/roles"))
        .json(json!({"name": "reviewers", "permissions": ["compliance:read"]}))
        .await
        .expect(StatusCode::CREATED);
    let created = in_chain(app, "org.role.create", &acme).await;
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].actor_id, ada_id);
    assert_eq!(created[0].details["impersonation"]["id"], id.as_str());
    assert_eq!(created[0].details["impersonation"]["adminId"], "root");
    // Never the account's credentials, nor a step-up.
    let soon = (Utc::now() + chrono::Duration::days(3)).to_rfc3339();
    app.by(&seen)
        .post("/api/me/tokens")
        .json(json!({"name": "cli", "expiresAt": soon}))
        .await
        .refused(ErrorCode::Forbidden);
    // Ada is told who, when and why.
    let Answer(status, answer) = app
        .by(&ada)
        .org(&acme)
        .get("/api/messages/conversations")
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let notice = answer.to_string();
    assert!(notice.contains("A platform administrator"), "{answer}");
    let conversation = answer["conversations"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let Answer(_, answer) = app
        .by(&ada)
        .org(&acme)
        .get(format!(
            "/api/messages/conversations/{conversation}/messages"
        ))
        .await;
    let text = answer.to_string();
    assert!(
        text.contains(reason) && text.contains(ROOT_EMAIL),
        "{answer}"
    );
    // Audited where ada's organizations see it.
    assert_eq!(
        in_chain(app, "admin.impersonate.start", &acme).await.len(),
        1
    );
    assert_eq!(
        in_chain(app, "admin.impersonate.start", &system)
            .await
            .len(),
        1
    );

    // Ended: refused at once; ending again is 409; others get 404.
    let Answer(status, answer) = app
        .by(&ada)
        .delete(format!("/api/admin/impersonations/{id}"))
        .await;
    assert_eq!(
        code(status, &answer),
        ErrorCode::NotFound,
        "ada's own session cannot end it"
    );
    app.by(&root)
        .delete(format!("/api/admin/impersonations/{id}"))
        .await
        .expect(StatusCode::OK);
    assert_eq!(me_status(app, &seen).await, StatusCode::UNAUTHORIZED);
    app.by(&root)
        .delete(format!("/api/admin/impersonations/{id}"))
        .await
        .refused(ErrorCode::Conflict);
    assert_eq!(in_chain(app, "admin.impersonate.end", &acme).await.len(), 1);

    // Read-only: reads pass, every change is refused; it ends from inside.
    let mut body = ask(&ada_id, reason, 5);
    body["readOnly"] = json!(true);
    let started: Started = start(body).await.expect(StatusCode::CREATED).data();
    assert!(started.read_only);
    let (read_only, second) = (started.access_token, started.id);
    assert_eq!(me_status(app, &read_only).await, StatusCode::OK);
    app.by(&read_only)
        .post(format!("/api/organization/{acme}/roles"))
        .json(json!({"name": "auditors", "permissions": ["compliance:read"]}))
        .await
        .refused(ErrorCode::Forbidden);
    let Answer(status, answer) = app
        .by(&read_only)
        .delete(format!("/api/admin/impersonations/{second}"))
        .await;
    assert_eq!(
        code(status, &answer),
        ErrorCode::Forbidden,
        "read-only: even its end goes through an admin"
    );
    app.by(&root)
        .delete(format!("/api/admin/impersonations/{second}"))
        .await
        .expect(StatusCode::OK);
    // A token that claims an actor this server did not record is refused.
    let mut forged = adapters::auth::Claims::user(
        &ada_id,
        None,
        Utc::now(),
        std::time::Duration::from_secs(600),
    );
    forged.act = Some(adapters::auth::Actor { sub: "root".into() });
    let forged = app.keys.sign(&forged).unwrap();
    assert_eq!(me_status(app, &forged).await, StatusCode::UNAUTHORIZED);
}

async fn impersonation_through_the_console(app: &TestApp) {
    let (_, _) = app.system().await;
    adapters::services::accounts::provision(
        &app.state.infra.store,
        &app.state.config,
        &app.state.infra.passwords,
        (ROOT_EMAIL, PASSWORD.to_owned()),
        Utc::now(),
    )
    .await
    .unwrap();
    let ada_id = register(app, "ada@example.com").await;
    let (ada, _) = session(app, "ada@example.com").await;
    let acme = org_of(app, &ada, "acme").await;
    let base = super::console::serve(app.router.clone()).await;
    let b = super::console::browser().await;
    b.sign_in(&base, ROOT_EMAIL).await;
    b.open(&format!("{base}/console/admin/users")).await;
    assert!(b.text("#users").await.contains("ada@example.com"));
    let row = format!("tr[data-user='{ada_id}']");
    b.type_into(
        &format!("{row} input[name=reason]"),
        "ticket 4711: her scans fail",
    )
    .await;
    b.type_into(&format!("{row} input[name=minutes]"), "10")
        .await;
    b.click(&format!("{row} input[name=readOnly]")).await;
    b.type_into(&format!("{row} input[name=password]"), PASSWORD)
        .await;
    b.shot("admin-users").await;
    b.click(&format!("{row} button")).await;
    assert!(
        b.lands_on("/console/posture").await,
        "{}",
        b.text("main").await
    );
    // Every page says who is seen as, for whom, and that it is read-only.
    for path in ["/console/posture", "/console/scans"] {
        b.open(&format!("{base}{path}?org={acme}")).await;
        let banner = b.text("#impersonation").await;
        assert!(banner.contains("ada@example.com"), "{banner}");
        assert!(banner.contains(ROOT_EMAIL), "{banner}");
        assert!(banner.contains("read-only"), "{banner}");
    }
    b.shot("impersonating").await;
    // A change is refused with the API's reason.
    b.click("#start-scan button").await;
    let refused = b.text("#error").await;
    assert!(refused.contains("read-only"), "{refused}");
    let Answer(_, answer) = app.by(&ada).org(&acme).get("/api/compliance/scans").await;
    assert_eq!(pagination(&answer).total, 0, "no scan started: {answer}");
    // Ada was told.
    let Answer(_, answer) = app
        .by(&ada)
        .org(&acme)
        .get("/api/messages/conversations")
        .await;
    assert!(
        answer.to_string().contains("A platform administrator"),
        "{answer}"
    );
    // Ended from the banner: the admin's own console comes back.
    b.click("#impersonation button").await;
    assert!(b.lands_on("/console/admin/users").await);
    assert_eq!(b.count("#impersonation").await, 0);
    assert!(b.text("header .who").await.contains(ROOT_EMAIL));
    let ended = in_chain(app, "admin.impersonate.end", &acme).await;
    assert_eq!(ended.len(), 1);
}

/// A console page (no session): (status, body).
async fn console_page(
    app: &TestApp,
    method: &str,
    path: &str,
    form: Option<String>,
) -> (StatusCode, String) {
    let mut request = Request::builder().method(method).uri(path);
    let body = match form {
        Some(form) => {
            request = request.header("content-type", "application/x-www-form-urlencoded");
            Body::from(form)
        }
        None => Body::empty(),
    };
    let response = app
        .router
        .clone()
        .oneshot(request.body(body).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

async fn an_invitation_is_accepted_on_the_console_page_its_mail_links_to(app: &TestApp) {
    let (_, root) = app.system().await;
    app.by(&root)
        .post("/api/admin/users")
        .json(json!({"email": "finn@example.com"}))
        .await
        .expect(StatusCode::CREATED);
    let mail = super::signin::text(
        app,
        "SELECT body FROM account_mail WHERE recipient = 'finn@example.com'",
    )
    .await
    .unwrap();
    let link = mail
        .lines()
        .find(|l| l.contains("/console/verify-email?token="))
        .expect("the mail links to the console");
    let path = &link[link.find("/console/").unwrap()..];
    let token = link_token(app, "finn@example.com").await;
    let (status, page) = console_page(app, "GET", path, None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        page.contains(&token) && page.contains("Choose a password"),
        "{page}"
    );
    let (status, page) = console_page(app, "GET", "/console/verify-email", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    // Without the password an invitation needs: refused, the link still good.
    let form = format!("token={token}&password=");
    let (status, page) = console_page(app, "POST", "/console/verify-email", Some(form)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(page.contains("choose its password"), "{page}");
    let form = format!("token={token}&password=finn%27s+own+secret");
    let (status, page) = console_page(app, "POST", "/console/verify-email", Some(form)).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("Your e-mail is verified"), "{page}");
    let Answer(status, answer) = login_as(app, "finn@example.com", "finn's own secret").await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

/// `kubectl create --dry-run=client` of a YAML stream, against a loopback server
/// that answers only API discovery (kubectl maps each kind to its resource there;
/// nothing is created): the names kubectl prints.
async fn kubectl_dry_run(yaml: &str) -> Vec<String> {
    use axum::routing::get;
    let resources = |group_version: &str, list: &[(&str, &str, bool)]| {
        json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": list.iter().map(|(name, kind, namespaced)| json!({
                "name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
                "verbs": ["create", "get", "list"]
            })).collect::<Vec<_>>()
        })
    };
    let core = resources(
        "v1",
        &[
            ("namespaces", "Namespace", false),
            ("resourcequotas", "ResourceQuota", true),
            ("limitranges", "LimitRange", true),
            ("serviceaccounts", "ServiceAccount", true),
        ],
    );
    let networking = resources(
        "networking.k8s.io/v1",
        &[("networkpolicies", "NetworkPolicy", true)],
    );
    let discovery = axum::Router::new()
        .route(
            "/api",
            get(|| async { axum::Json(json!({"kind": "APIVersions", "versions": ["v1"]})) }),
        )
        .route("/api/v1", get(move || async move { axum::Json(core) }))
        .route(
            "/apis",
            get(|| async {
                axum::Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
                    "name": "networking.k8s.io",
                    "versions": [{"groupVersion": "networking.k8s.io/v1", "version": "v1"}],
                    "preferredVersion": {"groupVersion": "networking.k8s.io/v1", "version": "v1"}
                }]}))
            }),
        )
        .route(
            "/apis/networking.k8s.io/v1",
            get(move || async move { axum::Json(networking) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, discovery).await });
    let dir = std::env::temp_dir().join(format!("kubectl-{}", adapters::new_id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("namespace.yaml");
    std::fs::write(&file, yaml).unwrap();
    let output = tokio::process::Command::new("kubectl")
        .args([
            "create",
            "--dry-run=client",
            "--validate=false",
            "-o",
            "name",
            "--server",
        ])
        .arg(format!("http://{address}"))
        .arg("-f")
        .arg(&file)
        .env("KUBECONFIG", dir.join("none"))
        .env("HOME", &dir)
        .output()
        .await
        .expect("kubectl must be installed (scripts/test installs it)");
    server.abort();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        output.status.success(),
        "kubectl refused the manifests: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

use sha2::Digest;

on_both_backends!(
    accounts_are_created_changed_disabled_and_deleted,
    a_users_own_flags_take_features_away_and_open_previews,
    the_active_organization_is_carried_by_tokens_minted_afterwards,
    the_build_namespace_is_rendered_the_same_way_each_time,
    a_super_admins_delete_of_an_organization_is_an_administration_action,
    impersonation_sees_as_the_user_and_ends_everywhere,
    impersonation_through_the_console,
    an_invitation_is_accepted_on_the_console_page_its_mail_links_to,
);
