//! The table against the documents, and the OpenAPI document against its snapshot.

use super::*;
use crate::http::openapi::document;
use tenancy::Access as Column;

/// The reviewed copy of `/openapi.json`: a change of the API shows up in review as
/// a change of this file.
const SNAPSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json");

/// A component name means one schema: the typed ones agree wherever routes use
/// them, and none is also written by hand.
#[test]
fn each_component_is_defined_once() {
    let hand = components();
    let mut typed: BTreeMap<String, Value> = BTreeMap::new();
    for route in routes() {
        for (name, schema) in route.components {
            assert!(
                hand.get(&name).is_none(),
                "{name} is typed and written by hand"
            );
            let first = typed.entry(name.clone()).or_insert_with(|| schema.clone());
            assert_eq!(*first, schema, "two types are named {name}");
        }
    }
}

/// Client generators name an inline object after its parent and property
/// (`Pipeline.props` is `PipelineProps`): an inline object whose derived name is
/// also a component's makes them drop both models (openapi-python-client: "attempted
/// to generate duplicate models"). Such a property refers to the component.
#[test]
fn no_inline_object_is_named_like_a_component() {
    let document = document();
    let schemas = document["components"]["schemas"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut clashes = Vec::new();
    for (name, schema) in &schemas {
        let properties = schema["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (property, inner) in properties {
            let object = match &inner["type"] {
                Value::String(t) => t == "object",
                Value::Array(types) => types.iter().any(|t| t == "object"),
                _ => false,
            };
            let mut chars = property.chars();
            let derived = match chars.next() {
                Some(first) => format!("{name}{}{}", first.to_uppercase(), chars.as_str()),
                None => continue,
            };
            if object && schemas.contains_key(&derived) {
                clashes.push(format!("{name}.{property}"));
            }
        }
    }
    assert!(
        clashes.is_empty(),
        "inline objects named like components: {clashes:?}"
    );
}

#[test]
fn the_document_matches_its_reviewed_snapshot() {
    let mut now = serde_json::to_string_pretty(&document()).unwrap_or_default();
    now.push('\n');
    if std::env::var_os("ACCEPT_OPENAPI").is_some() {
        assert!(
            std::fs::write(SNAPSHOT, &now).is_ok(),
            "cannot write {SNAPSHOT}"
        );
        return;
    }
    let reviewed = std::fs::read_to_string(SNAPSHOT).unwrap_or_default();
    if reviewed != now {
        let line = reviewed
            .lines()
            .zip(now.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| reviewed.lines().count().min(now.lines().count()));
        panic!(
            "/openapi.json differs from {SNAPSHOT} from line {} on. If the change is \
             meant, accept it with `ACCEPT_OPENAPI=1 cargo test -p adapters --lib \
             the_document_matches_its_reviewed_snapshot` and review the diff.",
            line + 1
        );
    }
}

/// Document 2's Permission column for `/organization` and `/invitation`, against
/// the table. Two rows differ by design: `GET /organization` names the
/// organization by `x-org-id`, so membership of it is checked; `POST
/// /organization` is open to any user for a root organization, and checks
/// `org:settings` in `parentOrgId` for a team (inside the handler, since the
/// organization is in the body).
#[test]
fn the_table_follows_document_2() {
    let org = |need, step_up| Access::Org {
        from: OrgFrom::Path,
        need,
        step_up,
        counted: true,
    };
    let header = |need| Access::Org {
        from: OrgFrom::Header,
        need,
        step_up: false,
        counted: true,
    };
    let rows = [
        ("GET", "/api/organization", header(Column::Member)),
        ("POST", "/api/organization", Access::User),
        (
            "GET",
            "/api/organization/{id}",
            org(Column::OwnManagedOrSuperAdmin, false),
        ),
        (
            "PUT",
            "/api/organization/{id}",
            org(Column::SuperAdmin, false),
        ),
        (
            "DELETE",
            "/api/organization/{id}",
            // A super-admin with step-up; the organization is looked up by
            // the service, deleted ones included (a second delete is 409).
            Access::SuperAdmin { step_up: true },
        ),
        (
            "PATCH",
            "/api/organization/{id}/tier",
            org(Column::SuperAdmin, true),
        ),
        (
            "GET",
            "/api/organization/{id}/export",
            org(Needs(OrgSettings), false),
        ),
        (
            "PATCH",
            "/api/organization/{id}/transfer-owner",
            org(Needs(OrgSettings), true),
        ),
        ("GET", "/api/organization/{id}/members", org(Member, false)),
        (
            "POST",
            "/api/organization/{id}/members",
            org(Needs(MembersManage), false),
        ),
        (
            "DELETE",
            "/api/organization/{id}/members/{userId}",
            org(Needs(MembersManage), false),
        ),
        (
            "PATCH",
            "/api/organization/{id}/members/{userId}",
            org(Needs(MembersManage), false),
        ),
        (
            "PATCH",
            "/api/organization/{id}/members/{userId}/activate",
            org(Needs(MembersManage), false),
        ),
        (
            "PATCH",
            "/api/organization/{id}/members/{userId}/deactivate",
            org(Needs(MembersManage), false),
        ),
        (
            "POST",
            "/api/organization/{id}/members/bulk-add",
            org(Needs(MembersManage), false),
        ),
        ("GET", "/api/organization/{id}/teams", org(Member, false)),
        ("GET", "/api/organization/{id}/roles", org(Member, false)),
        (
            "POST",
            "/api/organization/{id}/roles",
            org(Needs(RolesManage), false),
        ),
        (
            "PUT",
            "/api/organization/{id}/roles/{roleId}",
            org(Needs(RolesManage), false),
        ),
        (
            "DELETE",
            "/api/organization/{id}/roles/{roleId}",
            org(Needs(RolesManage), false),
        ),
        (
            "POST",
            "/api/organization/{id}/roles/{roleId}/members",
            org(Needs(RolesManage), false),
        ),
        (
            "DELETE",
            "/api/organization/{id}/roles/{roleId}/members/{userId}",
            org(Needs(RolesManage), false),
        ),
        (
            "POST",
            "/api/invitation/send",
            header(Needs(InvitationsManage)),
        ),
        ("GET", "/api/invitation", header(Needs(InvitationsManage))),
        (
            "DELETE",
            "/api/invitation/{id}",
            header(Needs(InvitationsManage)),
        ),
        (
            "POST",
            "/api/invitation/{id}/resend",
            header(Needs(InvitationsManage)),
        ),
    ];
    let table = routes();
    for (method, path, access) in rows {
        let route = table
            .iter()
            .find(|r| r.method == method && r.path == path)
            .unwrap_or_else(|| panic!("{method} {path} is not in the table"));
        assert_eq!(route.access, access, "{method} {path}");
    }
}

#[test]
fn each_route_is_declared_once_with_a_unique_operation() {
    let table = routes();
    let mut seen = std::collections::BTreeSet::new();
    let mut operations = std::collections::BTreeSet::new();
    for route in &table {
        assert!(
            seen.insert((route.method, route.path)),
            "{} {}",
            route.method,
            route.path
        );
        assert!(operations.insert(route.operation), "{}", route.operation);
        assert!(!route.summary.is_empty(), "{} {}", route.method, route.path);
    }
}

#[test]
fn the_document_marks_what_each_route_needs() {
    let document = document();
    assert_eq!(document["openapi"], "3.1.0");
    let validate = &document["paths"]["/api/compliance/validate/{target}"]["post"];
    let names: Vec<_> = validate["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["name"].as_str(),
                p["in"].as_str(),
                p["required"].as_bool(),
            )
        })
        .collect();
    assert!(names.contains(&(Some("x-org-id"), Some("header"), Some(true))));
    assert!(names.contains(&(Some("target"), Some("path"), Some(true))));
    assert!(validate["requestBody"]["content"]["application/json"]["schema"].is_object());
    assert!(validate["responses"]["200"].is_object());
    assert_eq!(
        validate["responses"]["default"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/Error"
    );
    let health = &document["paths"]["/health"]["get"];
    assert_eq!(health["security"], json!([]));
    // Every reference resolves.
    let text = document.to_string();
    for name in text.split("#/components/schemas/").skip(1) {
        let name: String = name.chars().take_while(|c| c.is_alphanumeric()).collect();
        assert!(
            document["components"]["schemas"][&name].is_object(),
            "{name} is referenced but not defined"
        );
    }
}

#[test]
fn billing_parameters_are_the_catalogs_enums() {
    let document = document();
    let path_enum = |path: &str, method: &str, name: &str| -> Vec<String> {
        document["paths"][path][method]["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["name"] == name && p["in"] == "path")
            .flat_map(|p| p["schema"]["enum"].as_array().cloned().unwrap_or_default())
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    // The quota service's types (seats go to the platform, not here).
    assert_eq!(
        path_enum("/api/quotas/{id}/{type}", "get", "type"),
        ["plugins", "pipelines", "apiCalls", "aiCalls", "storage"]
    );
    let bundles = path_enum(
        "/api/subscriptions/{id}/addons/{bundleId}",
        "delete",
        "bundleId",
    );
    assert_eq!(bundles.len(), 8);
    assert!(bundles
        .iter()
        .all(|b| entitlements::BundleId::parse(b).is_some()));
    assert!(bundles.contains(&"SEAT_PACK".to_owned()));
    let body_field = |path: &str, field: &str| -> Value {
        let operations = &document["paths"][path];
        let operation = if operations["post"].is_object() {
            &operations["post"]
        } else {
            &operations["put"]
        };
        let body = resolve(
            &document,
            &operation["requestBody"]["content"]["application/json"]["schema"],
        );
        resolve(&document, &body["properties"][field])
    };
    let increment = body_field("/api/quotas/{id}/increment", "type");
    assert_eq!(increment["enum"], json!(["apiCalls", "aiCalls", "storage"]));
    let addon = body_field("/api/subscriptions/{id}/addons", "bundleId");
    assert_eq!(addon["enum"].as_array().map(Vec::len), Some(8));
    // The limit overrides name exactly the quota types.
    let limits = body_field("/api/quotas/{id}", "limits");
    let limits = resolve(&document, &limits["oneOf"][1]);
    let mut named: Vec<&String> = limits["properties"]
        .as_object()
        .map(|p| p.keys().collect())
        .unwrap_or_default();
    named.sort();
    assert_eq!(
        named,
        ["aiCalls", "apiCalls", "pipelines", "plugins", "storage"]
    );
}

/// A schema, or the component its `$ref` names.
fn resolve(document: &Value, schema: &Value) -> Value {
    match schema["$ref"].as_str() {
        Some(reference) => {
            let name = reference.trim_start_matches("#/components/schemas/");
            document["components"]["schemas"][name].clone()
        }
        None => schema.clone(),
    }
}

/// A feature is checked where an organization is granted: a route that declares
/// one on another kind of access would be open to every tier, so none does.
#[test]
fn a_route_that_needs_a_feature_names_its_organization() {
    let gated: Vec<_> = routes()
        .into_iter()
        .filter(|r| r.feature.is_some())
        .collect();
    assert!(gated.len() >= 4);
    for route in gated {
        assert!(
            matches!(route.access, Access::Org { .. }),
            "{} {} needs a feature but names no organization",
            route.method,
            route.path
        );
    }
}
