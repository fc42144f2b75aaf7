//! Billing (`BILLING_*`): the provider, the portal, the billing service's name.

use super::Reader;

/// Billing settings (document 3, "Add-on bundles").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BillingSettings {
    /// `BILLING_PROVIDER`: `direct` (default, self-service) or `marketplace` (bundles
    /// are not bought here; a system admin sets entitlements).
    pub provider: entitlements::BillingProvider,
    /// `BILLING_PORTAL_URL`: the portal's address, with `{orgId}` and
    /// `{subscriptionId}` filled in; unset, `POST /api/portal` answers 404.
    pub portal_url: Option<String>,
    /// `BILLING_SERVICE_NAME` (`billing`): the service claim of the billing
    /// service's tokens, which may set seat limits.
    pub service_name: String,
}

/// Reads the section.
pub(super) fn billing_settings(r: &mut Reader<'_>) -> BillingSettings {
    let provider = match r
        .string("BILLING_PROVIDER", "direct")
        .to_ascii_lowercase()
        .as_str()
    {
        "direct" | "stripe" => entitlements::BillingProvider::Direct,
        "marketplace" | "aws-marketplace" | "aws_marketplace" => {
            entitlements::BillingProvider::Marketplace
        }
        other => {
            r.fail(
                "BILLING_PROVIDER",
                format!("`{other}` is not `direct` or `marketplace`"),
            );
            entitlements::BillingProvider::Direct
        }
    };
    let portal_url = r.optional("BILLING_PORTAL_URL");
    if let Some(url) = &portal_url {
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            r.fail(
                "BILLING_PORTAL_URL",
                "must be an http(s) address (with `{orgId}` where the organization goes)"
                    .to_owned(),
            );
        }
    }
    BillingSettings {
        provider,
        portal_url,
        service_name: r.string("BILLING_SERVICE_NAME", "billing"),
    }
}
