//! The route table: every route declared once, with its method, path, handler, who
//! may call it and its documentation. The router ([`crate::http::router`]), the gate
//! (a [`guard`](crate::http::guard) layer per route) and `/openapi.json`
//! ([`document`]) are all derived from [`routes`]; nothing else names a path.

use std::collections::BTreeMap;

use axum::handler::Handler;
use axum::middleware;
use axum::routing::{self, MethodRouter};
use entitlements::Feature;
use serde_json::{json, Map, Value};
use tenancy::Access::{Member, OwnManagedOrSuperAdmin, Permission as Needs};
use tenancy::Permission::*;

use crate::http::guard::{enforce, Access, Guard, OrgFrom};
use crate::http::openapi::{schema_of, Components};
use crate::http::schemas::*;
use crate::http::state::AppState;
use crate::http::{
    admin, audit, billing, catalog, check_log, exemptions, invitations, members, messages,
    organizations, pipelines, plugins, policies, preferences, quotas, rules, scans, system,
    templates, validate,
};

/// One route.
pub struct Route {
    /// `GET`, `POST`, ...
    pub method: &'static str,
    /// The full path, with `{name}` parameters.
    pub path: &'static str,
    /// The OpenAPI operationId.
    pub operation: &'static str,
    pub(crate) access: Access,
    summary: &'static str,
    /// The request body's schema, and whether a body is required.
    body: Option<(Value, bool)>,
    query: Vec<Value>,
    ok: (u16, Value),
    /// The success answer's media type.
    media: &'static str,
    /// The request body's media type.
    body_media: &'static str,
    /// A body limit of its own, above the server's.
    body_limit: Option<usize>,
    /// The feature of the account's tier (or bundles) the route needs.
    pub(crate) feature: Option<entitlements::Feature>,
    /// The named schemas the route's typed body and answer refer to.
    components: Components,
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

    /// The success answer is a page of `T`s under `key` ([`Paged`]).
    ///
    /// [`Paged`]: crate::http::response::Paged
    fn pages<T: utoipa::ToSchema>(mut self, key: &str) -> Self {
        let schema = schema_of::<T>(&mut self.components);
        self.ok = (200, page(key, schema));
        self
    }

    fn body(mut self, schema: Value) -> Self {
        self.body = Some((schema, true));
        self
    }

    /// A body that may be left out.
    fn optional_body(mut self, schema: Value) -> Self {
        self.body = Some((schema, false));
        self
    }

    fn query(mut self, parameters: Vec<Value>) -> Self {
        self.query = parameters;
        self
    }

    fn ok(mut self, status: u16, schema: Value) -> Self {
        self.ok = (status, schema);
        self
    }

    /// A `multipart/form-data` body of at most `limit` bytes.
    fn multipart(mut self, schema: Value, limit: usize) -> Self {
        self.body = Some((schema, true));
        self.body_media = "multipart/form-data";
        self.body_limit = Some(limit);
        self
    }

    /// A success answered as plain text.
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

fn target() -> Value {
    one_of(&["plugin", "pipeline"])
}

fn rule_page() -> Value {
    page("rules", reference("Rule"))
}

fn rule_filters() -> Vec<Value> {
    listing(vec![
        query("target", target()),
        query("severity", one_of(&["warning", "error", "critical"])),
        query("scope", one_of(&["org", "published"])),
        query("tag", string()),
        query("name", string()),
        query("includeDeleted", boolean()),
    ])
}

fn rule_ref() -> Value {
    body(&[("ruleId", text(200)), ("name", text(200))], &["ruleId"])
}

fn clone_body() -> Value {
    body(&[("name", text(200))], &[])
}

fn validation_body() -> Value {
    body(
        &[
            ("attributes", json!({"type": "object"})),
            ("entityId", text(200)),
        ],
        &["attributes"],
    )
}

fn exemption_fields(entities: (&'static str, Value)) -> Value {
    let key = entities.0;
    body(
        &[
            ("ruleId", text(200)),
            entities,
            ("reason", text(2000)),
            ("expiresAt", nullable(instant())),
        ],
        &["ruleId", key, "reason"],
    )
}

fn policy_body() -> Value {
    body(
        &[
            ("name", text(200)),
            ("description", nullable(string())),
            ("ruleIds", array(string())),
            ("isTemplate", boolean()),
        ],
        &[],
    )
}

fn role_body(required: &[&str]) -> Value {
    body(
        &[("name", text(100)), ("permissions", array(string()))],
        required,
    )
}

fn addon_body() -> Value {
    body(
        &[
            ("bundleId", bundle_id()),
            (
                "quantity",
                json!({"type": "integer", "minimum": 1, "maximum": 10000}),
            ),
        ],
        &["bundleId"],
    )
}

fn org_member() -> Access {
    Access::Org {
        from: OrgFrom::Header,
        need: Member,
        step_up: false,
        counted: true,
    }
}

fn pipeline_filters(paged: bool) -> Vec<Value> {
    let filters = vec![
        query("project", string()),
        query("organization", string()),
        query("pipelineName", string()),
        query("accessModifier", one_of(&["public", "private"])),
    ];
    if paged {
        let mut all = filters;
        all.extend(paging(&crate::http::pipelines::SORTABLE));
        all
    } else {
        filters
    }
}

fn plugin_filters(paged: bool) -> Vec<Value> {
    let mut filters = vec![
        query("name", string()),
        query("version", string()),
        query("accessModifier", one_of(&["public", "private"])),
        query("isActive", boolean()),
        query("isDefault", boolean()),
        query("pluginType", string()),
    ];
    if paged {
        filters.extend(paging(&crate::http::plugins::SORTABLE));
    }
    filters
}

/// Every route of the server.
pub fn routes() -> Vec<Route> {
    use OrgFrom::Query as InQuery;
    let compliance = |permission| Access::header(permission);
    let org_path = Access::path;
    vec![
        // Operational.
        get("/health", "health", Access::Public, system::health)
            .doc("The process is up")
            .ok(200, envelope(object(&[("status", string())], &["status"]))),
        get("/ready", "ready", Access::Public, system::ready)
            .doc("The database answers")
            .ok(200, envelope(object(&[("status", string())], &["status"]))),
        get("/metrics", "metrics", Access::Public, system::metrics)
            .doc("Prometheus metrics")
            .text(),
        get("/openapi.json", "openapi", Access::Public, system::openapi)
            .doc("This document")
            .ok(200, json!({"type": "object"})),
        // Organizations.
        get("/api/me/organizations", "myOrganizations", Access::User, organizations::mine)
            .doc("The organizations the caller belongs to, with their roles")
            .query(paging(&["createdAt"]))
            .ok(200, page("organizations", object(
                &[
                    ("id", string()),
                    ("name", string()),
                    ("parentOrgId", nullable(string())),
                    ("isSystem", boolean()),
                    ("role", one_of(&["owner", "admin", "member"])),
                    ("active", boolean()),
                    ("roles", array(string())),
                ],
                &["id", "name", "role", "active", "roles"],
            ))),
        get("/api/organization", "activeOrganization", org_member(), organizations::active)
            .doc("The `x-org-id` organization")
            .ok(200, envelope(reference("Organization"))),
        post("/api/organization", "createOrganization", Access::User, organizations::create)
            .doc("Create an organization, or a team under `parentOrgId` (the `org:settings` permission there)")
            .body(body(
                &[
                    ("name", text(100)),
                    ("displayName", nullable(text(200))),
                    ("parentOrgId", nullable(string())),
                ],
                &["name"],
            ))
            .ok(201, envelope(reference("Organization"))),
        get("/api/organization/{id}", "getOrganization", org_path(OwnManagedOrSuperAdmin), organizations::get)
            .doc("One organization")
            .ok(200, envelope(reference("Organization"))),
        put("/api/organization/{id}", "updateOrganization", org_path(tenancy::Access::SuperAdmin), organizations::update)
            .doc("Rename an organization")
            .body(body(
                &[("name", text(100)), ("displayName", nullable(text(200)))],
                &[],
            ))
            .ok(200, envelope(reference("Organization"))),
        delete("/api/organization/{id}", "deleteOrganization", Access::SuperAdmin { step_up: true }, organizations::delete)
            .doc("Soft-delete an organization and its teams (audit org.soft_delete, in its chain and the system organization's): its members can no longer act in it, it leaves every listing, its running scans end and its schedules stop, a team's usage leaves its root's pool; its data is kept for ORG_RESTORE_DAYS (30), then purged but for its audit chain. Deleted already: 409")
            .ok(200, done("id", "deleted")),
        post("/api/organization/{id}/restore", "restoreOrganization", Access::SuperAdmin { step_up: true }, organizations::restore)
            .doc("Restore a soft-deleted organization and the teams deleted with it, exactly as they were (audit org.restore): within ORG_RESTORE_DAYS of the delete, else 410 GONE; not deleted, restored meanwhile, a team whose root is deleted, or a name another organization took meanwhile: 409")
            .ok(200, envelope(reference("Organization"))),
        patch("/api/organization/{id}/tier", "changeTier", org_path(tenancy::Access::SuperAdmin).stepped_up(), organizations::change_tier)
            .doc("Change an organization's tier")
            .body(body(&[("tier", tier())], &["tier"]))
            .ok(200, envelope(reference("Organization"))),
        get("/api/organization/{id}/export", "exportOrganization", org_path(Needs(OrgSettings)), organizations::export)
            .doc("Everything the organization holds about its members, teams, roles and invitations")
            .ok(200, envelope(object(
                &[
                    ("organization", reference("Organization")),
                    ("members", array(reference("Member"))),
                    ("teams", array(reference("Organization"))),
                    ("roles", array(reference("Role"))),
                    ("invitations", array(reference("Invitation"))),
                ],
                &["organization", "members", "teams", "roles", "invitations"],
            ))),
        patch("/api/organization/{id}/transfer-owner", "transferOwner", org_path(Needs(OrgSettings)).stepped_up(), organizations::transfer_owner)
            .doc("Hand the ownership to another active member")
            .body(body(&[("userId", text(200))], &["userId"]))
            .ok(200, envelope(reference("Organization"))),
        get("/api/organization/{id}/teams", "listTeams", org_path(Member), organizations::teams)
            .doc("The organization's teams")
            .query(paging(&["createdAt"]))
            .ok(200, page("teams", reference("Organization"))),
        // Members and roles.
        get("/api/organization/{id}/members", "listMembers", org_path(Member), members::list)
            .doc("The organization's members")
            .query(paging(&["createdAt"]))
            .ok(200, page("members", reference("Member"))),
        post("/api/organization/{id}/members", "addMember", org_path(Needs(MembersManage)), members::add)
            .doc("Add a member")
            .body(body(
                &[
                    ("userId", text(200)),
                    ("email", nullable(string())),
                    ("role", nullable(one_of(&["admin", "member"]))),
                ],
                &["userId"],
            ))
            .ok(201, envelope(reference("Member"))),
        post("/api/organization/{id}/members/bulk-add", "bulkAddMember", org_path(Needs(MembersManage)), members::bulk_add)
            .doc("Add a user to several teams of the organization")
            .feature(Feature::BulkOperations)
            .body(body(
                &[
                    ("userId", text(200)),
                    ("teamIds", json!({"type": "array", "items": string(), "minItems": 1, "maxItems": 100})),
                    ("role", nullable(one_of(&["admin", "member"]))),
                ],
                &["userId", "teamIds"],
            ))
            .ok(201, envelope(object(
                &[("userId", string()), ("teamIds", array(string()))],
                &["userId", "teamIds"],
            ))),
        patch("/api/organization/{id}/members/{userId}", "changeMemberRole", org_path(Needs(MembersManage)), members::change_role)
            .doc("Change a member's role")
            .body(body(&[("role", one_of(&["admin", "member"]))], &["role"]))
            .ok(200, envelope(reference("Member"))),
        delete("/api/organization/{id}/members/{userId}", "removeMember", org_path(Needs(MembersManage)), members::remove)
            .doc("Remove a member")
            .ok(200, done("userId", "removed")),
        patch("/api/organization/{id}/members/{userId}/activate", "activateMember", org_path(Needs(MembersManage)), members::activate)
            .doc("Activate a member")
            .ok(200, envelope(reference("Member"))),
        patch("/api/organization/{id}/members/{userId}/deactivate", "deactivateMember", org_path(Needs(MembersManage)), members::deactivate)
            .doc("Deactivate a member")
            .ok(200, envelope(reference("Member"))),
        get("/api/organization/{id}/roles", "listRoles", org_path(Member), members::roles)
            .doc("The organization's Roles")
            .query(paging(&["createdAt"]))
            .ok(200, page("roles", reference("Role"))),
        post("/api/organization/{id}/roles", "createRole", org_path(Needs(RolesManage)), members::create_role)
            .doc("Define a custom Role")
            .body(role_body(&["name", "permissions"]))
            .ok(201, envelope(reference("Role"))),
        put("/api/organization/{id}/roles/{roleId}", "updateRole", org_path(Needs(RolesManage)), members::update_role)
            .doc("Change a custom Role")
            .body(role_body(&[]))
            .ok(200, envelope(reference("Role"))),
        delete("/api/organization/{id}/roles/{roleId}", "deleteRole", org_path(Needs(RolesManage)), members::delete_role)
            .doc("Delete a custom Role")
            .ok(200, done("id", "deleted")),
        post("/api/organization/{id}/roles/{roleId}/members", "addRoleMember", org_path(Needs(RolesManage)), members::add_role_member)
            .doc("Give a member a Role")
            .body(body(&[("userId", text(200))], &["userId"]))
            .ok(201, envelope(reference("Role"))),
        delete("/api/organization/{id}/roles/{roleId}/members/{userId}", "removeRoleMember", org_path(Needs(RolesManage)), members::remove_role_member)
            .doc("Take a Role from a member")
            .ok(200, envelope(object(
                &[("roleId", string()), ("userId", string()), ("removed", boolean())],
                &["roleId", "userId", "removed"],
            ))),
        // Invitations.
        post("/api/invitation/send", "sendInvitation", compliance(InvitationsManage), invitations::send)
            .doc("Invite someone by e-mail")
            .body(body(
                &[
                    ("email", json!({"type": "string", "maxLength": 320, "pattern": "^[^@\\s]+@[^@\\s]+$"})),
                    ("role", nullable(one_of(&["admin", "member"]))),
                ],
                &["email"],
            ))
            .ok(201, envelope(reference("Invitation"))),
        get("/api/invitation", "listInvitations", compliance(InvitationsManage), invitations::list)
            .doc("The organization's invitations")
            .query(paging(&["createdAt"]))
            .ok(200, page("invitations", reference("Invitation"))),
        delete("/api/invitation/{id}", "revokeInvitation", compliance(InvitationsManage), invitations::revoke)
            .doc("Revoke an invitation")
            .ok(200, envelope(reference("Invitation"))),
        post("/api/invitation/{id}/resend", "resendInvitation", compliance(InvitationsManage), invitations::resend)
            .doc("Send an invitation again")
            .ok(200, envelope(reference("Invitation"))),
        post("/api/invitation/{id}/accept", "acceptInvitation", Access::User, invitations::accept)
            .doc("Accept an invitation as its invitee (the token's e-mail; anyone else's is 404): the caller joins with the invited role, within the account's seats (429 QUOTA_EXCEEDED beyond them); 409 once it is no longer pending (audit invitation.accept)")
            .ok(201, envelope(reference("Member"))),
        // Platform administration.
        get("/api/admin/super-admins", "listSuperAdmins", Access::SuperAdmin { step_up: false }, admin::list)
            .doc("The super-admins")
            .ok(200, envelope(object(&[("superAdmins", array(string()))], &["superAdmins"]))),
        put("/api/admin/super-admins/{userId}", "grantSuperAdmin", Access::SuperAdmin { step_up: true }, admin::grant)
            .doc("Make a user a super-admin")
            .ok(200, envelope(object(&[("userId", string()), ("superAdmin", boolean())], &["userId", "superAdmin"]))),
        delete("/api/admin/super-admins/{userId}", "revokeSuperAdmin", Access::SuperAdmin { step_up: true }, admin::revoke)
            .doc("Revoke a super-admin (never the last one)")
            .ok(200, envelope(object(&[("userId", string()), ("superAdmin", boolean())], &["userId", "superAdmin"]))),
        // The audit trail.
        post("/api/audit/events", "ingestAuditEvent", Access::Service, audit::ingest)
            .doc("Append another service's event to the organization's chain; `Idempotency-Key` header required (a redelivery answers 200 with the first row)")
            .body(body(
                &[
                    ("action", text(100)),
                    ("actorId", text(200)),
                    ("actorEmail", nullable(string())),
                    ("orgId", text(200)),
                    ("affectedOrgId", nullable(string())),
                    ("targetType", nullable(string())),
                    ("targetId", nullable(string())),
                    ("details", any()),
                    ("outcome", nullable(one_of(&["success", "failure"]))),
                    ("occurredAt", nullable(instant())),
                    ("service", nullable(string())),
                ],
                &["action", "actorId", "orgId"],
            ))
            .query(vec![parameter("Idempotency-Key", "header", true, text(200))])
            .ok(201, envelope(reference("AuditEvent"))),
        get("/api/audit", "queryAudit", compliance(AuditRead), audit::query)
            .doc("The organization's audit events (a super-admin may name any `orgId`)")
            .feature(Feature::AuditLog)
            .query(listing(vec![
                query("orgId", string()),
                query("action", string()),
                query("actorId", string()),
                query("targetType", string()),
                query("targetId", string()),
                query("outcome", string()),
                query("from", instant()),
                query("to", instant()),
            ]))
            .ok(200, page("events", reference("AuditEvent"))),
        get("/api/audit/verify", "verifyAudit", Access::SuperAdmin { step_up: false }, audit::verify)
            .doc("Verify one chain, and its signed checkpoints when they are on")
            .query(vec![parameter("orgId", "query", true, text(200))])
            .ok(200, envelope(object(&[("ok", boolean()), ("count", integer())], &["ok"]))),
        get("/api/audit/checkpoints", "listCheckpoints", Access::Org {
            from: InQuery("orgId"),
            need: Needs(AuditRead),
            step_up: false,
            counted: true,
        }, audit::checkpoints)
            .doc("The chain's signed checkpoints, newest first, and the latest")
            .feature(Feature::AuditLog)
            .query(listing(vec![parameter("orgId", "query", true, text(200))]))
            .ok(200, page_with("checkpoints", reference("Checkpoint"), &[("latest", nullable(reference("Checkpoint")))])),
        get("/api/audit/checkpoints/key", "checkpointKey", Access::Public, audit::checkpoint_key)
            .doc("The checkpoints' verifier key, in the signed-note form `<name>+<key id>+<base64 key>` (404 when checkpoints are off)")
            .text(),
        // Rules.
        get("/api/compliance/rules", "listRules", compliance(ComplianceRead), rules::list)
            .doc("The organization's rules")
            .query(rule_filters())
            .ok(200, rule_page()),
        post("/api/compliance/rules", "createRule", compliance(ComplianceWrite), rules::create)
            .doc("Create a rule (validated: operator, value, regex, conditions)")
            .body(rule_body())
            .ok(201, envelope(reference("Rule"))),
        get("/api/compliance/rules/{id}", "getRule", compliance(ComplianceRead), rules::get)
            .doc("One rule")
            .ok(200, envelope(reference("Rule"))),
        put("/api/compliance/rules/{id}", "updateRule", compliance(ComplianceWrite), rules::update)
            .doc("Replace a rule (a new version)")
            .body(rule_body())
            .ok(200, envelope(reference("Rule"))),
        delete("/api/compliance/rules/{id}", "deleteRule", compliance(ComplianceWrite), rules::delete)
            .doc("Delete a rule")
            .ok(200, done("id", "deleted")),
        get("/api/compliance/rules/{id}/history", "ruleHistory", compliance(ComplianceRead), rules::history)
            .doc("A rule's versions")
            .ok(200, envelope(array(object(
                &[
                    ("version", integer()),
                    ("change", any()),
                    ("changedBy", string()),
                    ("changedAt", instant()),
                    ("rule", any()),
                ],
                &["version", "changedBy", "changedAt"],
            )))),
        // The published catalog and subscriptions.
        get("/api/compliance/published-rules", "publishedRules", compliance(ComplianceRead), catalog::catalog)
            .doc("The published catalog")
            .query(rule_filters())
            .ok(200, rule_page()),
        get("/api/compliance/subscriptions", "listSubscriptions", compliance(ComplianceRead), catalog::list)
            .doc("The organization's subscriptions")
            .query(paging(&["createdAt"]))
            .ok(200, page("subscriptions", object(
                &[("ruleId", string()), ("isActive", boolean()), ("pinnedVersion", nullable(integer()))],
                &["ruleId", "isActive"],
            ))),
        post("/api/compliance/subscriptions", "subscribe", compliance(ComplianceWrite), catalog::subscribe)
            .doc("Subscribe to a published rule (inactive until activated)")
            .body(rule_ref())
            .ok(201, envelope(object(
                &[("ruleId", string()), ("isActive", boolean()), ("pinnedVersion", nullable(integer()))],
                &["ruleId", "isActive"],
            ))),
        post("/api/compliance/subscriptions/clone", "cloneSubscription", compliance(ComplianceWrite), catalog::clone)
            .doc("Copy a published rule into the organization's own rules")
            .body(rule_ref())
            .ok(201, envelope(reference("Rule"))),
        post("/api/compliance/subscriptions/auto-subscribe", "autoSubscribe", compliance(ComplianceWrite), catalog::auto_subscribe)
            .doc("Subscribe to every published rule")
            .ok(200, envelope(object(&[("subscribed", integer()), ("published", integer())], &["subscribed", "published"]))),
        post("/api/compliance/subscriptions/bulk", "bulkActivate", compliance(ComplianceWrite), catalog::bulk)
            .doc("Activate or deactivate several subscriptions")
            .body(body(
                &[
                    ("ruleIds", json!({"type": "array", "items": string(), "minItems": 1, "maxItems": 500})),
                    ("isActive", boolean()),
                ],
                &["ruleIds", "isActive"],
            ))
            .ok(200, envelope(object(&[("ruleIds", array(string())), ("isActive", boolean())], &["ruleIds", "isActive"]))),
        get("/api/compliance/subscriptions/enforced", "enforcedRules", compliance(ComplianceRead), catalog::enforced)
            .doc("The effective rule set: own rules and active subscriptions")
            .ok(200, envelope(array(reference("Rule")))),
        post("/api/compliance/subscriptions/preview/impact", "previewImpact", compliance(ComplianceRead), catalog::impact)
            .doc("Which validated entities a rule would fail")
            .body(body(&[("rule", rule_body())], &["rule"]))
            .ok(200, envelope(object(
                &[("target", target()), ("evaluated", integer()), ("failing", integer()), ("samples", array(any()))],
                &["target", "evaluated", "failing", "samples"],
            ))),
        post("/api/compliance/subscriptions/preview", "previewRule", compliance(ComplianceRead), catalog::preview)
            .doc("Evaluate a rule on attributes without saving anything")
            .body(body(&[("rule", rule_body()), ("attributes", json!({"type": "object"}))], &["rule", "attributes"]))
            .ok(200, envelope(evaluation())),
        patch("/api/compliance/subscriptions/{ruleId}", "setSubscriptionActive", compliance(ComplianceWrite), catalog::set_active)
            .doc("Activate or deactivate a subscription")
            .body(body(&[("isActive", boolean())], &["isActive"]))
            .ok(200, envelope(object(&[("ruleId", string()), ("isActive", boolean())], &["ruleId", "isActive"]))),
        delete("/api/compliance/subscriptions/{ruleId}", "unsubscribe", compliance(ComplianceWrite), catalog::unsubscribe)
            .doc("Unsubscribe")
            .ok(200, done("ruleId", "unsubscribed")),
        post("/api/compliance/subscriptions/{ruleId}/pin", "pinSubscription", compliance(ComplianceWrite), catalog::pin)
            .doc("Pin the subscription to the rule's current version")
            .ok(200, envelope(object(&[("ruleId", string()), ("pinnedVersion", nullable(integer()))], &["ruleId"]))),
        delete("/api/compliance/subscriptions/{ruleId}/pin", "unpinSubscription", compliance(ComplianceWrite), catalog::unpin)
            .doc("Follow the rule's latest version again")
            .ok(200, envelope(object(&[("ruleId", string()), ("pinnedVersion", nullable(integer()))], &["ruleId"]))),
        // Exemptions.
        get("/api/compliance/exemptions", "listExemptions", compliance(ComplianceRead), exemptions::list_exemptions)
            .doc("The organization's exemptions")
            .query(listing(vec![
                query("status", one_of(&["requested", "approved", "rejected", "revoked"])),
                query("ruleId", string()),
                query("entityId", string()),
            ]))
            .ok(200, page("exemptions", reference("Exemption"))),
        post("/api/compliance/exemptions", "requestExemption", compliance(ComplianceWrite), exemptions::request)
            .doc("Ask for an exemption of one entity from one rule")
            .body(exemption_fields(("entityId", text(200))))
            .ok(201, envelope(reference("Exemption"))),
        post("/api/compliance/exemptions/bulk", "requestExemptions", compliance(ComplianceWrite), exemptions::request_bulk)
            .doc("Ask for exemptions of up to 500 entities from one rule")
            .body(exemption_fields(("entityIds", json!({"type": "array", "items": text(200), "minItems": 1, "maxItems": 500}))))
            .ok(201, envelope(object(&[("ids", array(string())), ("count", integer())], &["ids", "count"]))),
        put("/api/compliance/exemptions/{id}/review", "reviewExemption", compliance(ComplianceReview), exemptions::review)
            .doc("Approve or reject an exemption (never one's own)")
            .body(body(&[("decision", one_of(&["approve", "reject"])), ("note", nullable(string()))], &["decision"]))
            .ok(200, envelope(reference("Exemption"))),
        delete("/api/compliance/exemptions/{id}", "revokeExemption", compliance(ComplianceWrite), exemptions::revoke)
            .doc("Revoke an exemption")
            .ok(200, envelope(reference("Exemption"))),
        // Policies and templates.
        get("/api/compliance/policies", "listPolicies", compliance(ComplianceRead), policies::list_policies)
            .doc("The organization's policies")
            .query(listing(vec![query("name", string())]))
            .ok(200, page("policies", reference("Policy"))),
        post("/api/compliance/policies", "createPolicy", compliance(ComplianceWrite), policies::create_policy)
            .doc("Create a policy (a named set of rules)")
            .body(policy_body())
            .ok(201, envelope(reference("Policy"))),
        get("/api/compliance/policies/{id}", "getPolicy", compliance(ComplianceRead), policies::get_policy)
            .doc("One policy")
            .ok(200, envelope(reference("Policy"))),
        put("/api/compliance/policies/{id}", "updatePolicy", compliance(ComplianceWrite), policies::update_policy)
            .doc("Change a policy")
            .body(policy_body())
            .ok(200, envelope(reference("Policy"))),
        delete("/api/compliance/policies/{id}", "deletePolicy", compliance(ComplianceWrite), policies::delete_policy)
            .doc("Delete a policy")
            .ok(200, done("id", "deleted")),
        get("/api/compliance/templates", "listTemplates", compliance(ComplianceRead), templates::templates)
            .doc("Template rules and policies")
            .ok(200, envelope(object(
                &[("rules", array(reference("Rule"))), ("policies", array(reference("Policy")))],
                &["rules", "policies"],
            ))),
        post("/api/compliance/templates/apply", "applyTemplate", compliance(ComplianceWrite), templates::apply)
            .doc("Instantiate a template rule in the organization")
            .body(body(&[("templateId", text(200)), ("name", text(200))], &["templateId"]))
            .ok(201, envelope(reference("Rule"))),
        post("/api/compliance/templates/rules/{id}/clone", "cloneTemplateRule", compliance(ComplianceWrite), templates::clone_rule)
            .doc("Copy a template rule (an optional body renames it)")
            .optional_body(clone_body())
            .ok(201, envelope(reference("Rule"))),
        post("/api/compliance/templates/policies/{id}/clone", "cloneTemplatePolicy", compliance(ComplianceWrite), templates::clone_policy)
            .doc("Copy a template policy and its rules, all or nothing")
            .optional_body(clone_body())
            .ok(201, envelope(reference("Policy"))),
        // The check log and notification preferences.
        get("/api/compliance/audit", "checkLog", compliance(ComplianceRead), check_log::checks)
            .doc("The organization's validation log")
            .query(listing(vec![
                query("target", target()),
                query("result", one_of(&["pass", "warn", "block"])),
                query("entityId", string()),
            ]))
            .ok(200, page("entries", reference("CheckLogEntry"))),
        get("/api/compliance/notification-preferences", "notificationPreferences", compliance(ComplianceRead), preferences::preferences)
            .doc("The organization's notification preference (the secret is never returned)")
            .ok(200, envelope(reference("NotificationPreference"))),
        put("/api/compliance/notification-preferences", "saveNotificationPreferences", compliance(ComplianceRead), preferences::save_preferences)
            .doc("Change the notification preference (the organization's admins or owner): a field left out keeps its value; null or an empty value clears webhookUrl, webhookSecret and targetUsers (then every admin and the owner are e-mailed); null for another field is 400; targetUsers are e-mail addresses (CR, LF, spaces refused)")
            .body(body(
                &[
                    ("emailEnabled", boolean()),
                    ("targetUsers", nullable(json!({"type": "array", "maxItems": crate::services::preferences::MAX_TARGET_USERS, "items": {"type": "string", "format": "email", "maxLength": 254}}))),
                    ("webhookUrl", nullable(string())),
                    ("webhookSecret", nullable(string())),
                    ("digestMode", one_of(&["immediate", "daily", "weekly"])),
                    ("notifyWarnings", boolean()),
                ],
                &[],
            ))
            .ok(200, envelope(reference("NotificationPreference"))),
        // Notifications: the log and the inbox.
        get("/api/compliance/notifications", "notificationLog", compliance(ComplianceRead), messages::log)
            .doc("Every notification delivery attempt (channel, notification id, status, attempt, response status or error), newest first")
            .query({
                let mut q = vec![
                    query("channel", one_of(&["inbox", "email", "webhook"])),
                    query("status", one_of(&["sent", "failed", "retrying", "skipped", "disabled", "held", "digested"])),
                ];
                q.extend(paging(&["createdAt"]));
                q
            })
            .ok(200, page("attempts", reference("NotificationAttempt"))),
        get("/api/messages", "inbox", org_member(), messages::inbox)
            .doc("The organization's inbox: notifications and announcements, newest first")
            .query({
                let mut q = vec![query("unread", json!({"type": "string", "enum": ["true", "false"]}))];
                q.extend(paging(&["createdAt"]));
                q
            })
            .ok(200, page("messages", reference("Message"))),
        post("/api/messages/announcements", "announce", compliance(OrgSettings), messages::announce)
            .doc("Post an announcement to the organization's inbox (admins and owner)")
            .body(body(&[("title", text(200)), ("body", text(10_000))], &["title", "body"]))
            .ok(201, envelope(reference("Message"))),
        patch("/api/messages/{id}/read", "markMessageRead", org_member(), messages::mark_read)
            .doc("Mark a message read")
            .ok(200, envelope(reference("Message"))),
        delete("/api/messages/{id}", "deleteMessage", compliance(OrgSettings), messages::delete)
            .doc("Delete a message (admins and owner)")
            .ok(200, done("id", "deleted")),
        // Quotas (document 2, "Quota service").
        get("/api/quotas", "myQuotas", org_member().uncounted(), quotas::of)
            .doc("The `x-org-id` organization's quotas: plugins, pipelines, apiCalls, aiCalls and storage, each with the account's limit (-1 unlimited), what the account (root and teams) used, what this organization used, what remains, the percentage, and for monthly types when they start again")
            .ok(200, envelope(reference("OrgQuotas"))),
        get("/api/quotas/all", "allQuotas", Access::SuperAdmin { step_up: false }, quotas::all)
            .doc("Every organization's quotas, oldest first")
            .query(paging(&["createdAt"]))
            .ok(200, page("quotas", reference("OrgQuotas"))),
        get("/api/quotas/at-risk", "quotasAtRisk", Access::SuperAdmin { step_up: false }, quotas::at_risk)
            .doc("Account roots whose usage is at or above `threshold` percent (default 80) of a finite limit on any quota type (a zero limit counts as full)")
            .query({
                let mut q = vec![query("threshold", json!({"type": "number", "minimum": 0}))];
                q.extend(paging(&["createdAt"]));
                q
            })
            .ok(200, page("quotas", reference("OrgQuotas"))),
        get("/api/quotas/{id}", "orgQuotas", org_path(OwnManagedOrSuperAdmin).uncounted(), quotas::of)
            .doc("One organization's quotas")
            .ok(200, envelope(reference("OrgQuotas"))),
        get("/api/quotas/{id}/{type}", "orgQuota", org_path(OwnManagedOrSuperAdmin).uncounted(), quotas::one_type)
            .doc("One quota type of one organization (plugins, pipelines, apiCalls, aiCalls, storage)")
            .ok(200, envelope(reference("QuotaStatus"))),
        put("/api/quotas/{id}", "updateQuotas", org_path(tenancy::Access::SuperAdmin), quotas::update)
            .doc("Set an account root's tier (audit billing.tier.override) and limit overrides (-1 unlimited, null back to the entitlement's; audit admin.org.quota.override); the limits are derived again in the same transaction")
            .body(body(
                &[
                    ("tier", tier()),
                    ("limits", json!({
                        "type": "object",
                        "properties": {
                            "plugins": nullable(json!({"type": "integer", "minimum": -1})),
                            "pipelines": nullable(json!({"type": "integer", "minimum": -1})),
                            "apiCalls": nullable(json!({"type": "integer", "minimum": -1})),
                            "aiCalls": nullable(json!({"type": "integer", "minimum": -1})),
                            "storage": nullable(json!({"type": "integer", "minimum": -1})),
                        },
                        "additionalProperties": false,
                    })),
                ],
                &[],
            ))
            .ok(200, envelope(reference("OrgQuotas"))),
        post("/api/quotas/{id}/reset", "resetQuotas", org_path(tenancy::Access::SuperAdmin), quotas::reset)
            .doc("Set the monthly usage counters (apiCalls, aiCalls; or the one `type`, storage included) back to zero: a root's whole account, or a team's share (audit quota.reset)")
            .optional_body(body(&[("type", counted_type())], &[]))
            .ok(200, envelope(reference("OrgQuotas"))),
        post("/api/quotas/{id}/increment", "incrementQuota", Access::Service, quotas::increment)
            .doc("Add 1 to 1000 of apiCalls, aiCalls or storage to the organization and its account's pool in one atomic statement; over the limit 429 QUOTA_EXCEEDED with limit, used and requested, and nothing counted. An Idempotency-Key header makes a retry count once (the key reused for another increment is 409); keys are remembered 7 days")
            .query(vec![parameter("Idempotency-Key", "header", false, text(200))])
            .body(body(
                &[
                    ("type", counted_type()),
                    ("amount", json!({"type": "integer", "minimum": 1, "maximum": 1000})),
                ],
                &["type", "amount"],
            ))
            .ok(200, envelope(reference("QuotaStatus"))),
        // Billing (document 3, "Add-on bundles").
        get("/api/bundles", "listBundles", org_member().uncounted(), billing::bundles)
            .doc("The add-on bundles offered to the account's tier, with prices in cents and dollars, grants and stackability; none (enabled false) unless BILLING_BUNDLES_ENABLED=true and billing is direct")
            .ok(200, envelope(object(
                &[("enabled", boolean()), ("bundles", array(reference("BundleOffer")))],
                &["enabled", "bundles"],
            ))),
        get("/api/subscriptions/current", "currentSubscription", org_member().uncounted(), billing::current)
            .doc("The account's billing subscription: tier, add-ons with quantities, status, and the effective entitlement with each limit's base and bundle contributions")
            .ok(200, envelope(reference("Subscription"))),
        post("/api/subscriptions/{id}/addons/preview", "previewAddon", Access::account_root(Needs(BillingManage)), billing::preview)
            .doc("The subscription and entitlement an add-on change would give, committing nothing; the same function as the purchase. Refusals: 403 BUNDLES_DISABLED, 403 MARKETPLACE_MANAGED, 403 BUNDLE_NOT_ELIGIBLE (the tier may not buy it), 400 BUNDLE_NOT_STACKABLE, 400 VALIDATION_ERROR (quantity 1 to 10000)")
            .body(addon_body())
            .ok(200, envelope(reference("Subscription"))),
        post("/api/subscriptions/{id}/addons", "addAddon", Access::account_root(Needs(BillingManage)), billing::add)
            .doc("Add an add-on or set its quantity (audit billing.addon.add); the limits, seats and features are synchronized in the same transaction. Refusals as the preview's")
            .body(addon_body())
            .ok(200, envelope(reference("Subscription"))),
        delete("/api/subscriptions/{id}/addons/{bundleId}", "removeAddon", Access::account_root(Needs(BillingManage)), billing::remove)
            .doc("Remove an add-on (audit billing.addon.remove; 404 when not held), synchronized like an add")
            .ok(200, envelope(reference("Subscription"))),
        post("/api/portal", "billingPortal", Access::account_root(Needs(BillingManage)), billing::portal)
            .doc("The billing portal's address for the account, from BILLING_PORTAL_URL; 404 BILLING_PORTAL_NOT_CONFIGURED when none is set")
            .ok(200, envelope(object(&[("url", string())], &["url"]))),
        put("/api/organization/{id}/seat-limit", "setSeatLimit", Access::SuperAdminOrBilling, billing::seat_limit)
            .doc("Set an account root's seat limit (-1 unlimited) and purchased features (audit admin.org.seatLimit.update); a `version` older than the last applied is 409. Adding or activating a member beyond the seats answers 429 QUOTA_EXCEEDED")
            .body(body(
                &[
                    ("seats", json!({"type": "integer", "minimum": -1})),
                    ("features", array(feature())),
                    ("version", json!({"type": "integer", "minimum": 0})),
                ],
                &["seats"],
            ))
            .ok(200, envelope(reference("Subscription"))),
        // Scans, schedules and posture.
        post("/api/compliance/scans", "startScan", compliance(ComplianceWrite), scans::start)
            .doc("Start a scan of the organization's inventory; answers 202 at once, a worker sweeps it. filter.orgId is replaced by the organization's; name, accessModifier and project narrow the sweep")
            .body(body(
                &[
                    ("target", one_of(&["plugin", "pipeline", "all"])),
                    ("filter", json!({
                        "type": "object",
                        "properties": {
                            "orgId": string(),
                            "name": text(200),
                            "accessModifier": one_of(&["public", "private"]),
                            "project": text(200),
                        },
                        "additionalProperties": false,
                    })),
                ],
                &["target"],
            ))
            .ok(202, envelope(reference("Scan"))),
        get("/api/compliance/scans", "listScans", compliance(ComplianceRead), scans::list)
            .doc("The organization's scans, newest first")
            .query({
                let mut q = vec![
                    query("target", one_of(&["plugin", "pipeline", "all"])),
                    query("status", one_of(&["running", "completed", "cancelled", "failed"])),
                ];
                q.extend(paging(&["createdAt"]));
                q
            })
            .ok(200, page("scans", reference("Scan"))),
        get("/api/compliance/scans/{id}", "getScan", compliance(ComplianceRead), scans::get)
            .doc("One scan, with its counts")
            .ok(200, envelope(reference("Scan"))),
        get("/api/compliance/scans/{id}/results", "scanResults", compliance(ComplianceRead), scans::results)
            .doc("The results of one scan, one per entity judged, narrowed to one result")
            .query({
                let mut q = vec![query("result", one_of(&["pass", "warn", "block", "error"]))];
                q.extend(paging(&["createdAt"]));
                q
            })
            .ok(200, page("results", reference("ScanResult"))),
        post("/api/compliance/scans/{id}/cancel", "cancelScan", compliance(ComplianceWrite), scans::cancel)
            .doc("Cancel a running scan (it stops within one batch); 409 when it has ended")
            .ok(200, envelope(reference("Scan"))),
        get("/api/compliance/scan-schedules", "listScanSchedules", compliance(ComplianceRead), scans::schedules)
            .doc("The organization's recurring scans")
            .query(paging(&["createdAt"]))
            .ok(200, page("schedules", reference("ScanSchedule"))),
        post("/api/compliance/scan-schedules", "createScanSchedule", compliance(ComplianceWrite), scans::create_schedule)
            .doc("Schedule a recurring scan: five cron fields (minute hour dayOfMonth month dayOfWeek, UTC); 400 INVALID_CRON names the field")
            .body(body(
                &[("target", one_of(&["plugin", "pipeline", "all"])), ("cronExpression", text(200))],
                &["target", "cronExpression"],
            ))
            .ok(201, envelope(reference("ScanSchedule"))),
        put("/api/compliance/scan-schedules/{id}", "updateScanSchedule", compliance(ComplianceWrite), scans::update_schedule)
            .doc("Change a schedule's target and/or cron expression")
            .body({
                let mut b = body(
                    &[("target", one_of(&["plugin", "pipeline", "all"])), ("cronExpression", text(200))],
                    &[],
                );
                if let Some(o) = b.as_object_mut() {
                    o.insert("minProperties".to_owned(), json!(1));
                }
                b
            })
            .ok(200, envelope(reference("ScanSchedule"))),
        patch("/api/compliance/scan-schedules/{id}/active", "toggleScanSchedule", compliance(ComplianceWrite), scans::toggle_schedule)
            .doc("Activate or deactivate a schedule")
            .body(body(&[("isActive", boolean())], &["isActive"]))
            .ok(200, envelope(reference("ScanSchedule"))),
        delete("/api/compliance/scan-schedules/{id}", "deleteScanSchedule", compliance(ComplianceWrite), scans::delete_schedule)
            .doc("Deactivate a schedule (it is kept, inactive)")
            .ok(200, envelope(reference("ScanSchedule"))),
        get("/api/compliance/posture", "compliancePosture", compliance(ComplianceRead), scans::posture)
            .doc("The organization's entities by current result and the rules failing most, from the stored results")
            .query(vec![
                query("target", target()),
                query("top", json!({"type": "integer", "minimum": 1, "maximum": 100})),
            ])
            .ok(200, envelope(reference("Posture"))),
        get("/api/compliance/posture/policy-report", "policyReport", compliance(ComplianceRead), scans::policy_report)
            .doc("The posture of one target as a Kubernetes PolicyReport (wgpolicyk8s.io/v1alpha2), answered as is (no envelope): the summary over every entity, the results of a page of entities")
            .query({
                let mut q = vec![parameter("target", "query", true, target())];
                q.extend(paging(&["createdAt"]));
                q
            })
            .ok(200, reference("PolicyReport")),
        // Pipelines.
        get("/api/pipelines", "listPipelines", org_member(), pipelines::list)
            .doc("The organization's pipelines")
            .query(pipeline_filters(true))
            .pages::<pipelines::Pipeline>("pipelines"),
        get("/api/pipelines/find", "findPipeline", org_member(), pipelines::find)
            .doc("The newest pipeline matching the filters (at least one of project, organization, pipelineName)")
            .query(pipeline_filters(false))
            .answers::<pipelines::Pipeline>(200),
        get("/api/pipelines/registry", "pipelineRegistry", org_member(), pipelines::registry)
            .doc("The organization's registry: cloud pipeline resource names mapped to pipelines, newest first")
            .query(paging(&["createdAt"]))
            .pages::<pipelines::Registration>("registry"),
        post("/api/pipelines/registry", "registerPipeline", compliance(PipelinesWrite), pipelines::register)
            .doc("Map a cloud pipeline resource name to a pipeline of the organization (upsert; the deploy hook)")
            .body_of::<pipelines::RegistrationBody>()
            .answers::<pipelines::Registration>(200),
        delete("/api/pipelines/registry", "deregisterPipeline", compliance(PipelinesWrite), pipelines::deregister)
            .doc("Remove a registry entry")
            .query(vec![parameter("arn", "query", true, text(2048))])
            .ok(200, done("arn", "deleted")),
        get("/api/pipelines/{id}", "getPipeline", org_member(), pipelines::get)
            .doc("One pipeline")
            .answers::<pipelines::Pipeline>(200),
        post("/api/pipelines", "createPipeline", compliance(PipelinesWrite), pipelines::create)
            .doc("Create a pipeline: checked by the organization's compliance rules (403 COMPLIANCE_VIOLATION with details.violations on a block, 503 COMPLIANCE_UNAVAILABLE when the check cannot be made in 5 s; nothing stored either way) and its pipelines quota (429 QUOTA_EXCEEDED)")
            .body_of::<pipelines::PipelineBody>()
            .answers::<pipelines::Pipeline>(201),
        put("/api/pipelines/{id}", "updatePipeline", compliance(PipelinesWrite), pipelines::update)
            .doc("Replace a pipeline, checked by the compliance rules like a create")
            .body_of::<pipelines::PipelineBody>()
            .answers::<pipelines::Pipeline>(200),
        delete("/api/pipelines/{id}", "deletePipeline", compliance(PipelinesWrite), pipelines::delete)
            .doc("Delete a pipeline (frees its quota)")
            .ok(200, done("id", "deleted")),
        // Plugins.
        get("/api/plugins", "listPlugins", org_member(), plugins::list)
            .doc("The organization's plugins")
            .query(plugin_filters(true))
            .ok(200, page("plugins", reference("Plugin"))),
        get("/api/plugins/find", "findPlugin", org_member(), plugins::find)
            .doc("The newest plugin of a name (and version)")
            .query(plugin_filters(false))
            .ok(200, envelope(reference("Plugin"))),
        post("/api/plugins/lookup", "lookupPlugin", org_member(), plugins::lookup)
            .doc("The newest plugin matching a filter body (at least one field)")
            .body(body(
                &[
                    ("name", json!({"type": "string", "maxLength": 200})),
                    ("version", json!({"type": "string", "maxLength": 200})),
                    ("accessModifier", one_of(&["public", "private"])),
                    ("isActive", boolean()),
                    ("isDefault", boolean()),
                    ("pluginType", json!({"type": "string", "maxLength": 200})),
                ],
                &[],
            ))
            .ok(200, envelope(reference("Plugin"))),
        get("/api/plugins/plugin-usage", "pluginUsage", org_member(), plugins::usage)
            .doc("Per plugin name, how many of the organization's pipelines reference it")
            .ok(200, envelope(array(object(
                &[("name", string()), ("pipelines", integer())],
                &["name", "pipelines"],
            )))),
        post("/api/plugins", "uploadPlugin", compliance(PluginsWrite), plugins::upload)
            .doc("Upload a plugin: a ZIP with plugin.json (or plugin.yaml) at its root and optionally a Dockerfile; refused with the reason (400) for path traversal, links, more than 1,000 entries, more than 50 MB unpacked, a bomb-like ratio, a missing or invalid manifest. Checked by the compliance rules (403, 503) and the plugins quota (429) like a pipeline; a build job is queued")
            .multipart(
                object(
                    &[
                        ("plugin", json!({"type": "string", "contentMediaType": "application/zip"})),
                        ("accessModifier", one_of(&["public", "private"])),
                    ],
                    &["plugin"],
                ),
                plugins::MAX_UPLOAD_BYTES,
            )
            .ok(201, envelope(reference("Plugin"))),
        post("/api/plugins/deploy-generated", "deployGeneratedPlugin", compliance(PluginsWrite), plugins::deploy_generated)
            .doc("Deploy a generated plugin: packed with its Dockerfile, judged, charged and queued for a build like an upload")
            .body(body(
                &[
                    ("name", text(100)),
                    ("version", text(64)),
                    ("commands", array(string())),
                    ("installCommands", array(string())),
                    ("dockerfile", text(262_144)),
                ],
                &["name", "version", "commands", "installCommands", "dockerfile"],
            ))
            .ok(201, envelope(reference("Plugin"))),
        put("/api/plugins/bulk/update", "bulkUpdatePlugins", compliance(PluginsWrite), plugins::bulk_update)
            .doc("Change several plugins, all or nothing; only description, computeType, isDefault, isActive and accessModifier may change (any other field is 400)")
            .feature(Feature::BulkOperations)
            .body(body(
                &[(
                    "plugins",
                    json!({"type": "array", "minItems": 1, "maxItems": plugins::BULK_LIMIT, "items": body(
                        &[
                            ("id", text(200)),
                            ("description", nullable(string())),
                            ("computeType", nullable(string())),
                            ("isDefault", nullable(boolean())),
                            ("isActive", nullable(boolean())),
                            ("accessModifier", nullable(one_of(&["public", "private"]))),
                        ],
                        &["id"],
                    )}),
                )],
                &["plugins"],
            ))
            .ok(200, envelope(object(&[("plugins", array(reference("Plugin")))], &["plugins"]))),
        get("/api/plugins/queue/status", "buildQueueStatus", compliance(OrgSettings), plugins::queue_status)
            .doc("Build job counts by queue and status (admins: the org:settings permission); a super-admin sees every organization's")
            .ok(200, envelope(object(&[("counts", array(object(
                &[("queue", one_of(&["tier", "dlq"])), ("status", string()), ("count", integer())],
                &["queue", "status", "count"],
            )))], &["counts"]))),
        get("/api/plugins/queue/failed", "failedBuilds", compliance(OrgSettings), plugins::failed)
            .doc("Builds that ended failed or timed out (the organization's; every organization's for a super-admin)")
            .query(paging(&["createdAt"]))
            .ok(200, page("jobs", reference("BuildJob"))),
        get("/api/plugins/queue/dlq", "deadLetters", compliance(OrgSettings), plugins::dead_letters)
            .doc("The dead letter queue (the organization's; every organization's for a super-admin)")
            .query(paging(&["createdAt"]))
            .ok(200, page("jobs", reference("BuildJob"))),
        post("/api/plugins/queue/dlq/{jobId}/replay", "replayDeadLetter", compliance(OrgSettings), plugins::replay)
            .doc("Replay a dead letter of the organization: it is marked replayed and a new build of the plugin starts in the dead letter queue with fresh attempts")
            .ok(200, envelope(reference("BuildJob"))),
        delete("/api/plugins/queue/dlq", "purgeDeadLetters", Access::SuperAdmin { step_up: false }, plugins::purge)
            .doc("Purge every dead letter (audited plugin.dlq.purge)")
            .ok(200, envelope(object(&[("purged", integer())], &["purged"]))),
        get("/api/plugins/{id}", "getPlugin", org_member(), plugins::get)
            .doc("One plugin")
            .ok(200, envelope(reference("Plugin"))),
        put("/api/plugins/{id}", "updatePlugin", compliance(PluginsWrite), plugins::update)
            .doc("Change a plugin's description, computeType or isDefault (any other field is 400)")
            .body(body(
                &[
                    ("description", nullable(string())),
                    ("computeType", nullable(string())),
                    ("isDefault", nullable(boolean())),
                ],
                &[],
            ))
            .ok(200, envelope(nullable(reference("Plugin")))),
        delete("/api/plugins/{id}", "deletePlugin", compliance(PluginsWrite), plugins::delete)
            .doc("Delete a plugin (frees its quota)")
            .ok(200, done("id", "deleted")),
        // Validation.
        post("/api/compliance/validate/{target}", "validate", Access::UserOrService(ComplianceRead), validate::live)
            .doc("Check an entity's attributes against the organization's effective rules; recorded in the check log")
            .body(validation_body())
            .ok(200, envelope(evaluation())),
        post("/api/compliance/validate/{target}/dry-run", "validateDryRun", Access::UserOrService(ComplianceRead), validate::dry_run)
            .doc("The same check, recording nothing")
            .body(validation_body())
            .ok(200, envelope(evaluation())),
    ]
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
        let merged = match paths.remove(route.path) {
            Some(existing) => existing.merge(handler),
            None => handler,
        };
        paths.insert(route.path, merged);
    }
    paths
        .into_iter()
        .fold(axum::Router::new(), |router, (path, methods)| {
            router.route(path, methods)
        })
}

/// The OpenAPI 3.1 document of the table.
pub fn document() -> Value {
    let mut paths: Map<String, Value> = Map::new();
    let mut schemas = match components() {
        Value::Object(hand) => hand,
        _ => Map::new(),
    };
    for route in routes() {
        for (name, schema) in &route.components {
            schemas.insert(name.clone(), schema.clone());
        }
        let mut parameters: Vec<Value> = route
            .path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| {
                let schema = match name {
                    "target" => target(),
                    "type" => quota_type(),
                    "bundleId" => bundle_id(),
                    _ => text(200),
                };
                parameter(name, "path", true, schema)
            })
            .collect();
        if route.access.needs_org_header() {
            parameters.push(parameter("x-org-id", "header", true, text(200)));
        }
        parameters.extend(route.query.iter().cloned());
        let (status, schema) = &route.ok;
        let content_type = route.media;
        let security = if route.access.authenticated() {
            json!([{"bearer": []}])
        } else {
            json!([])
        };
        let mut operation = Map::new();
        operation.insert("operationId".into(), json!(route.operation));
        operation.insert("summary".into(), json!(route.summary));
        let feature = route.feature.map_or_else(String::new, |f| {
            format!(
                " Needs the `{}` feature in the account (its tier, a bundle or a grant; a super-admin and the system organization have every feature), else 403 FEATURE_NOT_AVAILABLE.",
                f.name()
            )
        });
        operation.insert(
            "description".into(),
            json!(format!(
                "{}{feature} Errors answer in the envelope {{success: false, statusCode, code, message, details?}}.",
                route.access.describe()
            )),
        );
        if let Some(feature) = route.feature {
            operation.insert("x-feature".into(), json!(feature.name()));
        }
        operation.insert("security".into(), security);
        operation.insert("parameters".into(), Value::Array(parameters));
        if let Some((body, required)) = &route.body {
            operation.insert(
                "requestBody".into(),
                json!({"required": required, "content": {route.body_media: {"schema": body}}}),
            );
        }
        operation.insert(
            "responses".into(),
            json!({
                status.to_string(): {
                    "description": "Success",
                    "content": {content_type: {"schema": schema}},
                },
                "default": {
                    "description": "An error, in the envelope",
                    "content": {"application/json": {"schema": reference("Error")}},
                },
            }),
        );
        if let Value::Object(methods) = paths
            .entry(route.path.to_owned())
            .or_insert_with(|| json!({}))
        {
            methods.insert(route.method.to_lowercase(), Value::Object(operation));
        }
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "compliance",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The governance core of a multi-tenant CI/CD platform: the reference server.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let increment = &document["paths"]["/api/quotas/{id}/increment"]["post"]["requestBody"]
            ["content"]["application/json"]["schema"]["properties"]["type"]["enum"];
        assert_eq!(increment, &json!(["apiCalls", "aiCalls", "storage"]));
        let addon = &document["paths"]["/api/subscriptions/{id}/addons"]["post"]["requestBody"]
            ["content"]["application/json"]["schema"]["properties"]["bundleId"]["enum"];
        assert_eq!(addon.as_array().map(Vec::len), Some(8));
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
}
