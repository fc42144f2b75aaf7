//! The server's configuration: every variable the documents name, read once at start
//! into one typed value with the documents' defaults. A bad value stops the start
//! with a message that names the variable.
//!
//! One file on purpose (over 600 lines): every variable is read here and nowhere
//! else, so the list can be held against the documents' in one read.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use entitlements::{Catalog, Tier};
use tenancy::BootstrapList;

mod ai;
mod alerts;
mod builds;
mod database;
mod keys;
mod messages;
mod notifications;
mod reevaluation;
mod signin;
pub use ai::{AiSettings, ProviderSettings};
pub use alerts::AlertSettings;
pub use builds::BuildSettings;
pub use database::ReportingSettings;
pub use keys::{AwsCredentials, KeySettings, Secret};
pub use messages::MessageSettings;
pub use notifications::NotificationSettings;
pub use reevaluation::ReevaluationSettings;
pub use signin::SignInSettings;

/// The development JWT secret used when `JWT_SECRET` is unset (a warning says so).
pub const DEV_JWT_SECRET: &str = "compliance-development-secret-do-not-use-in-production";

/// The longest access-token lifetime `JWT_EXPIRES_IN` may ask for.
pub const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// A variable that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}: {message}")]
pub struct ConfigError {
    /// The variable at fault.
    pub variable: String,
    /// What is wrong.
    pub message: String,
}

/// Token settings.
#[derive(Debug, Clone)]
pub struct JwtConfig {
    /// The HS256 secret.
    pub secret: Secret,
    /// Whether the development secret is in use.
    pub secret_is_default: bool,
    /// Access-token lifetime (`JWT_EXPIRES_IN`, default 2 h, at most 24 h).
    pub expires_in: Duration,
    /// Per-tier lifetimes (`JWT_EXPIRES_IN_<TIER>`).
    pub expires_in_by_tier: BTreeMap<Tier, Duration>,
    /// `JWT_JWKS_URL`: an identity provider's key set; RS256 and ES256 tokens are
    /// verified against it (HS256 with `JWT_SECRET` stays for development).
    pub jwks_url: Option<String>,
    /// `JWT_ISSUER`: the `iss` a token must carry, when set.
    pub issuer: Option<String>,
    /// `JWT_AUDIENCE`: an `aud` a token must carry, when set.
    pub audience: Option<String>,
    /// `JWT_JWKS_MIN_REFRESH_SECONDS` (60): the key set is fetched again for an unknown
    /// `kid` at most this often.
    pub jwks_min_refresh: Duration,
}

/// Signed checkpoints of the audit chains (`AUDIT_CHECKPOINT_*`); absent without a key.
#[derive(Debug, Clone)]
pub struct CheckpointSettings {
    /// The signing key (`AUDIT_CHECKPOINT_KEY`: a file path or the key itself, in the
    /// signed-note private-key form). The database never holds it.
    pub signer: audit_chain::NoteSigner,
    /// The deployment's name in each checkpoint's origin (`AUDIT_CHECKPOINT_ORIGIN`,
    /// default: the key's name).
    pub origin: String,
    /// `AUDIT_CHECKPOINT_INTERVAL_SECONDS` (300).
    pub interval_seconds: u64,
    /// `AUDIT_CHECKPOINT_EVENTS` (1000): a chain this many appends past its last
    /// checkpoint gets a new one without waiting for the interval.
    pub events: u64,
    /// `AUDIT_CHECKPOINT_DIR`: where each checkpoint is also written as a file.
    pub dir: Option<std::path::PathBuf>,
}

/// Limits and settings of the compliance service (document 1, "Limits").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComplianceSettings {
    /// `COMPLIANCE_MAX_REGEX_LENGTH` (100).
    pub max_regex_length: usize,
    /// `COMPLIANCE_MAX_ATTRIBUTE_DEPTH` (10).
    pub max_attribute_depth: usize,
    /// `COMPLIANCE_MAX_ATTRIBUTE_KEYS` (100).
    pub max_attribute_keys: usize,
    /// `COMPLIANCE_SCAN_CONCURRENCY` (10).
    pub scan_concurrency: usize,
    /// `COMPLIANCE_SCAN_PROGRESS_BATCH_SIZE` (10).
    pub scan_progress_batch_size: usize,
    /// `CACHE_TTL_COMPLIANCE_RULES` in seconds (60).
    pub cache_ttl: Duration,
    /// `COMPLIANCE_AUDIT_RETENTION_DAYS` (180).
    pub audit_retention_days: u32,
    /// `SYSTEM_ORG_SCANS_ENABLED` (false).
    pub system_org_scans_enabled: bool,
    /// `COMPLIANCE_MAX_SCHEDULES_PER_ORG` (50): the active scan schedules one
    /// organization may hold; one more (a create, or a schedule turned on again) is
    /// 409 `CONFLICT`.
    pub max_schedules_per_org: u32,
    /// `SCAN_SCHEDULER_INTERVAL_MS` (60000).
    pub scan_scheduler_interval: Duration,
    /// `SCAN_LOCK_TTL_MS` (300000).
    pub scan_lock_ttl: Duration,
    /// `COMPLIANCE_SCAN_LEASE_MS` (30000): how long a scan's sweeper holds it without
    /// a flush; past it another replica resumes the scan.
    pub scan_lease: Duration,
    /// `COMPLIANCE_SCAN_POLL_MS` (1000): how often an idle sweeper looks for scans.
    pub scan_poll: Duration,
    /// `DIGEST_SCHEDULER_INTERVAL_MS` (3600000).
    pub digest_scheduler_interval: Duration,
    /// `DIGEST_LOCK_TTL_MS` (300000).
    pub digest_lock_ttl: Duration,
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

/// HTTP settings of this server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSettings {
    /// `COMPLIANCE_SERVICE_PORT` (3000).
    pub port: u16,
    /// `MAX_PAGE_LIMIT` (1000).
    pub max_page_limit: u32,
    /// `COMPLIANCE_REQUEST_TIMEOUT_MS` (30000).
    pub request_timeout: Duration,
    /// `COMPLIANCE_BODY_LIMIT_BYTES` (1 MiB).
    pub body_limit_bytes: usize,
    /// `STEP_UP_WINDOW_SECONDS` (300).
    pub step_up_window: Duration,
    /// `SHUTDOWN_GRACE_SECONDS` (30): after SIGTERM, how long requests in flight may
    /// take to finish before the process stops anyway.
    pub shutdown_grace: Duration,
}

/// Everything the server reads from its environment.
#[derive(Debug, Clone)]
pub struct Config {
    /// `DATABASE_URL`: `postgres://...` or `sqlite://...` (default `sqlite://compliance.db`).
    pub database_url: String,
    /// Whether `DATABASE_URL` was left unset.
    pub database_is_default: bool,
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

/// The registry's address and credentials (`REGISTRY_URL`, `REGISTRY_USERNAME`,
/// `REGISTRY_PASSWORD`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrySettings {
    /// The registry's base URL (`http(s)://host[:port]`).
    pub url: String,
    /// The user name, for basic authentication or the token endpoint.
    pub username: Option<String>,
    /// The password.
    pub password: Option<Secret>,
}

/// Billing settings (document 3, "Add-on bundles").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BillingSettings {
    /// `BILLING_PROVIDER`: `direct` (default, self-service) or `marketplace` (bundles
    /// are not bought here; a system admin sets entitlements).
    pub provider: entitlements::BillingProvider,
    /// `BILLING_PORTAL_URL`: the portal's address, with `{orgId}` and
    /// `{subscriptionId}` filled in; unset, `POST /api/portal` answers 404.
    pub portal_url: Option<String>,
    /// `BILLING_SERVICE_NAME` (`billing`): the service claim of the billing
    /// service's tokens, which may set seat limits.
    pub service_name: String,
}

struct Reader<'a> {
    vars: &'a BTreeMap<String, String>,
    errors: Vec<ConfigError>,
}

impl Reader<'_> {
    fn raw(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str).map(str::trim)
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
        };
        let mut warnings = Vec::new();

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

        let secret_is_default = r.raw("JWT_SECRET").is_none_or(str::is_empty);
        let secret = r.string("JWT_SECRET", DEV_JWT_SECRET);
        if !secret_is_default && secret.len() < 16 {
            r.fail("JWT_SECRET", "must be at least 16 characters".to_owned());
        }
        if secret_is_default {
            warnings.push("JWT_SECRET is unset: using the development secret; set it in any shared environment".to_owned());
        }
        let mut lifetime = |r: &mut Reader<'_>, name: &str, default: Duration| -> Duration {
            match r.raw(name) {
                None | Some("") => default,
                Some(text) => match parse_duration(text) {
                    Some(d) if d.is_zero() => {
                        r.fail(name, "must be longer than zero".to_owned());
                        default
                    }
                    Some(d) if d > MAX_TOKEN_LIFETIME => {
                        warnings.push(format!("{name}={text} is above 24h: capped at 24h"));
                        MAX_TOKEN_LIFETIME
                    }
                    Some(d) => d,
                    None => {
                        r.fail(
                            name,
                            format!("`{text}` is not a duration such as 2h, 30m or 7200"),
                        );
                        default
                    }
                },
            }
        };
        let expires_in = lifetime(&mut r, "JWT_EXPIRES_IN", Duration::from_secs(2 * 3600));
        let optional =
            |r: &Reader<'_>, name: &str| r.raw(name).filter(|v| !v.is_empty()).map(str::to_owned);
        let jwks_url = optional(&r, "JWT_JWKS_URL");
        if let Some(url) = &jwks_url {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                r.fail("JWT_JWKS_URL", "expected an http(s) URL".to_owned());
            }
        }
        let issuer = optional(&r, "JWT_ISSUER");
        let audience = optional(&r, "JWT_AUDIENCE");
        let jwks_min_refresh =
            Duration::from_secs(r.parse("JWT_JWKS_MIN_REFRESH_SECONDS", 60, "a number of seconds"));
        let mut expires_in_by_tier = BTreeMap::new();
        for tier in Tier::ALL {
            let name = format!("JWT_EXPIRES_IN_{}", tier.env_name());
            if r.raw(&name).is_some_and(|v| !v.is_empty()) {
                let d = lifetime(&mut r, &name, expires_in);
                expires_in_by_tier.insert(tier, d);
            }
        }

        let http = HttpSettings {
            port: r.parse("COMPLIANCE_SERVICE_PORT", 3000, "a port number"),
            max_page_limit: r
                .positive("MAX_PAGE_LIMIT", 1000)
                .try_into()
                .unwrap_or(u32::MAX),
            request_timeout: r.millis("COMPLIANCE_REQUEST_TIMEOUT_MS", 30_000),
            body_limit_bytes: r
                .positive("COMPLIANCE_BODY_LIMIT_BYTES", 1 << 20)
                .try_into()
                .unwrap_or(usize::MAX),
            step_up_window: Duration::from_secs(r.positive("STEP_UP_WINDOW_SECONDS", 300)),
            shutdown_grace: Duration::from_secs(r.parse(
                "SHUTDOWN_GRACE_SECONDS",
                30,
                "a number of seconds",
            )),
        };
        let compliance = ComplianceSettings {
            max_regex_length: r.positive("COMPLIANCE_MAX_REGEX_LENGTH", 100) as usize,
            max_attribute_depth: r.positive("COMPLIANCE_MAX_ATTRIBUTE_DEPTH", 10) as usize,
            max_attribute_keys: r.positive("COMPLIANCE_MAX_ATTRIBUTE_KEYS", 100) as usize,
            scan_concurrency: r.positive("COMPLIANCE_SCAN_CONCURRENCY", 10) as usize,
            scan_progress_batch_size: r.positive("COMPLIANCE_SCAN_PROGRESS_BATCH_SIZE", 10)
                as usize,
            cache_ttl: Duration::from_secs(r.parse(
                "CACHE_TTL_COMPLIANCE_RULES",
                60,
                "a number of seconds",
            )),
            audit_retention_days: r
                .positive("COMPLIANCE_AUDIT_RETENTION_DAYS", 180)
                .try_into()
                .unwrap_or(u32::MAX),
            system_org_scans_enabled: r.flag("SYSTEM_ORG_SCANS_ENABLED"),
            max_schedules_per_org: r
                .parse(
                    "COMPLIANCE_MAX_SCHEDULES_PER_ORG",
                    50,
                    "a number of schedules",
                )
                .max(1),
            scan_scheduler_interval: r.millis("SCAN_SCHEDULER_INTERVAL_MS", 60_000),
            scan_lock_ttl: r.millis("SCAN_LOCK_TTL_MS", 300_000),
            scan_lease: r.millis("COMPLIANCE_SCAN_LEASE_MS", 30_000),
            scan_poll: r.millis("COMPLIANCE_SCAN_POLL_MS", 1_000),
            digest_scheduler_interval: r.millis("DIGEST_SCHEDULER_INTERVAL_MS", 3_600_000),
            digest_lock_ttl: r.millis("DIGEST_LOCK_TTL_MS", 300_000),
        };
        if compliance.max_attribute_depth > 100 {
            r.fail(
                "COMPLIANCE_MAX_ATTRIBUTE_DEPTH",
                "at most 100 is supported (the JSON parser stops at 128)".to_owned(),
            );
        }
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
        let checkpoints = match r.raw("AUDIT_CHECKPOINT_KEY").filter(|v| !v.is_empty()) {
            None => {
                warnings.push(
                    "AUDIT_CHECKPOINT_KEY is unset: signed audit checkpoints are off".to_owned(),
                );
                None
            }
            Some(value) => {
                // The key itself, or a file that holds it.
                let text = if value.starts_with("PRIVATE+KEY+") {
                    Ok(value.to_owned())
                } else {
                    std::fs::read_to_string(value)
                        .map_err(|e| format!("cannot read the key file `{value}`: {e}"))
                        .map(|t| {
                            t.lines()
                                .find(|l| l.starts_with("PRIVATE+KEY+"))
                                .unwrap_or_default()
                                .to_owned()
                        })
                };
                match text.and_then(|t| {
                    audit_chain::NoteSigner::from_private_key(&t).map_err(|e| e.to_string())
                }) {
                    Ok(signer) => {
                        let origin = r.string("AUDIT_CHECKPOINT_ORIGIN", signer.name());
                        Some(CheckpointSettings {
                            origin,
                            interval_seconds: r.positive("AUDIT_CHECKPOINT_INTERVAL_SECONDS", 300),
                            events: r.positive("AUDIT_CHECKPOINT_EVENTS", 1000),
                            dir: r
                                .raw("AUDIT_CHECKPOINT_DIR")
                                .filter(|v| !v.is_empty())
                                .map(std::path::PathBuf::from),
                            signer,
                        })
                    }
                    Err(message) => {
                        r.fail("AUDIT_CHECKPOINT_KEY", message);
                        None
                    }
                }
            }
        };
        let remote_compliance = optional(&r, "COMPLIANCE_SERVICE_HOST")
            .map(|host| format!("http://{host}:{}", http.port));
        let hosts = ServiceHosts { remote_compliance };
        let bootstrap = BootstrapList::parse(&r.string("BOOTSTRAP_SUPERADMIN_EMAILS", ""));
        if bootstrap.is_empty() {
            warnings.push(
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
        let registry =
            r.raw("REGISTRY_URL")
                .filter(|v| !v.is_empty())
                .map(|url| RegistrySettings {
                    url: url.to_owned(),
                    username: r
                        .raw("REGISTRY_USERNAME")
                        .filter(|v| !v.is_empty())
                        .map(str::to_owned),
                    password: r.raw("REGISTRY_PASSWORD").map(Secret::new),
                });
        if let Some(url) = registry.as_ref().map(|r| r.url.clone()) {
            let parsed = reqwest::Url::parse(&url);
            let ok = parsed
                .as_ref()
                .is_ok_and(|u| ["http", "https"].contains(&u.scheme()) && u.host_str().is_some());
            if !ok {
                r.fail(
                    "REGISTRY_URL",
                    format!("`{url}` is not an http(s) address with a host"),
                );
            }
        }
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
        let provider = match r
            .string("BILLING_PROVIDER", "direct")
            .to_ascii_lowercase()
            .as_str()
        {
            "direct" | "stripe" => entitlements::BillingProvider::Direct,
            "marketplace" | "aws-marketplace" | "aws_marketplace" => {
                entitlements::BillingProvider::Marketplace
            }
            other => {
                r.fail(
                    "BILLING_PROVIDER",
                    format!("`{other}` is not `direct` or `marketplace`"),
                );
                entitlements::BillingProvider::Direct
            }
        };
        let portal_url = optional(&r, "BILLING_PORTAL_URL");
        if let Some(url) = &portal_url {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                r.fail(
                    "BILLING_PORTAL_URL",
                    "must be an http(s) address (with `{orgId}` where the organization goes)"
                        .to_owned(),
                );
            }
        }
        let billing = BillingSettings {
            provider,
            portal_url,
            service_name: r.string("BILLING_SERVICE_NAME", "billing"),
        };
        let builds = builds::build_settings(&mut r);
        let reevaluation = reevaluation::reevaluation_settings(&mut r);
        let reporting = database::reporting_settings(&mut r);
        let alerts = alerts::alert_settings(&mut r);
        let notifications = notifications::notification_settings(&mut r);
        let signin = signin::signin_settings(&mut r, http.port, notifications.smtp_url.is_some());
        if !signin.verification_required {
            warnings.push(
                "EMAIL_VERIFICATION_REQUIRED is off (no SMTP_URL): accounts sign in before their e-mail is verified"
                    .to_owned(),
            );
        }
        if !r.errors.is_empty() {
            return Err(r.errors);
        }
        Ok(Config {
            database_url,
            database_is_default,
            reporting,
            jwt: JwtConfig {
                secret: Secret::new(secret),
                secret_is_default,
                expires_in,
                expires_in_by_tier,
                jwks_url,
                issuer,
                audience,
                jwks_min_refresh,
            },
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
            warnings,
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
