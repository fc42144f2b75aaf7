//! Authorizing a request against an organization through the tenancy crate, and
//! turning its decision into the error codes of SEMANTICS.md 5.

use chrono::Utc;
use serde_json::json;
use tenancy::{Reason, Requirement};

use crate::audit::Action;
use crate::http::error::ApiError;
use crate::http::state::{AppState, Caller};
use crate::services::access;
use crate::services::organizations::OrgRecord;

/// How the organization was named: by a path id (a foreign one answers 404) or by
/// the `x-org-id` header (a foreign one answers 403 `TENANT_FORBIDDEN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// A path parameter.
    Path,
    /// The `x-org-id` header.
    Header,
}

/// What a passed gate hands to the handler.
#[derive(Debug, Clone)]
pub struct Granted {
    /// The organization.
    pub org: OrgRecord,
    /// The caller's effective permissions there (loaded only when the route asks
    /// for a permission; empty on membership-only routes).
    pub permissions: std::collections::BTreeSet<tenancy::Permission>,
    /// Whether the caller is a super-admin (by token or stored flag).
    pub super_admin: bool,
}

/// The `x-org-id` header, required.
pub fn tenant_header(caller: &Caller) -> Result<&str, ApiError> {
    caller
        .org_header
        .as_deref()
        .ok_or_else(ApiError::tenant_forbidden)
}

/// The chain a refused state-changing request is audited in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chain {
    /// The organization the request named (when it exists; a made-up id gets no
    /// chain and is counted only).
    Org(String),
    /// The system organization: routes of the platform (super-admin, billing,
    /// registry) name none (counted only until the system organization exists).
    System,
}

/// Audits a refused state-changing request as `authz.denied` (outcome failure) in
/// `chain`, folded per actor, organization and minute (`Store::fold_denial`): the
/// first at once, the rest of the minute as one more event with their count.
pub async fn audit_refusal(
    state: &AppState,
    actor_id: &str,
    actor_email: Option<&str>,
    chain: Chain,
    action: &str,
    details: serde_json::Value,
) -> Result<(), ApiError> {
    let org_id = match chain {
        Chain::Org(org_id) => access::facts(
            &state.infra.store,
            &state.replica.kept,
            &org_id,
            actor_id,
            false,
        )
        .await?
        .org
        .as_ref()
        .map(|org| org.id.clone()),
        Chain::System => access::system_organization(&state.infra.store)
            .await?
            .map(|org| org.id),
    };
    let Some(org_id) = org_id else {
        // No chain to write in: counted only.
        state.infra.metrics.denied_unknown_organization();
        return Ok(());
    };
    let event = Action {
        action: "authz.denied",
        actor_id,
        actor_email,
        org_id: &org_id,
        target_type: "endpoint",
        target_id: action,
        details,
        outcome: "failure",
        ..Action::default()
    }
    .into_event();
    access::record_denial(&state.infra.store, &event, Utc::now()).await?;
    Ok(())
}

/// Loads what the gate needs, asks it, and audits a denied state-changing request
/// as `authz.denied` (every refusal of a state-changing request, the token's scope
/// included).
pub async fn gate(
    state: &AppState,
    caller: &Caller,
    org_id: &str,
    named: Named,
    requirement: Requirement,
    action: &str,
) -> Result<Granted, ApiError> {
    // A personal access token bound to an organization reaches no other, and uses
    // no permission outside its subset (it only ever takes away).
    let scope = caller
        .personal_token
        .as_ref()
        .and_then(|used| used.scope.as_ref());
    if let Some(scope) = scope {
        let refusal = if !scope.reaches(org_id) {
            Some((
                match named {
                    Named::Path => ApiError::not_found("organization"),
                    Named::Header => ApiError::tenant_forbidden(),
                },
                json!({"reason": "token_scope", "missing": requirement.permission}),
            ))
        } else {
            requirement
                .permission
                .filter(|p| !scope.allows(*p))
                .map(|permission| {
                    (
                        ApiError::forbidden(format!(
                            "the personal access token does not carry the `{permission}` permission"
                        ))
                        .with_details(json!({"missing": permission.to_string()})),
                        json!({"reason": "token_scope", "missing": permission}),
                    )
                })
        };
        if let Some((error, details)) = refusal {
            if requirement.changes_state {
                audit_refusal(
                    state,
                    &caller.user_id,
                    caller.email.as_deref(),
                    Chain::Org(org_id.to_owned()),
                    action,
                    details,
                )
                .await?;
            }
            return Err(error.audited());
        }
    }
    let (decision, facts, super_admin) = access::decide(
        &state.infra.store,
        &state.config,
        &state.replica.kept,
        caller,
        org_id,
        requirement,
    )
    .await?;
    if decision.allowed {
        let permissions = match decision.standing {
            Some(tenancy::Standing::Manager) => tenancy::union_of(&facts.parent_roles),
            Some(tenancy::Standing::SuperAdmin) => tenancy::Permission::ALL.into_iter().collect(),
            _ => tenancy::union_of(&facts.roles),
        };
        let permissions = match scope {
            Some(scope) => scope.restrict(permissions),
            None => permissions,
        };
        let org = facts
            .org
            .clone()
            .ok_or_else(|| ApiError::not_found("organization"))?;
        // An organization that requires its single sign-on refuses other
        // credentials of its members (a super-admin is the platform's, not theirs).
        if decision.standing != Some(tenancy::Standing::SuperAdmin) {
            crate::services::sso::enforce(
                &state.infra.store,
                &state.config,
                &state.replica.kept,
                caller,
                &org,
                Utc::now(),
            )
            .await?;
        }
        return Ok(Granted {
            org,
            permissions,
            super_admin,
        });
    }
    if decision.audit_as_denied {
        if facts.org.is_some() {
            // Chained under the organization it targeted, folded per actor,
            // organization and minute: a flood of denials writes one event a minute.
            let event = Action {
                action: "authz.denied",
                actor_id: &caller.user_id,
                actor_email: caller.email.as_deref(),
                org_id,
                target_type: "endpoint",
                target_id: action,
                details: json!({"reason": decision.reason, "missing": decision.missing}),
                outcome: "failure",
                ..Action::default()
            }
            .into_event();
            access::record_denial(&state.infra.store, &event, Utc::now()).await?;
        } else {
            // An organization that does not exist gets no chain: counted only.
            state.infra.metrics.denied_unknown_organization();
        }
    }
    let error = match decision.reason {
        Reason::NotYourOrganization => match named {
            Named::Path => ApiError::not_found("organization"),
            Named::Header => ApiError::tenant_forbidden(),
        },
        Reason::StepUpRequired => ApiError::new(
            crate::code::ErrorCode::StepUpRequired,
            "this operation needs a fresh step-up verification (X-Step-Up-Token)",
        )
        .with_details(json!({"stepUp": decision.step_up})),
        Reason::SuperAdminOnly => ApiError::forbidden("only a super-admin may do this"),
        _ => {
            let missing = decision.missing.map(|p| p.to_string()).unwrap_or_default();
            ApiError::forbidden(format!("the `{missing}` permission is required"))
                .with_details(json!({"missing": missing}))
        }
    };
    Err(if decision.audit_as_denied {
        error.audited()
    } else {
        error
    })
}
