//! Configuration: defaults, and errors that name the variable.

use adapters::config::{parse_duration, Config};
use std::time::Duration;

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_documents_defaults() {
    let c = Config::from_vars(vars(&[])).unwrap();
    assert_eq!(c.database_url.expose(), "sqlite://compliance.db");
    assert!(c.database_is_default && c.jwt.secret_is_default);
    assert_eq!(c.http.port, 3000);
    assert_eq!(c.http.max_page_limit, 1000);
    assert_eq!(c.jwt.expires_in, Duration::from_secs(7200));
    assert_eq!(c.compliance.max_regex_length, 100);
    assert_eq!(
        (
            c.compliance.max_attribute_depth,
            c.compliance.max_attribute_keys
        ),
        (10, 100)
    );
    assert_eq!(
        (
            c.compliance.scan_concurrency,
            c.compliance.scan_progress_batch_size
        ),
        (10, 10)
    );
    assert_eq!(c.compliance.cache_ttl, Duration::from_secs(60));
    assert_eq!(c.compliance.audit_retention_days, 180);
    assert_eq!(c.audit_retention_days, 90);
    assert_eq!(
        c.compliance.scan_scheduler_interval,
        Duration::from_millis(60_000)
    );
    assert_eq!(c.compliance.scan_lock_ttl, Duration::from_millis(300_000));
    assert_eq!(
        c.compliance.digest_scheduler_interval,
        Duration::from_millis(3_600_000)
    );
    assert_eq!(c.compliance.digest_lock_ttl, Duration::from_millis(300_000));
    assert!(!c.compliance.system_org_scans_enabled);
    // Of the hosts document 1 names, only the compliance service's is called.
    assert_eq!(c.hosts.remote_compliance, None);
    assert!(!c.catalog.bundles_enabled);
    assert!(c.warnings.iter().any(|w| w.contains("JWT_SECRET")));
}

#[test]
fn overrides_apply() {
    let c = Config::from_vars(vars(&[
        ("DATABASE_URL", "postgres://u@db/compliance"),
        ("JWT_SECRET", "a-long-enough-secret"),
        ("JWT_EXPIRES_IN", "30m"),
        ("JWT_EXPIRES_IN_PRO", "48h"),
        ("MAX_PAGE_LIMIT", "50"),
        ("SYSTEM_ORG_SCANS_ENABLED", "true"),
        ("BILLING_BUNDLES_ENABLED", "true"),
        ("BOOTSTRAP_SUPERADMIN_EMAILS", "a@x.io,b@x.io"),
    ]))
    .unwrap();
    assert_eq!(c.jwt.expires_in, Duration::from_secs(1800));
    assert_eq!(
        c.jwt.expires_in_by_tier[&entitlements::Tier::Pro],
        Duration::from_secs(86_400),
        "capped at 24h"
    );
    assert!(c.warnings.iter().any(|w| w.contains("JWT_EXPIRES_IN_PRO")));
    assert_eq!(c.http.max_page_limit, 50);
    assert!(c.compliance.system_org_scans_enabled && c.catalog.bundles_enabled);
    assert!(c.bootstrap.allows("B@x.io"));
}

#[test]
fn every_bad_value_is_named() {
    let errors = Config::from_vars(vars(&[
        ("DATABASE_URL", "mysql://x"),
        ("JWT_SECRET", "short"),
        ("JWT_EXPIRES_IN", "soon"),
        ("COMPLIANCE_SERVICE_PORT", "70000"),
        ("MAX_PAGE_LIMIT", "0"),
        ("COMPLIANCE_MAX_REGEX_LENGTH", "-5"),
        ("SYSTEM_ORG_SCANS_ENABLED", "maybe"),
        ("SCAN_LOCK_TTL_MS", "1.5"),
        ("BILLING_BUNDLE_SSO_GRANT", "2"),
        ("QUOTA_TIER_PRO_WIDGETS", "1"),
    ]))
    .unwrap_err();
    let named: Vec<&str> = errors.iter().map(|e| e.variable.as_str()).collect();
    for variable in [
        "DATABASE_URL",
        "JWT_SECRET",
        "JWT_EXPIRES_IN",
        "COMPLIANCE_SERVICE_PORT",
        "MAX_PAGE_LIMIT",
        "COMPLIANCE_MAX_REGEX_LENGTH",
        "SYSTEM_ORG_SCANS_ENABLED",
        "SCAN_LOCK_TTL_MS",
        "BILLING_BUNDLE_SSO_GRANT",
        "QUOTA_TIER_PRO_WIDGETS",
    ] {
        assert!(
            named.contains(&variable),
            "{variable} not reported: {named:?}"
        );
    }
    assert!(errors
        .iter()
        .all(|e| e.to_string().starts_with(&e.variable)));
}

#[test]
fn durations() {
    assert_eq!(parse_duration("7200"), Some(Duration::from_secs(7200)));
    assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
    assert_eq!(parse_duration("30m"), Some(Duration::from_secs(1800)));
    assert_eq!(parse_duration("2h"), Some(Duration::from_secs(7200)));
    assert_eq!(parse_duration("1d"), Some(Duration::from_secs(86_400)));
    for bad in ["", "h", "2w", "-1h", "1.5h"] {
        assert_eq!(parse_duration(bad), None, "{bad}");
    }
}

/// Every secret of the configuration prints as `***`: a configuration logged whole
/// (at start, in a panic) shows none of them.
#[test]
fn secrets_never_print() {
    let secrets = [
        (
            "DATABASE_URL",
            "postgres://app:db-password-42@db/compliance",
        ),
        ("JWT_SECRET", "jwt-secret-that-is-long-enough"),
        ("REGISTRY_URL", "http://127.0.0.1:5000"),
        ("REGISTRY_USERNAME", "robot"),
        ("REGISTRY_PASSWORD", "registry-password-42"),
        ("AI_OPENAI_API_KEY", "sk-openai-key-42"),
        ("AI_OPENAI_MODELS", "gpt-x"),
        ("AI_ANTHROPIC_API_KEY", "sk-ant-key-42"),
        ("AI_ANTHROPIC_MODELS", "claude-x"),
        (
            "REPORTING_DATABASE_URL",
            "postgres://reader:standby-password-42@standby/db",
        ),
        (
            "DATABASE_DIRECT_URL",
            "postgres://app:direct-password-42@db:5432/compliance",
        ),
        ("SMTP_URL", "smtp://mailer:smtp-password-42@127.0.0.1:2525"),
        ("PLATFORM_IDENTIFIER", "provisioner"),
        ("PLATFORM_PASSWORD", "platform-password-42"),
        ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
        ("AWS_SECRET_ACCESS_KEY", "aws-secret-42"),
        ("AWS_SESSION_TOKEN", "aws-session-42"),
    ];
    let c = Config::from_vars(vars(&secrets)).unwrap();
    let printed = format!("{c:?}");
    for (name, value) in secrets {
        if [
            "REGISTRY_URL",
            "REGISTRY_USERNAME",
            "AI_OPENAI_MODELS",
            "AI_ANTHROPIC_MODELS",
            "PLATFORM_IDENTIFIER",
            "AWS_ACCESS_KEY_ID",
        ]
        .contains(&name)
        {
            continue;
        }
        assert!(!printed.contains(value), "{name} printed: {printed}");
    }
    assert!(printed.contains("***"));
    // The settings are read all the same.
    assert!(c.registry.is_some());
    assert_eq!(c.ai.providers.len(), 2);
    assert!(c.reporting.url.is_some());
    assert!(c.database_direct_url.is_some());
}

/// `DATABASE_DIRECT_URL` (the database behind a pooler) stands beside a PostgreSQL
/// `DATABASE_URL`, each naming one host; a session's URL is then the direct one.
#[test]
fn a_pooler_is_one_host_in_front_of_postgresql() {
    let pooled = "postgres://app@pooler:6432/compliance";
    let direct = "postgres://app@db:5432/compliance";
    let c = Config::from_vars(vars(&[
        ("DATABASE_URL", pooled),
        ("DATABASE_DIRECT_URL", direct),
    ]))
    .unwrap();
    assert_eq!(c.database_url.expose(), pooled);
    assert_eq!(c.session_database_url(), direct);
    let c = Config::from_vars(vars(&[("DATABASE_URL", pooled)])).unwrap();
    assert!(c.database_direct_url.is_none());
    assert_eq!(c.session_database_url(), pooled);
    for (database, direct) in [
        ("sqlite://compliance.db", "postgres://app@db/compliance"),
        (pooled, "sqlite://compliance.db"),
        (pooled, "mysql://app@db/compliance"),
        ("postgres://app@p1:6432,p2:6432/compliance", direct),
        (pooled, "postgres://app@db1:5432,db2:5432/compliance"),
    ] {
        let errors = Config::from_vars(vars(&[
            ("DATABASE_URL", database),
            ("DATABASE_DIRECT_URL", direct),
        ]))
        .unwrap_err();
        let named: Vec<&str> = errors.iter().map(|e| e.variable.as_str()).collect();
        assert_eq!(named, ["DATABASE_DIRECT_URL"], "{database} {direct}");
    }
}
