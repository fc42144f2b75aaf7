//! The middle floor: the workflows behind the API.
//!
//! A service function takes what a handler parsed and authorized (the caller, the
//! organization granted, the request's values), does the work over the [`Store`] and
//! the pure crates (which decide), and answers a [`ServiceError`], which knows nothing
//! of HTTP; `error.rs` maps it to the envelope. Handlers call one service function;
//! storage holds SQL only.
//!
//! [`Store`]: crate::storage::Store

pub mod access;
pub mod account_mail;
pub mod accounts;
pub mod admin;
pub mod ai_settings;
pub mod alerts;
pub mod announcements;
pub mod audit;
pub mod billing;
pub mod builds;
pub mod catalog;
pub mod checks;
pub mod console;
pub mod context;
pub mod conversations;
pub mod credentials;
pub mod dashboards;
pub mod delivery;
pub mod entitlement;
pub mod exemptions;
pub mod exports;
pub mod generation;
pub mod images;
pub mod invitations;
pub mod keys;
pub mod members;
pub mod notifications;
pub mod operations;
pub mod organizations;
pub mod pipelines;
pub mod plugins;
pub mod policies;
pub mod posture;
pub mod preferences;
pub mod quotas;
pub mod reevaluation;
pub mod reports;
pub mod rules;
pub mod scans;
pub mod schedules;
pub mod sso;
pub mod templates;

use compliance_core::ExemptionRefusal;

use crate::storage::StoreError;

/// Why a workflow did not complete.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A value of the request is not acceptable; names the field.
    #[error("{field}: {message}")]
    Invalid {
        /// The request's field, as the API spells it.
        field: &'static str,
        /// Why.
        message: String,
    },
    /// The thing asked for does not exist in the organization (a service's lookup,
    /// or a row storage did not find).
    #[error("{0} not found")]
    NotFound(std::borrow::Cow<'static, str>),
    /// The request contradicts what is stored (a name taken, a state moved on; a
    /// write storage refused for it).
    #[error("{0}")]
    Conflict(String),
    /// What was asked for existed, and is gone for good (410).
    #[error("{0}")]
    Gone(String),
    /// The caller may not do this here (beyond the permission the gate checked).
    #[error("{0}")]
    Forbidden(&'static str),
    /// Rules that compliance-core refuses, every problem with its field.
    #[error(transparent)]
    Rules(#[from] compliance_core::Error),
    /// An exemption cannot take the action asked (compliance-core decided).
    #[error(transparent)]
    Exemption(#[from] ExemptionRefusal),
    /// A cron expression that does not parse (names the field at fault).
    #[error(transparent)]
    Cron(#[from] compliance_core::CronError),
    /// A document over an attribute limit.
    #[error(transparent)]
    Limit(compliance_core::LimitExceeded),
    /// A request that cannot be read (not UTF-8, not the expected JSON).
    #[error("{0}")]
    Malformed(String),
    /// The check could not be made in time, or at all: fail closed.
    #[error("the compliance rules could not be loaded in time")]
    Unavailable,
    /// The organization's rules block the entity (an error or critical violation).
    #[error("the compliance rules block it")]
    Blocked(Box<compliance_core::Evaluation>),
    /// Another server's compliance check blocks the entity: its details
    /// (`violations`), as it answered them.
    #[error("the compliance rules block it")]
    Violations(serde_json::Value),
    /// The organization's pool has no room for it.
    #[error("quota exceeded: {dimension}")]
    Quota {
        /// `plugins` or `pipelines`.
        dimension: &'static str,
        /// The limit, the usage and what was asked.
        refusal: crate::storage::QuotaRefusal,
    },
    /// The account's tier (with its bundles and grants) does not include a feature
    /// the operation needs.
    #[error("the `{}` feature is not in the {} tier (nor in the account's bundles)", .feature.name(), .tier.name())]
    FeatureNotAvailable {
        /// The feature.
        feature: entitlements::Feature,
        /// The account's tier.
        tier: entitlements::Tier,
    },
    /// A bundle change the entitlements crate refused.
    #[error(transparent)]
    Purchase(#[from] entitlements::PurchaseError),
    /// The billing portal is not configured: there is nothing to reach (404).
    #[error("{0}")]
    NotConfigured(String),
    /// Sign-in refused (credentials, throttling, a token no longer good).
    #[error(transparent)]
    SignIn(accounts::SignInRefusal),
    /// Too many requests of one kind in a window (429).
    #[error("at most {limit} {what} a minute")]
    RateLimited {
        /// What is counted.
        what: &'static str,
        /// The limit.
        limit: u64,
        /// When to try again.
        retry_after_seconds: u64,
    },
    /// The image registry is not configured, refused, or failed.
    #[error(transparent)]
    Registry(crate::outbound::registry::RegistryError),
    /// An AI generation that gave no usable answer (the provider failed, the
    /// repository could not be read, or every attempt had problems).
    #[error(transparent)]
    Generation(#[from] crate::services::generation::GenerationError),
    /// tenancy refused (an escalation, a built-in Role, the last super-admin...).
    #[error(transparent)]
    Tenancy(#[from] tenancy::TenancyError),
    /// Stored data breaks an invariant the server keeps (a built-in Role missing).
    #[error("{0}")]
    Broken(String),
    /// Storage refused a value.
    #[error("{0}")]
    StoreRefused(String),
    /// A secret of the organization cannot be sealed or opened: its key is orphaned
    /// or its provider refused (the failure's class). Fails closed (503).
    #[error("the organization's key cannot be used now ({0})")]
    KeyUnavailable(String),
    /// The organization's tier does not include it (customer-managed keys:
    /// Enterprise, or the system organization).
    #[error("`{what}` needs the Enterprise tier; the organization is on {}", .tier.name())]
    TierRequired {
        /// What needs it.
        what: &'static str,
        /// The organization's tier.
        tier: entitlements::Tier,
    },
    /// The database cannot be reached or answered too late.
    #[error("the database is unavailable: {0}")]
    StoreUnavailable(String),
    /// The database kept rolling the unit of work back for conflicts with others
    /// (its runner's attempts are spent): 503, to be sent again.
    #[error("the database rolled the transaction back for a conflict: {0}")]
    Contended(String),
    /// The process is stopping (SIGTERM): it takes nothing new.
    #[error("the server is stopping")]
    Stopping,
    /// A sign-in through an identity provider refused (401 with the refusal's
    /// code); a link waiting for the account's password carries its token.
    #[error("{}", .refusal.message())]
    SsoRefused {
        /// Why.
        refusal: tenancy::sso::Refusal,
        /// The token to link the account with (with `LinkRequired`).
        link_token: Option<String>,
    },
    /// The organization requires its single sign-on and the credential did not come
    /// through it (403 `SSO_REQUIRED`).
    #[error("the organization `{org_name}` requires single sign-on: sign in through GET /api/auth/sso/start?org={org_name}")]
    SsoRequired {
        /// The root organization's name.
        org_name: String,
    },
}

/// What a storage failure means to a caller: the services speak no storage type to
/// the floor above them. A row that does not decode stays an error (`Broken`).
impl From<StoreError> for ServiceError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Conflict(what) => ServiceError::Conflict(what),
            StoreError::NotFound(what) => ServiceError::NotFound(what.into()),
            StoreError::Invalid(why) => ServiceError::StoreRefused(why),
            StoreError::Unavailable(cause) => ServiceError::StoreUnavailable(cause),
            StoreError::Contended(cause) => ServiceError::Contended(cause),
            StoreError::Other(cause) | StoreError::Corrupt(cause) => ServiceError::Broken(cause),
        }
    }
}

impl crate::storage::Contention for ServiceError {
    fn contended(&self) -> bool {
        matches!(self, ServiceError::Contended(_))
    }
}

impl ServiceError {
    pub(crate) fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        ServiceError::Invalid {
            field,
            message: message.into(),
        }
    }
}

/// The result of a service function.
pub type ServiceResult<T> = Result<T, ServiceError>;
