//! The server, through its router, on SQLite and on PostgreSQL.
//!
//! Every scenario runs on both backends: SQLite always, PostgreSQL when
//! `TEST_DATABASE_URL` names a server (a fresh database per test). Without it the
//! PostgreSQL tests say loudly that they skipped; with `REQUIRE_POSTGRES=1` (set by
//! `scripts/test`) a skip is a failure.

// Test code: a panic is how a test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod administration;
mod alerts;
mod api;
mod architecture;
mod audit;
mod authority;
mod billing;
mod builds;
mod checkpoints;
mod ci;
mod cli;
mod clients;
mod compliance;
mod config;
mod console;
mod console_account;
mod console_pages;
mod console_people;
mod console_rules;
mod console_settings;
mod console_work;
mod conventions;
mod crash;
mod exports;
mod failover;
mod features;
mod fixtures;
mod generation;
mod grids;
mod hardening;
mod hostile;
mod integrity;
mod judgements;
mod keys;
mod lifecycle;
mod messages;
mod notifications;
mod organizations;
mod permissions;
mod pipelines;
mod plugins;
mod reevaluation;
mod registry;
mod replicas;
mod reports;
mod scans;
mod schema;
mod signin;
mod sso;
mod third_wave;

use std::sync::Arc;

use adapters::auth::{Claims, TokenKeys};
use adapters::code::ErrorCode;
use adapters::config::Config;
use adapters::http::{router, AppState};
use adapters::storage::Store;
use audit_chain::SealedEvent;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use chrono::Utc;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

pub const SECRET: &str = "test-secret-0123456789abcdef";
pub const ROOT_EMAIL: &str = "root@example.com";
/// The test deployment's checkpoint key (a fixed seed: tests only).
pub const CHECKPOINT_KEY: &str =
    "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";

pub struct TestApp {
    pub router: Router,
    /// The server's state (its workers' steps are called on it).
    pub state: AppState,
    workers: Option<adapters::workers::Workers>,
    pub keys: TokenKeys,
    pub store: Store,
    cleanup: Option<(String, String)>,
}

pub fn test_config(extra: &[(&str, &str)]) -> Config {
    let mut vars = vec![
        ("JWT_SECRET".to_owned(), SECRET.to_owned()),
        ("AUDIT_CHECKPOINT_KEY".to_owned(), CHECKPOINT_KEY.to_owned()),
        (
            "AUDIT_CHECKPOINT_ORIGIN".to_owned(),
            "test.example".to_owned(),
        ),
        (
            "BOOTSTRAP_SUPERADMIN_EMAILS".to_owned(),
            ROOT_EMAIL.to_owned(),
        ),
        // Most tests add members to Developer organizations (one seat in document
        // 2); the billing tests count seats on Pro and Team.
        ("QUOTA_TIER_DEVELOPER_SEATS".to_owned(), "-1".to_owned()),
        // Most tests read the audit log and run bulk updates on Developer
        // organizations, as a deployment that keeps its earlier behaviour does; the
        // feature gates are tested with the variable empty (`features.rs`).
        (
            "FEATURES_FOR_ALL_TIERS".to_owned(),
            "audit_log,bulk_operations".to_owned(),
        ),
    ];
    vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Config::from_vars(vars).unwrap()
}

impl TestApp {
    async fn with_store(store: Store, cleanup: Option<(String, String)>) -> TestApp {
        TestApp::configured(store, cleanup, &[]).await
    }

    /// Another server on the same database, with more configuration (it drains no
    /// database of its own when it finishes).
    pub async fn beside(&self, extra: &[(&str, &str)]) -> TestApp {
        TestApp::configured(self.store.clone(), None, extra).await
    }

    /// Another server on the same database whose reports read `standby`.
    pub async fn reading_reports_from(&self, standby: Store, extra: &[(&str, &str)]) -> TestApp {
        TestApp::configured_with(self.store.clone(), None, extra, Some(standby)).await
    }

    async fn configured(
        store: Store,
        cleanup: Option<(String, String)>,
        extra: &[(&str, &str)],
    ) -> TestApp {
        TestApp::configured_with(store, cleanup, extra, None).await
    }

    async fn configured_with(
        store: Store,
        cleanup: Option<(String, String)>,
        extra: &[(&str, &str)],
        standby: Option<Store>,
    ) -> TestApp {
        adapters::services::operations::migrate(&store)
            .await
            .unwrap();
        let counters = Arc::new(adapters::audit::AuditCounters::default());
        let mut vars = vec![("COMPLIANCE_BODY_LIMIT_BYTES", "65536")];
        vars.extend_from_slice(extra);
        let state = AppState::new(test_config(&vars), store.clone(), counters);
        let state = match standby {
            Some(standby) => state.with_reporting_standby(standby),
            None => state,
        };
        // The real relay worker, as `serve` runs it.
        let mut workers = adapters::workers::Workers::new();
        {
            let store = store.clone();
            workers.spawn("audit-relay", move |shutdown| {
                adapters::workers::relay::run(store, "test".to_owned(), shutdown)
            });
        }
        {
            let state = state.clone();
            workers.spawn("allowances", move |shutdown| {
                adapters::workers::allowances::run(state, shutdown)
            });
        }
        {
            // Hands new messages and announcements to this server's live streams.
            let state = state.clone();
            workers.spawn("message-feed", move |shutdown| {
                adapters::workers::message_feed::run(state, shutdown)
            });
        }
        {
            // Sends the verification links when SMTP_URL is set (else returns).
            let state = state.clone();
            workers.spawn("account-mail", move |shutdown| {
                adapters::workers::account_mail::run(state, shutdown)
            });
        }
        TestApp {
            router: router(state.clone()),
            state,
            workers: Some(workers),
            keys: TokenKeys::hs256(SECRET),
            store,
            cleanup,
        }
    }

    pub async fn sqlite() -> TestApp {
        let path =
            std::env::temp_dir().join(format!("compliance-test-{}.db", uuid::Uuid::new_v4()));
        let store = Store::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        TestApp::with_store(store, None).await
    }

    pub async fn postgres() -> Option<TestApp> {
        let (url, admin_url, name) = fresh_postgres().await?;
        let store = Store::connect(&url).await.unwrap();
        Some(TestApp::with_store(store, Some((admin_url, name))).await)
    }

    /// Stops the workers and drops a PostgreSQL test database.
    /// Stops a server made [`TestApp::beside`] another (the database stays open).
    pub async fn stop(mut self) {
        if let Some(workers) = self.workers.take() {
            workers.drain(std::time::Duration::from_secs(5)).await;
        }
    }

    pub async fn finish(mut self) {
        if let Some(workers) = self.workers.take() {
            workers.drain(std::time::Duration::from_secs(5)).await;
        }
        self.store.close().await;
        if let Some((admin_url, name)) = self.cleanup {
            drop_postgres(&admin_url, &name).await;
        }
    }

    pub fn token(&self, sub: &str, email: &str) -> String {
        self.keys
            .sign(&Claims::user(
                sub,
                Some(email),
                Utc::now(),
                std::time::Duration::from_secs(3600),
            ))
            .unwrap()
    }

    pub fn step_up(&self, sub: &str, seconds_ago: i64) -> String {
        let mut claims = Claims::user(
            sub,
            None,
            Utc::now() - chrono::Duration::seconds(seconds_ago),
            std::time::Duration::from_secs(3600),
        );
        claims.step_up = true;
        self.keys.sign(&claims).unwrap()
    }

    pub async fn send(&self, request: Request<Body>) -> (StatusCode, Value) {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, body)
    }

    /// Sends every request at once (each on a task of its own); the answers in the
    /// order of the requests.
    pub async fn concurrently(&self, requests: Vec<Request<Body>>) -> Vec<(StatusCode, Value)> {
        let mut set = tokio::task::JoinSet::new();
        for (i, request) in requests.into_iter().enumerate() {
            let router = self.router.clone();
            set.spawn(async move {
                let response = router.oneshot(request).await.unwrap();
                let status = response.status();
                let bytes = response.into_body().collect().await.unwrap().to_bytes();
                (i, status, serde_json::from_slice::<Value>(&bytes).unwrap())
            });
        }
        let mut answers = set.join_all().await;
        answers.sort_by_key(|(i, _, _)| *i);
        answers
            .into_iter()
            .map(|(_, status, body)| (status, body))
            .collect()
    }

    /// Runs a statement directly on the test database (to corrupt or tamper with rows).
    pub async fn sql(&self, statement: &str) {
        sqlx::query(statement)
            .execute(admin_pool(&self.store))
            .await
            .unwrap();
    }

    /// A number read directly from the test database (`SELECT COUNT(*) ...`).
    pub async fn number(&self, query: &str) -> i64 {
        sqlx::query_scalar(query)
            .fetch_one(admin_pool(&self.store))
            .await
            .unwrap()
    }

    /// Creates a root organization owned by `sub`; returns its id.
    pub async fn org(&self, sub: &str, name: &str) -> String {
        let token = self.token(sub, &format!("{sub}@example.com"));
        self.by(&token)
            .post("/api/organization")
            .json(json!({"name": name}))
            .await
            .expect(StatusCode::CREATED)
            .id()
    }

    /// The chained events of `action`, after the relay has drained the outbox (and
    /// flushed every denial fold, whatever its minute).
    pub async fn audited(&self, action: &str) -> Vec<SealedEvent> {
        self.relay().await;
        let filter = adapters::storage::AuditFilter {
            action: Some(action.to_owned()),
            ..Default::default()
        };
        let (events, _) = self
            .store
            .audit_events(&filter, 10_000, 0, true)
            .await
            .unwrap();
        events
    }

    /// Flushes every denial fold (whatever its minute) and waits until the relay
    /// worker has chained everything in the outbox.
    pub async fn relay(&self) {
        adapters::workers::relay::flush_all_denials(&self.store)
            .await
            .unwrap();
        for _ in 0..1000 {
            if self.store.outbox_depth().await.unwrap().rows == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the audit relay did not drain the outbox in 10 s");
    }
}

/// A fresh PostgreSQL database: (its URL, the admin URL, its name); `None` (and a loud
/// skip) without `TEST_DATABASE_URL`.
pub async fn fresh_postgres() -> Option<(String, String, String)> {
    let Ok(admin_url) = std::env::var("TEST_DATABASE_URL") else {
        eprintln!("SKIPPED: TEST_DATABASE_URL is not set, so this PostgreSQL test did not run");
        assert!(
            std::env::var("REQUIRE_POSTGRES").is_err(),
            "REQUIRE_POSTGRES is set but TEST_DATABASE_URL is not"
        );
        return None;
    };
    let name = format!("compliance_test_{}", uuid::Uuid::new_v4().simple());
    let admin = Store::connect(&admin_url)
        .await
        .expect("TEST_DATABASE_URL does not answer");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(admin_pool(&admin))
        .await
        .unwrap();
    admin.close().await;
    let url = match admin_url.rsplit_once('/') {
        Some((base, _)) => format!("{base}/{name}"),
        None => panic!("TEST_DATABASE_URL must end with a database name"),
    };
    Some((url, admin_url, name))
}

/// Drops a database made by [`fresh_postgres`].
pub async fn drop_postgres(admin_url: &str, name: &str) {
    if let Ok(admin) = Store::connect(admin_url).await {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(admin_pool(&admin))
            .await;
        admin.close().await;
    }
}

fn admin_pool(store: &Store) -> &sqlx::AnyPool {
    adapters::storage::pool_for_tests(store)
}

/// The error envelope's code, after checking its shape (a code the server does not
/// define fails the test).
pub fn code(status: StatusCode, body: &Value) -> ErrorCode {
    assert_eq!(body["success"], false, "{body}");
    assert_eq!(body["statusCode"], status.as_u16(), "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    code_of(body)
}

/// The `code` of an error's body wherever it travels (an envelope, a stream's
/// `error` event), read as the server's own code: one it does not define fails.
pub fn code_of(body: &Value) -> ErrorCode {
    let text = body["code"].as_str().unwrap_or_default();
    ErrorCode::parse(text).unwrap_or_else(|| panic!("`{text}` is not an error code: {body}"))
}

/// Declares scenarios (async fns taking a `TestApp`) and runs each on both backends.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let app = $crate::TestApp::sqlite().await;
                    super::$name(&app).await;
                    app.finish().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    if let Some(app) = $crate::TestApp::postgres().await {
                        super::$name(&app).await;
                        app.finish().await;
                    }
                }
            )*
        }
    };
}

/// Every answer the tests read through [`TestApp::call`] is checked against the
/// schema `/openapi.json` gives it: a success against the route's answer, an error
/// against the envelope. The validators are built once per route.
mod conformance {
    use std::collections::HashMap;
    use std::sync::OnceLock;

    use serde_json::{json, Value};

    type Validators = HashMap<(String, String), (String, jsonschema::Validator)>;

    fn validators() -> &'static (Validators, jsonschema::Validator) {
        static ALL: OnceLock<(Validators, jsonschema::Validator)> = OnceLock::new();
        ALL.get_or_init(|| {
            let document = adapters::http::openapi::document();
            let components = document["components"].clone();
            let compile = |schema: &Value| {
                jsonschema::validator_for(&json!({"components": components, "allOf": [schema]}))
                    .unwrap()
            };
            let mut all = Validators::new();
            for (path, methods) in document["paths"].as_object().unwrap() {
                for (method, operation) in methods.as_object().unwrap() {
                    let Some((status, answer)) = operation["responses"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .find(|(status, _)| status.as_str() != "default")
                    else {
                        continue;
                    };
                    let Some(schema) = answer["content"]["application/json"].get("schema") else {
                        continue;
                    };
                    all.insert(
                        (method.to_uppercase(), path.clone()),
                        (status.clone(), compile(schema)),
                    );
                }
            }
            let error = compile(&json!({"$ref": "#/components/schemas/Error"}));
            (all, error)
        })
    }

    /// The route template a concrete path matches.
    fn template<'a>(validators: &'a Validators, method: &str, path: &str) -> Option<&'a str> {
        let path = path.split('?').next().unwrap_or(path);
        let segments: Vec<&str> = path.split('/').collect();
        let mut matches: Vec<&str> = validators
            .keys()
            .filter(|(m, _)| m == method)
            .map(|(_, t)| t.as_str())
            .filter(|t| {
                let parts: Vec<&str> = t.split('/').collect();
                parts.len() == segments.len()
                    && parts
                        .iter()
                        .zip(&segments)
                        .all(|(p, s)| p == s || (p.starts_with('{') && !s.is_empty()))
            })
            .collect();
        // The most literal template wins (`/pipelines/find` over `/pipelines/{id}`).
        matches.sort_by_key(|t| t.matches('{').count());
        matches.first().copied()
    }

    /// Panics when `body`, answered with `status` to `method path`, is not what the
    /// document says.
    pub fn check(method: &str, path: &str, status: u16, body: &Value) {
        let (all, error) = validators();
        if status >= 400 {
            if let Some(problem) = error.iter_errors(body).next() {
                panic!(
                    "{method} {path} answered {status}, not the error envelope: {problem}\n{body}"
                );
            }
            return;
        }
        let Some(template) = template(all, method, path) else {
            return;
        };
        let (documented, validator) = &all[&(method.to_owned(), template.to_owned())];
        if body.is_null() {
            return;
        }
        assert_eq!(
            documented,
            &status.to_string(),
            "{method} {path} answered {status}, the document says {documented}"
        );
        if let Some(problem) = validator.iter_errors(body).next() {
            panic!(
                "{method} {path} ({template}) answered what its schema does not allow: {problem} at {}\n{body}",
                problem.instance_path
            );
        }
    }

    #[test]
    #[should_panic(expected = "does not allow")]
    fn an_answer_off_its_schema_is_caught() {
        let pipeline = json!({"id": "p", "orgId": "o", "project": "web", "organization": "acme",
            "pipelineName": "deploy", "accessModifier": "private", "props": {},
            "compliance": {"result": "pass", "violations": []}, "createdBy": "alice",
            "createdAt": "2026-11-26T00:00:00Z", "updatedAt": "2026-11-26T00:00:00Z"});
        let mut answer = json!({"success": true, "statusCode": 200, "data": pipeline});
        check("GET", "/api/pipelines/p", 200, &answer);
        answer["data"]["accessModifier"] = json!("internal");
        check("GET", "/api/pipelines/p", 200, &answer);
    }

    #[test]
    #[should_panic(expected = "not the error envelope")]
    fn an_error_off_the_envelope_is_caught() {
        check(
            "GET",
            "/api/pipelines/p",
            404,
            &json!({"error": "not found"}),
        );
    }
}
