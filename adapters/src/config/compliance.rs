//! The compliance service's limits and schedules (document 1, "Limits").

use std::time::Duration;

use super::Reader;

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

/// Reads the section.
pub(super) fn compliance_settings(r: &mut Reader<'_>) -> ComplianceSettings {
    let compliance = ComplianceSettings {
        max_regex_length: r.positive("COMPLIANCE_MAX_REGEX_LENGTH", 100) as usize,
        max_attribute_depth: r.positive("COMPLIANCE_MAX_ATTRIBUTE_DEPTH", 10) as usize,
        max_attribute_keys: r.positive("COMPLIANCE_MAX_ATTRIBUTE_KEYS", 100) as usize,
        scan_concurrency: r.positive("COMPLIANCE_SCAN_CONCURRENCY", 10) as usize,
        scan_progress_batch_size: r.positive("COMPLIANCE_SCAN_PROGRESS_BATCH_SIZE", 10) as usize,
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
    compliance
}
