//! Enforcement: an organization's policy, its break-glass accounts, and the check
//! a credential passes where single sign-on is required.

use super::*;
use crate::config::Config;
use crate::replica::kept::KeptFacts;
use crate::storage::Store;

/// An organization's enforcement and break-glass accounts.
pub async fn policy(store: &Store, org: &OrgRecord) -> ServiceResult<SsoPolicyRow> {
    root_only(org)?;
    Ok(store.sso_policy(&org.id).await?)
}

/// Sets whether the organization requires its single sign-on (after
/// `grace_hours`). Requiring it needs the `sso` feature and an enabled
/// configuration (else nobody could sign in: 409).
pub async fn set_enforcement(
    store: &Store,
    config: &Config,
    caller: &Caller,
    org: &OrgRecord,
    (required, grace_hours): (bool, u32),
    now: DateTime<Utc>,
) -> ServiceResult<SsoPolicyRow> {
    root_only(org)?;
    if required {
        crate::services::entitlement::require_feature(store, config, org, Feature::Sso).await?;
        if !store.idp_configs(&org.id).await?.iter().any(|c| c.enabled) {
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
    unit_of_work!(store, |tx| {
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
    store.facts_changed();
    Ok(store.sso_policy(&org.id).await?)
}

/// Arms a break-glass account (an active member) until `until`: at most two at
/// once, at most 30 days.
pub async fn arm_break_glass(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    (user_id, until, reason): (&str, DateTime<Utc>, &str),
    now: DateTime<Utc>,
) -> ServiceResult<SsoPolicyRow> {
    root_only(org)?;
    let reason = bounded("reason", reason, 500)?;
    let member = store.membership(&org.id, user_id).await?;
    if !member.is_some_and(|m| m.membership().active) {
        return Err(ServiceError::invalid(
            "userId",
            "must be an active member of the organization",
        ));
    }
    unit_of_work!(store, |tx| {
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
    store.facts_changed();
    Ok(store.sso_policy(&org.id).await?)
}

/// Disarms a break-glass account.
pub async fn disarm_break_glass(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    user_id: &str,
) -> ServiceResult<SsoPolicyRow> {
    unit_of_work!(store, |tx| {
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
    store.facts_changed();
    Ok(store.sso_policy(&org.id).await?)
}

/// Whether the organization (a root, or a team's root) refuses `caller`'s
/// credential because it requires its single sign-on. The policy is kept with the
/// gate's facts and follows changes on every replica.
pub async fn enforce(
    store: &Store,
    config: &Config,
    kept: &KeptFacts,
    caller: &Caller,
    org: &OrgRecord,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let root_id = org.parent_org_id.as_deref().unwrap_or(&org.id);
    let policy = kept
        .sso
        .get_or_load(
            store,
            root_id.to_owned(),
            |_| true,
            store.sso_policy(root_id),
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
    let root = crate::services::entitlement::root_of(store, org).await?;
    if !sso_active(store, config, &root).await? {
        return Ok(());
    }
    Err(ServiceError::SsoRequired {
        org_name: root.name,
    })
}
