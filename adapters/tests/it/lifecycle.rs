//! An organization's life after delete: soft delete (its teams with it), everything
//! refused while deleted, restore to exactly the state it left, the restore window,
//! the purge after it (the clock passed in), the audit chain kept and verifiable.

use super::billing::team_of;
use super::fixtures::pipeline;
use super::*;
use crate::api::Answer;
use adapters::code::ErrorCode;
use adapters::http::wire::{ChainVerdict, OrgQuotas};

/// What an organization holds, as its owner and a super-admin read it.
async fn snapshot(app: &TestApp, owner: &str, root: &str, org: &str) -> Value {
    let mut seen = serde_json::Map::new();
    for (name, path, token, header) in [
        (
            "members",
            format!("/api/organization/{org}/members"),
            root,
            None,
        ),
        (
            "roles",
            format!("/api/organization/{org}/roles"),
            root,
            None,
        ),
        (
            "teams",
            format!("/api/organization/{org}/teams"),
            root,
            None,
        ),
        (
            "rules",
            "/api/compliance/rules".to_owned(),
            owner,
            Some(org),
        ),
        ("pipelines", "/api/pipelines".to_owned(), owner, Some(org)),
        (
            "schedules",
            "/api/compliance/scan-schedules".to_owned(),
            owner,
            Some(org),
        ),
    ] {
        let Answer(status, body) = app.by(token).org_opt(header).get(&path).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        seen.insert(name.to_owned(), body);
    }
    let quotas: OrgQuotas = app.by(owner).org(org).get("/api/quotas").await.data();
    for dimension in ["pipelines", "plugins"] {
        seen.insert(
            format!("quota-{dimension}"),
            json!(quotas.quotas[dimension]),
        );
    }
    Value::Object(seen)
}

/// The same step-up request twice at once, by the super-admin: one 200, one 409.
async fn one_wins(app: &TestApp, method: &str, path: &str, root: &str) -> Vec<(StatusCode, Value)> {
    let step = app.step_up("root", 5);
    let requests = (0..2)
        .map(|_| {
            let mut request = app.by(root).method(method, path).request();
            request
                .headers_mut()
                .insert("x-step-up-token", step.parse().unwrap());
            request
        })
        .collect();
    let answers = app.concurrently(requests).await;
    let statuses: Vec<u16> = answers.iter().map(|(s, _)| s.as_u16()).collect();
    assert!(
        statuses.contains(&200) && statuses.contains(&409),
        "{method} {path}: {answers:?}"
    );
    answers
}

async fn used_pipelines(app: &TestApp, owner: &str, org: &str) -> u64 {
    let quotas: OrgQuotas = app.by(owner).org(org).get("/api/quotas").await.data();
    quotas.quotas["pipelines"].used
}

async fn delete_refuses_everything_and_restore_brings_it_all_back(app: &TestApp) {
    let root = app.super_token().await;
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let bob = app.token("bob", "bob@example.com");
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": "bob", "role": "member"}))
        .await
        .expect(StatusCode::CREATED);
    app.by(&alice)
        .post(format!("/api/organization/{acme}/roles"))
        .json(json!({"name": "Readers", "permissions": ["reports:read"]}))
        .await
        .expect(StatusCode::CREATED);
    app.rule(
        &alice,
        &acme,
        json!({"name": "Private only", "target": "pipeline", "severity": "warning",
               "field": "accessModifier", "operator": "eq", "value": "private"}),
    )
    .await;
    let team = team_of(app, &alice, &acme, "ops").await;
    for (org, name) in [(&acme, "web"), (&team, "ops-web")] {
        app.by(&alice)
            .org(org)
            .post("/api/pipelines")
            .json(pipeline(name))
            .await
            .expect(StatusCode::CREATED);
    }
    app.by(&alice)
        .org(&acme)
        .post("/api/compliance/scan-schedules")
        .json(json!({"target": "pipeline", "cronExpression": "0 3 * * *"}))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(used_pipelines(app, &alice, &acme).await, 2, "root and team");
    // bob has been seen (his e-mail is recorded once his token is).
    app.by(&bob)
        .org(&acme)
        .get("/api/pipelines")
        .await
        .expect(StatusCode::OK);

    // A team alone: its usage leaves the root's pool, and comes back with it.
    let stepped = |path: String, method: &'static str| {
        let root = root.clone();
        async move {
            app.by(&root)
                .step_up(app.step_up("root", 5))
                .method(method, &path)
                .await
        }
    };
    let Answer(status, body) = stepped(format!("/api/organization/{team}"), "DELETE").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(used_pipelines(app, &alice, &acme).await, 1);
    let Answer(status, body) = stepped(format!("/api/organization/{team}/restore"), "POST").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(used_pipelines(app, &alice, &acme).await, 2);

    let before = snapshot(app, &alice, &root, &acme).await;

    // Delete: without step-up refused; twice at once, one 200 and one 409.
    app.by(&root)
        .delete(format!("/api/organization/{acme}"))
        .await
        .refused(ErrorCode::StepUpRequired);
    one_wins(app, "DELETE", &format!("/api/organization/{acme}"), &root).await;
    assert_eq!(
        app.audited("org.soft_delete").await.len(),
        2 + 2,
        "team, then root: each in two chains"
    );

    // Its members cannot act in it or its team; it leaves every listing; no schedule
    // of it is due.
    for (token, org) in [(&alice, &acme), (&bob, &acme), (&alice, &team)] {
        let Answer(status, body) = app.by(token).org(org).get("/api/pipelines").await;
        assert!(
            matches!(status, StatusCode::FORBIDDEN | StatusCode::NOT_FOUND),
            "{status} {body}"
        );
    }
    let Answer(_, mine) = app.by(&alice).get("/api/me/organizations").await;
    assert!(!mine.to_string().contains(&acme), "{mine}");
    let far = Utc::now() + chrono::Duration::days(2);
    assert!(app
        .store
        .due_schedules(far, 100)
        .await
        .unwrap()
        .iter()
        .all(|s| s.org_id != acme));

    // Restoring needs step-up; a name taken meanwhile is 409 naming it.
    app.by(&root)
        .post(format!("/api/organization/{acme}/restore"))
        .await
        .refused(ErrorCode::StepUpRequired);
    let taken = app.org("dave", "acme").await;
    let Answer(status, body) = stepped(format!("/api/organization/{acme}/restore"), "POST").await;
    assert_eq!(code(status, &body), ErrorCode::Conflict, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("`acme`"),
        "{body}"
    );
    let Answer(status, body) = stepped(format!("/api/organization/{taken}"), "DELETE").await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Twice at once: one restores, the other is 409.
    let answers = one_wins(
        app,
        "POST",
        &format!("/api/organization/{acme}/restore"),
        &root,
    )
    .await;
    let restored = answers.iter().find(|(s, _)| *s == StatusCode::OK).unwrap();
    assert_eq!(Answer::from(restored.clone()).id(), acme);
    assert_eq!(app.audited("org.restore").await.len(), 2 + 2);

    // Everything is back, exactly: members, Roles, rules, inventory, schedules, quotas.
    assert_eq!(snapshot(app, &alice, &root, &acme).await, before);
    let Answer(status, _) = app.by(&bob).org(&team).get("/api/pipelines").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "bob was never in the team");
    let Answer(status, _) = app.by(&alice).org(&team).get("/api/pipelines").await;
    assert_eq!(status, StatusCode::OK, "the team came back with its root");
    // A team cannot come back without its root.
    let Answer(status, _) = stepped(format!("/api/organization/{acme}"), "DELETE").await;
    assert_eq!(status, StatusCode::OK);
    let Answer(status, body) = stepped(format!("/api/organization/{team}/restore"), "POST").await;
    assert_eq!(code(status, &body), ErrorCode::Conflict, "{body}");
}

async fn past_the_window_it_is_gone_and_its_chain_stays(app: &TestApp) {
    let root = app.super_token().await;
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    app.by(&alice)
        .org(&acme)
        .post("/api/pipelines")
        .json(pipeline("web"))
        .await
        .expect(StatusCode::CREATED);
    let step = || Some(app.step_up("root", 5));
    app.by(&root)
        .step_up_opt(step())
        .delete(format!("/api/organization/{acme}"))
        .await
        .expect(StatusCode::OK);
    // Within the window nothing is purged.
    let purged = adapters::workers::retention::purge_deleted(
        &app.store,
        Utc::now() + chrono::Duration::days(29),
        30,
    )
    .await
    .unwrap();
    assert_eq!(purged, 0);
    // Past ORG_RESTORE_DAYS a restore is 410, before the purge and after it.
    app.sql(&format!(
        "UPDATE organizations SET deleted_at = '2000-01-01T00:00:00.000000Z' WHERE id = '{acme}'"
    ))
    .await;
    let restore = format!("/api/organization/{acme}/restore");
    let Answer(status, body) = app.by(&root).step_up_opt(step()).post(&restore).await;
    assert_eq!(code(status, &body), ErrorCode::Gone, "{body}");
    assert_eq!(status, StatusCode::GONE);
    app.relay().await;
    let purged = adapters::workers::retention::purge_deleted(&app.store, Utc::now(), 30)
        .await
        .unwrap();
    assert_eq!(purged, 1);
    app.by(&root)
        .step_up_opt(step())
        .post(&restore)
        .await
        .refused(ErrorCode::Gone);
    // Its data is gone, its chain is not, and it verifies.
    for (table, column) in [
        ("organizations", "id"),
        ("pipelines", "org_id"),
        ("memberships", "org_id"),
        ("roles", "org_id"),
        ("quota_usage", "org_id"),
        ("quota_pool", "root_id"),
        ("billing_subscriptions", "org_id"),
    ] {
        let row = sqlx::query(&format!(
            "SELECT COUNT(*) AS n FROM {table} WHERE {column} = '{acme}'"
        ))
        .fetch_one(adapters::storage::pool_for_tests(&app.store))
        .await
        .unwrap();
        let n: i64 = sqlx::Row::try_get(&row, "n").unwrap();
        assert_eq!(n, 0, "{table} still holds the organization's rows");
    }
    assert!(app.store.chain_batch(&acme, 0, 10).await.unwrap().len() >= 2);
    let verdict: ChainVerdict = app
        .by(&root)
        .get(format!("/api/audit/verify?orgId={acme}"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(verdict.ok, "{verdict:?}");
    // An id that never existed is 404.
    app.by(&root)
        .step_up_opt(step())
        .post("/api/organization/never/restore")
        .await
        .refused(ErrorCode::NotFound);
}

on_both_backends!(
    delete_refuses_everything_and_restore_brings_it_all_back,
    past_the_window_it_is_gone_and_its_chain_stays,
);
