//! The routes of one area: Quotas and billing.

use super::*;

/// The area's routes.
pub(super) fn routes() -> Vec<Route> {
    vec![
        // Quotas (document 2, "Quota service").
        get("/api/quotas", "myQuotas", org_member().uncounted(), quotas::of)
            .doc("The `x-org-id` organization's quotas: plugins, pipelines, apiCalls, aiCalls and storage, each with the account's limit (-1 unlimited), what the account (root and teams) used, what this organization used, what remains, the percentage, and for monthly types when they start again")
            .answers::<quotas::OrgQuotas>(200),
        get("/api/quotas/all", "allQuotas", Access::SuperAdmin { step_up: false }, quotas::all)
            .doc("Every organization's quotas, oldest first")
            .paged(&["createdAt"])
            .pages::<quotas::OrgQuotas>("quotas"),
        get("/api/quotas/at-risk", "quotasAtRisk", Access::SuperAdmin { step_up: false }, quotas::at_risk)
            .doc("Account roots whose usage is at or above `threshold` percent (default 80) of a finite limit on any quota type (a zero limit counts as full)")
            .query_of::<quotas::RiskQuery>()
            .paged(&["createdAt"])
            .pages::<quotas::OrgQuotas>("quotas"),
        get("/api/quotas/{id}", "orgQuotas", org_path(OwnManagedOrSuperAdmin).uncounted(), quotas::of)
            .doc("One organization's quotas")
            .answers::<quotas::OrgQuotas>(200),
        get("/api/quotas/{id}/{type}", "orgQuota", org_path(OwnManagedOrSuperAdmin).uncounted(), quotas::one_type)
            .doc("One quota type of one organization (plugins, pipelines, apiCalls, aiCalls, storage)")
            .answers::<quotas::QuotaStatus>(200),
        put("/api/quotas/{id}", "updateQuotas", org_path(tenancy::Access::SuperAdmin), quotas::update)
            .doc("Set an account root's tier (audit billing.tier.override) and limit overrides (-1 unlimited, null back to the entitlement's; audit admin.org.quota.override); the limits are derived again in the same transaction")
            .body_of::<quotas::QuotaUpdate>()
            .answers::<quotas::OrgQuotas>(200),
        post("/api/quotas/{id}/reset", "resetQuotas", org_path(tenancy::Access::SuperAdmin), quotas::reset)
            .doc("Set the monthly usage counters (apiCalls, aiCalls; or the one `type`, storage included) back to zero: a root's whole account, or a team's share (audit quota.reset)")
            .optional_body_of::<quotas::QuotaReset>()
            .answers::<quotas::OrgQuotas>(200),
        post("/api/quotas/{id}/increment", "incrementQuota", Access::Service, quotas::increment)
            .doc("Add 1 to 1000 of apiCalls, aiCalls or storage to the organization and its account's pool in one atomic statement; over the limit 429 QUOTA_EXCEEDED with limit, used and requested, and nothing counted. An Idempotency-Key header makes a retry count once (the key reused for another increment is 409); keys are remembered 7 days")
            .idempotency_key(false)
            .body_of::<quotas::QuotaIncrement>()
            .answers::<quotas::QuotaStatus>(200),
        // Billing (document 3, "Add-on bundles").
        get("/api/bundles", "listBundles", org_member().uncounted(), billing::bundles)
            .doc("The add-on bundles offered to the account's tier, with prices in cents and dollars, grants and stackability; none (enabled false) unless BILLING_BUNDLES_ENABLED=true and billing is direct")
            .answers::<billing::Bundles>(200),
        get("/api/subscriptions/current", "currentSubscription", org_member().uncounted(), billing::current)
            .doc("The account's billing subscription: tier, add-ons with quantities, status, and the effective entitlement with each limit's base and bundle contributions")
            .answers::<billing::Subscription>(200),
        post("/api/subscriptions/{id}/addons/preview", "previewAddon", Access::account_root(Needs(BillingManage)), billing::preview)
            .doc("The subscription and entitlement an add-on change would give, committing nothing; the same function as the purchase. Refusals: 403 BUNDLES_DISABLED, 403 MARKETPLACE_MANAGED, 403 BUNDLE_NOT_ELIGIBLE (the tier may not buy it), 400 BUNDLE_NOT_STACKABLE, 400 VALIDATION_ERROR (quantity 1 to 10000)")
            .body_of::<billing::AddonBody>()
            .answers::<billing::Subscription>(200),
        post("/api/subscriptions/{id}/addons", "addAddon", Access::account_root(Needs(BillingManage)), billing::add)
            .doc("Add an add-on or set its quantity (audit billing.addon.add); the limits, seats and features are synchronized in the same transaction. Refusals as the preview's")
            .body_of::<billing::AddonBody>()
            .answers::<billing::Subscription>(200),
        delete("/api/subscriptions/{id}/addons/{bundleId}", "removeAddon", Access::account_root(Needs(BillingManage)), billing::remove)
            .doc("Remove an add-on (audit billing.addon.remove; 404 when not held), synchronized like an add")
            .answers::<billing::Subscription>(200),
        post("/api/portal", "billingPortal", Access::account_root(Needs(BillingManage)), billing::portal)
            .doc("The billing portal's address for the account, from BILLING_PORTAL_URL; 404 BILLING_PORTAL_NOT_CONFIGURED when none is set")
            .answers::<billing::Portal>(200),
        put("/api/organization/{id}/seat-limit", "setSeatLimit", Access::SuperAdminOrBilling, billing::seat_limit)
            .doc("Set an account root's seat limit (-1 unlimited) and purchased features (audit admin.org.seatLimit.update); a `version` older than the last applied is 409. Adding or activating a member beyond the seats answers 429 QUOTA_EXCEEDED")
            .body_of::<billing::SeatLimitBody>()
            .answers::<billing::Subscription>(200),
    ]
}
