//! The route table: every route declared once, with its method, path, handler, who
//! may call it and its documentation, one file per area. The router
//! ([`crate::http::router`]), the gate (a [`guard`](crate::http::guard) layer per
//! route) and `/openapi.json` ([`crate::http::openapi::document`]) are all derived
//! from [`routes`]; nothing else names a path.

use std::collections::BTreeMap;

use axum::handler::Handler;
use axum::middleware;
use axum::routing::{self, MethodRouter};
use entitlements::Feature;
use serde_json::{json, Value};
use tenancy::Access::{Member, OwnManagedOrSuperAdmin, Permission as Needs};
use tenancy::Permission::*;
use OrgFrom::Query as InQuery;

use crate::http::guard::{enforce, Access, Guard, OrgFrom};
use crate::http::openapi::{schema_of, Components};
use crate::http::response::Deleted;
use crate::http::schemas::*;
use crate::http::state::AppState;
use crate::http::{
    admin, alerts, announcements, audit, billing, builds, catalog, check_log, conversations,
    dashboards, exemptions, generation, images, invitations, keys, members, messages,
    organizations, pipelines, plugins, policies, preferences, quotas, reports, rules, scans,
    signin, sso, system, templates, validate,
};

mod accounts;
mod admin_area;
mod analytics;
mod governance;
mod inbox;
mod inventory;
mod operational;
mod orgs;
mod registry;
mod sessions;
mod sweeps;
#[cfg(test)]
mod tests;
mod trail;
mod watch;

/// One route.
pub struct Route {
    /// `GET`, `POST`, ...
    pub method: &'static str,
    /// The full path, with `{name}` parameters.
    pub path: &'static str,
    /// The OpenAPI operationId.
    pub operation: &'static str,
    pub(crate) access: Access,
    pub(crate) summary: &'static str,
    /// The request body's schema, and whether a body is required.
    pub(crate) body: Option<(Value, bool)>,
    /// The query parameters (from the route's query type and `.paged`) and the
    /// headers it reads (`Idempotency-Key`), as OpenAPI parameters.
    pub(crate) query: Vec<Value>,
    pub(crate) ok: (u16, Value),
    /// The success answer's media type.
    pub(crate) media: &'static str,
    /// The request body's media type.
    pub(crate) body_media: &'static str,
    /// A body limit of its own, above the server's.
    pub(crate) body_limit: Option<usize>,
    /// The feature of the account's tier (or bundles) the route needs.
    pub(crate) feature: Option<entitlements::Feature>,
    /// The named schemas the route's typed body and answer refer to.
    pub(crate) components: Components,
    /// The path the router matches, when it differs from the documented one (a
    /// parameter that may hold slashes is matched by a wildcard).
    matched: Option<&'static str>,
    handler: MethodRouter<AppState>,
}

macro_rules! verb {
    ($name:ident, $method:literal, $routing:path) => {
        fn $name<H, T>(
            path: &'static str,
            operation: &'static str,
            access: Access,
            handler: H,
        ) -> Route
        where
            H: Handler<T, AppState>,
            T: 'static,
        {
            Route {
                method: $method,
                path,
                operation,
                access,
                summary: "",
                body: None,
                query: Vec::new(),
                ok: (200, envelope(any())),
                media: "application/json",
                body_media: "application/json",
                body_limit: None,
                feature: None,
                components: Components::new(),
                matched: None,
                handler: $routing(handler),
            }
        }
    };
}

verb!(get, "GET", routing::get);
verb!(post, "POST", routing::post);
verb!(put, "PUT", routing::put);
verb!(patch, "PATCH", routing::patch);
verb!(delete, "DELETE", routing::delete);

impl Route {
    /// The router matches `path` (a wildcard where a documented parameter may hold
    /// slashes); the documentation keeps the route's own path.
    fn matched_as(mut self, path: &'static str) -> Self {
        self.matched = Some(path);
        self
    }

    fn doc(mut self, summary: &'static str) -> Self {
        self.summary = summary;
        self
    }

    /// The route needs `feature` in the caller's account (403
    /// `FEATURE_NOT_AVAILABLE` otherwise), as it needs its permission.
    fn feature(mut self, feature: entitlements::Feature) -> Self {
        self.feature = Some(feature);
        self
    }

    /// The request body is a `T` (its schema derived from the type).
    fn body_of<T: utoipa::ToSchema>(mut self) -> Self {
        let schema = schema_of::<T>(&mut self.components);
        self.body = Some((schema, true));
        self
    }

    /// The success answer is a `T` in the envelope ([`Answer`]), with `status`.
    ///
    /// [`Answer`]: crate::http::response::Answer
    fn answers<T: utoipa::ToSchema>(mut self, status: u16) -> Self {
        let schema = schema_of::<T>(&mut self.components);
        self.ok = (status, envelope(schema));
        self
    }

    /// The success answer is a list of `T`s in the envelope (an [`Answer`] of a `Vec`).
    ///
    /// [`Answer`]: crate::http::response::Answer
    fn answers_list<T: utoipa::ToSchema>(mut self, status: u16) -> Self {
        let schema = schema_of::<T>(&mut self.components);
        self.ok = (status, envelope(array(schema)));
        self
    }

    /// A page of `T`s under `key`, with a `B` (or null) under `beside` ([`Paged::beside`]).
    ///
    /// [`Paged::beside`]: crate::http::response::Paged::beside
    fn pages_beside<T: utoipa::ToSchema, B: utoipa::ToSchema>(
        mut self,
        key: &str,
        beside: &str,
    ) -> Self {
        let item = schema_of::<T>(&mut self.components);
        let other = schema_of::<B>(&mut self.components);
        self.ok = (200, page_with(key, item, &[(beside, nullable(other))]));
        self
    }

    /// The success answer is a `T` as is, with no envelope (a format other tools
    /// read, such as a `PolicyReport`).
    fn bare<T: utoipa::ToSchema>(mut self) -> Self {
        let schema = schema_of::<T>(&mut self.components);
        self.ok = (200, schema);
        self
    }

    /// The success answer is a page of `T`s under `key` ([`Paged`]).
    ///
    /// [`Paged`]: crate::http::response::Paged
    fn pages<T: utoipa::ToSchema>(mut self, key: &str) -> Self {
        let schema = schema_of::<T>(&mut self.components);
        self.ok = (200, page(key, schema));
        self
    }

    /// A body that may be left out, a `T` when given.
    fn optional_body_of<T: utoipa::ToSchema>(mut self) -> Self {
        let schema = schema_of::<T>(&mut self.components);
        self.body = Some((schema, false));
        self
    }

    /// The query parameters are the fields of `T` (its `IntoParams`), followed by
    /// those already declared.
    fn query_of<T: utoipa::IntoParams>(mut self) -> Self {
        let mut parameters: Vec<Value> =
            T::into_params(|| Some(utoipa::openapi::path::ParameterIn::Query))
                .into_iter()
                .filter_map(|p| serde_json::to_value(p).ok())
                .collect();
        parameters.append(&mut self.query);
        self.query = parameters;
        self
    }

    /// The list parameters of document 2 (`limit`, `offset`, `sortBy` among
    /// `sortable`, `sortOrder`), after the others.
    fn paged(mut self, sortable: &[&str]) -> Self {
        self.query.extend(paging(sortable));
        self
    }

    /// The `Idempotency-Key` header (1 to 200 characters), `required` or not.
    fn idempotency_key(mut self, required: bool) -> Self {
        self.query
            .push(parameter("Idempotency-Key", "header", required, text(200)));
        self
    }

    /// A body of at most `limit` bytes, above the server's `COMPLIANCE_BODY_LIMIT_BYTES`.
    fn body_limit(mut self, limit: usize) -> Self {
        self.body_limit = Some(limit);
        self
    }

    /// A `multipart/form-data` body of at most `limit` bytes.
    fn multipart<T: utoipa::ToSchema>(mut self, limit: usize) -> Self {
        let schema = schema_of::<T>(&mut self.components);
        self.body = Some((schema, true));
        self.body_media = "multipart/form-data";
        self.body_limit = Some(limit);
        self
    }

    /// A success answered as a JSON document of its own (no envelope).
    fn json_document(mut self) -> Self {
        self.ok = (200, json!({"type": "object"}));
        self
    }

    /// A success answered as server-sent events.
    fn event_stream(mut self) -> Self {
        self.ok = (200, json!({"type": "string"}));
        self.media = "text/event-stream";
        self
    }

    /// A success answered as JSON lines.
    fn lines(mut self) -> Self {
        self.ok = (200, json!({"type": "string"}));
        self.media = "application/x-ndjson";
        self
    }

    /// A success answered as plain text.
    /// The success answer is a 302 to another site (no body).
    fn redirects(mut self) -> Self {
        self.ok = (302, json!({"type": "string"}));
        self.media = "text/plain";
        self
    }

    /// A success answered as a ZIP archive.
    fn zip(mut self) -> Self {
        self.ok = (200, json!({"type": "string", "format": "binary"}));
        self.media = "application/zip";
        self
    }

    /// A success answered as YAML.
    fn yaml(mut self) -> Self {
        self.ok = (200, json!({"type": "string"}));
        self.media = "application/yaml";
        self
    }

    fn text(mut self) -> Self {
        self.ok = (200, json!({"type": "string"}));
        self.media = "text/plain";
        self
    }

    /// `METHOD /path`, as an `authz.denied` event names it.
    fn action(&self) -> std::sync::Arc<str> {
        format!("{} {}", self.method, self.path).into()
    }
}

fn org_member() -> Access {
    Access::Org {
        from: OrgFrom::Header,
        need: Member,
        step_up: false,
        counted: true,
    }
}

/// Every route of the server.
pub fn routes() -> Vec<Route> {
    [
        operational::routes(),
        sessions::routes(),
        orgs::routes(),
        admin_area::routes(),
        trail::routes(),
        governance::routes(),
        inbox::routes(),
        accounts::routes(),
        analytics::routes(),
        watch::routes(),
        sweeps::routes(),
        inventory::routes(),
        registry::routes(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// A route of the `x-org-id` organization that needs `permission`.
const fn compliance(permission: tenancy::Permission) -> Access {
    Access::header(permission)
}

/// A route of the organization in the path that needs `need`.
const fn org_path(need: tenancy::Access) -> Access {
    Access::path(need)
}

/// The axum router of the table: one guard layer per route, stating its access.
pub(crate) fn router(state: &AppState) -> axum::Router<AppState> {
    let mut paths: BTreeMap<&'static str, MethodRouter<AppState>> = BTreeMap::new();
    for route in routes() {
        let guard = Guard {
            state: state.clone(),
            access: route.access,
            action: route.action(),
            changes_state: route.method != "GET",
            feature: route.feature,
        };
        let mut handler = route.handler;
        if let Some(limit) = route.body_limit {
            handler = handler.layer(axum::extract::DefaultBodyLimit::max(limit));
        }
        let handler = handler.route_layer(middleware::from_fn_with_state(guard, enforce));
        let path = route.matched.unwrap_or(route.path);
        let merged = match paths.remove(path) {
            Some(existing) => existing.merge(handler),
            None => handler,
        };
        paths.insert(path, merged);
    }
    paths
        .into_iter()
        .fold(axum::Router::new(), |router, (path, methods)| {
            router.route(path, methods)
        })
}
