//! The tests' client of the API: a request reads like the contract's operation
//! (`app.by(&alice).org(&acme).post("/api/compliance/rules").json(rule)`), and its
//! answer is decoded into the server's own wire types or checked as the envelope of
//! one [`ErrorCode`]. Every answer is also checked against the schema
//! `/openapi.json` gives its route (`conformance::check`).

use std::future::{Future, IntoFuture};
use std::pin::Pin;

use adapters::code::ErrorCode;
use adapters::http::wire::Pagination;
use adapters::services::accounts::{Account, Session};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::TestApp;

/// Who sends requests (a bearer token, or none), in which organization, with which
/// step-up.
#[derive(Clone)]
pub struct Caller<'a> {
    app: &'a TestApp,
    token: Option<String>,
    headers: Vec<(&'static str, String)>,
}

impl TestApp {
    /// Requests sent with `token` as their bearer.
    pub fn by(&self, token: &str) -> Caller<'_> {
        Caller {
            app: self,
            token: Some(token.to_owned()),
            headers: Vec::new(),
        }
    }

    /// Requests sent without credentials (registration, sign-in, public routes).
    pub fn public(&self) -> Caller<'_> {
        Caller {
            app: self,
            token: None,
            headers: Vec::new(),
        }
    }

    /// Registers `email` with `password` (`POST /api/auth/register`): the account.
    pub async fn register(&self, email: &str, password: &str) -> Account {
        self.public()
            .post("/api/auth/register")
            .json(json!({"email": email, "password": password}))
            .await
            .expect(StatusCode::CREATED)
            .data()
    }

    /// Signs `email` in with `password` (`POST /api/auth/login`): the session.
    pub async fn login(&self, email: &str, password: &str) -> Session {
        self.public()
            .post("/api/auth/login")
            .json(json!({"identifier": email, "password": password}))
            .await
            .expect(StatusCode::OK)
            .data()
    }
}

impl<'a> Caller<'a> {
    /// In the organization `org` (`x-org-id`).
    pub fn org(&self, org: &str) -> Caller<'a> {
        self.with("x-org-id", org)
    }

    /// In `org` when there is one.
    pub fn org_opt(&self, org: Option<&str>) -> Caller<'a> {
        match org {
            Some(org) => self.org(org),
            None => self.clone(),
        }
    }

    /// With the step-up proof `proof` (`x-step-up-token`).
    pub fn step_up(&self, proof: impl AsRef<str>) -> Caller<'a> {
        self.with("x-step-up-token", proof.as_ref())
    }

    /// With the step-up proof when there is one.
    pub fn step_up_opt(&self, proof: Option<impl AsRef<str>>) -> Caller<'a> {
        match proof {
            Some(proof) => self.step_up(proof),
            None => self.clone(),
        }
    }

    /// With one more header.
    pub fn with(&self, name: &'static str, value: &str) -> Caller<'a> {
        let mut next = self.clone();
        next.headers.push((name, value.to_owned()));
        next
    }

    /// `GET path`.
    pub fn get(&self, path: impl AsRef<str>) -> Call<'a> {
        self.method("GET", path)
    }

    /// `POST path`.
    pub fn post(&self, path: impl AsRef<str>) -> Call<'a> {
        self.method("POST", path)
    }

    /// `PUT path`.
    pub fn put(&self, path: impl AsRef<str>) -> Call<'a> {
        self.method("PUT", path)
    }

    /// `PATCH path`.
    pub fn patch(&self, path: impl AsRef<str>) -> Call<'a> {
        self.method("PATCH", path)
    }

    /// `DELETE path`.
    pub fn delete(&self, path: impl AsRef<str>) -> Call<'a> {
        self.method("DELETE", path)
    }

    /// `method path` (for methods the tests choose at run time).
    pub fn method(&self, method: &str, path: impl AsRef<str>) -> Call<'a> {
        Call {
            caller: self.clone(),
            method: method.to_owned(),
            path: path.as_ref().to_owned(),
            body: None,
        }
    }
}

/// One request, sent when awaited.
pub struct Call<'a> {
    caller: Caller<'a>,
    method: String,
    path: String,
    body: Option<Value>,
}

impl Call<'_> {
    /// With a JSON body.
    pub fn json(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }

    /// With a JSON body when there is one.
    pub fn json_opt(mut self, body: Option<Value>) -> Self {
        self.body = body;
        self
    }

    /// The request itself (for [`TestApp::concurrently`]).
    pub fn request(&self) -> Request<Body> {
        let mut request = Request::builder()
            .method(self.method.as_str())
            .uri(&self.path);
        if let Some(token) = &self.caller.token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        for (name, value) in &self.caller.headers {
            request = request.header(*name, value);
        }
        match &self.body {
            Some(body) => request
                .header("content-type", "application/json")
                .body(Body::from(body.to_string())),
            None => request.body(Body::empty()),
        }
        .unwrap()
    }
}

impl<'a> IntoFuture for Call<'a> {
    type Output = Answer;
    type IntoFuture = Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let request = self.request();
            let (status, body) = self.caller.app.send(request).await;
            crate::conformance::check(&self.method, &self.path, status.as_u16(), &body);
            Answer(status, body)
        })
    }
}

/// An answer: its status and its JSON body (text read as a JSON string).
#[derive(Debug, Clone)]
pub struct Answer(pub StatusCode, pub Value);

impl From<(StatusCode, Value)> for Answer {
    /// An answer read by a helper of its own (a browser's redirects, a multipart
    /// upload).
    fn from((status, body): (StatusCode, Value)) -> Self {
        Answer(status, body)
    }
}

impl Answer {
    /// The status.
    pub fn status(&self) -> StatusCode {
        self.0
    }

    /// The body.
    pub fn body(&self) -> &Value {
        &self.1
    }

    /// The success envelope's `data` decoded into the wire type `T`, after checking
    /// that the answer is a success (a missing or renamed field fails the test).
    pub fn data<T: DeserializeOwned>(&self) -> T {
        self.succeeded();
        decode(&self.1["data"], &self.1)
    }

    /// The whole body decoded into `T` (answers whose list is not under `data`),
    /// after checking that the answer is a success.
    pub fn decoded<T: DeserializeOwned>(&self) -> T {
        self.succeeded();
        decode(&self.1, &self.1)
    }

    /// The `data.id` of a success (what a create answers).
    pub fn id(&self) -> String {
        self.succeeded();
        match self.1["data"]["id"].as_str() {
            Some(id) => id.to_owned(),
            None => panic!("the answer names no data.id: {}", self.1),
        }
    }

    /// A page's items under `key`, decoded into the wire type `T`, after checking that
    /// the answer is a success.
    pub fn items<T: DeserializeOwned>(&self, key: &str) -> Vec<T> {
        self.succeeded();
        decode(&self.1[key], &self.1)
    }

    /// Where a page sits in the whole list (the paginated envelope's `pagination`).
    pub fn pagination(&self) -> Pagination {
        self.succeeded();
        pagination(&self.1)
    }

    /// Checks the answer is a success with `status`; the answer again.
    pub fn expect(self, status: StatusCode) -> Self {
        assert_eq!(self.0, status, "{}", self.1);
        self
    }

    /// Checks the answer is the error envelope of `code`, with the status the code
    /// always carries.
    pub fn refused(&self, code: ErrorCode) {
        assert_eq!(self.0.as_u16(), code.status(), "{}", self.1);
        assert_eq!(crate::code(self.0, &self.1), code, "{}", self.1);
    }

    fn succeeded(&self) {
        assert!(self.0.is_success(), "{} {}", self.0, self.1);
    }
}

impl std::ops::Index<&str> for Answer {
    type Output = Value;

    fn index(&self, key: &str) -> &Value {
        &self.1[key]
    }
}

/// A server process's answer (the multi-replica tests talk to real processes over
/// HTTP): its success envelope's `data` decoded into the wire type `T`.
pub async fn data_of<T: DeserializeOwned>(response: reqwest::Response) -> T {
    let status = StatusCode::from_u16(response.status().as_u16()).unwrap();
    let body: Value = response.json().await.unwrap();
    Answer(status, body).data()
}

/// The `pagination` of a paginated envelope, decoded.
pub fn pagination(body: &Value) -> Pagination {
    decode(&body["pagination"], body)
}

fn decode<T: DeserializeOwned>(value: &Value, whole: &Value) -> T {
    match serde_json::from_value(value.clone()) {
        Ok(decoded) => decoded,
        Err(why) => panic!(
            "the answer is not a {}: {why}\n{whole}",
            std::any::type_name::<T>()
        ),
    }
}
