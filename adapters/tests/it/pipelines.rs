//! Document 2's pipeline service: the inventory, compliance and quota at the door, the
//! registry, tenant isolation.

use super::fixtures::staged_pipeline;
use super::*;
use crate::api::{pagination, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::{Pipeline, Registration};
use adapters::inventory::{AccessModifier, EntityCompliance, EntityResult};

async fn create(app: &TestApp, token: &str, org: &str, body: Value) -> Answer {
    app.by(token)
        .org(org)
        .post("/api/pipelines")
        .json(body)
        .await
}

async fn the_life_of_a_pipeline(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let created: Pipeline = create(app, &alice, &org, staged_pipeline("deploy-web"))
        .await
        .expect(StatusCode::CREATED)
        .data();
    let id = created.id.clone();
    assert_eq!(created.pipeline_name, "deploy-web");
    assert_eq!(created.org_id, org);
    assert_eq!(created.created_by, "alice");
    assert_eq!(created.compliance.result, EntityResult::Pass);
    assert_eq!(
        created.props["stages"][0]["steps"][0]["plugin"]["name"],
        "eslint"
    );

    let mut second = staged_pipeline("nightly");
    second["accessModifier"] = json!("public");
    second["project"] = json!("api");
    let Answer(status, _) = create(app, &alice, &org, second).await;
    assert_eq!(status, StatusCode::CREATED);

    let read: Pipeline = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/pipelines/{id}"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(read.id, id);

    // List: key, pagination, filters, sort.
    let Answer(status, body) = app.by(&alice).org(&org).get("/api/pipelines").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["pipelines"].as_array().unwrap().len(), 2);
    assert_eq!(pagination(&body).total, 2);
    let Answer(_, body) = app
        .by(&alice)
        .org(&org)
        .get("/api/pipelines?accessModifier=public")
        .await;
    assert_eq!(body["pipelines"][0]["pipelineName"], "nightly");
    assert_eq!(pagination(&body).total, 1);
    let Answer(_, body) = app
        .by(&alice)
        .org(&org)
        .get("/api/pipelines?sortBy=pipelineName&sortOrder=asc&limit=1")
        .await;
    assert_eq!(body["pipelines"][0]["pipelineName"], "deploy-web");
    assert!(pagination(&body).has_more);
    app.by(&alice)
        .org(&org)
        .get("/api/pipelines?sortBy=props")
        .await
        .refused(ErrorCode::ValidationError);
    app.by(&alice)
        .org(&org)
        .get("/api/pipelines?accessModifier=secret")
        .await
        .refused(ErrorCode::ValidationError);

    // Find: one by query.
    let found: Pipeline = app
        .by(&alice)
        .org(&org)
        .get("/api/pipelines/find?project=web&organization=acme")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(found.id, id);
    app.by(&alice)
        .org(&org)
        .get("/api/pipelines/find?project=nowhere")
        .await
        .refused(ErrorCode::NotFound);
    app.by(&alice)
        .org(&org)
        .get("/api/pipelines/find")
        .await
        .refused(ErrorCode::ValidationError);

    // Update, then a duplicate name.
    let mut changed = staged_pipeline("deploy-web");
    changed["accessModifier"] = json!("public");
    let updated: Pipeline = app
        .by(&alice)
        .org(&org)
        .put(format!("/api/pipelines/{id}"))
        .json(changed)
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(updated.access_modifier, AccessModifier::Public);
    let Answer(status, body) = create(app, &alice, &org, staged_pipeline("deploy-web")).await;
    assert_eq!(code(status, &body), ErrorCode::Conflict);

    // Delete.
    app.by(&alice)
        .org(&org)
        .delete(format!("/api/pipelines/{id}"))
        .await
        .expect(StatusCode::OK);
    app.by(&alice)
        .org(&org)
        .get(format!("/api/pipelines/{id}"))
        .await
        .refused(ErrorCode::NotFound);
    app.by(&alice)
        .org(&org)
        .delete(format!("/api/pipelines/{id}"))
        .await
        .refused(ErrorCode::NotFound);

    // Audited, and each mutation queued the entity's re-evaluation.
    for action in ["pipeline.create", "pipeline.update", "pipeline.delete"] {
        // The relay chains on its own schedule: look again for a while (it failed
        // once in a loaded run on PostgreSQL with a single look).
        let mut events = app.audited(action).await;
        for _ in 0..100 {
            if events
                .iter()
                .any(|e| e.target_id.as_deref() == Some(id.as_str()))
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            events = app.audited(action).await;
        }
        assert!(
            events
                .iter()
                .any(|e| e.target_id.as_deref() == Some(id.as_str())),
            "{action}"
        );
    }
    assert_eq!(app.store.pending_reevaluations(&org).await.unwrap(), 4);
}

async fn bad_bodies_change_nothing(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let mut cases = Vec::new();
    let mut unknown_visibility = staged_pipeline("p");
    unknown_visibility["accessModifier"] = json!("internal");
    cases.push((unknown_visibility, "accessModifier"));
    let mut no_plugin = staged_pipeline("p");
    no_plugin["props"]["stages"][0]["steps"][0]
        .as_object_mut()
        .unwrap()
        .remove("plugin");
    cases.push((no_plugin, "props"));
    let mut no_version = staged_pipeline("p");
    no_version["props"]["stages"][0]["steps"][0]["plugin"] = json!({"name": "eslint"});
    cases.push((no_version, "props"));
    let mut bad_env = staged_pipeline("p");
    bad_env["props"]["stages"][0]["steps"][0]["env"] = json!({"CI": 1});
    cases.push((bad_env, "props"));
    let mut not_object = staged_pipeline("p");
    not_object["props"] = json!([1, 2]);
    cases.push((not_object, "props"));
    let mut empty_name = staged_pipeline("p");
    empty_name["pipelineName"] = json!("  ");
    cases.push((empty_name, "pipelineName"));
    for (body, field) in cases {
        let Answer(status, answer) = create(app, &alice, &org, body).await;
        assert_eq!(
            code(status, &answer),
            ErrorCode::ValidationError,
            "{answer}"
        );
        assert_eq!(answer["details"]["field"], field, "{answer}");
    }
    let mut unknown_field = staged_pipeline("p");
    unknown_field["owner"] = json!("mallory");
    let Answer(status, answer) = create(app, &alice, &org, unknown_field).await;
    assert_eq!(code(status, &answer), ErrorCode::ValidationError);
    let Answer(_, body) = app.by(&alice).org(&org).get("/api/pipelines").await;
    assert_eq!(pagination(&body).total, 0);
    assert_eq!(app.store.pending_reevaluations(&org).await.unwrap(), 0);
}

async fn compliance_at_the_door(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let rule = |name: &str, severity: &str, field: &str, operator: &str, value: Value| {
        json!({"name": name, "target": "pipeline", "severity": severity,
               "field": field, "operator": operator, "value": value})
    };
    for body in [
        rule(
            "Private only",
            "error",
            "accessModifier",
            "eq",
            json!("private"),
        ),
        rule(
            "Named by convention",
            "warning",
            "pipelineName",
            "regex",
            json!("^[a-z]+-[a-z]+$"),
        ),
    ] {
        app.by(&alice)
            .org(&org)
            .post("/api/compliance/rules")
            .json(body)
            .await
            .expect(StatusCode::CREATED);
    }
    // A block: 403 with the violations, nothing stored.
    let mut public = staged_pipeline("deploy-web");
    public["accessModifier"] = json!("public");
    let Answer(status, body) = create(app, &alice, &org, public).await;
    assert_eq!(
        code(status, &body),
        ErrorCode::ComplianceViolation,
        "{body}"
    );
    let violation = &body["details"]["violations"][0];
    assert_eq!(violation["ruleName"], "Private only");
    assert_eq!(violation["severity"], "error");
    assert_eq!(violation["field"], "accessModifier");
    let Answer(_, listed) = app.by(&alice).org(&org).get("/api/pipelines").await;
    assert_eq!(pagination(&listed).total, 0);
    assert_eq!(app.store.pending_reevaluations(&org).await.unwrap(), 0);
    assert!(app.audited("pipeline.create").await.is_empty());

    // A warning: stored, and returned with the pipeline.
    let warned: Pipeline = create(app, &alice, &org, staged_pipeline("nightly"))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!(warned.compliance.result, EntityResult::Warn);
    let names: Vec<_> = warned
        .compliance
        .violations
        .iter()
        .map(|v| v.rule_name())
        .collect();
    assert_eq!(names, ["Named by convention"]);
    let id = warned.id;
    let read: Pipeline = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/pipelines/{id}"))
        .await
        .data();
    assert_eq!(read.compliance.result, EntityResult::Warn);

    // An update that would break a blocking rule is refused too, and changes nothing.
    let mut public = staged_pipeline("nightly");
    public["accessModifier"] = json!("public");
    app.by(&alice)
        .org(&org)
        .put(format!("/api/pipelines/{id}"))
        .json(public)
        .await
        .refused(ErrorCode::ComplianceViolation);
    let unchanged: Pipeline = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/pipelines/{id}"))
        .await
        .data();
    assert_eq!(unchanged.access_modifier, AccessModifier::Private);

    // The checks went through the check log like a validation.
    let Answer(_, log) = app
        .by(&alice)
        .org(&org)
        .get("/api/compliance/audit?target=pipeline")
        .await;
    let results: Vec<_> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["result"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(results.iter().filter(|r| *r == "block").count(), 2, "{log}");
    assert_eq!(results.iter().filter(|r| *r == "warn").count(), 1, "{log}");
}

async fn the_pool_of_a_root_and_its_team_is_capped(app: &TestApp) {
    // Developer tier: 5 pipelines, shared by the root and its teams.
    let root = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let team = app
        .by(&alice)
        .post("/api/organization")
        .json(json!({"name": "acme-web", "parentOrgId": root}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    let mut ids = Vec::new();
    for (i, org) in [&root, &root, &root, &team, &team].into_iter().enumerate() {
        let id = create(app, &alice, org, staged_pipeline(&format!("p{i}")))
            .await
            .expect(StatusCode::CREATED)
            .id();
        ids.push((org.clone(), id));
    }
    for org in [&root, &team] {
        let Answer(status, body) = create(app, &alice, org, staged_pipeline("one-too-many")).await;
        assert_eq!(code(status, &body), ErrorCode::QuotaExceeded, "{body}");
        assert_eq!(body["details"]["limit"], 5);
        assert_eq!(body["details"]["used"], 5);
        assert_eq!(body["details"]["requested"], 1);
        assert_eq!(body["details"]["dimension"], "pipelines");
    }
    assert_eq!(app.store.pool_usage(&root, "pipelines").await.unwrap(), 5);
    assert_eq!(app.store.usage(&team, "pipelines").await.unwrap(), 2);
    // Nothing of the refused creates was stored.
    let Answer(_, body) = app.by(&alice).org(&team).get("/api/pipelines").await;
    assert_eq!(pagination(&body).total, 2);
    // The refused creates were checked: their check log rows are the compliance
    // service's and stay; the entity's snapshot, its re-evaluation and its audit event
    // went with the refusal.
    for (org, created) in [(&root, 3), (&team, 2)] {
        let (_, checked) = app
            .store
            .checks(org, Some("pipeline"), None, None, 100, 0)
            .await
            .unwrap();
        assert_eq!(checked, created + 1, "{org}");
        let snapshots = app.store.snapshots(org, "pipeline", 100).await.unwrap();
        assert_eq!(snapshots.len() as u64, created, "{org}");
        assert!(snapshots
            .iter()
            .all(|(entity, _)| ids.iter().any(|(_, id)| id == entity)));
        assert_eq!(app.store.pending_reevaluations(org).await.unwrap(), created);
    }
    app.relay().await;
    assert_eq!(app.audited("pipeline.create").await.len(), 5);
    // Deleting frees: the team's delete makes room for the root.
    let (org, id) = &ids[4];
    app.by(&alice)
        .org(org)
        .delete(format!("/api/pipelines/{id}"))
        .await
        .expect(StatusCode::OK);
    // A name taken (409) after the check and the charge leaves no snapshot, charge or
    // event either.
    let kept = app.store.snapshots(&team, "pipeline", 100).await.unwrap();
    let Answer(status, body) = create(app, &alice, &team, staged_pipeline("p3")).await;
    assert_eq!(code(status, &body), ErrorCode::Conflict, "{body}");
    assert_eq!(
        app.store.snapshots(&team, "pipeline", 100).await.unwrap(),
        kept
    );
    assert_eq!(app.store.pool_usage(&root, "pipelines").await.unwrap(), 4);
    let Answer(status, body) = create(app, &alice, &root, staged_pipeline("fits-again")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(app.store.pool_usage(&root, "pipelines").await.unwrap(), 5);
    assert_eq!(app.store.usage(&team, "pipelines").await.unwrap(), 1);
}

async fn concurrent_creates_never_pass_the_cap(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    // Twelve creates in flight at once against a cap of five.
    let requests = (0..12)
        .map(|i| {
            app.by(&alice)
                .org(&org)
                .post("/api/pipelines")
                .json(staged_pipeline(&format!("race-{i}")))
                .request()
        })
        .collect();
    let answers = app.concurrently(requests).await;
    let created = answers
        .iter()
        .filter(|(status, _)| *status == StatusCode::CREATED)
        .count();
    let refused = answers
        .iter()
        .filter(|(status, body)| {
            *status == StatusCode::TOO_MANY_REQUESTS
                && code(*status, body) == ErrorCode::QuotaExceeded
        })
        .count();
    assert_eq!((created, refused), (5, 7), "{answers:?}");
    assert_eq!(app.store.pool_usage(&org, "pipelines").await.unwrap(), 5);
    let Answer(_, body) = app.by(&alice).org(&org).get("/api/pipelines").await;
    assert_eq!(pagination(&body).total, 5);
}

async fn the_registry(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let other = app.org("bob", "globex").await;
    let alice = app.token("alice", "alice@example.com");
    let bob = app.token("bob", "bob@example.com");
    let id = create(app, &alice, &org, staged_pipeline("deploy-web"))
        .await
        .id();
    let second = create(app, &alice, &org, staged_pipeline("nightly"))
        .await
        .id();
    let arn = "arn:aws:codepipeline:eu-west-1:123456789012:deploy-web";
    let register = |pipeline_id: &str| json!({"arn": arn, "pipelineId": pipeline_id});
    let registered: Registration = app
        .by(&alice)
        .org(&org)
        .post("/api/pipelines/registry")
        .json(register(&id))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(registered.pipeline_id, id);
    // An upsert: the same ARN, another pipeline.
    let registered: Registration = app
        .by(&alice)
        .org(&org)
        .post("/api/pipelines/registry")
        .json(register(&second))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(registered.pipeline_id, second);
    let Answer(status, body) = app
        .by(&alice)
        .org(&org)
        .get("/api/pipelines/registry")
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["registry"].as_array().unwrap().len(), 1);
    assert_eq!(body["registry"][0]["arn"], arn);
    // Tenant-guarded: bob cannot point his registry at alice's pipeline.
    app.by(&bob)
        .org(&other)
        .post("/api/pipelines/registry")
        .json(register(&id))
        .await
        .refused(ErrorCode::NotFound);
    let Answer(_, body) = app
        .by(&bob)
        .org(&other)
        .get("/api/pipelines/registry")
        .await;
    assert_eq!(pagination(&body).total, 0);
    // Deregister.
    let path = format!("/api/pipelines/registry?arn={}", arn.replace(':', "%3A"));
    app.by(&alice)
        .org(&org)
        .delete(&path)
        .await
        .expect(StatusCode::OK);
    app.by(&alice)
        .org(&org)
        .delete(&path)
        .await
        .refused(ErrorCode::NotFound);
    assert_eq!(app.audited("pipeline.registry.register").await.len(), 2);
    assert_eq!(app.audited("pipeline.registry.deregister").await.len(), 1);
}

async fn another_organization_cannot_reach_pipelines(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let other = app.org("bob", "globex").await;
    let alice = app.token("alice", "alice@example.com");
    let bob = app.token("bob", "bob@example.com");
    let id = create(app, &alice, &org, staged_pipeline("deploy-web"))
        .await
        .id();
    // Bob, in his own organization, finds nothing of alice's.
    for (method, path, body) in [
        ("GET", format!("/api/pipelines/{id}"), None),
        (
            "PUT",
            format!("/api/pipelines/{id}"),
            Some(staged_pipeline("x")),
        ),
        ("DELETE", format!("/api/pipelines/{id}"), None),
    ] {
        let Answer(status, answer) = app
            .by(&bob)
            .org(&other)
            .method(method, &path)
            .json_opt(body)
            .await;
        assert_eq!(
            code(status, &answer),
            ErrorCode::NotFound,
            "{method} {path}"
        );
    }
    // Naming alice's organization is refused outright.
    for (method, path) in [
        ("GET", "/api/pipelines".to_owned()),
        ("GET", format!("/api/pipelines/{id}")),
        ("DELETE", format!("/api/pipelines/{id}")),
        ("GET", "/api/pipelines/registry".to_owned()),
    ] {
        let Answer(status, answer) = app.by(&bob).org(&org).method(method, &path).await;
        assert_eq!(
            code(status, &answer),
            ErrorCode::TenantForbidden,
            "{method} {path}"
        );
    }
    let Answer(status, answer) = create(app, &bob, &org, staged_pipeline("intruder")).await;
    assert_eq!(code(status, &answer), ErrorCode::TenantForbidden);
    // A member without pipelines:write reads but does not write.
    app.by(&alice)
        .post(format!("/api/organization/{org}/members"))
        .json(json!({"userId": "carol"}))
        .await
        .expect(StatusCode::CREATED);
    let Answer(_, roles) = app
        .by(&alice)
        .get(format!("/api/organization/{org}/roles"))
        .await;
    let member_role = roles["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "Member")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.by(&alice)
        .delete(format!(
            "/api/organization/{org}/roles/{member_role}/members/carol"
        ))
        .await
        .expect(StatusCode::OK);
    let carol = app.token("carol", "carol@example.com");
    app.by(&carol)
        .org(&org)
        .get("/api/pipelines")
        .await
        .expect(StatusCode::OK);
    let Answer(status, answer) = create(app, &carol, &org, staged_pipeline("by-carol")).await;
    assert_eq!(code(status, &answer), ErrorCode::Forbidden);
    assert_eq!(answer["details"]["missing"], "pipelines:write");
}

/// A remote check (`COMPLIANCE_SERVICE_HOST`): a real server that blocks, one that
/// is down, one that answers after 6 seconds; the last two fail closed with 503.
async fn a_remote_check_blocks_or_fails_closed(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    app.by(&alice)
        .org(&org)
        .post("/api/compliance/rules")
        .json(
            json!({"name": "Private only", "target": "pipeline", "severity": "critical",
                        "field": "accessModifier", "operator": "eq", "value": "private"}),
        )
        .await
        .expect(StatusCode::CREATED);
    // The remote: this server's router on loopback.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let remote_port = listener.local_addr().unwrap().port().to_string();
    let router = app.router.clone();
    let remote = tokio::spawn(async move { axum::serve(listener, router).await });
    let door = app
        .beside(&[
            ("COMPLIANCE_SERVICE_HOST", "127.0.0.1"),
            ("COMPLIANCE_SERVICE_PORT", &remote_port),
        ])
        .await;
    let mut public = staged_pipeline("deploy-web");
    public["accessModifier"] = json!("public");
    let Answer(status, body) = create(&door, &alice, &org, public.clone()).await;
    assert_eq!(
        code(status, &body),
        ErrorCode::ComplianceViolation,
        "{body}"
    );
    assert_eq!(body["details"]["violations"][0]["ruleName"], "Private only");
    let created: Pipeline = create(&door, &alice, &org, staged_pipeline("private-one"))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!(created.compliance.result, EntityResult::Pass);
    // The entity refers to the remote's verdict, kept here as an unlisted judgement.
    let id = created.id;
    let read: Pipeline = door
        .by(&alice)
        .org(&org)
        .get(format!("/api/pipelines/{id}"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(
        read.compliance,
        EntityCompliance {
            result: EntityResult::Pass,
            violations: Vec::new(),
            scan_id: None
        }
    );
    // The remote recorded both checks in its check log; the verdict kept for the
    // entity is no entry of it.
    let Answer(_, log) = app
        .by(&alice)
        .org(&org)
        .get("/api/compliance/audit?target=pipeline")
        .await;
    assert_eq!(pagination(&log).total, 2, "{log}");
    door.stop().await;
    remote.abort();

    // Down: nothing listens there.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let down_port = closed.local_addr().unwrap().port().to_string();
    drop(closed);
    let door = app
        .beside(&[
            ("COMPLIANCE_SERVICE_HOST", "127.0.0.1"),
            ("COMPLIANCE_SERVICE_PORT", &down_port),
        ])
        .await;
    let Answer(status, body) = create(&door, &alice, &org, staged_pipeline("while-down")).await;
    assert_eq!(
        code(status, &body),
        ErrorCode::ComplianceUnavailable,
        "{body}"
    );
    door.stop().await;

    // Slow: accepts, then answers a pass after 6 seconds, past the 5-second budget.
    let slow = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let slow_port = slow.local_addr().unwrap().port().to_string();
    let server = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut socket, _)) = slow.accept().await {
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                let _ = socket.read(&mut buffer).await;
                tokio::time::sleep(std::time::Duration::from_secs(6)).await;
                let body = r#"{"success":true,"statusCode":200,"data":{"blocked":false,"violations":[],"exempted":[]}}"#;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    let door = app
        .beside(&[
            ("COMPLIANCE_SERVICE_HOST", "127.0.0.1"),
            ("COMPLIANCE_SERVICE_PORT", &slow_port),
        ])
        .await;
    let Answer(status, body) = create(&door, &alice, &org, staged_pipeline("while-slow")).await;
    assert_eq!(
        code(status, &body),
        ErrorCode::ComplianceUnavailable,
        "{body}"
    );
    door.stop().await;
    server.abort();
    // Nothing was stored by the refused creates.
    let Answer(_, body) = app.by(&alice).org(&org).get("/api/pipelines").await;
    assert_eq!(pagination(&body).total, 1);
}

on_both_backends!(
    a_remote_check_blocks_or_fails_closed,
    the_life_of_a_pipeline,
    bad_bodies_change_nothing,
    compliance_at_the_door,
    the_pool_of_a_root_and_its_team_is_capped,
    concurrent_creates_never_pass_the_cap,
    the_registry,
    another_organization_cannot_reach_pipelines,
);

/// The command line of document 2: `upload-plugin` and `create-pipeline` against a
/// server on loopback, with PLATFORM_URL and PLATFORM_TOKEN.
mod command_line {
    use super::super::plugins::plugin_zip;
    use super::*;

    async fn run(args: &[&str], url: &str, token: &str) -> (i32, String, String) {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_compliance"))
            .args(args)
            .env("PLATFORM_URL", url)
            .env("PLATFORM_TOKEN", token)
            .output()
            .await
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    async fn serve(router: axum::Router) -> (String, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        (url, task)
    }

    async fn upload_plugin_and_create_pipeline(app: &TestApp) {
        let org = app.org("alice", "acme").await;
        let alice = app.token("alice", "alice@example.com");
        app.by(&alice)
            .org(&org)
            .post("/api/compliance/rules")
            .json(
                json!({"name": "Private only", "target": "pipeline", "severity": "error",
                            "field": "accessModifier", "operator": "eq", "value": "private"}),
            )
            .await
            .expect(StatusCode::CREATED);
        let (url, server) = serve(app.router.clone()).await;
        let dir = std::env::temp_dir().join(format!("compliance-cli-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let zip = dir.join("eslint.zip");
        std::fs::write(&zip, plugin_zip("eslint", "8.1.0")).unwrap();
        let zip = zip.display().to_string();

        let upload = |name: &'static str, version: &'static str| {
            vec![
                "upload-plugin",
                "--file",
                zip.as_str(),
                "--organization",
                org.as_str(),
                "--name",
                name,
                "--version",
                version,
            ]
        };
        let (code, out, err) = run(&upload("eslint", "8.1.0"), &url, &alice).await;
        assert_eq!(code, 0, "{err}");
        let plugin: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(plugin["name"], "eslint");
        assert_eq!(plugin["buildStatus"], "queued");
        let (code, _, err) = run(&upload("eslint", "8.1.0"), &url, &alice).await;
        assert_eq!(code, 1);
        assert!(err.contains("409 CONFLICT"), "{err}");
        let (code, _, err) = run(&upload("prettier", "8.1.0"), &url, &alice).await;
        assert_eq!(code, 2, "a manifest that names another plugin");
        assert!(err.contains("eslint"), "{err}");

        let body = |access: &str| {
            format!(
                "pipelineName: deploy-{access}\naccessModifier: {access}\nprops:\n  stages:\n    - stageName: build\n      steps:\n        - name: lint\n          plugin: {{name: eslint, version: 8.1.0}}\n"
            )
        };
        let private = dir.join("private.yaml");
        std::fs::write(&private, body("private")).unwrap();
        let public = dir.join("public.yaml");
        std::fs::write(&public, body("public")).unwrap();
        let create = |file: &std::path::Path| {
            vec![
                "create-pipeline".to_owned(),
                "--file".to_owned(),
                file.display().to_string(),
                "--project".to_owned(),
                "web".to_owned(),
                "--organization".to_owned(),
                org.clone(),
            ]
        };
        let args = create(&private);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = run(&args, &url, &alice).await;
        assert_eq!(code, 0, "{err}");
        let pipeline: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(pipeline["project"], "web");
        assert_eq!(pipeline["organization"], org.as_str());
        let args = create(&public);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err) = run(&args, &url, &alice).await;
        assert_eq!(code, 1);
        assert!(err.contains("403 COMPLIANCE_VIOLATION"), "{err}");
        assert!(
            err.contains("Private only (error, accessModifier)"),
            "{err}"
        );

        // A server whose compliance check is unreachable: 503, exit 1.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let down = closed.local_addr().unwrap().port().to_string();
        drop(closed);
        let door = app
            .beside(&[
                ("COMPLIANCE_SERVICE_HOST", "127.0.0.1"),
                ("COMPLIANCE_SERVICE_PORT", &down),
            ])
            .await;
        let (door_url, door_server) = serve(door.router.clone()).await;
        let args = create(&private);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err) = run(&args, &door_url, &alice).await;
        assert_eq!(code, 1);
        assert!(err.contains("503 COMPLIANCE_UNAVAILABLE"), "{err}");
        door_server.abort();
        door.stop().await;
        server.abort();
        // Nothing listens at all: exit 1, naming the address.
        let (code, _, err) = run(&args, &door_url, &alice).await;
        assert_eq!(code, 1);
        assert!(err.contains(&door_url), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    on_both_backends!(upload_plugin_and_create_pipeline);
}
