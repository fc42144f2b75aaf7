//! Single sign-on: the sign-in (`/api/auth/sso/start`, `/callback`, `/link`), an
//! organization's identity-provider configurations (its admins under
//! `/api/organization/{id}/idp`, super-admins under `/api/admin/organizations/{id}/idp`),
//! its claimed domains, and its enforcement with break-glass accounts. No answer
//! ever holds a client secret.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tenancy::sso::RoleMapping;

use crate::config::Config;
use crate::http::error::ApiError;
use crate::http::extract::{Json, Query};
use crate::http::gate::Granted;
use crate::http::response::{Answer, Deleted};
use crate::http::signin::{client_address, Peer};
use crate::http::state::{AppState, Caller};
use crate::outbound::oidc::SsoClients;
use crate::services::accounts::Session;
use crate::services::sso::{
    self, Callback, Changer, ConfigInput, ConfigView, DomainRow, ReturnTo, Route, SsoPolicyRow,
};
mod domains;
pub use domains::*;
mod enforcement;
pub use enforcement::*;

/// The cookie that binds a sign-in's callback to the browser that started it.
pub const BROWSER_COOKIE: &str = "compliance_sso";

/// Where a sign-in starts: an organization's name or an e-mail address.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct StartQuery {
    /// The root organization's name.
    org: Option<String>,
    /// An e-mail address whose verified domain names the organization.
    email: Option<String>,
}

/// What the identity provider sends back.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

/// The browser's binding cookie's value.
pub(crate) fn browser_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == BROWSER_COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// The start of a sign-in through the provider, as a redirect with the binding
/// cookie (ten minutes, HttpOnly, SameSite=Lax so that the provider's redirect back
/// carries it).
async fn start_response(
    state: &AppState,
    config: &Config,
    sso: &SsoClients,
    route: Route,
    return_to: ReturnTo,
) -> Result<Response, ApiError> {
    let store = &state.infra.store;
    let started = sso::start(store, config, sso, route, return_to, Utc::now()).await?;
    let cookie = binding_cookie(config, &started.browser)?;
    let mut response = StatusCode::FOUND.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::LOCATION,
        HeaderValue::from_str(&started.location)
            .map_err(|_| ApiError::internal("the provider's address is not a header value"))?,
    );
    headers.insert(header::SET_COOKIE, cookie);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// The `Set-Cookie` value that binds a started sign-in to the browser (ten minutes,
/// HttpOnly, SameSite=Lax so that the provider's redirect back carries it; Secure
/// when `PUBLIC_URL` is https).
pub(crate) fn binding_cookie(config: &Config, browser: &str) -> Result<HeaderValue, ApiError> {
    let secure = if config.signin.public_url.starts_with("https://") {
        "; Secure"
    } else {
        ""
    };
    HeaderValue::from_str(&format!(
        "{BROWSER_COOKIE}={browser}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}{secure}",
        tenancy::sso::ATTEMPT_LIFETIME_SECONDS
    ))
    .map_err(|_| ApiError::internal("the binding cookie is not a header value"))
}

/// The route a start query names.
pub(crate) fn route_of(org: Option<String>, email: Option<String>) -> Result<Route, ApiError> {
    match (org, email) {
        (Some(org), None) if !org.trim().is_empty() && org.len() <= 200 => Ok(Route::Org(org)),
        (None, Some(email)) if !email.trim().is_empty() && email.len() <= 254 => {
            Ok(Route::Email(email))
        }
        _ => Err(ApiError::validation(
            "give exactly one of `org` (the organization's name) or `email`",
        )
        .with_details(serde_json::json!({"field": "org"}))),
    }
}

/// `GET /api/auth/sso/start`.
pub(crate) async fn start(
    State(state): State<AppState>,
    Query(query): Query<StartQuery>,
) -> Result<Response, ApiError> {
    let route = route_of(query.org, query.email)?;
    start_response(
        &state,
        &state.config,
        &state.outbound.sso,
        route,
        ReturnTo::Api,
    )
    .await
}

/// The callback's query as the service takes it.
pub(crate) fn callback_of(query: CallbackQuery) -> Callback {
    Callback {
        code: query.code,
        state: query.state,
        error: query.error,
    }
}

/// `GET /api/auth/sso/callback`.
pub(crate) async fn callback(
    State(state): State<AppState>,
    Peer(peer): Peer,
    headers: HeaderMap,
    Query(query): Query<CallbackQuery>,
) -> Result<Answer<Session>, ApiError> {
    let client = client_address(&state.config, &headers, peer);
    let browser = browser_cookie(&headers);
    let finished = sso::finish(
        &state,
        callback_of(query),
        (browser.as_deref(), client),
        ReturnTo::Api,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(finished.session))
}

/// The link of an existing account: the token the callback answered and the
/// account's password.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct LinkAccount {
    #[schema(max_length = 200)]
    link_token: String,
    #[schema(max_length = 1024, write_only)]
    password: String,
}

impl std::fmt::Debug for LinkAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkAccount").finish_non_exhaustive()
    }
}

/// `POST /api/auth/sso/link`.
pub(crate) async fn link(
    State(state): State<AppState>,
    Peer(peer): Peer,
    headers: HeaderMap,
    Json(body): Json<LinkAccount>,
) -> Result<Answer<Session>, ApiError> {
    if body.link_token.len() > 200 || body.password.len() > 1024 {
        return Err(ApiError::validation(
            "the link token or the password is too long",
        ));
    }
    let client = client_address(&state.config, &headers, peer);
    let session = sso::link(
        &state,
        (&body.link_token, body.password),
        client,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(session))
}

/// An identity-provider configuration to save.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PutIdentityProvider {
    /// Its name in the organization.
    #[schema(min_length = 1, max_length = 100)]
    name: String,
    /// The issuer, exactly as its discovery document names it (a tenant's own).
    #[schema(max_length = 2048)]
    issuer: String,
    #[schema(min_length = 1, max_length = 255)]
    client_id: String,
    /// Required to create; left out on a replace, the stored one is kept. Stored
    /// sealed, never answered.
    #[schema(max_length = 1024, write_only)]
    client_secret: Option<String>,
    /// Scopes beside `openid` (default `email profile`).
    #[serde(default = "default_scopes")]
    scopes: Vec<String>,
    /// The ID token's claim that lists groups (default `groups`).
    #[serde(default = "default_groups_claim")]
    groups_claim: String,
    /// Groups given Roles of the organization.
    #[serde(default)]
    role_mappings: Vec<RoleMapping>,
    /// The Role given when none of the person's groups is mapped (default `Member`).
    #[serde(default = "default_role")]
    default_role: String,
    /// The e-mail domains it serves (verified ones route and provision).
    #[serde(default)]
    domains: Vec<String>,
    /// Whether accounts are created at the first sign-in (default false).
    #[serde(default)]
    jit_provisioning: bool,
    /// Default true.
    #[serde(default = "yes")]
    enabled: bool,
    /// On a replace: the version read (a stale one is 409).
    version: Option<u32>,
}

impl std::fmt::Debug for PutIdentityProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PutIdentityProvider")
            .field("name", &self.name)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

fn default_scopes() -> Vec<String> {
    vec!["email".to_owned(), "profile".to_owned()]
}
fn default_groups_claim() -> String {
    "groups".to_owned()
}
fn default_role() -> String {
    "Member".to_owned()
}
fn yes() -> bool {
    true
}

/// An identity-provider configuration as answered (never its secret).
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdentityProvider {
    pub id: String,
    pub org_id: String,
    pub name: String,
    pub issuer: String,
    pub client_id: String,
    /// Always true: a secret is stored (it is never answered).
    pub has_client_secret: bool,
    pub scopes: Vec<String>,
    pub groups_claim: String,
    pub role_mappings: Vec<RoleMapping>,
    pub default_role: String,
    pub domains: Vec<String>,
    pub jit_provisioning: bool,
    /// As set.
    pub enabled: bool,
    /// Enabled and the `sso` feature active: a downgrade disables, never deletes.
    pub active: bool,
    pub version: u32,
    /// Where the provider must send people back (register both at the provider).
    pub redirect_uris: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

fn answer(config: &Config, view: ConfigView) -> IdentityProvider {
    let r = view.row;
    let public = &config.signin.public_url;
    IdentityProvider {
        id: r.id,
        org_id: r.org_id,
        name: r.name,
        issuer: r.issuer,
        client_id: r.client_id,
        has_client_secret: !r.client_secret.is_empty(),
        scopes: r.scopes,
        groups_claim: r.groups_claim,
        role_mappings: r.role_mappings,
        default_role: r.default_role,
        domains: r.domains,
        jit_provisioning: r.jit_provisioning,
        enabled: r.enabled,
        active: view.active,
        version: r.version,
        redirect_uris: vec![
            format!("{public}{}", sso::API_CALLBACK),
            format!("{public}{}", sso::CONSOLE_CALLBACK),
        ],
        created_at: r.created_at,
        updated_at: r.updated_at,
    }
}

fn input_of(body: PutIdentityProvider) -> ConfigInput {
    ConfigInput {
        name: body.name,
        issuer: body.issuer,
        client_id: body.client_id,
        client_secret: body.client_secret,
        scopes: body.scopes,
        groups_claim: body.groups_claim,
        role_mappings: body.role_mappings,
        default_role: body.default_role,
        domains: body.domains,
        jit_provisioning: body.jit_provisioning,
        enabled: body.enabled,
    }
}

async fn list_as(
    state: &AppState,
    config: &Config,
    granted: &Granted,
) -> Result<Answer<Vec<IdentityProvider>>, ApiError> {
    let store = &state.infra.store;
    let views = sso::configs(store, config, &granted.org).await?;
    Ok(Answer::ok(
        views.into_iter().map(|v| answer(config, v)).collect(),
    ))
}

async fn create_as(
    state: &AppState,
    (caller, changer): (&Caller, Changer),
    granted: &Granted,
    body: PutIdentityProvider,
) -> Result<Answer<IdentityProvider>, ApiError> {
    if body.version.is_some() {
        return Err(ApiError::validation("`version` is for a replace (PUT)"));
    }
    let view = sso::save_config(
        state,
        (caller, changer),
        &granted.org,
        input_of(body),
        None,
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(answer(&state.config, view)))
}

async fn remove_as(
    state: &AppState,
    changer: (&Caller, Changer),
    granted: &Granted,
    idp_id: String,
) -> Result<Answer<Deleted>, ApiError> {
    let store = &state.infra.store;
    sso::delete_config(store, changer, &granted.org, &idp_id).await?;
    Ok(Answer::ok(Deleted::new(idp_id)))
}

async fn replace_as(
    state: &AppState,
    (caller, changer): (&Caller, Changer),
    granted: &Granted,
    idp_id: &str,
    body: PutIdentityProvider,
) -> Result<Answer<IdentityProvider>, ApiError> {
    let Some(version) = body.version else {
        return Err(ApiError::validation("`version` (the one read) is required")
            .with_details(serde_json::json!({"field": "version"})));
    };
    let view = sso::save_config(
        state,
        (caller, changer),
        &granted.org,
        input_of(body),
        Some((idp_id, version)),
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(answer(&state.config, view)))
}

/// `GET /organization/{id}/idp`.
pub(crate) async fn list(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<Vec<IdentityProvider>>, ApiError> {
    list_as(&state, &state.config, &granted).await
}

/// `POST /organization/{id}/idp`.
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<PutIdentityProvider>,
) -> Result<Answer<IdentityProvider>, ApiError> {
    create_as(&state, (&caller, Changer::OrgAdmin), &granted, body).await
}

/// `PUT /organization/{id}/idp/{idpId}`.
pub(crate) async fn replace(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((_, idp_id)): Path<(String, String)>,
    Json(body): Json<PutIdentityProvider>,
) -> Result<Answer<IdentityProvider>, ApiError> {
    replace_as(
        &state,
        (&caller, Changer::OrgAdmin),
        &granted,
        &idp_id,
        body,
    )
    .await
}

/// `DELETE /organization/{id}/idp/{idpId}`.
pub(crate) async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((_, idp_id)): Path<(String, String)>,
) -> Result<Answer<Deleted>, ApiError> {
    remove_as(&state, (&caller, Changer::OrgAdmin), &granted, idp_id).await
}

/// `GET /admin/organizations/{id}/idp`.
pub(crate) async fn admin_list(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<Vec<IdentityProvider>>, ApiError> {
    list_as(&state, &state.config, &granted).await
}

/// `POST /admin/organizations/{id}/idp`.
pub(crate) async fn admin_create(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<PutIdentityProvider>,
) -> Result<Answer<IdentityProvider>, ApiError> {
    create_as(&state, (&caller, Changer::SuperAdmin), &granted, body).await
}

/// `PUT /admin/organizations/{id}/idp/{idpId}`.
pub(crate) async fn admin_replace(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((_, idp_id)): Path<(String, String)>,
    Json(body): Json<PutIdentityProvider>,
) -> Result<Answer<IdentityProvider>, ApiError> {
    replace_as(
        &state,
        (&caller, Changer::SuperAdmin),
        &granted,
        &idp_id,
        body,
    )
    .await
}

/// `DELETE /admin/organizations/{id}/idp/{idpId}`.
pub(crate) async fn admin_remove(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((_, idp_id)): Path<(String, String)>,
) -> Result<Answer<Deleted>, ApiError> {
    remove_as(&state, (&caller, Changer::SuperAdmin), &granted, idp_id).await
}
