//! Document 2's plugin service: uploads (hostile archives refused), generated
//! deploys, compliance and quota at the door, the update whitelist, usage, tenant
//! isolation.

use crate::api::{pagination, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::{Changed, Plugin, PluginUsage};
use adapters::inventory::{AccessModifier, BuildStatus, EntityResult};
use std::io::Write;

use super::*;

/// A ZIP of `(name, bytes)` entries, deflated.
pub fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    zip_with(zip::CompressionMethod::Deflated, entries)
}

/// A ZIP of `(name, bytes)` entries, compressed with `method`.
pub fn zip_with(method: zip::CompressionMethod, entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    {
        let mut writer = zip::ZipWriter::new(&mut out);
        let options = zip::write::SimpleFileOptions::default().compression_method(method);
        for (name, bytes) in entries {
            writer.start_file(*name, options).unwrap();
            writer.write_all(bytes).unwrap();
        }
        writer.finish().unwrap();
    }
    out.into_inner()
}

pub fn manifest(name: &str, version: &str) -> Vec<u8> {
    json!({
        "name": name,
        "version": version,
        "description": "lints the code",
        "pluginType": "Quality",
        "computeType": "small",
        "commands": ["npm run lint"],
        "installCommands": ["npm ci"]
    })
    .to_string()
    .into_bytes()
}

pub fn plugin_zip(name: &str, version: &str) -> Vec<u8> {
    zip_of(&[
        ("plugin.json", &manifest(name, version)),
        ("Dockerfile", b"FROM node:20\nRUN npm ci\n"),
        ("src/index.js", b"console.log('lint')\n"),
    ])
}

/// `POST /api/plugins` as `multipart/form-data`.
pub async fn upload(
    app: &TestApp,
    token: &str,
    org: &str,
    archive: &[u8],
    access: Option<&str>,
) -> Answer {
    let boundary = "compliance-test-boundary";
    let mut body = Vec::new();
    body.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"plugin\"; filename=\"plugin.zip\"\r\nContent-Type: application/zip\r\n\r\n").as_bytes(),
    );
    body.extend_from_slice(archive);
    body.extend_from_slice(b"\r\n");
    if let Some(access) = access {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"accessModifier\"\r\n\r\n{access}\r\n").as_bytes(),
        );
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let request = Request::post("/api/plugins")
        .header("authorization", format!("Bearer {token}"))
        .header("x-org-id", org)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(Body::from(body))
        .unwrap();
    Answer::from(app.send(request).await)
}

async fn the_life_of_a_plugin(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let plugin: Plugin = upload(
        app,
        &alice,
        &org,
        &plugin_zip("eslint", "8.1.0"),
        Some("public"),
    )
    .await
    .expect(StatusCode::CREATED)
    .data();
    let id = plugin.id.clone();
    assert_eq!(
        (plugin.name.as_str(), plugin.version.as_str()),
        ("eslint", "8.1.0")
    );
    assert_eq!(plugin.access_modifier, AccessModifier::Public);
    assert_eq!(plugin.plugin_type.as_deref(), Some("Quality"));
    assert_eq!(plugin.commands, ["npm run lint"]);
    assert_eq!(
        plugin.dockerfile.as_deref(),
        Some("FROM node:20\nRUN npm ci\n")
    );
    assert_eq!(plugin.build_status, BuildStatus::Queued);
    assert_eq!(plugin.compliance.result, EntityResult::Pass);
    // The same name and version again: 409.
    let Answer(status, body) =
        upload(app, &alice, &org, &plugin_zip("eslint", "8.1.0"), None).await;
    assert_eq!(code(status, &body), ErrorCode::Conflict);
    let second: Plugin = upload(app, &alice, &org, &plugin_zip("eslint", "9.0.0"), None)
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!(second.access_modifier, AccessModifier::Private);

    // A generated plugin.
    let generated = app
        .by(&alice)
        .org(&org)
        .post("/api/plugins/deploy-generated")
        .json(
            json!({"name": "trivy", "version": "0.50.0", "commands": ["trivy fs ."],
                        "installCommands": [], "dockerfile": "FROM aquasec/trivy\n"}),
        )
        .await
        .expect(StatusCode::CREATED)
        .data::<Plugin>();
    assert_eq!(
        generated.dockerfile.as_deref(),
        Some("FROM aquasec/trivy\n")
    );

    // Reads.
    let Answer(_, body) = app.by(&alice).org(&org).get("/api/plugins").await;
    assert_eq!(pagination(&body).total, 3);
    let Answer(_, body) = app
        .by(&alice)
        .org(&org)
        .get("/api/plugins?name=eslint&sortBy=version&sortOrder=asc")
        .await;
    assert_eq!(body["plugins"][0]["version"], "8.1.0");
    assert_eq!(pagination(&body).total, 2);
    let found: Plugin = app
        .by(&alice)
        .org(&org)
        .get("/api/plugins/find?name=eslint&version=9.0.0")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(found.version, "9.0.0");
    app.by(&alice)
        .org(&org)
        .get("/api/plugins/find")
        .await
        .refused(ErrorCode::ValidationError);
    let found: Plugin = app
        .by(&alice)
        .org(&org)
        .post("/api/plugins/lookup")
        .json(json!({"name": "trivy"}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(found.name, "trivy");
    app.by(&alice)
        .org(&org)
        .post("/api/plugins/lookup")
        .json(json!({"owner": "x"}))
        .await
        .refused(ErrorCode::ValidationError);
    app.by(&alice)
        .org(&org)
        .post("/api/plugins/lookup")
        .json(json!({}))
        .await
        .refused(ErrorCode::ValidationError);

    // Update: the three fields, nothing else.
    let updated = app
        .by(&alice)
        .org(&org)
        .put(format!("/api/plugins/{id}"))
        .json(json!({"description": "the linter", "computeType": "large", "isDefault": true}))
        .await
        .expect(StatusCode::OK)
        .data::<Plugin>();
    assert_eq!(updated.description.as_deref(), Some("the linter"));
    assert_eq!(
        (updated.compute_type.as_deref(), updated.is_default),
        (Some("large"), true)
    );
    app.by(&alice)
        .org(&org)
        .put(format!("/api/plugins/{id}"))
        .json(json!({"name": "renamed"}))
        .await
        .refused(ErrorCode::ValidationError);

    // Bulk update: all or nothing, whitelist only.
    let Answer(_, listed) = app.by(&alice).org(&org).get("/api/plugins").await;
    let ids: Vec<String> = listed["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_owned())
        .collect();
    app
        .by(&alice).org(&org).put("/api/plugins/bulk/update").json(json!({"plugins": [{"id": ids[0], "isActive": false}, {"id": ids[1], "version": "6.6.6"}]}))
        .await.refused(ErrorCode::ValidationError);
    app
        .by(&alice).org(&org).put("/api/plugins/bulk/update").json(json!({"plugins": [{"id": ids[0], "isActive": false}, {"id": "nope", "isActive": false}]}))
        .await.refused(ErrorCode::NotFound);
    let Answer(_, body) = app
        .by(&alice)
        .org(&org)
        .get("/api/plugins?isActive=false")
        .await;
    assert_eq!(pagination(&body).total, 0, "nothing changed");
    let changed: Changed = app
        .by(&alice).org(&org).put("/api/plugins/bulk/update").json(json!({"plugins": [{"id": ids[0], "isActive": false}, {"id": ids[1], "accessModifier": "public"}]}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(changed.plugins.len(), 2);
    let Answer(_, body) = app
        .by(&alice)
        .org(&org)
        .get("/api/plugins?isActive=false")
        .await;
    assert_eq!(pagination(&body).total, 1);

    // Usage by pipelines.
    let pipeline = json!({"project": "web", "organization": "acme", "pipelineName": "ci",
        "accessModifier": "private", "props": {"synth": {"plugin": {"name": "cdk", "version": "1"}},
        "stages": [{"stageName": "check", "steps": [
            {"name": "lint", "plugin": {"name": "eslint", "version": "8.1.0"}},
            {"name": "lint-again", "plugin": {"name": "eslint", "version": "9.0.0"}}]}]}});
    app.by(&alice)
        .org(&org)
        .post("/api/pipelines")
        .json(pipeline)
        .await
        .expect(StatusCode::CREATED);
    let usage: Vec<PluginUsage> = app
        .by(&alice)
        .org(&org)
        .get("/api/plugins/plugin-usage")
        .await
        .expect(StatusCode::OK)
        .data();
    let usage: Vec<(&str, u64)> = usage
        .iter()
        .map(|u| (u.name.as_str(), u.pipelines))
        .collect();
    assert_eq!(usage, [("cdk", 1), ("eslint", 1)]);

    // Delete.
    app.by(&alice)
        .org(&org)
        .delete(format!("/api/plugins/{id}"))
        .await
        .expect(StatusCode::OK);
    app.by(&alice)
        .org(&org)
        .get(format!("/api/plugins/{id}"))
        .await
        .refused(ErrorCode::NotFound);
    for action in [
        "plugin.upload",
        "plugin.deploy",
        "plugin.bulk.update",
        "plugin.delete",
    ] {
        assert!(!app.audited(action).await.is_empty(), "{action}");
    }
}

async fn hostile_archives_are_refused_with_the_reason(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let good = manifest("eslint", "1.0.0");
    let many: Vec<(String, Vec<u8>)> = (0..1001)
        .map(|i| (format!("f{i}.txt"), b"x".to_vec()))
        .collect();
    let many: Vec<(&str, &[u8])> = many
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let zeros = vec![0u8; 10 * 1024 * 1024];
    let huge = vec![0u8; 51 * 1024 * 1024];
    let mut link = std::io::Cursor::new(Vec::new());
    {
        let mut writer = zip::ZipWriter::new(&mut link);
        let options = zip::write::SimpleFileOptions::default();
        writer.start_file("plugin.json", options).unwrap();
        writer.write_all(&good).unwrap();
        writer
            .add_symlink("passwd", "/etc/passwd", options)
            .unwrap();
        writer.finish().unwrap();
    }
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "traversal",
            zip_of(&[("plugin.json", &good), ("../evil.sh", b"rm -rf /")]),
            "outside the archive",
        ),
        (
            "absolute",
            zip_of(&[("plugin.json", &good), ("/etc/cron.d/x", b"x")]),
            "outside the archive",
        ),
        ("link", link.into_inner(), "link"),
        (
            "too many entries",
            zip_of(&[vec![("plugin.json", good.as_slice())], many].concat()),
            "entries",
        ),
        (
            "a bomb",
            zip_of(&[("plugin.json", &good), ("zeros.bin", &zeros)]),
            "bomb",
        ),
        (
            "too large",
            zip_of(&[("plugin.json", &good), ("zeros.bin", &huge)]),
            "more than",
        ),
        (
            "no manifest",
            zip_of(&[("README.md", b"hello")]),
            "plugin.json",
        ),
        (
            "a manifest in a folder",
            zip_of(&[("sub/plugin.json", &good)]),
            "plugin.json",
        ),
        (
            "a bad name",
            zip_of(&[("plugin.json", &manifest("../x", "1.0.0"))]),
            "name",
        ),
        (
            "an unknown field",
            zip_of(&[("plugin.json", br#"{"name":"a","version":"1","owner":"x"}"#)]),
            "owner",
        ),
        (
            "not JSON",
            zip_of(&[("plugin.json", b"{")]),
            "invalid manifest",
        ),
        (
            "not a ZIP",
            b"PK\x03\x04 this is not a zip".to_vec(),
            "not a ZIP",
        ),
    ];
    for (what, archive, reason) in cases {
        let Answer(status, body) = upload(app, &alice, &org, &archive, None).await;
        assert_eq!(
            code(status, &body),
            ErrorCode::ValidationError,
            "{what}: {body}"
        );
        assert_eq!(body["details"]["field"], "plugin", "{what}");
        assert!(
            body["message"].as_str().unwrap().contains(reason),
            "{what}: {body}"
        );
    }
    // A YAML manifest is as good as JSON.
    let yaml = b"name: yamlint\nversion: 1.0.0\ncommands: [yamllint .]\n";
    let Answer(status, body) =
        upload(app, &alice, &org, &zip_of(&[("plugin.yaml", yaml)]), None).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // Not multipart, no file part, a stray part, a bad visibility.
    app.by(&alice)
        .org(&org)
        .post("/api/plugins")
        .json(json!({"plugin": "x"}))
        .await
        .refused(ErrorCode::ValidationError);
    let Answer(status, body) =
        upload(app, &alice, &org, &plugin_zip("a", "1"), Some("internal")).await;
    assert_eq!(code(status, &body), ErrorCode::ValidationError);
    assert_eq!(body["details"]["field"], "accessModifier");
    let Answer(_, body) = app.by(&alice).org(&org).get("/api/plugins").await;
    assert_eq!(pagination(&body).total, 1, "only the YAML one was stored");
}

async fn compliance_and_quota_at_the_door(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    app.by(&alice)
        .org(&org)
        .post("/api/compliance/rules")
        .json(
            json!({"name": "No latest", "target": "plugin", "severity": "critical",
                        "field": "dockerfile", "operator": "notContains", "value": ":latest"}),
        )
        .await
        .expect(StatusCode::CREATED);
    let bad = zip_of(&[
        ("plugin.json", &manifest("risky", "1.0.0")),
        ("Dockerfile", b"FROM node:latest\n"),
    ]);
    let Answer(status, body) = upload(app, &alice, &org, &bad, None).await;
    assert_eq!(
        code(status, &body),
        ErrorCode::ComplianceViolation,
        "{body}"
    );
    assert_eq!(body["details"]["violations"][0]["ruleName"], "No latest");
    assert_eq!(body["details"]["violations"][0]["severity"], "critical");
    app.by(&alice)
        .org(&org)
        .post("/api/plugins/deploy-generated")
        .json(
            json!({"name": "gen", "version": "1", "commands": [], "installCommands": [],
                        "dockerfile": "FROM alpine:latest\n"}),
        )
        .await
        .refused(ErrorCode::ComplianceViolation);
    let Answer(_, body) = app.by(&alice).org(&org).get("/api/plugins").await;
    assert_eq!(pagination(&body).total, 0, "nothing stored");

    // Developer tier: 25 plugins.
    for i in 0..25 {
        let Answer(status, body) = upload(
            app,
            &alice,
            &org,
            &plugin_zip("p", &format!("1.0.{i}")),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let Answer(status, body) = upload(app, &alice, &org, &plugin_zip("p", "2.0.0"), None).await;
    assert_eq!(code(status, &body), ErrorCode::QuotaExceeded);
    assert_eq!(body["details"]["limit"], 25);
    assert_eq!(body["details"]["dimension"], "plugins");
    let Answer(_, body) = app.by(&alice).org(&org).get("/api/plugins").await;
    assert_eq!(pagination(&body).total, 25);
}

async fn another_organization_cannot_reach_plugins(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let other = app.org("bob", "globex").await;
    let alice = app.token("alice", "alice@example.com");
    let bob = app.token("bob", "bob@example.com");
    let id = upload(app, &alice, &org, &plugin_zip("eslint", "1.0.0"), None)
        .await
        .id();
    for (method, path, body) in [
        ("GET", format!("/api/plugins/{id}"), None),
        (
            "PUT",
            format!("/api/plugins/{id}"),
            Some(json!({"description": "mine"})),
        ),
        ("DELETE", format!("/api/plugins/{id}"), None),
        (
            "PUT",
            "/api/plugins/bulk/update".to_owned(),
            Some(json!({"plugins": [{"id": id, "isActive": false}]})),
        ),
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
    let Answer(_, body) = app
        .by(&bob)
        .org(&other)
        .get("/api/plugins?name=eslint")
        .await;
    assert_eq!(pagination(&body).total, 0);
    let Answer(status, body) = upload(app, &bob, &org, &plugin_zip("intruder", "1"), None).await;
    assert_eq!(code(status, &body), ErrorCode::TenantForbidden);
    app.by(&bob)
        .org(&org)
        .get("/api/plugins")
        .await
        .refused(ErrorCode::TenantForbidden);
}

on_both_backends!(
    the_life_of_a_plugin,
    hostile_archives_are_refused_with_the_reason,
    compliance_and_quota_at_the_door,
    another_organization_cannot_reach_plugins,
);
