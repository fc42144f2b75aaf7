//! The sign-in: its start, the provider's callback (who a first sign-in becomes,
//! which Roles its groups give) and the link of an existing account after its
//! password.

use super::*;
use crate::auth::TokenKeys;
use crate::config::Config;
use crate::outbound::oidc::SsoClients;
use crate::storage::Store;

mod provisioning;
use provisioning::*;

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

    fn redirect_uri(self, config: &Config) -> String {
        let path = match self {
            ReturnTo::Api => API_CALLBACK,
            ReturnTo::Console => CONSOLE_CALLBACK,
        };
        format!("{}{path}", config.signin.public_url)
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
    store: &Store,
    settings: &Config,
    sso: &SsoClients,
    route: Route,
    return_to: ReturnTo,
    now: DateTime<Utc>,
) -> ServiceResult<Started> {
    let (org, domain) = match &route {
        Route::Org(name) => (store.root_organization_named(name.trim()).await?, None),
        Route::Email(email) => {
            let domain = rules::email_domain(email)
                .ok_or_else(|| ServiceError::invalid("email", "must be an e-mail address"))?;
            let owner = store.domain_owner(&domain).await?;
            let org = match owner {
                Some(id) => store.organization(&id).await?,
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
    if !sso_active(store, settings, &org).await? {
        return Err(not_found());
    }
    let config = store
        .idp_configs(&org.id)
        .await?
        .into_iter()
        .filter(|c| c.enabled)
        .find(|c| domain.as_ref().is_none_or(|d| c.domains.contains(d)))
        .ok_or_else(not_found)?;
    let redirect_uri = return_to.redirect_uri(settings);
    let relying = Relying {
        config: (&config.id, config.version),
        issuer: &config.issuer,
        client_id: &config.client_id,
        redirect_uri: &redirect_uri,
    };
    let started = sso
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
    unit_of_work!(store, |tx| {
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
    store: &Store,
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
    if let Err(error) = accounts::record_failure(store, event).await {
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
    let store = &state.infra.store;
    let Some(sent_state) = callback.state.as_deref().filter(|s| s.len() <= 512) else {
        return Err(refuse(store, Refusal::StateInvalid, (None, client), None).await);
    };
    let attempt = unit_of_work!(store, |tx| {
        Ok(tx.use_attempt(&token_hash(sent_state), now).await?)
    })?;
    let Some(attempt) = attempt else {
        return Err(refuse(store, Refusal::StateInvalid, (None, client), None).await);
    };
    let bound = browser.is_some_and(|b| {
        bool::from(subtle::ConstantTimeEq::ct_eq(
            token_hash(b).as_bytes(),
            attempt.browser_hash.as_bytes(),
        ))
    });
    if !bound || attempt.return_to != return_to.as_str() {
        return Err(refuse(store, Refusal::StateInvalid, (None, client), None).await);
    }
    let config = state.infra.store.idp_config(&attempt.config_id).await?;
    let org = match &config {
        Some(c) => state.infra.store.organization(&c.org_id).await?,
        None => None,
    };
    let (Some(config), Some(org)) = (config, org) else {
        return Err(refuse(store, Refusal::ConfigurationDisabled, (None, client), None).await);
    };
    let at = (Some(org.id.as_str()), client);
    if !config.enabled || !sso_active(&state.infra.store, &state.config, &org).await? {
        return Err(refuse(store, Refusal::ConfigurationDisabled, at, None).await);
    }
    if callback.error.is_some() {
        return Err(refuse(store, Refusal::ProviderError, at, None).await);
    }
    let Some(code) = callback
        .code
        .as_deref()
        .filter(|c| !c.is_empty() && c.len() <= 4096)
    else {
        return Err(refuse(store, Refusal::ProviderError, at, None).await);
    };
    let secret = crate::services::keys::open(
        &state.infra.store,
        &state.config,
        &state.outbound.keyring,
        secret_binding(&org.id, &config.id),
        &config.client_secret,
    )
    .await?;
    let redirect_uri = return_to.redirect_uri(&state.config);
    let relying = Relying {
        config: (&config.id, config.version),
        issuer: &config.issuer,
        client_id: &config.client_id,
        redirect_uri: &redirect_uri,
    };
    let verified = match state
        .outbound
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
        Err(refusal) => return Err(refuse(store, refusal, at, None).await),
    };
    let identity = IdentityRow {
        config_id: config.id.clone(),
        issuer: verified.issuer.clone(),
        subject: verified.subject.clone(),
        user_id: String::new(),
    };
    if let Some(user_id) = state
        .infra
        .store
        .sso_identity(&config.id, &verified.issuer, &verified.subject)
        .await?
    {
        let account = state
            .infra
            .store
            .account(&user_id)
            .await?
            .filter(|a| a.deleted_at.is_none());
        let Some(account) = account else {
            return Err(refuse(store, Refusal::ProvisioningOff, at, None).await);
        };
        let identity = IdentityRow {
            user_id,
            ..identity
        };
        let session = signed_in(
            &state.infra.store,
            &state.config,
            &state.infra.keys,
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
        Some(d) => state.infra.store.domain_owner(d).await?,
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
        Some(e) => state.infra.store.account_by_email(e).await?,
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
            unit_of_work!(store, |tx| {
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
            Err(refuse(store, Refusal::LinkRequired, at, Some(token)).await)
        }
        (FirstSignIn::Provision, None, Some(email)) => {
            let user_id = crate::new_id();
            let session = provision(
                &state.infra.store,
                &state.config,
                &state.infra.keys,
                (&config, &org),
                (&user_id, &email),
                (&identity, &verified),
                now,
            )
            .await?;
            Ok(Finished { session, return_to })
        }
        (FirstSignIn::Refused(refusal), _, _) => Err(refuse(store, refusal, at, None).await),
        _ => Err(refuse(store, Refusal::EmailNotVerified, at, None).await),
    }
}

/// The Roles the groups give, resolved to the organization's Roles (a Role deleted
/// since the mapping was saved gives nothing; with none left, the built-in Member).
async fn roles_for(
    store: &Store,
    (config, org): (&IdpConfigRow, &OrgRecord),
    groups: &[String],
) -> ServiceResult<MemberRoles> {
    let names = rules::mapped_roles(&config.role_mappings, groups, &config.default_role);
    let by_name: BTreeMap<String, String> = store.role_names(&org.id).await?.into_iter().collect();
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
    store: &Store,
    settings: &Config,
    keys: &TokenKeys,
    (config, org): (&IdpConfigRow, &OrgRecord),
    account: &AccountRecord,
    (identity, groups): (&IdentityRow, &[String]),
    link: Option<&str>,
    now: DateTime<Utc>,
) -> ServiceResult<Session> {
    let roles = roles_for(store, (config, org), groups).await?;
    let (family, refresh) = accounts::new_family(settings, account, Some(&org.id), now)?;
    let login = accounts::user_event(
        "user.login",
        (&account.user_id, Some(&account.email)),
        &account.user_id,
        json!({"method": "sso", "orgId": org.id, "idpId": config.id, "issuer": identity.issuer,
               "linked": link.is_some()}),
        "success",
    );
    unit_of_work!(store, |tx| {
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
            if held.is_none()
                && crate::services::members::seat_taken(tx.seats(&org.id).await?).is_err()
            {
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
    store.facts_changed();
    let (access, expires_in) = accounts::tokens_for(
        store,
        settings,
        keys,
        account,
        &family.id,
        Some(&org.id),
        now,
    )
    .await?;
    Ok(Session {
        access_token: access,
        refresh_token: refresh,
        token_type: "Bearer".into(),
        expires_in,
    })
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
    let pending = state.infra.store.pending_link(&hash, now).await?;
    let Some(pending) = pending else {
        return Err(refuse(
            &state.infra.store,
            Refusal::StateInvalid,
            (None, client),
            None,
        )
        .await);
    };
    let account = state
        .infra
        .store
        .account(&pending.identity.user_id)
        .await?
        .filter(|a| a.deleted_at.is_none());
    let key = format!(
        "account:{}",
        account.as_ref().map_or("", |a| a.email.as_str())
    );
    accounts::throttle(&state.infra.store, &[key.as_str()], now).await?;
    let matched =
        accounts::password_matches(&state.infra.passwords, account.as_ref(), password).await?;
    let Some(account) = account.filter(|_| matched) else {
        let event = accounts::user_event(
            "user.login.failed",
            ("anonymous", None),
            "unknown",
            json!({"method": "sso-link", "reason": "invalid credentials"}),
            "failure",
        );
        accounts::record_failure(&state.infra.store, event).await?;
        return Err(accounts::SignInRefusal::InvalidCredentials.into());
    };
    accounts::refund(&state.infra.store, &[key.as_str()]).await?;
    let config = state
        .infra
        .store
        .idp_config(&pending.identity.config_id)
        .await?
        .ok_or(ServiceError::NotFound(
            "identity-provider configuration".into(),
        ))?;
    let org = state
        .infra
        .store
        .organization(&config.org_id)
        .await?
        .ok_or(ServiceError::NotFound("organization".into()))?;
    signed_in(
        &state.infra.store,
        &state.config,
        &state.infra.keys,
        (&config, &org),
        &account,
        (&pending.identity, &pending.groups),
        Some(&hash),
        now,
    )
    .await
}
