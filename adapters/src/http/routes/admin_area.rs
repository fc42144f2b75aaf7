//! The routes of one area: platform administration (super-admins, accounts, a
//! user's own features, an organization's build namespace).

use super::*;

/// The area's routes.
pub(super) fn routes() -> Vec<Route> {
    vec![
        get("/api/admin/super-admins", "listSuperAdmins", Access::SuperAdmin { step_up: false }, admin::list)
            .doc("The super-admins")
            .answers::<admin::SuperAdmins>(200),
        put("/api/admin/super-admins/{userId}", "grantSuperAdmin", Access::SuperAdmin { step_up: true }, admin::grant)
            .doc("Make a user a super-admin")
            .answers::<admin::SuperAdmin>(200),
        delete("/api/admin/super-admins/{userId}", "revokeSuperAdmin", Access::SuperAdmin { step_up: true }, admin::revoke)
            .doc("Revoke a super-admin (never the last one)")
            .answers::<admin::SuperAdmin>(200),
        get("/api/admin/users", "adminListUsers", Access::SuperAdmin { step_up: false }, admin::users)
            .doc("Accounts, newest first: `email` (a part of it), `state` (active, unverified, disabled, deleted), `orgId` (its members)")
            .query_of::<admin::UserQuery>()
            .paged(&["createdAt"])
            .pages::<crate::services::admin::users::AdminUser>("users"),
        post("/api/admin/users", "adminCreateUser", Access::SuperAdmin { step_up: false }, admin::create_user)
            .doc("Create an account: with `password`, verified and bound to change it at first sign-in (until then every request but GET /api/me, PUT /api/me/password and logout is 403 PASSWORD_CHANGE_REQUIRED); without, unverified, with an invitation by e-mail whose link sets the password (POST /api/auth/verify-email with `password`). An address a live account holds: 409 (audit admin.user.create)")
            .body_of::<admin::CreateUser>()
            .answers::<crate::services::admin::users::AdminUser>(201),
        patch("/api/admin/users/{userId}", "adminUpdateUser", Access::SuperAdmin { step_up: false }, admin::update_user)
            .doc("Change an account's e-mail or name, disable it (its sessions, console sessions and personal access tokens end at once on every replica; signing in answers 403 ACCOUNT_DISABLED) or enable it. Never one's own account nor a super-admin's (409) (audit admin.user.update, in the system chain and in each organization the account belongs to)")
            .body_of::<admin::UpdateUser>()
            .answers::<crate::services::admin::users::AdminUser>(200),
        delete("/api/admin/users/{userId}", "adminDeleteUser", Access::SuperAdmin { step_up: true }, admin::delete_user)
            .doc("Delete an account: its memberships end, its sessions and tokens end, its personal data is erased and its id stays as a ghost for what it made and the audit chain. The Owner of an organization (409 naming it), a super-admin and oneself cannot be deleted (audit admin.user.delete, in the system chain and in each organization the account belonged to)")
            .answers::<Deleted>(200),
        get("/api/admin/users/{userId}/features", "adminUserFeatures", Access::SuperAdmin { step_up: false }, admin::user_features)
            .doc("A user's own feature flags")
            .answers::<admin::UserFeatures>(200),
        put("/api/admin/users/{userId}/features", "adminSetUserFeatures", Access::SuperAdmin { step_up: false }, admin::set_user_features)
            .doc("Replace a user's own feature flags, from the catalog (the tier features and the preview features `alerts`, `dashboards`; another name is 400): `false` takes a tier feature away from the user (403 FEATURE_NOT_AVAILABLE on its routes), `true` opens a preview feature, and never opens a tier feature the organization lacks (audit admin.user.features.update with the old and new flags)")
            .body_of::<admin::UserFeatures>()
            .answers::<admin::UserFeatures>(200),
        post("/api/admin/impersonations", "startImpersonation", Access::SuperAdmin { step_up: true }, admin::start_impersonation)
            .doc("See the platform as a user: a reason of 10 to 500 characters, 1 to 60 minutes, never oneself (400) nor a super-admin (403), refused when IMPERSONATION_ENABLED=false (403). Answers an access token for the user that carries the admin as its actor (RFC 8693 `act`) and cannot be refreshed; every audit event written with it names the impersonation and the admin (`details.impersonation`); with `readOnly` every request but GET is 403. The user is told by a message (who, when, why). Ended or expired, the token is refused on every replica within a second (audit admin.impersonate.start, in the system chain and in each organization the user belongs to)")
            .body_of::<admin::StartImpersonation>()
            .answers::<crate::services::admin::impersonation::Started>(201),
        delete("/api/admin/impersonations/{id}", "endImpersonation", Access::User, admin::end_impersonation)
            .doc("End an impersonation: a super-admin, or the impersonation's own token (anyone else: 404); ended or expired already: 409 (audit admin.impersonate.end)")
            .answers::<crate::services::admin::impersonation::Ended>(200),
        get("/api/admin/organizations/{id}/ai", "adminGetAiSettings", org_path(tenancy::Access::SuperAdmin), crate::http::ai_settings::get)
            .doc("An account root's own AI settings (a team: 409), never its key: only its last four characters")
            .answers::<crate::services::ai_settings::AiSettings>(200),
        put("/api/admin/organizations/{id}/ai", "adminPutAiSettings", org_path(tenancy::Access::SuperAdmin), crate::http::ai_settings::put)
            .doc("Replace an account root's AI settings: the providers and models its generations (and its teams') may use (a platform provider's models only among those it offers), its own provider (a base URL under the Git URLs' address rule, a key sealed under the organization's data key), a monthly token cap (429 QUOTA_EXCEEDED `aiTokens` once reached). A stale `version`: 409 (audit admin.org.ai-config.update naming the fields changed, never the key)")
            .body_of::<crate::http::ai_settings::PutAiSettings>()
            .answers::<crate::services::ai_settings::AiSettings>(200),
        post("/api/admin/organizations/{id}/exports", "adminExportOrganization", org_path(tenancy::Access::SuperAdmin), crate::http::exports::admin_request)
            .doc("Ask for an export of an organization (202): a background job writes an archive of newline-delimited JSON per resource (never a secret), the organization's audit chain with its newest signed checkpoint first, and a manifest with each file's SHA-256, which `compliance export verify FILE` checks offline. One at a time per organization (409). Audited admin.org.export")
            .answers::<crate::http::exports::ExportJob>(202),
        get("/api/admin/organizations/{id}/exports/{jobId}", "adminExportStatus", org_path(tenancy::Access::SuperAdmin), crate::http::exports::admin_status)
            .doc("An export job: its status, and once done its size, SHA-256 and download link (24 hours)")
            .answers::<crate::http::exports::ExportJob>(200),
        get("/api/admin/organizations/{id}/exports/{jobId}/download", "adminExportDownload", org_path(tenancy::Access::SuperAdmin), crate::http::exports::admin_download)
            .doc("The export's archive (application/zip; its SHA-256 in `X-Content-SHA256`): 409 until it is done, 410 once its 24 hours passed")
            .zip(),
        get("/api/admin/organizations/{id}/namespace", "adminRenderNamespace", org_path(tenancy::Access::SuperAdmin), admin::namespace)
            .doc("The Kubernetes objects the build system applies for the organization, as one YAML stream: its Namespace, a ResourceQuota and a LimitRange from its tier and limits, a default-deny NetworkPolicy that lets builds reach the image registry only, and a ServiceAccount. The same inputs give the same bytes; their SHA-256 is in `X-Content-SHA256` and the `ETag` (audit admin.org.namespace.render)")
            .yaml(),
    ]
}
