//! The gate as a layer: each route's declared [`Access`] is checked before its
//! handler runs, and what the check found (the caller, the organization and the
//! caller's permissions there) is handed to the handler through the request's
//! extensions. A handler never states a permission of its own.

use std::collections::HashMap;

use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde_json::json;
use tenancy::{Permission, StepUp};

use crate::http::error::{ApiError, ErrorCode};
use crate::http::gate::{audit_refusal, gate, Chain, Granted, Named};
use crate::http::state::{AnyCaller, AppState, Caller, ServiceCaller};
use crate::services::organizations::OrgRecord;
use crate::services::ServiceError;

/// Where an organization-scoped route names its organization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OrgFrom {
    /// The `x-org-id` header (a foreign one is 403 `TENANT_FORBIDDEN`).
    Header,
    /// The path's `{id}` (a foreign one is 404, as if it did not exist).
    Path,
    /// A required query parameter (a foreign one is 403 `TENANT_FORBIDDEN`).
    Query(&'static str),
    /// The account root of the `x-org-id` organization: what an account pays for is
    /// the root's, so a team's members and admins are judged in the root (a team
    /// admin who is not the root's owner or admin is 403 `FORBIDDEN`).
    AccountRoot,
}

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Anyone, without a token.
    Public,
    /// Any authenticated user.
    User,
    /// A service token.
    Service,
    /// A super-admin (the stored flag), with a fresh step-up when `step_up`.
    SuperAdmin {
        /// Needs a fresh `X-Step-Up-Token`.
        step_up: bool,
    },
    /// A user with `need` in the organization named by `from`.
    Org {
        /// Where the organization is named.
        from: OrgFrom,
        /// What the caller needs there (document 2's Permission column).
        need: tenancy::Access,
        /// Needs a fresh `X-Step-Up-Token`.
        step_up: bool,
        /// Whether the request counts as one of the organization's API calls. The
        /// routes a customer needs to see and fix an exhausted quota (its quotas,
        /// subscription, bundles, add-ons and portal) do not.
        counted: bool,
    },
    /// A user holding the permission in the `x-org-id` organization, or a service
    /// token acting in it.
    UserOrService(Permission),
    /// A super-admin, or the billing service's token (`BILLING_SERVICE_NAME`).
    SuperAdminOrBilling,
    /// A permission of the platform (`registry:*`): held only through the system
    /// organization's Super Admin role, so it is asked there; a refused
    /// state-changing request is audited there as `authz.denied`.
    Platform(Permission),
}

impl Access {
    /// A permission in the `x-org-id` organization.
    pub(crate) const fn header(permission: Permission) -> Access {
        Access::Org {
            from: OrgFrom::Header,
            need: tenancy::Access::Permission(permission),
            step_up: false,
            counted: true,
        }
    }

    /// `need` in the `x-org-id` organization's account root, not counted as an API
    /// call (billing: what the account pays for).
    pub(crate) const fn account_root(need: tenancy::Access) -> Access {
        Access::Org {
            from: OrgFrom::AccountRoot,
            need,
            step_up: false,
            counted: false,
        }
    }

    /// The same access, not counted as an API call (a route that must stay open to
    /// an organization that has none left).
    pub(crate) const fn uncounted(self) -> Access {
        match self {
            Access::Org {
                from,
                need,
                step_up,
                ..
            } => Access::Org {
                from,
                need,
                step_up,
                counted: false,
            },
            other => other,
        }
    }

    /// `need` in the path's organization.
    pub(crate) const fn path(need: tenancy::Access) -> Access {
        Access::Org {
            from: OrgFrom::Path,
            need,
            step_up: false,
            counted: true,
        }
    }

    /// The same access, with a fresh step-up required.
    pub(crate) const fn stepped_up(self) -> Access {
        match self {
            Access::Org {
                from,
                need,
                counted,
                ..
            } => Access::Org {
                from,
                need,
                step_up: true,
                counted,
            },
            Access::SuperAdmin { .. } => Access::SuperAdmin { step_up: true },
            other => other,
        }
    }

    /// Whether the route takes a bearer token.
    pub(crate) fn authenticated(self) -> bool {
        self != Access::Public
    }

    /// Whether `x-org-id` is required.
    pub(crate) fn needs_org_header(self) -> bool {
        matches!(
            self,
            Access::UserOrService(_)
                | Access::Org {
                    from: OrgFrom::Header | OrgFrom::AccountRoot,
                    ..
                }
        )
    }

    /// The query parameter that names the organization, when the route takes it there.
    pub(crate) fn org_query(self) -> Option<&'static str> {
        match self {
            Access::Org {
                from: OrgFrom::Query(name),
                ..
            } => Some(name),
            _ => None,
        }
    }

    /// One sentence for the documentation.
    pub(crate) fn describe(self) -> String {
        let need = |need: tenancy::Access| match need {
            tenancy::Access::Authenticated => "authentication".to_owned(),
            tenancy::Access::Member => "membership".to_owned(),
            tenancy::Access::OwnManagedOrSuperAdmin => {
                "its own organization, a team it manages, or a super-admin".to_owned()
            }
            tenancy::Access::Permission(p) => format!("the `{p}` permission"),
            tenancy::Access::SuperAdmin => "a super-admin".to_owned(),
        };
        let step = |step_up: bool| {
            if step_up {
                ", and a fresh step-up verification (X-Step-Up-Token)"
            } else {
                ""
            }
        };
        match self {
            Access::Public => "No authentication.".to_owned(),
            Access::User => "Any authenticated user.".to_owned(),
            Access::Service => "A service token.".to_owned(),
            Access::SuperAdmin { step_up } => format!("A super-admin{}.", step(step_up)),
            Access::Org {
                from,
                need: n,
                step_up,
                counted,
            } => {
                let place = match from {
                    OrgFrom::Header => "the `x-org-id` organization".to_owned(),
                    OrgFrom::AccountRoot => {
                        "the account root of the `x-org-id` organization (a team's admins act on its account only as admins of the root)".to_owned()
                    }
                    OrgFrom::Path => "the organization `{id}`".to_owned(),
                    OrgFrom::Query(name) => format!("the organization `{name}`"),
                };
                let uncounted = if counted {
                    ""
                } else {
                    " Not counted as an API call, so an organization that has none left can still see and fix it."
                };
                format!(
                    "Requires {} in {place}{}.{uncounted}",
                    need(n),
                    step(step_up)
                )
            }
            Access::UserOrService(p) => format!(
                "Requires the `{p}` permission in the `x-org-id` organization, or a service token acting in it."
            ),
            Access::SuperAdminOrBilling => {
                "A super-admin, or the billing service's token (BILLING_SERVICE_NAME).".to_owned()
            }
            Access::Platform(p) => format!(
                "Requires the `{p}` permission, which only super-admins hold (the system organization's Super Admin role); a refusal is audited there as authz.denied."
            ),
        }
    }
}

/// The state of a route's guard layer.
#[derive(Clone)]
pub(crate) struct Guard {
    pub(crate) state: AppState,
    pub(crate) access: Access,
    /// `METHOD /path`: what an `authz.denied` event names.
    pub(crate) action: std::sync::Arc<str>,
    pub(crate) changes_state: bool,
    /// The feature of the account the route needs (super-admins are never gated).
    pub(crate) feature: Option<entitlements::Feature>,
}

/// What the guard learnt of a state-changing request before refusing it: who asked,
/// and which chain a refusal belongs in. Reads are never audited, so nothing is kept
/// for them.
#[derive(Debug, Default)]
struct Attempt {
    /// Whether a refusal is audited at all (the route changes state).
    audited: bool,
    /// The authenticated actor (id and e-mail); none before authentication.
    actor: Option<(String, Option<String>)>,
    /// Where a refusal is audited; none when the request named no organization.
    chain: Option<Chain>,
}

impl Attempt {
    fn caller(&mut self, caller: &Caller, chain: Option<Chain>) {
        if self.audited {
            self.actor = Some((caller.user_id.clone(), caller.email.clone()));
            self.chain = chain;
        }
    }

    fn service(&mut self, service: &str) {
        if self.audited {
            self.actor = Some((format!("service:{service}"), None));
            self.chain = Some(Chain::System);
        }
    }

    fn named(&mut self, org_id: &str) {
        if self.audited {
            self.chain = Some(Chain::Org(org_id.to_owned()));
        }
    }
}

/// The layer: admits the request or answers the refusal in the error envelope. Every
/// refusal (403 or 404) of an authenticated state-changing request is audited as
/// `authz.denied`, whichever check made it: the gate's own, or the guard's
/// (super-admin routes, the platform's, the billing service's, a feature the
/// account lacks).
pub(crate) async fn enforce(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let mut attempt = Attempt {
        audited: guard.changes_state,
        ..Attempt::default()
    };
    match admit(&guard, &mut parts, &mut attempt).await {
        Ok(()) => next.run(Request::from_parts(parts, body)).await,
        Err(error) => {
            let refused = matches!(
                error.status(),
                StatusCode::FORBIDDEN | StatusCode::NOT_FOUND
            );
            if attempt.audited && refused && !error.audited {
                if let Some((actor, email)) = attempt.actor {
                    let chain = attempt.chain.unwrap_or(Chain::System);
                    let details = json!({"reason": error.code.as_str().to_ascii_lowercase()});
                    let audit = audit_refusal(
                        &guard.state,
                        &actor,
                        email.as_deref(),
                        chain,
                        &guard.action,
                        details,
                    );
                    if let Err(failed) = audit.await {
                        // The refusal stands; what could not be recorded is answered
                        // as the store's failure (never a silent pass).
                        return failed.into_response();
                    }
                }
            }
            error.into_response()
        }
    }
}

async fn admit(guard: &Guard, parts: &mut Parts, attempt: &mut Attempt) -> Result<(), ApiError> {
    let state = &guard.state;
    match guard.access {
        Access::Public => {}
        Access::User => {
            let caller = Caller::from_request_parts(parts, state).await?;
            parts.extensions.insert(caller);
        }
        Access::Service => {
            let service = ServiceCaller::from_request_parts(parts, state).await?;
            parts.extensions.insert(service);
        }
        Access::SuperAdmin { step_up } => {
            let caller = Caller::from_request_parts(parts, state).await?;
            attempt.caller(&caller, Some(Chain::System));
            if caller.bound()
                || !crate::services::access::is_super_admin(&state.infra.store, &caller.user_id)
                    .await?
            {
                return Err(ApiError::forbidden("only a super-admin may do this"));
            }
            let window = chrono::Duration::from_std(state.config.http.step_up_window)
                .unwrap_or(tenancy::DEFAULT_STEP_UP_WINDOW);
            let status = tenancy::step_up_status(&caller.principal(), step_up, Utc::now(), window);
            if matches!(status, StepUp::Missing | StepUp::Stale) {
                return Err(step_up_required(status));
            }
            parts.extensions.insert(caller);
        }
        Access::Org {
            from,
            need,
            step_up,
            counted,
        } => {
            let caller = Caller::from_request_parts(parts, state).await?;
            attempt.caller(&caller, caller.org_header.clone().map(Chain::Org));
            let (org_id, named) = match from {
                OrgFrom::Header | OrgFrom::AccountRoot => (
                    crate::http::gate::tenant_header(&caller)?.to_owned(),
                    Named::Header,
                ),
                OrgFrom::Path => (path_id(parts).await?, Named::Path),
                OrgFrom::Query(name) => (query_value(parts, name)?, Named::Header),
            };
            attempt.named(&org_id);
            let requirement = need.requirement(guard.changes_state, step_up);
            let mut granted =
                gate(state, &caller, &org_id, named, requirement, &guard.action).await?;
            if from == OrgFrom::AccountRoot {
                if let Some(root) = granted.org.parent_org_id.clone() {
                    granted = gate(state, &caller, &root, named, requirement, &guard.action)
                        .await
                        .map_err(|refused| {
                            if matches!(refused.code, ErrorCode::TenantForbidden | ErrorCode::Forbidden) {
                                ApiError {
                                    audited: refused.audited,
                                    ..ApiError::forbidden(
                                        "what an account pays for is changed by its root organization's owner and admins; a team's admins cannot",
                                    )
                                }
                            } else {
                                refused
                            }
                        })?;
                }
            }
            if let (Some(feature), false) = (guard.feature, granted.super_admin) {
                crate::services::entitlement::require_feature(
                    &state.infra.store,
                    &state.config,
                    &granted.org,
                    feature,
                )
                .await?;
                // A flag of the user's own may take the feature away from it.
                crate::services::admin::features::require_user_feature(
                    &state.infra.store,
                    &state.replica.kept,
                    &caller.user_id,
                    feature,
                    granted.org.tier,
                )
                .await?;
            }
            // The organization's own requests count; a super-admin's do not (they
            // are not its usage, and must reach an organization that has none left).
            if counted && !granted.super_admin {
                crate::services::quotas::count_api_call(
                    &state.infra.store,
                    &state.config,
                    &state.replica.allowances,
                    &granted.org,
                )
                .await?;
            }
            parts.extensions.insert(caller);
            parts.extensions.insert(granted);
        }
        Access::Platform(permission) => {
            let caller = Caller::from_request_parts(parts, state).await?;
            attempt.caller(&caller, Some(Chain::System));
            let refused = || {
                ApiError::forbidden(format!(
                    "the `{permission}` permission is required; only super-admins hold it"
                ))
                .with_details(json!({"missing": permission.to_string()}))
            };
            let system = crate::services::access::system_organization(&state.infra.store)
                .await?
                .ok_or_else(refused)?;
            let requirement =
                tenancy::Access::Permission(permission).requirement(guard.changes_state, false);
            let granted = gate(
                state,
                &caller,
                &system.id,
                Named::Header,
                requirement,
                &guard.action,
            )
            .await
            .map_err(|error| {
                if error.code == ErrorCode::TenantForbidden {
                    ApiError {
                        audited: error.audited,
                        ..refused()
                    }
                } else {
                    error
                }
            })?;
            parts.extensions.insert(caller);
            parts.extensions.insert(granted);
        }
        Access::SuperAdminOrBilling => match AnyCaller::from_request_parts(parts, state).await? {
            AnyCaller::User(caller) => {
                attempt.caller(&caller, Some(Chain::System));
                if caller.bound()
                    || !crate::services::access::is_super_admin(&state.infra.store, &caller.user_id)
                        .await?
                {
                    return Err(ApiError::forbidden(
                        "only a super-admin or the billing service may do this",
                    ));
                }
                parts.extensions.insert(caller);
            }
            AnyCaller::Service { service, .. } => {
                attempt.service(&service);
                if service != state.config.billing.service_name {
                    return Err(ApiError::forbidden(
                        "only a super-admin or the billing service may do this",
                    ));
                }
                parts.extensions.insert(ServiceCaller { service });
            }
        },
        Access::UserOrService(permission) => {
            // One budget for the whole check, from here: the gate, the rules, the
            // evaluation and the exemptions. Storage that fails under the gate, or
            // does not answer in time, is "compliance unavailable" (fail closed).
            let deadline = tokio::time::Instant::now() + crate::services::checks::BUDGET;
            let caller = AnyCaller::from_request_parts(parts, state).await?;
            let org = match &caller {
                AnyCaller::User(user) => {
                    attempt.caller(user, user.org_header.clone().map(Chain::Org));
                    let org_id = crate::http::gate::tenant_header(user)?.to_owned();
                    let requirement =
                        tenancy::Access::Permission(permission).requirement(false, false);
                    let gated = gate(
                        state,
                        user,
                        &org_id,
                        Named::Header,
                        requirement,
                        &guard.action,
                    );
                    let counted = async {
                        let granted = gated.await?;
                        if !granted.super_admin {
                            crate::services::quotas::count_api_call(
                                &state.infra.store,
                                &state.config,
                                &state.replica.allowances,
                                &granted.org,
                            )
                            .await?;
                        }
                        Ok::<_, ApiError>(granted)
                    };
                    match tokio::time::timeout_at(deadline, counted).await {
                        Ok(Ok(granted)) => Some(granted.org),
                        Ok(Err(e)) if e.status().is_server_error() => {
                            return Err(ServiceError::Unavailable.into())
                        }
                        Ok(Err(refused)) => return Err(refused),
                        Err(_) => return Err(ServiceError::Unavailable.into()),
                    }
                }
                // A service acts in the organization it names; the handler finds it
                // within the budget (from the rule cache when warm).
                AnyCaller::Service { .. } => None,
            };
            parts.extensions.insert(Admitted {
                caller,
                org,
                deadline,
            });
        }
    }
    Ok(())
}

fn step_up_required(status: StepUp) -> ApiError {
    ApiError::new(
        ErrorCode::StepUpRequired,
        "this operation needs a fresh step-up verification (X-Step-Up-Token)",
    )
    .with_details(json!({"stepUp": status}))
}

async fn path_id(parts: &mut Parts) -> Result<String, ApiError> {
    let Path(params) = Path::<HashMap<String, String>>::from_request_parts(parts, &())
        .await
        .map_err(|e| ApiError::validation(e.body_text()))?;
    params
        .get("id")
        .cloned()
        .ok_or_else(|| ApiError::internal("an organization route without an {id}"))
}

fn query_value(parts: &Parts, name: &str) -> Result<String, ApiError> {
    axum::extract::Query::<HashMap<String, String>>::try_from_uri(&parts.uri)
        .ok()
        .and_then(|q| q.0.get(name).cloned())
        .filter(|value| !value.trim().is_empty())
        .ok_or_else(|| ApiError::invalid_field(name, "is required"))
}

/// What the guard admitted to a validation route: the caller, the organization when
/// the caller is a user, and the deadline of the check's budget.
#[derive(Debug, Clone)]
pub(crate) struct Admitted {
    pub(crate) caller: AnyCaller,
    pub(crate) org: Option<OrgRecord>,
    pub(crate) deadline: tokio::time::Instant,
}

impl FromRequestParts<AppState> for Admitted {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Admitted>()
            .cloned()
            .ok_or_else(|| ApiError::internal("the route admits no validation"))
    }
}

/// What the guard admitted: extracted by handlers of organization-scoped routes. A
/// handler that asks for it on a route that does not grant it fails closed (500).
impl FromRequestParts<AppState> for Granted {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Granted>()
            .cloned()
            .ok_or_else(|| ApiError::internal("the route grants no organization"))
    }
}
