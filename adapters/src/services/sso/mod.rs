//! Single sign-on per root organization with OpenID Connect: identity-provider
//! configurations (at most five, while the `sso` feature is active; the client
//! secret sealed), claimed e-mail domains proven by a TXT record, the sign-in
//! (start, callback, and the link of an existing account after its password), and
//! enforcement with its break-glass accounts. Decisions are tenancy's (`sso`): who
//! a first sign-in becomes, which Roles groups give, whether a credential passes.
//!
//! Every refusal of the callback is a 401 with a stable code, audited as
//! user.login.failed with the reason, and leaves no account or membership.

use std::collections::BTreeMap;
use std::net::IpAddr;

use chrono::{DateTime, Duration, Utc};
use entitlements::Feature;
use serde_json::json;
use tenancy::sso::{self as rules, Arrival, DomainStanding, FirstSignIn, Refusal, RoleMapping};
use tenancy::MembershipRole;

use super::accounts::{self, token_hash, Session};
use super::context::{event_on, AppState, Caller};
use super::{ServiceError, ServiceResult};
use crate::config::Config;
use crate::keys::Binding;
use crate::outbound::oidc::SsoClients;
use crate::outbound::oidc::{Relying, Verified};
use crate::storage::{
    unit_of_work, AccountRecord, BreakGlassRow, IdentityRow, IdpConfigRow, MemberRoles, OrgRecord,
    PendingLinkRow, ProvisionedAccount, SignInAttemptRow, Store,
};

/// A claimed domain and an organization's enforcement, as stored (the HTTP floor
/// maps them to its answers).
pub use crate::storage::{DomainRow, SsoPolicyRow};

/// Where the provider sends the person back (`<PUBLIC_URL>` + this).
pub const API_CALLBACK: &str = "/api/auth/sso/callback";
/// The console's callback.
pub const CONSOLE_CALLBACK: &str = "/console/sso/callback";

fn secret_binding<'a>(org_id: &'a str, config_id: &'a str) -> Binding<'a> {
    Binding {
        org_id,
        table: "org_idp_configs",
        column: "client_secret",
        row_id: config_id,
    }
}

/// Single sign-on is configured on root organizations only.
fn root_only(org: &OrgRecord) -> ServiceResult<()> {
    if org.parent_org_id.is_some() {
        return Err(ServiceError::Conflict(
            "single sign-on is configured on the root organization; its teams follow it".to_owned(),
        ));
    }
    Ok(())
}

/// Whether the organization's account has the `sso` feature now.
async fn sso_active(store: &Store, config: &Config, org: &OrgRecord) -> ServiceResult<bool> {
    match crate::services::entitlement::require_feature(store, config, org, Feature::Sso).await {
        Ok(()) => Ok(true),
        Err(ServiceError::FeatureNotAvailable { .. }) => Ok(false),
        Err(other) => Err(other),
    }
}

/// A configuration as asked for (create or replace).
#[derive(Debug, Clone)]
pub struct ConfigInput {
    /// Its name in the organization.
    pub name: String,
    /// The issuer.
    pub issuer: String,
    /// The client id.
    pub client_id: String,
    /// The client secret (`None` on a replace: kept).
    pub client_secret: Option<String>,
    /// Scopes (`openid` is added).
    pub scopes: Vec<String>,
    /// The groups claim.
    pub groups_claim: String,
    /// Groups given Roles.
    pub role_mappings: Vec<RoleMapping>,
    /// The default Role.
    pub default_role: String,
    /// E-mail domains served.
    pub domains: Vec<String>,
    /// Just-in-time provisioning.
    pub jit_provisioning: bool,
    /// Enabled.
    pub enabled: bool,
}

fn bounded(field: &'static str, text: &str, max: usize) -> ServiceResult<String> {
    let text = text.trim();
    if text.is_empty() || text.chars().count() > max || text.chars().any(char::is_control) {
        return Err(ServiceError::invalid(
            field,
            format!("must be 1 to {max} characters, without control characters"),
        ));
    }
    Ok(text.to_owned())
}

/// Checks a configuration against the organization's Roles.
async fn checked(
    store: &Store,
    sso: &SsoClients,
    org: &OrgRecord,
    input: ConfigInput,
) -> ServiceResult<ConfigInput> {
    let name = bounded("name", &input.name, 100)?;
    let issuer = input.issuer.trim().to_owned();
    sso.providers
        .issuer_url(&issuer)
        .map_err(|e| ServiceError::invalid("issuer", e.to_string()))?;
    let client_id = bounded("clientId", &input.client_id, 255)?;
    let client_secret = match input.client_secret {
        Some(secret) => {
            if secret.is_empty() || secret.len() > 1024 {
                return Err(ServiceError::invalid(
                    "clientSecret",
                    "must be 1 to 1024 bytes",
                ));
            }
            Some(secret)
        }
        None => None,
    };
    let mut scopes = vec!["openid".to_owned()];
    for scope in &input.scopes {
        let valid = !scope.is_empty()
            && scope.len() <= 64
            && scope
                .bytes()
                .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b));
        if !valid {
            return Err(ServiceError::invalid(
                "scopes",
                format!("`{scope}` is not a scope (RFC 6749: printable characters but space, `\"` and `\\`)"),
            ));
        }
        if !scopes.contains(scope) {
            scopes.push(scope.clone());
        }
    }
    if scopes.len() > 10 {
        return Err(ServiceError::invalid("scopes", "at most 10 scopes"));
    }
    let groups_claim = bounded("groupsClaim", &input.groups_claim, 100)?;
    if input.role_mappings.len() > rules::MAX_ROLE_MAPPINGS {
        return Err(ServiceError::invalid(
            "roleMappings",
            format!("at most {} mappings", rules::MAX_ROLE_MAPPINGS),
        ));
    }
    let roles: Vec<String> = store
        .role_names(&org.id)
        .await?
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let known = |field: &'static str, role: &str| -> ServiceResult<()> {
        if role.eq_ignore_ascii_case("owner") {
            return Err(ServiceError::invalid(
                field,
                "the Owner is never given by single sign-on",
            ));
        }
        if roles.iter().any(|r| r == role) {
            Ok(())
        } else {
            Err(ServiceError::invalid(
                field,
                format!("`{role}` is not a Role of the organization"),
            ))
        }
    };
    let mut role_mappings = Vec::with_capacity(input.role_mappings.len());
    for mapping in input.role_mappings {
        let group = bounded("roleMappings", &mapping.group, 256)?;
        known("roleMappings", &mapping.role)?;
        role_mappings.push(RoleMapping {
            group,
            role: mapping.role,
        });
    }
    known("defaultRole", &input.default_role)?;
    if input.domains.len() > rules::MAX_DOMAINS {
        return Err(ServiceError::invalid(
            "domains",
            format!("at most {} domains", rules::MAX_DOMAINS),
        ));
    }
    let mut domains = Vec::with_capacity(input.domains.len());
    for domain in &input.domains {
        let domain = rules::claimable_domain(domain)
            .map_err(|e| ServiceError::invalid("domains", e.to_string()))?;
        if !domains.contains(&domain) {
            domains.push(domain);
        }
    }
    Ok(ConfigInput {
        name,
        issuer,
        client_id,
        client_secret,
        scopes,
        groups_claim,
        role_mappings,
        default_role: input.default_role,
        domains,
        jit_provisioning: input.jit_provisioning,
        enabled: input.enabled,
    })
}

/// A configuration with whether it can be used now.
#[derive(Debug, Clone)]
pub struct ConfigView {
    /// As stored (the secret sealed: never answered).
    pub row: IdpConfigRow,
    /// Enabled, and the `sso` feature active (a downgrade disables, never deletes).
    pub active: bool,
}

/// A root organization's configurations.
pub async fn configs(
    store: &Store,
    config: &Config,
    org: &OrgRecord,
) -> ServiceResult<Vec<ConfigView>> {
    let active = sso_active(store, config, org).await?;
    Ok(store
        .idp_configs(&org.id)
        .await?
        .into_iter()
        .map(|row| ConfigView {
            active: active && row.enabled,
            row,
        })
        .collect())
}

/// Who changes a configuration: an organization admin, or a super-admin (audited
/// admin.org-idp.*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changer {
    /// Through `/api/organization/{id}/sso`.
    OrgAdmin,
    /// Through `/api/admin/organizations/{id}/idp`.
    SuperAdmin,
}

impl Changer {
    fn action(self, verb: &str) -> String {
        match self {
            Changer::OrgAdmin => format!("org.idp.{verb}"),
            Changer::SuperAdmin => format!("admin.org-idp.{verb}"),
        }
    }
}

/// Creates a configuration (or replaces `replacing` at the version read): the
/// discovery document is fetched and its issuer must match exactly; a sixth is
/// 409; without the `sso` feature 403.
pub async fn save_config(
    state: &AppState,
    (caller, changer): (&Caller, Changer),
    org: &OrgRecord,
    input: ConfigInput,
    replacing: Option<(&str, u32)>,
    now: DateTime<Utc>,
) -> ServiceResult<ConfigView> {
    root_only(org)?;
    crate::services::entitlement::require_feature(
        &state.infra.store,
        &state.config,
        org,
        Feature::Sso,
    )
    .await?;
    let input = checked(&state.infra.store, &state.outbound.sso, org, input).await?;
    let current = match replacing {
        Some((id, _)) => Some(
            state
                .infra
                .store
                .idp_config(id)
                .await?
                .filter(|c| c.org_id == org.id)
                .ok_or(ServiceError::NotFound(
                    "identity-provider configuration".into(),
                ))?,
        ),
        None => None,
    };
    state
        .outbound
        .sso
        .providers
        .discover(&input.issuer)
        .await
        .map_err(|e| ServiceError::invalid("issuer", e.to_string()))?;
    let id = current
        .as_ref()
        .map_or_else(crate::new_id, |c| c.id.clone());
    let secret_changed = input.client_secret.is_some();
    let client_secret = match (&input.client_secret, &current) {
        (Some(secret), _) => {
            crate::services::keys::seal(
                &state.infra.store,
                &state.config,
                &state.outbound.keyring,
                secret_binding(&org.id, &id),
                secret,
            )
            .await?
        }
        (None, Some(current)) => current.client_secret.clone(),
        (None, None) => {
            return Err(ServiceError::invalid(
                "clientSecret",
                "is required for a new configuration",
            ))
        }
    };
    let row = IdpConfigRow {
        id: id.clone(),
        org_id: org.id.clone(),
        name: input.name,
        issuer: input.issuer,
        client_id: input.client_id,
        client_secret,
        scopes: input.scopes,
        groups_claim: input.groups_claim,
        role_mappings: input.role_mappings,
        default_role: input.default_role,
        domains: input.domains,
        jit_provisioning: input.jit_provisioning,
        enabled: input.enabled,
        version: current.as_ref().map_or(1, |c| c.version.saturating_add(1)),
        created_at: current.as_ref().map_or(now, |c| c.created_at),
        updated_at: now,
    };
    unit_of_work!(&state.infra.store, |tx| {
        tx.lock_organization(&org.id).await?;
        match replacing {
            Some((_, read_version)) => {
                if !tx.update_idp_config(&row, read_version).await? {
                    return Err(ServiceError::Conflict(format!(
                        "the configuration changed since version {read_version} was read: read it again"
                    )));
                }
            }
            None => {
                if tx.count_idp_configs(&org.id).await? >= rules::MAX_IDENTITY_PROVIDERS {
                    return Err(ServiceError::Conflict(format!(
                        "the organization holds {} identity-provider configurations already (the most it may)",
                        rules::MAX_IDENTITY_PROVIDERS
                    )));
                }
                tx.insert_idp_config(&row).await?;
            }
        }
        tx.enqueue_audit(&[event_on(
            caller,
            &changer.action("upsert"),
            (&org.id, Some(&org.id)),
            ("idp", &row.id),
            json!({
                "name": row.name, "issuer": row.issuer, "clientId": row.client_id,
                "enabled": row.enabled, "jitProvisioning": row.jit_provisioning,
                "domains": row.domains, "created": replacing.is_none(),
                "secretChanged": secret_changed,
            }),
        )])
        .await?;
        Ok(())
    })?;
    state.infra.store.facts_changed();
    let active = row.enabled;
    Ok(ConfigView { row, active })
}

/// Deletes a configuration (its identities with it).
pub async fn delete_config(
    store: &Store,
    (caller, changer): (&Caller, Changer),
    org: &OrgRecord,
    id: &str,
) -> ServiceResult<()> {
    let current = store
        .idp_config(id)
        .await?
        .filter(|c| c.org_id == org.id)
        .ok_or(ServiceError::NotFound(
            "identity-provider configuration".into(),
        ))?;
    unit_of_work!(store, |tx| {
        tx.delete_idp_config(id).await?;
        tx.enqueue_audit(&[event_on(
            caller,
            &changer.action("delete"),
            (&org.id, Some(&org.id)),
            ("idp", id),
            json!({"name": current.name, "issuer": current.issuer}),
        )])
        .await?;
        Ok(())
    })?;
    store.facts_changed();
    Ok(())
}

mod domains;
mod enforcement;
mod signin;

pub use domains::*;
pub use enforcement::*;
pub use signin::*;
