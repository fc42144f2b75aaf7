//! A person's first sign-in through single sign-on: their account and membership
//! created, linked to the identity, with the Roles the provider's groups map to.

use super::*;

/// Creates an account and its membership at a first sign-in, linked, signed in.
pub(super) async fn provision(
    store: &Store,
    settings: &Config,
    keys: &TokenKeys,
    (config, org): (&IdpConfigRow, &OrgRecord),
    (user_id, email): (&str, &str),
    (identity, verified): (&IdentityRow, &Verified),
    now: DateTime<Utc>,
) -> ServiceResult<Session> {
    let roles = roles_for(store, (config, org), &verified.groups).await?;
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
    unit_of_work!(store, |tx| {
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
        if crate::services::members::seat_taken(tx.seats(&org.id).await?).is_err() {
            return Err(ServiceError::Conflict(
                "the organization has no free seat for another member".to_owned(),
            ));
        }
        tx.link_identity(&identity, now).await?;
        tx.enqueue_audit(&events).await?;
        Ok(())
    })?;
    store.facts_changed();
    let account = store
        .account(user_id)
        .await?
        .ok_or(ServiceError::NotFound("account".into()))?;
    signed_in(
        store,
        settings,
        keys,
        (config, org),
        &account,
        (&identity, &verified.groups),
        None,
        now,
    )
    .await
}
