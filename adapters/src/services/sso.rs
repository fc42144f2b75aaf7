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
use crate::keys::Binding;
use crate::outbound::oidc::{Relying, Verified};
use crate::storage::{
    unit_of_work, AccountRecord, BreakGlassRow, IdentityRow, IdpConfigRow, MemberRoles, OrgRecord,
    PendingLinkRow, ProvisionedAccount, SignInAttemptRow,
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
async fn sso_active(state: &AppState, org: &OrgRecord) -> ServiceResult<bool> {
    match super::entitlement::require_feature(state, org, Feature::Sso).await {
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
    state: &AppState,
    org: &OrgRecord,
    input: ConfigInput,
) -> ServiceResult<ConfigInput> {
    let name = bounded("name", &input.name, 100)?;
    let issuer = input.issuer.trim().to_owned();
    state
        .sso
        .providers
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
    let roles: Vec<String> = state
        .store
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
pub async fn configs(state: &AppState, org: &OrgRecord) -> ServiceResult<Vec<ConfigView>> {
    let active = sso_active(state, org).await?;
    Ok(state
        .store
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
    super::entitlement::require_feature(state, org, Feature::Sso).await?;
    let input = checked(state, org, input).await?;
    let current = match replacing {
        Some((id, _)) => Some(
            state
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
        (Some(secret), _) => super::keys::seal(state, secret_binding(&org.id, &id), secret).await?,
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
    unit_of_work!(&state.store, |tx| {
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
    state.store.facts_changed();
    let active = row.enabled;
    Ok(ConfigView { row, active })
}

/// Deletes a configuration (its identities with it).
pub async fn delete_config(
    state: &AppState,
    (caller, changer): (&Caller, Changer),
    org: &OrgRecord,
    id: &str,
) -> ServiceResult<()> {
    let current = state
        .store
        .idp_config(id)
        .await?
        .filter(|c| c.org_id == org.id)
        .ok_or(ServiceError::NotFound(
            "identity-provider configuration".into(),
        ))?;
    unit_of_work!(&state.store, |tx| {
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
    state.store.facts_changed();
    Ok(())
}

/// An organization's claimed domains.
pub async fn domains(state: &AppState, org: &OrgRecord) -> ServiceResult<Vec<DomainRow>> {
    root_only(org)?;
    Ok(state.store.domains(&org.id).await?)
}

/// Claims a domain: answers the TXT record that proves it.
pub async fn claim_domain(
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    domain: &str,
    now: DateTime<Utc>,
) -> ServiceResult<DomainRow> {
    root_only(org)?;
    let domain = rules::claimable_domain(domain)
        .map_err(|e| ServiceError::invalid("domain", e.to_string()))?;
    if state.store.domains(&org.id).await?.len() >= rules::MAX_DOMAINS {
        return Err(ServiceError::Conflict(format!(
            "an organization claims at most {} domains",
            rules::MAX_DOMAINS
        )));
    }
    let row = DomainRow {
        org_id: org.id.clone(),
        domain,
        token: hex::encode(accounts::random::<16>()?),
        created_at: now,
        verified_at: None,
        checked_at: None,
    };
    unit_of_work!(&state.store, |tx| {
        tx.insert_domain(&row).await?;
        tx.enqueue_audit(&[event_on(
            caller,
            "org.domain.claim",
            (&org.id, Some(&org.id)),
            ("domain", &row.domain),
            json!({"domain": row.domain}),
        )])
        .await?;
        Ok(())
    })?;
    Ok(row)
}

/// Verifies a claimed domain by its TXT record. Not found: 400 naming the record
/// to publish, nothing changed; verified by another organization: 409.
pub async fn verify_domain(
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    domain: &str,
    now: DateTime<Utc>,
) -> ServiceResult<DomainRow> {
    root_only(org)?;
    let domain = domain.trim().to_ascii_lowercase();
    let row = state
        .store
        .domains(&org.id)
        .await?
        .into_iter()
        .find(|d| d.domain == domain)
        .ok_or(ServiceError::NotFound("domain".into()))?;
    if row.verified_at.is_some() {
        return Ok(row);
    }
    let name = rules::txt_record_name(&row.domain);
    let records = state.sso.txt().txt(&name).await.map_err(|why| {
        ServiceError::StoreUnavailable(format!("the TXT lookup of {name} failed: {why}"))
    })?;
    if !rules::txt_proves(records.iter().map(String::as_str), &row.token) {
        return Err(ServiceError::invalid(
            "domain",
            format!(
                "no TXT record `{name}` carries `{}`: publish it, then verify again",
                rules::txt_record_value(&row.token)
            ),
        ));
    }
    unit_of_work!(&state.store, |tx| {
        tx.domain_checked((&org.id, &row.domain), true, now).await?;
        tx.enqueue_audit(&[event_on(
            caller,
            "org.domain.verify",
            (&org.id, Some(&org.id)),
            ("domain", &row.domain),
            json!({"domain": row.domain}),
        )])
        .await?;
        Ok(())
    })?;
    Ok(DomainRow {
        verified_at: Some(now),
        checked_at: Some(now),
        ..row
    })
}

/// Gives up a claimed domain.
pub async fn remove_domain(
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    domain: &str,
) -> ServiceResult<()> {
    let domain = domain.trim().to_ascii_lowercase();
    unit_of_work!(&state.store, |tx| {
        if !tx.delete_domain(&org.id, &domain).await? {
            return Err(ServiceError::NotFound("domain".into()));
        }
        tx.enqueue_audit(&[event_on(
            caller,
            "org.domain.delete",
            (&org.id, Some(&org.id)),
            ("domain", &domain),
            json!({"domain": domain}),
        )])
        .await?;
        Ok(())
    })?;
    Ok(())
}

/// An organization's enforcement and break-glass accounts.
pub async fn policy(state: &AppState, org: &OrgRecord) -> ServiceResult<SsoPolicyRow> {
    root_only(org)?;
    Ok(state.store.sso_policy(&org.id).await?)
}

/// Sets whether the organization requires its single sign-on (after
/// `grace_hours`). Requiring it needs the `sso` feature and an enabled
/// configuration (else nobody could sign in: 409).
pub async fn set_enforcement(
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    (required, grace_hours): (bool, u32),
    now: DateTime<Utc>,
) -> ServiceResult<SsoPolicyRow> {
    root_only(org)?;
    if required {
        super::entitlement::require_feature(state, org, Feature::Sso).await?;
        if !state
            .store
            .idp_configs(&org.id)
            .await?
            .iter()
            .any(|c| c.enabled)
        {
            return Err(ServiceError::Conflict(
                "no enabled identity-provider configuration: requiring single sign-on would lock everyone out".to_owned(),
            ));
        }
    }
    if grace_hours > 24 * 90 {
        return Err(ServiceError::invalid(
            "graceHours",
            "at most 2160 (90 days)",
        ));
    }
    let from = required.then(|| now + Duration::hours(i64::from(grace_hours)));
    unit_of_work!(&state.store, |tx| {
        tx.save_sso_policy(&org.id, (required, from), now).await?;
        tx.enqueue_audit(&[event_on(
            caller,
            "org.sso.enforcement",
            (&org.id, Some(&org.id)),
            ("organization", &org.id),
            json!({"required": required, "enforceFrom": from}),
        )])
        .await?;
        Ok(())
    })?;
    state.store.facts_changed();
    Ok(state.store.sso_policy(&org.id).await?)
}

/// Arms a break-glass account (an active member) until `until`: at most two at
/// once, at most 30 days.
pub async fn arm_break_glass(
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    (user_id, until, reason): (&str, DateTime<Utc>, &str),
    now: DateTime<Utc>,
) -> ServiceResult<SsoPolicyRow> {
    root_only(org)?;
    let reason = bounded("reason", reason, 500)?;
    let member = state.store.membership(&org.id, user_id).await?;
    if !member.is_some_and(|m| m.membership().active) {
        return Err(ServiceError::invalid(
            "userId",
            "must be an active member of the organization",
        ));
    }
    unit_of_work!(&state.store, |tx| {
        tx.lock_organization(&org.id).await?;
        let others = tx.armed_break_glass_others(&org.id, user_id, now).await?;
        rules::check_break_glass(others, until, now).map_err(|e| match e {
            rules::BreakGlassError::TooMany => ServiceError::Conflict(e.to_string()),
            other => ServiceError::invalid("until", other.to_string()),
        })?;
        tx.arm_break_glass(
            &org.id,
            &BreakGlassRow {
                user_id: user_id.to_owned(),
                armed_until: until,
                armed_by: caller.user_id.clone(),
                reason: reason.clone(),
            },
        )
        .await?;
        tx.enqueue_audit(&[event_on(
            caller,
            "org.break-glass.arm",
            (&org.id, Some(&org.id)),
            ("user", user_id),
            json!({"armedUntil": until, "reason": reason}),
        )])
        .await?;
        Ok(())
    })?;
    state.store.facts_changed();
    Ok(state.store.sso_policy(&org.id).await?)
}

/// Disarms a break-glass account.
pub async fn disarm_break_glass(
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    user_id: &str,
) -> ServiceResult<SsoPolicyRow> {
    unit_of_work!(&state.store, |tx| {
        if !tx.disarm_break_glass(&org.id, user_id).await? {
            return Err(ServiceError::NotFound("break-glass account".into()));
        }
        tx.enqueue_audit(&[event_on(
            caller,
            "org.break-glass.disarm",
            (&org.id, Some(&org.id)),
            ("user", user_id),
            json!({}),
        )])
        .await?;
        Ok(())
    })?;
    state.store.facts_changed();
    Ok(state.store.sso_policy(&org.id).await?)
}

/// Whether the organization (a root, or a team's root) refuses `caller`'s
/// credential because it requires its single sign-on. The policy is kept with the
/// gate's facts and follows changes on every replica.
pub async fn enforce(
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let root_id = org.parent_org_id.as_deref().unwrap_or(&org.id);
    let policy = state
        .kept
        .sso
        .get_or_load(
            &state.store,
            root_id.to_owned(),
            |_| true,
            state.store.sso_policy(root_id),
        )
        .await?;
    let enforcement = match (policy.required, policy.enforce_from) {
        (true, Some(from)) => rules::Enforcement::Required { from },
        _ => return Ok(()),
    };
    let credential = rules::Credential {
        sso_org: caller.sso_org.as_deref(),
        break_glass_until: policy
            .break_glass
            .iter()
            .find(|b| b.user_id == caller.user_id)
            .map(|b| b.armed_until),
    };
    if !rules::sso_refuses(enforcement, root_id, credential, now) {
        return Ok(());
    }
    // A downgrade turns enforcement off with the configurations (never a lockout).
    let root = super::entitlement::root_of(state, org).await?;
    if !sso_active(state, &root).await? {
        return Ok(());
    }
    Err(ServiceError::SsoRequired {
        org_name: root.name,
    })
}

/// How a sign-in names its organization.
#[derive(Debug, Clone)]
pub enum Route {
    /// A root organization's name.
    Org(String),
    /// An e-mail address (routed by its verified domain).
    Email(String),
}

/// Where a sign-in goes back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReturnTo {
    /// The API: the callback answers the session's tokens.
    Api,
    /// The console: the callback opens a console session.
    Console,
}

impl ReturnTo {
    fn as_str(self) -> &'static str {
        match self {
            ReturnTo::Api => "api",
            ReturnTo::Console => "console",
        }
    }

    fn redirect_uri(self, state: &AppState) -> String {
        let path = match self {
            ReturnTo::Api => API_CALLBACK,
            ReturnTo::Console => CONSOLE_CALLBACK,
        };
        format!("{}{path}", state.config.signin.public_url)
    }
}

/// A sign-in started: where to send the browser, and the value of the cookie that
/// binds the callback to it.
#[derive(Debug, Clone)]
pub struct Started {
    /// The provider's authorization URL.
    pub location: String,
    /// The browser's binding (set as an HttpOnly cookie for ten minutes).
    pub browser: String,
}

/// Starts a sign-in through the organization's identity provider (or the one
/// serving the e-mail's verified domain).
pub async fn start(
    state: &AppState,
    route: Route,
    return_to: ReturnTo,
    now: DateTime<Utc>,
) -> ServiceResult<Started> {
    let (org, domain) = match &route {
        Route::Org(name) => (
            state.store.root_organization_named(name.trim()).await?,
            None,
        ),
        Route::Email(email) => {
            let domain = rules::email_domain(email)
                .ok_or_else(|| ServiceError::invalid("email", "must be an e-mail address"))?;
            let owner = state.store.domain_owner(&domain).await?;
            let org = match owner {
                Some(id) => state.store.organization(&id).await?,
                None => None,
            };
            (org, Some(domain))
        }
    };
    let not_found =
        || ServiceError::NotFound("single sign-on for this organization or e-mail".into());
    let org = org
        .filter(|o| o.parent_org_id.is_none())
        .ok_or_else(not_found)?;
    if !sso_active(state, &org).await? {
        return Err(not_found());
    }
    let config = state
        .store
        .idp_configs(&org.id)
        .await?
        .into_iter()
        .filter(|c| c.enabled)
        .find(|c| domain.as_ref().is_none_or(|d| c.domains.contains(d)))
        .ok_or_else(not_found)?;
    let redirect_uri = return_to.redirect_uri(state);
    let relying = Relying {
        config: (&config.id, config.version),
        issuer: &config.issuer,
        client_id: &config.client_id,
        redirect_uri: &redirect_uri,
    };
    let started = state
        .sso
        .providers
        .start(&relying, &config.scopes)
        .await
        .map_err(|e| {
            tracing::warn!(config = %config.id, error = %e, "an identity provider cannot be reached");
            ServiceError::StoreUnavailable(format!("the identity provider cannot be reached: {e}"))
        })?;
    let browser = accounts::opaque("csb_")?;
    let attempt = SignInAttemptRow {
        config_id: config.id.clone(),
        browser_hash: token_hash(&browser),
        nonce: started.nonce,
        pkce_verifier: started.pkce_verifier,
        return_to: return_to.as_str().to_owned(),
        expires_at: now + Duration::seconds(rules::ATTEMPT_LIFETIME_SECONDS),
    };
    unit_of_work!(&state.store, |tx| {
        tx.insert_attempt(&token_hash(&started.state), &attempt, now)
            .await?;
        Ok(())
    })?;
    Ok(Started {
        location: started.url,
        browser,
    })
}

/// What the provider sent back.
#[derive(Debug, Clone, Default)]
pub struct Callback {
    /// `code`.
    pub code: Option<String>,
    /// `state`.
    pub state: Option<String>,
    /// `error` (the provider refused).
    pub error: Option<String>,
}

/// A finished sign-in: the session, and where it goes.
#[derive(Debug, Clone)]
pub struct Finished {
    /// The session's tokens.
    pub session: Session,
    /// API or console.
    pub return_to: ReturnTo,
}

async fn refuse(
    state: &AppState,
    refusal: Refusal,
    (org_id, client): (Option<&str>, Option<IpAddr>),
    link_token: Option<String>,
) -> ServiceError {
    let event = accounts::user_event(
        "user.login.failed",
        ("anonymous", None),
        "unknown",
        json!({"method": "sso", "reason": refusal.reason(), "code": refusal.code(), "orgId": org_id,
               "clientAddress": client.map(|ip| ip.to_string())}),
        "failure",
    );
    if let Err(error) = accounts::record_failure(state, event).await {
        return error;
    }
    ServiceError::SsoRefused {
        refusal,
        link_token,
    }
}

/// Finishes a sign-in at the callback: the `state` used once and bound to this
/// browser, the code exchanged with the PKCE verifier, the ID token checked; then
/// the linked account signed in, or a first sign-in decided.
pub async fn finish(
    state: &AppState,
    callback: Callback,
    (browser, client): (Option<&str>, Option<IpAddr>),
    return_to: ReturnTo,
    now: DateTime<Utc>,
) -> ServiceResult<Finished> {
    let Some(sent_state) = callback.state.as_deref().filter(|s| s.len() <= 512) else {
        return Err(refuse(state, Refusal::StateInvalid, (None, client), None).await);
    };
    let attempt = unit_of_work!(&state.store, |tx| {
        Ok(tx.use_attempt(&token_hash(sent_state), now).await?)
    })?;
    let Some(attempt) = attempt else {
        return Err(refuse(state, Refusal::StateInvalid, (None, client), None).await);
    };
    let bound = browser.is_some_and(|b| {
        bool::from(subtle::ConstantTimeEq::ct_eq(
            token_hash(b).as_bytes(),
            attempt.browser_hash.as_bytes(),
        ))
    });
    if !bound || attempt.return_to != return_to.as_str() {
        return Err(refuse(state, Refusal::StateInvalid, (None, client), None).await);
    }
    let config = state.store.idp_config(&attempt.config_id).await?;
    let org = match &config {
        Some(c) => state.store.organization(&c.org_id).await?,
        None => None,
    };
    let (Some(config), Some(org)) = (config, org) else {
        return Err(refuse(state, Refusal::ConfigurationDisabled, (None, client), None).await);
    };
    let at = (Some(org.id.as_str()), client);
    if !config.enabled || !sso_active(state, &org).await? {
        return Err(refuse(state, Refusal::ConfigurationDisabled, at, None).await);
    }
    if callback.error.is_some() {
        return Err(refuse(state, Refusal::ProviderError, at, None).await);
    }
    let Some(code) = callback
        .code
        .as_deref()
        .filter(|c| !c.is_empty() && c.len() <= 4096)
    else {
        return Err(refuse(state, Refusal::ProviderError, at, None).await);
    };
    let secret = super::keys::open(
        state,
        secret_binding(&org.id, &config.id),
        &config.client_secret,
    )
    .await?;
    let redirect_uri = return_to.redirect_uri(state);
    let relying = Relying {
        config: (&config.id, config.version),
        issuer: &config.issuer,
        client_id: &config.client_id,
        redirect_uri: &redirect_uri,
    };
    let verified = match state
        .sso
        .providers
        .finish(
            &relying,
            (&secret, &config.groups_claim),
            (code, &attempt.pkce_verifier, &attempt.nonce),
            now,
        )
        .await
    {
        Ok(verified) => verified,
        Err(refusal) => return Err(refuse(state, refusal, at, None).await),
    };
    let identity = IdentityRow {
        config_id: config.id.clone(),
        issuer: verified.issuer.clone(),
        subject: verified.subject.clone(),
        user_id: String::new(),
    };
    if let Some(user_id) = state
        .store
        .sso_identity(&config.id, &verified.issuer, &verified.subject)
        .await?
    {
        let account = state
            .store
            .account(&user_id)
            .await?
            .filter(|a| a.deleted_at.is_none());
        let Some(account) = account else {
            return Err(refuse(state, Refusal::ProvisioningOff, at, None).await);
        };
        let identity = IdentityRow {
            user_id,
            ..identity
        };
        let session = signed_in(
            state,
            (&config, &org),
            &account,
            (&identity, &verified.groups),
            None,
            now,
        )
        .await?;
        return Ok(Finished { session, return_to });
    }
    let email = verified
        .email
        .as_deref()
        .and_then(|e| accounts::normalize_email("email", e).ok());
    let domain = email.as_deref().and_then(rules::email_domain);
    let owner = match &domain {
        Some(d) => state.store.domain_owner(d).await?,
        None => None,
    };
    let standing = match (&owner, &domain) {
        (Some(owner), Some(d)) if *owner == org.id && config.domains.contains(d) => {
            DomainStanding::VerifiedHere
        }
        (Some(owner), _) if *owner != org.id => DomainStanding::VerifiedElsewhere,
        _ => DomainStanding::Unverified,
    };
    let existing = match &email {
        Some(e) => state.store.account_by_email(e).await?,
        None => None,
    };
    let arrival = Arrival {
        email_verified: verified.email_verified && email.is_some(),
        domain: standing,
        account_exists: existing.is_some(),
        provisioning: config.jit_provisioning,
    };
    match (rules::first_sign_in(&arrival), existing, email) {
        (FirstSignIn::LinkAfterPassword, Some(account), _) => {
            let token = accounts::opaque("csl_")?;
            let link = PendingLinkRow {
                identity: IdentityRow {
                    user_id: account.user_id.clone(),
                    ..identity
                },
                groups: verified.groups.clone(),
            };
            unit_of_work!(&state.store, |tx| {
                tx.insert_pending_link(
                    &token_hash(&token),
                    &link,
                    (
                        now,
                        now + Duration::seconds(rules::ATTEMPT_LIFETIME_SECONDS),
                    ),
                )
                .await?;
                Ok(())
            })?;
            Err(refuse(state, Refusal::LinkRequired, at, Some(token)).await)
        }
        (FirstSignIn::Provision, None, Some(email)) => {
            let user_id = crate::new_id();
            let session = provision(
                state,
                (&config, &org),
                (&user_id, &email),
                (&identity, &verified),
                now,
            )
            .await?;
            Ok(Finished { session, return_to })
        }
        (FirstSignIn::Refused(refusal), _, _) => Err(refuse(state, refusal, at, None).await),
        _ => Err(refuse(state, Refusal::EmailNotVerified, at, None).await),
    }
}

/// The Roles the groups give, resolved to the organization's Roles (a Role deleted
/// since the mapping was saved gives nothing; with none left, the built-in Member).
async fn roles_for(
    state: &AppState,
    (config, org): (&IdpConfigRow, &OrgRecord),
    groups: &[String],
) -> ServiceResult<MemberRoles> {
    let names = rules::mapped_roles(&config.role_mappings, groups, &config.default_role);
    let by_name: BTreeMap<String, String> =
        state.store.role_names(&org.id).await?.into_iter().collect();
    let mut role_ids: Vec<String> = names
        .iter()
        .filter_map(|n| by_name.get(*n).cloned())
        .collect();
    if role_ids.is_empty() {
        role_ids.extend(by_name.get("Member").cloned());
    }
    let role = if names.contains("Admin") && by_name.contains_key("Admin") {
        MembershipRole::Admin
    } else {
        MembershipRole::Member
    };
    Ok(MemberRoles { role, role_ids })
}

/// Applies the mappings (never to the Owner), records the sign-in, and starts a
/// session the organization's single sign-on issued, in one transaction.
async fn signed_in(
    state: &AppState,
    (config, org): (&IdpConfigRow, &OrgRecord),
    account: &AccountRecord,
    (identity, groups): (&IdentityRow, &[String]),
    link: Option<&str>,
    now: DateTime<Utc>,
) -> ServiceResult<Session> {
    let roles = roles_for(state, (config, org), groups).await?;
    let (family, refresh) = accounts::new_family(state, account, Some(&org.id), now)?;
    let login = accounts::user_event(
        "user.login",
        (&account.user_id, Some(&account.email)),
        &account.user_id,
        json!({"method": "sso", "orgId": org.id, "idpId": config.id, "issuer": identity.issuer,
               "linked": link.is_some()}),
        "success",
    );
    unit_of_work!(&state.store, |tx| {
        tx.lock_organization(&org.id).await?;
        if let Some(link) = link {
            tx.use_pending_link(link, now)
                .await?
                .ok_or(ServiceError::SsoRefused {
                    refusal: Refusal::StateInvalid,
                    link_token: None,
                })?;
            tx.link_identity(identity, now).await?;
        } else {
            tx.touch_identity(identity, now).await?;
        }
        let held = tx.membership_role(&org.id, &account.user_id).await?;
        let mut events = vec![login.clone()];
        if held.as_deref() != Some("owner") {
            tx.set_member_roles((&org.id, &account.user_id), &roles, now)
                .await?;
            // Only a new member takes a seat (a member over a lowered limit still signs in).
            if held.is_none() && super::members::seat_taken(tx.seats(&org.id).await?).is_err() {
                return Err(ServiceError::Conflict(
                    "the organization has no free seat for another member".to_owned(),
                ));
            }
            if held.is_none() {
                events.push(event_on(
                    &Caller {
                        user_id: account.user_id.clone(),
                        email: Some(account.email.clone()),
                        stepped_up_at: None,
                        org_header: None,
                        personal_token: None,
                        session: None,
                        sso_org: Some(org.id.clone()),
                        impersonation: None,
                    },
                    "org.member.add",
                    (&org.id, None),
                    ("user", &account.user_id),
                    json!({"via": "sso", "idpId": config.id}),
                ));
            }
        }
        tx.start_family(&family, (&token_hash(&refresh), Some(&org.id)), now)
            .await?;
        tx.enqueue_audit(&events).await?;
        Ok(())
    })?;
    state.store.facts_changed();
    let (access, expires_in) =
        accounts::tokens_for(state, account, &family.id, Some(&org.id), now).await?;
    Ok(Session {
        access_token: access,
        refresh_token: refresh,
        token_type: "Bearer",
        expires_in,
    })
}

/// Creates an account and its membership at a first sign-in, linked, signed in.
async fn provision(
    state: &AppState,
    (config, org): (&IdpConfigRow, &OrgRecord),
    (user_id, email): (&str, &str),
    (identity, verified): (&IdentityRow, &Verified),
    now: DateTime<Utc>,
) -> ServiceResult<Session> {
    let roles = roles_for(state, (config, org), &verified.groups).await?;
    let identity = IdentityRow {
        user_id: user_id.to_owned(),
        ..identity.clone()
    };
    let actor = Caller {
        user_id: user_id.to_owned(),
        email: Some(email.to_owned()),
        stepped_up_at: None,
        org_header: None,
        personal_token: None,
        session: None,
        sso_org: Some(org.id.clone()),
        impersonation: None,
    };
    let events = [
        accounts::user_event(
            "user.register",
            (user_id, Some(email)),
            user_id,
            json!({"method": "sso", "orgId": org.id, "idpId": config.id}),
            "success",
        ),
        event_on(
            &actor,
            "org.member.add",
            (&org.id, None),
            ("user", user_id),
            json!({"via": "sso", "idpId": config.id, "role": roles.role}),
        ),
    ];
    unit_of_work!(&state.store, |tx| {
        tx.lock_organization(&org.id).await?;
        tx.insert_provisioned_account(
            ProvisionedAccount {
                user_id,
                email,
                name: verified.name.as_deref(),
            },
            now,
        )
        .await?;
        tx.set_member_roles((&org.id, user_id), &roles, now).await?;
        if super::members::seat_taken(tx.seats(&org.id).await?).is_err() {
            return Err(ServiceError::Conflict(
                "the organization has no free seat for another member".to_owned(),
            ));
        }
        tx.link_identity(&identity, now).await?;
        tx.enqueue_audit(&events).await?;
        Ok(())
    })?;
    state.store.facts_changed();
    let account = state
        .store
        .account(user_id)
        .await?
        .ok_or(ServiceError::NotFound("account".into()))?;
    signed_in(
        state,
        (config, org),
        &account,
        (&identity, &verified.groups),
        None,
        now,
    )
    .await
}

/// Links an identity waiting for its account's password: the password checked (and
/// throttled as a sign-in is), then the identity linked and the session started.
pub async fn link(
    state: &AppState,
    (link_token, password): (&str, String),
    client: Option<IpAddr>,
    now: DateTime<Utc>,
) -> ServiceResult<Session> {
    let hash = token_hash(link_token.trim());
    let pending = state.store.pending_link(&hash, now).await?;
    let Some(pending) = pending else {
        return Err(refuse(state, Refusal::StateInvalid, (None, client), None).await);
    };
    let account = state
        .store
        .account(&pending.identity.user_id)
        .await?
        .filter(|a| a.deleted_at.is_none());
    let key = format!(
        "account:{}",
        account.as_ref().map_or("", |a| a.email.as_str())
    );
    accounts::throttle(state, &[key.as_str()], now).await?;
    let matched = accounts::password_matches(state, account.as_ref(), password).await?;
    let Some(account) = account.filter(|_| matched) else {
        let event = accounts::user_event(
            "user.login.failed",
            ("anonymous", None),
            "unknown",
            json!({"method": "sso-link", "reason": "invalid credentials"}),
            "failure",
        );
        accounts::record_failure(state, event).await?;
        return Err(accounts::SignInRefusal::InvalidCredentials.into());
    };
    accounts::refund(state, &[key.as_str()]).await?;
    let config = state
        .store
        .idp_config(&pending.identity.config_id)
        .await?
        .ok_or(ServiceError::NotFound(
            "identity-provider configuration".into(),
        ))?;
    let org = state
        .store
        .organization(&config.org_id)
        .await?
        .ok_or(ServiceError::NotFound("organization".into()))?;
    signed_in(
        state,
        (&config, &org),
        &account,
        (&pending.identity, &pending.groups),
        Some(&hash),
        now,
    )
    .await
}
