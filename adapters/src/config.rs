//! The server's configuration: every variable the documents name, read once at start
//! into one typed value with the documents' defaults. A bad value stops the start
//! with a message that names the variable (every problem at once).
//!
//! One section per file under `config/`, each with its one reader (`jwt`, `http`,
//! `compliance`, `checkpoints`, `registry`, `billing`, `database`, `keys`, `ai`,
//! `signin`, `notifications`, `messages`, `builds`, `reevaluation`, `alerts`); this
//! file holds the few top-level variables and puts the sections together. A secret
//! is a [`Secret`]: its `Debug` and `Display` print `***`.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use entitlements::Catalog;
use tenancy::BootstrapList;

mod ai;
mod alerts;
mod billing;
mod builds;
mod checkpoints;
mod compliance;
mod database;
pub use database::split_hosts;
mod http;
mod jwt;
mod keys;
mod messages;
mod notifications;
mod reevaluation;
mod registry;
mod signin;
pub use ai::{AiSettings, ProviderSettings};
pub use alerts::AlertSettings;
pub use billing::BillingSettings;
pub use builds::BuildSettings;
pub use checkpoints::CheckpointSettings;
pub use compliance::ComplianceSettings;
pub use database::ReportingSettings;
pub use http::HttpSettings;
pub use jwt::{JwtConfig, DEV_JWT_SECRET, MAX_TOKEN_LIFETIME};
pub use keys::{AwsCredentials, KeySettings, Secret};
pub use messages::MessageSettings;
pub use notifications::NotificationSettings;
pub use reevaluation::ReevaluationSettings;
pub use registry::RegistrySettings;
pub use signin::SignInSettings;

/// A variable that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}: {message}")]
pub struct ConfigError {
    /// The variable at fault.
    pub variable: String,
    /// What is wrong.
    pub message: String,
}

/// Where the other services are (document 1, "Other settings"): of the hosts the
/// document names, only the compliance service's is one this server calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceHosts {
    /// Where the inventory's compliance checks go: `http://<COMPLIANCE_SERVICE_HOST>:
    /// <COMPLIANCE_SERVICE_PORT>` when `COMPLIANCE_SERVICE_HOST` is set, through
    /// `ComplianceClient` with a service token signed by `JWT_SECRET`; `None` (unset)
    /// checks in process.
    pub remote_compliance: Option<String>,
}

/// Everything the server reads from its environment.
#[derive(Debug, Clone)]
pub struct Config {
    /// `DATABASE_URL`: `postgres://...` or `sqlite://...` (default `sqlite://compliance.db`).
    pub database_url: Secret,
    /// Whether `DATABASE_URL` was left unset.
    pub database_is_default: bool,
    /// `DATABASE_DIRECT_URL`: when `DATABASE_URL` names a pooler in transaction
    /// mode, the database itself, for what needs a session (migrations, LISTEN).
    pub database_direct_url: Option<Secret>,
    /// The standby the reports read.
    pub reporting: ReportingSettings,
    /// Token settings.
    pub jwt: JwtConfig,
    /// `BOOTSTRAP_SUPERADMIN_EMAILS`.
    pub bootstrap: BootstrapList,
    /// HTTP settings.
    pub http: HttpSettings,
    /// Compliance limits.
    pub compliance: ComplianceSettings,
    /// `AUDIT_RETENTION_DAYS` (90).
    pub audit_retention_days: u32,
    /// `REPORT_RETENTION_DAYS` (180): reported executions, their events and the
    /// plugin build attempts older than this are pruned daily.
    pub report_retention_days: u32,
    /// `ORG_RESTORE_DAYS` (30): how long a deleted organization can be restored;
    /// after it, the retention worker purges its data (its audit chain stays, for
    /// `AUDIT_RETENTION_DAYS`).
    pub org_restore_days: u32,
    /// Signed checkpoints; `None` when `AUDIT_CHECKPOINT_KEY` is unset (they are off).
    pub checkpoints: Option<CheckpointSettings>,
    /// Tiers and bundles after `QUOTA_TIER_*`, `BILLING_PLAN_*`, `BILLING_BUNDLE*`.
    pub catalog: Catalog,
    /// Billing: the provider, the portal, the billing service's name.
    pub billing: BillingSettings,
    /// Other services.
    pub hosts: ServiceHosts,
    /// Plugin image builds.
    pub builds: BuildSettings,
    /// The re-evaluation worker.
    pub reevaluation: ReevaluationSettings,
    /// Alert evaluation and delivery.
    pub alerts: AlertSettings,
    /// Notification delivery.
    pub notifications: NotificationSettings,
    /// Messages: limits and retention.
    pub messages: MessageSettings,
    /// The image registry; `None` when `REGISTRY_URL` is unset (the image routes
    /// answer 503 `REGISTRY_NOT_CONFIGURED`).
    pub registry: Option<RegistrySettings>,
    /// AI generation: the providers (`AI_*`) and the limits of a generation.
    pub ai: AiSettings,
    /// Keys: the platform key, AWS KMS, the customer keys' checks.
    pub keys: KeySettings,
    /// `PLATFORM_IDENTIFIER` and `PLATFORM_PASSWORD`, for provisioning scripts.
    pub platform_credentials: Option<(String, Secret)>,
    /// Sign-in: links, client addresses, session lifetimes.
    pub signin: SignInSettings,
    /// Things worth a warning at start (development secret, clamped values).
    pub warnings: Vec<String>,
}

/// The variables as one section reads them: every problem and warning is kept,
/// so that all of them are reported at once.
struct Reader<'a> {
    vars: &'a BTreeMap<String, String>,
    errors: Vec<ConfigError>,
    warnings: Vec<String>,
}

impl Reader<'_> {
    fn raw(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str).map(str::trim)
    }

    /// A variable set to something, else `None`.
    fn optional(&self, name: &str) -> Option<String> {
        self.raw(name).filter(|v| !v.is_empty()).map(str::to_owned)
    }

    /// Something worth saying at start.
    fn warn(&mut self, message: impl Into<String>) {
        self.warnings.push(message.into());
    }

    fn string(&self, name: &str, default: &str) -> String {
        self.raw(name)
            .filter(|v| !v.is_empty())
            .unwrap_or(default)
            .to_owned()
    }

    fn parse<T: FromStr>(&mut self, name: &str, default: T, what: &str) -> T {
        match self.raw(name) {
            None | Some("") => default,
            Some(text) => match text.parse() {
                Ok(value) => value,
                Err(_) => {
                    self.fail(name, format!("`{text}` is not {what}"));
                    default
                }
            },
        }
    }

    fn positive(&mut self, name: &str, default: u64) -> u64 {
        let value = self.parse(name, default, "a positive integer");
        if value == 0 {
            self.fail(name, "must be at least 1".to_owned());
            return default;
        }
        value
    }

    fn millis(&mut self, name: &str, default: u64) -> Duration {
        Duration::from_millis(self.positive(name, default))
    }

    fn flag(&mut self, name: &str) -> bool {
        match self.raw(name).map(str::to_ascii_lowercase).as_deref() {
            None | Some("") | Some("false") | Some("0") => false,
            Some("true") | Some("1") => true,
            Some(other) => {
                self.fail(name, format!("`{other}` is not true or false"));
                false
            }
        }
    }

    fn fail(&mut self, name: &str, message: String) {
        self.errors.push(ConfigError {
            variable: name.to_owned(),
            message,
        });
    }
}

/// Parses a duration: `7200`, `7200s`, `30m`, `2h`, `1d`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let seconds = match unit {
        "" | "s" => n,
        "m" => n.checked_mul(60)?,
        "h" => n.checked_mul(3600)?,
        "d" => n.checked_mul(86_400)?,
        _ => return None,
    };
    Some(Duration::from_secs(seconds))
}

impl Config {
    /// The URL of a session of the database itself: `DATABASE_DIRECT_URL` behind a
    /// pooler, else `DATABASE_URL`.
    pub fn session_database_url(&self) -> &str {
        self.database_direct_url
            .as_ref()
            .unwrap_or(&self.database_url)
            .expose()
    }

    /// Reads the process environment.
    pub fn from_env() -> Result<Config, Vec<ConfigError>> {
        Config::from_vars(std::env::vars())
    }

    /// Reads configuration from name/value pairs; every problem is reported.
    pub fn from_vars(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, Vec<ConfigError>> {
        let vars: BTreeMap<String, String> = vars.into_iter().collect();
        let mut r = Reader {
            vars: &vars,
            errors: Vec::new(),
            warnings: Vec::new(),
        };

        let database_is_default = r.raw("DATABASE_URL").is_none_or(str::is_empty);
        let database_url = r.string("DATABASE_URL", "sqlite://compliance.db");
        if !(database_url.starts_with("postgres://")
            || database_url.starts_with("postgresql://")
            || database_url.starts_with("sqlite:"))
        {
            r.fail(
                "DATABASE_URL",
                "expected a postgres:// or sqlite:// URL".to_owned(),
            );
        }
        let jwt = jwt::jwt_settings(&mut r);
        let http = http::http_settings(&mut r);
        let compliance = compliance::compliance_settings(&mut r);
        let audit_retention_days = r
            .positive("AUDIT_RETENTION_DAYS", 90)
            .try_into()
            .unwrap_or(u32::MAX);
        let report_retention_days = r
            .positive("REPORT_RETENTION_DAYS", 180)
            .try_into()
            .unwrap_or(u32::MAX);
        let org_restore_days = r
            .positive("ORG_RESTORE_DAYS", 30)
            .try_into()
            .unwrap_or(u32::MAX);
        let checkpoints = checkpoints::checkpoint_settings(&mut r);
        let remote_compliance = r
            .optional("COMPLIANCE_SERVICE_HOST")
            .map(|host| format!("http://{host}:{}", http.port));
        let hosts = ServiceHosts { remote_compliance };
        let bootstrap = BootstrapList::parse(&r.string("BOOTSTRAP_SUPERADMIN_EMAILS", ""));
        if bootstrap.is_empty() {
            r.warn(
                "BOOTSTRAP_SUPERADMIN_EMAILS is empty: nobody can create the system organization"
                    .to_owned(),
            );
        }
        let platform_credentials = match (r.raw("PLATFORM_IDENTIFIER"), r.raw("PLATFORM_PASSWORD"))
        {
            (Some(id), Some(password)) if !id.is_empty() => {
                Some((id.to_owned(), Secret::new(password)))
            }
            _ => None,
        };
        let messages = messages::message_settings(&mut r);
        let registry = registry::registry_settings(&mut r);
        let ai = ai::ai_settings(&mut r);
        let keys = keys::key_settings(&mut r);
        let catalog = match Catalog::from_overrides(vars.iter()) {
            Ok(catalog) => catalog,
            Err(errors) => {
                r.errors.extend(errors.into_iter().map(|e| ConfigError {
                    variable: e.variable,
                    message: e.message,
                }));
                Catalog::default()
            }
        };
        let billing = billing::billing_settings(&mut r);
        let builds = builds::build_settings(&mut r);
        let reevaluation = reevaluation::reevaluation_settings(&mut r);
        let reporting = database::reporting_settings(&mut r);
        let database_direct_url = database::direct_url(&mut r, &database_url);
        let alerts = alerts::alert_settings(&mut r);
        let notifications = notifications::notification_settings(&mut r);
        let signin = signin::signin_settings(&mut r, http.port, notifications.smtp_url.is_some());
        if !signin.verification_required {
            r.warn(
                "EMAIL_VERIFICATION_REQUIRED is off (no SMTP_URL): accounts sign in before their e-mail is verified"
                    .to_owned(),
            );
        }
        if !r.errors.is_empty() {
            return Err(r.errors);
        }
        Ok(Config {
            database_url: Secret::new(database_url),
            database_is_default,
            database_direct_url,
            reporting,
            jwt,
            bootstrap,
            http,
            compliance,
            audit_retention_days,
            report_retention_days,
            org_restore_days,
            checkpoints,
            catalog,
            billing,
            hosts,
            builds,
            reevaluation,
            alerts,
            notifications,
            messages,
            registry,
            ai,
            keys,
            platform_credentials,
            signin,
            warnings: r.warnings,
        })
    }

    /// The compliance-core limits this configuration sets.
    pub fn attribute_limits(&self) -> compliance_core::AttributeLimits {
        compliance_core::AttributeLimits {
            max_depth: self.compliance.max_attribute_depth,
            max_keys: self.compliance.max_attribute_keys,
        }
    }
}
