//! The application context and the caller: what a service function is given.
//!
//! The HTTP floor builds a [`Caller`] (or a [`ServiceCaller`], an [`AnyCaller`]) from a
//! request (`http/state.rs`); workers and the CLI hold an [`AppState`] of their own.
//! Nothing here knows HTTP.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::audit::AuditCounters;
use crate::auth::TokenKeys;
use crate::config::Config;
use crate::cpu::CpuPool;
use crate::metrics::Metrics;
use crate::outbound::Outbound;
use crate::replica::ReplicaState;
use crate::storage::Store;

/// Everything a handler may use, shared: a clone (axum makes one per extractor and
/// layer of every request) is one reference count, not one per part.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Context>);

impl std::ops::Deref for AppState {
    type Target = Context;

    fn deref(&self) -> &Context {
        &self.0
    }
}

/// What an [`AppState`] holds, in parts: a service function takes the parts it uses,
/// each an argument (`store: &Store`, `config: &Config`, `kept: &KeptFacts`, …), and
/// the whole only for a workflow over four parts or more (the checks, sign-in).
#[derive(Debug)]
pub struct Context {
    /// Configuration, read once at start.
    pub config: Arc<Config>,
    /// The databases, the threads work runs on, the keys tokens are signed with, the
    /// metrics.
    pub infra: Infrastructure,
    /// What this replica keeps for itself (kept facts, allowance blocks, grouped
    /// writers, the message feed).
    pub replica: ReplicaState,
    /// The clients of other services.
    pub outbound: Outbound,
}

/// The infrastructure part of an [`AppState`].
#[derive(Debug)]
pub struct Infrastructure {
    /// The database.
    pub store: Store,
    /// The streaming standby the reports read (`REPORTING_DATABASE_URL`).
    pub reporting: Option<Store>,
    /// Token keys.
    pub keys: Arc<TokenKeys>,
    /// Request metrics.
    pub metrics: Arc<Metrics>,
    /// The audit counters shown on `/metrics`.
    pub audit_counters: Arc<AuditCounters>,
    /// The threads that parse and evaluate attribute documents, off the runtime.
    pub cpu: Arc<CpuPool>,
    /// The threads that hash and check passwords (argon2id, tens of milliseconds
    /// each), apart, so that a wave of sign-ins never delays a validation.
    pub passwords: Arc<CpuPool>,
}

impl AppState {
    /// The state for a configuration and a store; `audit_counters` are the emitter's
    /// counters shown on `/metrics`.
    pub fn new(config: Config, store: Store, audit_counters: Arc<AuditCounters>) -> Self {
        let keys = TokenKeys::from_config(&config.jwt);
        // The address was checked with the configuration; a client that cannot be
        // built leaves the routes answering 503, and says so.
        let registry = config.registry.as_ref().and_then(|settings| {
            crate::outbound::registry::RegistryClient::new(settings)
                .map_err(|why| tracing::error!(%why, "REGISTRY_URL: the registry client cannot be built"))
                .ok()
                .map(Arc::new)
        });
        let outbound = Outbound {
            registry,
            ai: crate::outbound::ai::AiClient::new(),
            keyring: Arc::new(crate::keys::Keyring::default()),
            sso: Arc::new(crate::outbound::oidc::SsoClients::new(
                config.signin.sso_allow_loopback_http,
                config.signin.sso_jwks_min_refresh,
            )),
        };
        AppState(Arc::new(Context {
            config: Arc::new(config),
            infra: Infrastructure {
                store,
                reporting: None,
                keys: Arc::new(keys),
                metrics: Arc::new(Metrics::default()),
                audit_counters,
                cpu: Arc::new(CpuPool::per_core()),
                passwords: Arc::new(CpuPool::new(
                    std::thread::available_parallelism().map_or(2, usize::from),
                    64,
                )),
            },
            replica: ReplicaState::default(),
            outbound,
        }))
    }

    /// The state with the reports reading `standby` (called once, right after
    /// [`AppState::new`], before the state is shared).
    pub fn with_reporting_standby(mut self, standby: Store) -> AppState {
        match Arc::get_mut(&mut self.0) {
            Some(context) => context.infra.reporting = Some(standby),
            None => tracing::error!(
                "the reporting standby was given to a shared state: reports read the primary"
            ),
        }
        self
    }

    /// The process starts stopping: `/ready` fails from now on, so that load
    /// balancers send nothing new while requests in flight finish.
    pub fn start_draining(&self) {
        self.replica.start_draining();
    }

    /// Whether the process is stopping.
    pub fn is_draining(&self) -> bool {
        self.replica.is_draining()
    }

    /// Whether this process sees the user for the first time (so that first sight
    /// writes once).
    pub(crate) fn first_sight(&self, user_id: &str) -> bool {
        self.replica.first_sight(user_id)
    }
}

/// An authenticated user (not a service).
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token subject.
    pub user_id: String,
    /// The token's e-mail.
    pub email: Option<String>,
    /// When the user last passed step-up, from a valid `X-Step-Up-Token`.
    pub stepped_up_at: Option<DateTime<Utc>>,
    /// The `x-org-id` header.
    pub org_header: Option<String>,
    /// Set when the credential is a personal access token rather than a session.
    pub personal_token: Option<TokenUse>,
    /// The sign-in's refresh family the access token was issued in (`sid`): a
    /// step-up proof is bound to it.
    pub session: Option<String>,
    /// The root organization whose single sign-on issued the session (or the
    /// session the personal access token was made in), if one did.
    pub sso_org: Option<String>,
    /// Set when a super-admin sees as this user (an impersonation's token).
    pub impersonation: Option<Box<Impersonating>>,
}

/// An impersonation a request is made under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Impersonating {
    /// The impersonation's id.
    pub id: String,
    /// The super-admin.
    pub admin_id: String,
    /// Reads only.
    pub read_only: bool,
}

/// A request made with a personal access token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUse {
    /// The token's id.
    pub id: String,
    /// The organization and permissions it is bound to, if any.
    pub scope: Option<tenancy::TokenScope>,
    /// The root organization whose single sign-on issued the session it was made in.
    pub sso_org: Option<String>,
}

impl Caller {
    /// Whether the credential is a personal access token bound to one organization
    /// (it never acts as a super-admin).
    pub fn bound(&self) -> bool {
        self.personal_token
            .as_ref()
            .is_some_and(|used| used.scope.is_some())
    }

    /// The tenancy crate's view of the caller.
    pub fn principal(&self) -> tenancy::Principal {
        tenancy::Principal {
            user_id: self.user_id.clone(),
            // Super-admin is the stored flag only; the gate (or the route) reads it.
            super_admin: false,
            stepped_up_at: self.stepped_up_at,
        }
    }
}

/// An authenticated service (a token with a `service` claim).
#[derive(Debug, Clone)]
pub struct ServiceCaller {
    /// The calling service's name.
    pub service: String,
}

/// A user or a service: the validation endpoints take either.
#[derive(Debug, Clone)]
pub enum AnyCaller {
    /// A user.
    User(Caller),
    /// A service, acting in the `x-org-id` organization.
    Service {
        /// The service's name.
        service: String,
        /// The `x-org-id` header.
        org_header: Option<String>,
    },
}

/// The audit event of an action `caller` is about to complete: the one place the
/// services turn a caller and what they do into an audit event. Services hand it to
/// the storage call that makes the change, which writes it to the outbox in the same
/// transaction.
pub fn event(
    caller: &Caller,
    action: &str,
    org_id: &str,
    target_type: &str,
    target_id: &str,
    details: serde_json::Value,
) -> audit_chain::AuditEvent {
    event_on(
        caller,
        action,
        (org_id, None),
        (target_type, target_id),
        details,
    )
}

/// [`event`] for an action on another organization (admin.* actions): the event is
/// chained under `affected`, so that organization's admins see it.
pub fn event_on(
    caller: &Caller,
    action: &str,
    (org_id, affected): (&str, Option<&str>),
    (target_type, target_id): (&str, &str),
    details: serde_json::Value,
) -> audit_chain::AuditEvent {
    crate::audit::Action {
        action,
        actor_id: &caller.user_id,
        actor_email: caller.email.as_deref(),
        org_id,
        affected_org_id: affected,
        target_type,
        target_id,
        details: with_impersonation(caller, details),
        outcome: "success",
    }
    .into_event()
}

/// `details` with, under an impersonation, who acted for the user:
/// `impersonation: {id, adminId}` (the event's actor stays the user).
pub fn with_impersonation(caller: &Caller, details: serde_json::Value) -> serde_json::Value {
    let Some(imp) = &caller.impersonation else {
        return details;
    };
    let marker = serde_json::json!({"id": imp.id, "adminId": imp.admin_id});
    match details {
        serde_json::Value::Object(mut map) => {
            map.insert("impersonation".to_owned(), marker);
            serde_json::Value::Object(map)
        }
        serde_json::Value::Null => serde_json::json!({"impersonation": marker}),
        other => serde_json::json!({"impersonation": marker, "value": other}),
    }
}
