//! What the client examples share: the reference server started in-process on a
//! loopback port, over a fresh SQLite file, with the development token secret; and a
//! way to mint tokens for it. A real service points the clients at its deployment.

#![allow(dead_code)]

pub mod load;
pub mod wrk;

use std::sync::Arc;
use std::time::Duration;

use adapters::auth::{Claims, TokenKeys};
use adapters::config::{Config, DEV_JWT_SECRET};
use adapters::http::{router, AppState};
use adapters::storage::Store;
use chrono::Utc;
use serde_json::Value;

/// A running server: its base URL.
pub struct Demo {
    pub base: String,
    keys: TokenKeys,
    /// The server's workers, running as long as the demo does.
    _workers: adapters::workers::Workers,
}

/// Starts the server, or says why it cannot.
pub async fn start() -> Result<Demo, String> {
    let path = std::env::temp_dir().join(format!("client-example-{}.db", uuid::Uuid::new_v4()));
    // The demo's organizations are on the Developer tier; reading the audit log is a
    // Team feature, opened to every tier here as an operator would with the variable.
    let config = Config::from_vars(vec![
        ("JWT_SECRET".to_owned(), DEV_JWT_SECRET.to_owned()),
        ("FEATURES_FOR_ALL_TIERS".to_owned(), "audit_log".to_owned()),
    ])
    .map_err(|e| format!("{e:?}"))?;
    let store = Store::connect(&format!("sqlite://{}", path.display()))
        .await
        .map_err(|e| e.to_string())?;
    adapters::services::operations::migrate(&store)
        .await
        .map_err(|e| e.to_string())?;
    let state = AppState::new(
        config,
        store.clone(),
        Arc::new(adapters::audit::AuditCounters::default()),
    );
    // The audit relay chains what the server records, as `serve` runs it.
    let mut workers = adapters::workers::Workers::new();
    workers.spawn("audit-relay", move |shutdown| {
        adapters::workers::relay::run(store, "example".to_owned(), shutdown)
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(state)).await;
    });
    Ok(Demo {
        base: format!("http://{addr}"),
        keys: TokenKeys::hs256(DEV_JWT_SECRET),
        _workers: workers,
    })
}

impl Demo {
    /// A user's token.
    pub fn user(&self, sub: &str) -> String {
        let claims = Claims::user(
            sub,
            Some(&format!("{sub}@example.com")),
            Utc::now(),
            Duration::from_secs(600),
        );
        self.keys.sign(&claims).unwrap_or_default()
    }

    /// A service token, as the platform's plugin or pipeline service holds one.
    pub fn service(&self, name: &str) -> String {
        let mut claims = Claims::user(name, None, Utc::now(), Duration::from_secs(600));
        claims.service = Some(name.to_owned());
        self.keys.sign(&claims).unwrap_or_default()
    }

    /// A new organization owned by the holder of `owner`; its id.
    pub async fn organization(&self, owner: &str, name: &str) -> Result<String, String> {
        let answer = self
            .call(
                reqwest::Method::POST,
                "/api/organization",
                owner,
                None,
                serde_json::json!({ "name": name }),
            )
            .await?;
        answer
            .pointer("/data/id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| "no organization id".to_owned())
    }

    /// `method path` with a user's token and organization; the whole answer when it
    /// succeeded.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        org: Option<&str>,
        body: Value,
    ) -> Result<Value, String> {
        call(&self.base, method, path, token, org, body).await
    }
}

/// `method path` on the server at `base` with a token and an optional organization;
/// the whole answer when it succeeded.
pub async fn call(
    base: &str,
    method: reqwest::Method,
    path: &str,
    token: &str,
    org: Option<&str>,
    body: Value,
) -> Result<Value, String> {
    let mut request = reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .bearer_auth(token)
        .json(&body);
    if let Some(org) = org {
        request = request.header("x-org-id", org);
    }
    let answer: Value = request
        .send()
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    match answer.get("success") {
        Some(Value::Bool(true)) => Ok(answer),
        _ => Err(answer.to_string()),
    }
}
