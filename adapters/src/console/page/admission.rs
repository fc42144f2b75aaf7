//! Whether a visitor may see what a page shows: the visitor as the API's gate sees them
//! in an organization, the permissions they hold there, and the route table's access
//! for each operation the page reads.

use super::*;

/// The visitor as the API's gate sees them in `org` (the console session's own
/// session, no step-up).
pub(super) async fn caller_of(
    console: &Console,
    visitor: &Visitor,
    org: &str,
) -> Result<Caller, Refusal> {
    Ok(Caller {
        user_id: visitor.session.user_id.clone(),
        email: visitor.session.email.clone(),
        stepped_up_at: None,
        org_header: Some(org.to_owned()),
        personal_token: None,
        session: Some(visitor.session.family_id.clone()),
        sso_org: crate::services::credentials::session_sso_org(
            &console.state.infra.store,
            &console.state.replica.kept,
            &visitor.session.user_id,
            &visitor.session.family_id,
        )
        .await
        .map_err(api::Refusal::from)?,
        impersonation: None,
    })
}

/// The permissions the visitor holds in `org`, as the gate judges them (a custom
/// Role's permissions are picked from these).
pub async fn held_permissions(
    console: &Console,
    visitor: &Visitor,
    org: &str,
) -> Result<Vec<tenancy::Permission>, Refusal> {
    let caller = caller_of(console, visitor, org).await?;
    access::held(
        &console.state.infra.store,
        &console.state.config,
        &console.state.replica.kept,
        &caller,
        org,
    )
    .await
    .map_err(Refusal::from)
}

/// Whether the route table's access for `operation` admits the caller in `org`
/// (`parent`: its root, for what an account pays for).
pub(super) async fn admits(
    console: &Console,
    caller: &Caller,
    (org, parent): (&str, &str),
    super_admin: bool,
    operation: &str,
) -> Result<bool, Refusal> {
    let state = &console.state;
    let holds = |org: String, permission| async move {
        access::holds(
            &state.infra.store,
            &state.config,
            &state.replica.kept,
            caller,
            &org,
            permission,
        )
        .await
        .map_err(Refusal::from)
    };
    let Some((access, feature)) = access_of(operation) else {
        return Ok(false);
    };
    // A feature the account lacks refuses everyone but super-admins.
    if let (Some(feature), false) = (feature, super_admin) {
        let record = state
            .infra
            .store
            .organization(org)
            .await
            .map_err(|e| Refusal::from(crate::services::ServiceError::from(e)))?;
        let Some(record) = record else {
            return Ok(false);
        };
        match crate::services::entitlement::require_feature(
            &state.infra.store,
            &state.config,
            &record,
            feature,
        )
        .await
        {
            Ok(()) => {}
            Err(crate::services::ServiceError::FeatureNotAvailable { .. }) => return Ok(false),
            Err(other) => return Err(Refusal::from(other)),
        }
        // A flag of the user's own may take it away (as the gate does).
        match crate::services::admin::features::require_user_feature(
            &state.infra.store,
            &state.replica.kept,
            &caller.user_id,
            feature,
            record.tier,
        )
        .await
        {
            Ok(()) => {}
            Err(crate::services::ServiceError::FeatureNotAvailable { .. }) => return Ok(false),
            Err(other) => return Err(Refusal::from(other)),
        }
    }
    Ok(match Some(access) {
        None => false,
        Some(Access::Public | Access::User) => true,
        Some(Access::Service) => false,
        Some(Access::SuperAdmin { .. } | Access::SuperAdminOrBilling | Access::Platform(_)) => {
            super_admin
        }
        Some(Access::UserOrService(permission)) => holds(org.to_owned(), permission).await?,
        Some(Access::Org { from, need, .. }) => {
            let place = if from == OrgFrom::AccountRoot && !parent.is_empty() {
                parent
            } else {
                org
            };
            match need {
                tenancy::Access::Permission(permission) => {
                    holds(place.to_owned(), permission).await?
                }
                tenancy::Access::SuperAdmin => super_admin,
                _ => true,
            }
        }
    })
}
