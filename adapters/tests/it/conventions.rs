//! Document 2's conventions: envelopes, pagination, authentication, error codes,
//! body limit, and the operational endpoints.

use super::*;
use crate::api::Answer;
use adapters::code::ErrorCode;
use adapters::http::wire::Organization;

async fn operational_endpoints(app: &TestApp) {
    let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();
    let (status, body) = app.send(get("/health")).await;
    assert_eq!(
        (status, &body["success"], &body["statusCode"]),
        (StatusCode::OK, &json!(true), &json!(200))
    );
    let (status, _) = app.send(get("/ready")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = app.send(get("/openapi.json")).await;
    assert_eq!(status, StatusCode::OK);
    // Every route of the table is documented, and served: a route that exists never
    // answers "no such route".
    for route in adapters::http::routes::routes() {
        let method = route.method.to_lowercase();
        assert!(
            body["paths"][route.path][&method].is_object(),
            "{method} {} missing from openapi.json",
            route.path
        );
        let concrete = route
            .path
            .replace("{target}", "plugin")
            .replace('{', "x")
            .replace('}', "");
        let request = Request::builder()
            .method(route.method)
            .uri(concrete)
            .body(Body::empty())
            .unwrap();
        let (status, response) = app.send(request).await;
        assert_ne!(
            status,
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {}",
            route.path
        );
        assert_ne!(
            response["message"], "no such route",
            "{method} {}",
            route.path
        );
    }
    let (status, body) = app.send(get("/api/nowhere")).await;
    assert_eq!(code(status, &body), ErrorCode::NotFound);
    let (status, body) = app
        .send(Request::patch("/health").body(Body::empty()).unwrap())
        .await;
    assert_eq!(code(status, &body), ErrorCode::MethodNotAllowed);
    let (status, body) = app.send(get("/metrics")).await;
    assert_eq!(status, StatusCode::OK);
    let text = body.as_str().unwrap();
    assert!(
        text.contains(r#"http_requests_total{method="GET",route="/health",status="200"} "#),
        "{text}"
    );
    assert!(text.contains("http_request_duration_seconds_bucket"));
}

async fn jwt_pitfalls(app: &TestApp) {
    use base64_url as b64;
    let org = app.org("alice", "acme").await;
    let request = |auth: Option<String>| {
        let mut r = Request::get("/api/organization").header("x-org-id", org.as_str());
        if let Some(auth) = auth {
            r = r.header("authorization", auth);
        }
        r.body(Body::empty()).unwrap()
    };
    let now = Utc::now().timestamp();
    let payload = b64::encode(
        &json!({"sub": "alice", "email": "alice@example.com", "exp": now + 3600}).to_string(),
    );
    let none_alg = format!(
        "{}.{payload}.",
        b64::encode(r#"{"alg":"none","typ":"JWT"}"#)
    );
    let wrong_secret = TokenKeys::hs256("another-secret-0123456789")
        .sign(&Claims::user(
            "alice",
            None,
            Utc::now(),
            std::time::Duration::from_secs(60),
        ))
        .unwrap();
    let mut expired = Claims::user(
        "alice",
        None,
        Utc::now(),
        std::time::Duration::from_secs(60),
    );
    expired.exp = now - 3600;
    let expired = app.keys.sign(&expired).unwrap();
    let no_exp = {
        let header = b64::encode(r#"{"alg":"HS256","typ":"JWT"}"#);
        let body = b64::encode(&json!({"sub": "alice"}).to_string());
        // Signed correctly, but without `exp`.
        let key = jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes());
        let signature = jsonwebtoken::crypto::sign(
            format!("{header}.{body}").as_bytes(),
            &key,
            jsonwebtoken::Algorithm::HS256,
        )
        .unwrap();
        format!("{header}.{body}.{signature}")
    };
    let cases = [
        None,
        Some("Basic abc".to_owned()),
        Some("Bearer".to_owned()),
        Some("Bearer not-a-token".to_owned()),
        Some(format!("Bearer {none_alg}")),
        Some(format!("Bearer {wrong_secret}")),
        Some(format!("Bearer {expired}")),
        Some(format!("Bearer {no_exp}")),
        Some(format!("Bearer {}", app.step_up("alice", 0))),
    ];
    for auth in cases {
        let (status, body) = app.send(request(auth.clone())).await;
        assert_eq!(code(status, &body), ErrorCode::Unauthorized, "{auth:?}");
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let mut service = Claims::user(
        "plugin-service",
        None,
        Utc::now(),
        std::time::Duration::from_secs(60),
    );
    service.service = Some("plugin".into());
    let (status, body) = app
        .send(request(Some(format!(
            "Bearer {}",
            app.keys.sign(&service).unwrap()
        ))))
        .await;
    assert_eq!(code(status, &body), ErrorCode::Forbidden);
    let (status, _) = app
        .send(request(Some(format!(
            "Bearer {}",
            app.token("alice", "alice@example.com")
        ))))
        .await;
    assert_eq!(status, StatusCode::OK);
}

async fn tenant_header_is_required_and_checked(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let globex = app.org("bob", "globex").await;
    let alice = app.token("alice", "alice@example.com");
    app.by(&alice)
        .get("/api/organization")
        .await
        .refused(ErrorCode::TenantForbidden);
    app.by(&alice)
        .org(&globex)
        .get("/api/organization")
        .await
        .refused(ErrorCode::TenantForbidden);
    let Answer(status, body) = app
        .by(&alice)
        .org("no-such-org")
        .get("/api/organization")
        .await;
    assert_eq!(
        code(status, &body),
        ErrorCode::TenantForbidden,
        "absent and foreign look the same"
    );
    let active: Organization = app
        .by(&alice)
        .org(&acme)
        .get("/api/organization")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(active.name, "acme");
}

async fn pagination(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    for i in 0..14 {
        app.by(&alice)
            .post(format!("/api/organization/{org}/members"))
            .json(json!({"userId": format!("user-{i:02}")}))
            .await
            .expect(StatusCode::CREATED);
    }
    let list = |query: &str| format!("/api/organization/{org}/members{query}");
    let Answer(status, body) = app.by(&alice).get(list("")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["members"].as_array().unwrap().len(), 10);
    assert_eq!(
        body["pagination"],
        json!({"total": 15, "limit": 10, "offset": 0, "hasMore": true})
    );
    assert_eq!(body["success"], true);
    let Answer(_, body) = app.by(&alice).get(list("?limit=10&offset=10")).await;
    assert_eq!(body["members"].as_array().unwrap().len(), 5);
    assert!(!crate::api::pagination(&body).has_more);
    let Answer(_, asc) = app.by(&alice).get(list("?limit=1&sortOrder=asc")).await;
    assert_eq!(
        asc["members"][0]["userId"], "alice",
        "the owner joined first"
    );
    let Answer(_, desc) = app
        .by(&alice)
        .get(list("?limit=1000&sortBy=createdAt&sortOrder=desc"))
        .await;
    assert_eq!(desc["members"].as_array().unwrap().len(), 15);
    for bad in [
        "?limit=0",
        "?limit=1001",
        "?limit=ten",
        "?offset=-1",
        "?sortOrder=up",
        "?sortBy=password",
    ] {
        let Answer(status, body) = app.by(&alice).get(list(bad)).await;
        assert_eq!(code(status, &body), ErrorCode::ValidationError, "{bad}");
    }
}

async fn rejected_bodies_answer_in_the_envelope(app: &TestApp) {
    let alice = app.token("alice", "alice@example.com");
    let post = |body: &'static str, content_type: &'static str| {
        Request::post("/api/organization")
            .header("authorization", format!("Bearer {alice}"))
            .header("content-type", content_type)
            .body(Body::from(body))
            .unwrap()
    };
    for (body, content_type) in [
        ("{\"name\":", "application/json"),
        ("[]", "application/json"),
        ("{\"name\": 5}", "application/json"),
        ("{\"name\": \"x\", \"surprise\": 1}", "application/json"),
        ("{\"name\": \"  \"}", "application/json"),
        ("{\"name\": \"x\"}", "text/plain"),
    ] {
        let (status, response) = app.send(post(body, content_type)).await;
        assert_eq!(
            code(status, &response),
            ErrorCode::ValidationError,
            "{body} as {content_type}"
        );
    }
    let huge = format!("{{\"name\": \"{}\"}}", "x".repeat(70_000));
    let request = Request::post("/api/organization")
        .header("authorization", format!("Bearer {alice}"))
        .header("content-type", "application/json")
        .body(Body::from(huge))
        .unwrap();
    let (status, body) = app.send(request).await;
    assert_eq!(code(status, &body), ErrorCode::PayloadTooLarge);
    let Answer(status, body) = app.by(&alice).get("/api/organization").await;
    assert_eq!(
        code(status, &body),
        ErrorCode::TenantForbidden,
        "nothing was created"
    );
}

async fn an_unreachable_database_answers_503(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    app.store.close().await;
    let (status, body) = app
        .send(Request::get("/ready").body(Body::empty()).unwrap())
        .await;
    assert_eq!(
        (status, code(status, &body)),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::ServiceUnavailable
        )
    );
    let Answer(status, body) = app.by(&alice).org(&org).get("/api/organization").await;
    assert_eq!(code(status, &body), ErrorCode::ServiceUnavailable);
    let (status, _) = app
        .send(Request::get("/health").body(Body::empty()).unwrap())
        .await;
    assert_eq!(status, StatusCode::OK, "the process itself is up");
}

on_both_backends!(
    an_unreachable_database_answers_503,
    operational_endpoints,
    jwt_pitfalls,
    tenant_header_is_required_and_checked,
    pagination,
    rejected_bodies_answer_in_the_envelope,
);

mod base64_url {
    /// Unpadded base64url, enough to forge test tokens.
    pub fn encode(input: &str) -> String {
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let bytes = input.as_bytes();
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            let chars = chunk.len() + 1;
            for i in 0..chars {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        out
    }
}
