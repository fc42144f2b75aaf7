//! The error codes of the envelope (SEMANTICS.md 5 and the codes added since), each
//! once with its status. Built in every configuration of the crate: the server
//! answers them, the clients other services embed read them. Everything that answers, reads or compares a code names a
//! variant: a code is never compared as text.

/// A machine-readable error code of the envelope `{success: false, statusCode, code,
/// message, details?}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A malformed body, a bad field or query parameter.
    ValidationError,
    /// A cron expression that does not parse.
    InvalidCron,
    /// More than 500 exemptions in one bulk call.
    BulkLimitExceeded,
    /// An attribute document over a limit.
    AttributeLimitExceeded,
    /// A missing, malformed, expired or badly signed token.
    Unauthorized,
    /// `x-org-id` missing, or not an organization of the caller.
    TenantForbidden,
    /// A permission missing.
    Forbidden,
    /// A requester reviewing their own exemption.
    SelfApprovalForbidden,
    /// Step-up verification missing or stale.
    StepUpRequired,
    /// Absent, or in another organization.
    NotFound,
    /// A method the route does not serve.
    MethodNotAllowed,
    /// A duplicate name, a state conflict, a stale version.
    Conflict,
    /// A quota exhausted.
    QuotaExceeded,
    /// A body too large.
    PayloadTooLarge,
    /// Headers too large (answered by the listener itself).
    HeaderTooLarge,
    /// A compliance check blocks the entity (`details.violations`).
    ComplianceViolation,
    /// A request over its time limit.
    RequestTimeout,
    /// The compliance check could not be made in time.
    ComplianceUnavailable,
    /// The database (or the server itself, stopping) is unavailable.
    ServiceUnavailable,
    /// The account's tier and bundles do not include the feature.
    FeatureNotAvailable,
    /// Sign-in refused (unknown account or wrong password, one answer).
    InvalidCredentials,
    /// Too many sign-in failures.
    TooManyAttempts,
    /// An organization restored past its window.
    Gone,
    /// Sign-in before the e-mail is verified.
    EmailNotVerified,
    /// An account disabled by a super-admin.
    AccountDisabled,
    /// An account that must change its password first.
    PasswordChangeRequired,
    /// The organization requires its single sign-on.
    SsoRequired,
    /// A sign-in through an identity provider refused (its own code).
    Sso(tenancy::sso::Refusal),
    /// A secret the organization's key cannot open now.
    KmsUnavailable,
    /// A per-minute or concurrency limit.
    RateLimited,
    /// A Role would grant more than its author holds.
    PermissionEscalation,
    /// A permission no custom Role may hold.
    PermissionNotAssignable,
    /// Bundles are off for the account.
    BundlesDisabled,
    /// The account is billed through a marketplace.
    MarketplaceManaged,
    /// The tier may not buy the bundle.
    BundleNotEligible,
    /// The bundle is held once at most.
    BundleNotStackable,
    /// No billing portal is configured.
    BillingPortalNotConfigured,
    /// No image registry is configured.
    RegistryNotConfigured,
    /// The registry does not delete.
    RegistryDeleteDisabled,
    /// The registry cannot be reached.
    RegistryUnavailable,
    /// The registry answered another digest.
    RegistryDigestMismatch,
    /// A manifest of a kind this server does not read.
    ManifestUnsupported,
    /// The registry refused.
    RegistryRefused,
    /// A digest other tags share.
    TagShared,
    /// The AI provider cannot be reached.
    AiProviderUnavailable,
    /// The AI provider refused or failed.
    AiProviderError,
    /// The AI provider's stream ended early.
    AiStreamTruncated,
    /// The AI provider's answer is too large.
    AiOutputTooLarge,
    /// The AI provider did not answer in time.
    AiProviderTimeout,
    /// The repository cannot be read.
    RepositoryUnavailable,
    /// The repository is too large.
    RepositoryTooLarge,
    /// The repository did not answer in time.
    RepositoryTimeout,
    /// Every attempt of a generation was refused.
    GenerationFailed,
    /// The client went away.
    Cancelled,
    /// A console form posted from another site.
    CrossSiteRequest,
    /// Anything the server did not expect (logged, not shown).
    InternalError,
}

impl ErrorCode {
    /// Every code but the single sign-on refusals (which [`tenancy::sso::Refusal::ALL`]
    /// lists).
    const PLAIN: [ErrorCode; 55] = [
        ErrorCode::ValidationError,
        ErrorCode::InvalidCron,
        ErrorCode::BulkLimitExceeded,
        ErrorCode::AttributeLimitExceeded,
        ErrorCode::Unauthorized,
        ErrorCode::TenantForbidden,
        ErrorCode::Forbidden,
        ErrorCode::SelfApprovalForbidden,
        ErrorCode::StepUpRequired,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Conflict,
        ErrorCode::QuotaExceeded,
        ErrorCode::PayloadTooLarge,
        ErrorCode::HeaderTooLarge,
        ErrorCode::ComplianceViolation,
        ErrorCode::RequestTimeout,
        ErrorCode::ComplianceUnavailable,
        ErrorCode::ServiceUnavailable,
        ErrorCode::FeatureNotAvailable,
        ErrorCode::InvalidCredentials,
        ErrorCode::TooManyAttempts,
        ErrorCode::Gone,
        ErrorCode::EmailNotVerified,
        ErrorCode::AccountDisabled,
        ErrorCode::PasswordChangeRequired,
        ErrorCode::SsoRequired,
        ErrorCode::KmsUnavailable,
        ErrorCode::RateLimited,
        ErrorCode::PermissionEscalation,
        ErrorCode::PermissionNotAssignable,
        ErrorCode::BundlesDisabled,
        ErrorCode::MarketplaceManaged,
        ErrorCode::BundleNotEligible,
        ErrorCode::BundleNotStackable,
        ErrorCode::BillingPortalNotConfigured,
        ErrorCode::RegistryNotConfigured,
        ErrorCode::RegistryDeleteDisabled,
        ErrorCode::RegistryUnavailable,
        ErrorCode::RegistryDigestMismatch,
        ErrorCode::ManifestUnsupported,
        ErrorCode::RegistryRefused,
        ErrorCode::TagShared,
        ErrorCode::AiProviderUnavailable,
        ErrorCode::AiProviderError,
        ErrorCode::AiStreamTruncated,
        ErrorCode::AiOutputTooLarge,
        ErrorCode::AiProviderTimeout,
        ErrorCode::RepositoryUnavailable,
        ErrorCode::RepositoryTooLarge,
        ErrorCode::RepositoryTimeout,
        ErrorCode::GenerationFailed,
        ErrorCode::Cancelled,
        ErrorCode::CrossSiteRequest,
        ErrorCode::InternalError,
    ];

    /// Every code.
    pub fn all() -> impl Iterator<Item = ErrorCode> {
        ErrorCode::PLAIN
            .into_iter()
            .chain(tenancy::sso::Refusal::ALL.into_iter().map(ErrorCode::Sso))
    }

    /// The code as the envelope spells it.
    pub fn as_str(self) -> &'static str {
        use ErrorCode as C;
        match self {
            C::ValidationError => "VALIDATION_ERROR",
            C::InvalidCron => "INVALID_CRON",
            C::BulkLimitExceeded => "BULK_LIMIT_EXCEEDED",
            C::AttributeLimitExceeded => "ATTRIBUTE_LIMIT_EXCEEDED",
            C::Unauthorized => "UNAUTHORIZED",
            C::TenantForbidden => "TENANT_FORBIDDEN",
            C::Forbidden => "FORBIDDEN",
            C::SelfApprovalForbidden => "SELF_APPROVAL_FORBIDDEN",
            C::StepUpRequired => "STEP_UP_REQUIRED",
            C::NotFound => "NOT_FOUND",
            C::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            C::Conflict => "CONFLICT",
            C::QuotaExceeded => "QUOTA_EXCEEDED",
            C::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            C::HeaderTooLarge => "HEADER_TOO_LARGE",
            C::ComplianceViolation => "COMPLIANCE_VIOLATION",
            C::RequestTimeout => "REQUEST_TIMEOUT",
            C::ComplianceUnavailable => "COMPLIANCE_UNAVAILABLE",
            C::ServiceUnavailable => "SERVICE_UNAVAILABLE",
            C::FeatureNotAvailable => "FEATURE_NOT_AVAILABLE",
            C::InvalidCredentials => "INVALID_CREDENTIALS",
            C::TooManyAttempts => "TOO_MANY_ATTEMPTS",
            C::Gone => "GONE",
            C::EmailNotVerified => "EMAIL_NOT_VERIFIED",
            C::AccountDisabled => "ACCOUNT_DISABLED",
            C::PasswordChangeRequired => "PASSWORD_CHANGE_REQUIRED",
            C::SsoRequired => "SSO_REQUIRED",
            C::Sso(refusal) => refusal.code(),
            C::KmsUnavailable => "KMS_UNAVAILABLE",
            C::RateLimited => "RATE_LIMITED",
            C::PermissionEscalation => "PERMISSION_ESCALATION",
            C::PermissionNotAssignable => "PERMISSION_NOT_ASSIGNABLE",
            C::BundlesDisabled => "BUNDLES_DISABLED",
            C::MarketplaceManaged => "MARKETPLACE_MANAGED",
            C::BundleNotEligible => "BUNDLE_NOT_ELIGIBLE",
            C::BundleNotStackable => "BUNDLE_NOT_STACKABLE",
            C::BillingPortalNotConfigured => "BILLING_PORTAL_NOT_CONFIGURED",
            C::RegistryNotConfigured => "REGISTRY_NOT_CONFIGURED",
            C::RegistryDeleteDisabled => "REGISTRY_DELETE_DISABLED",
            C::RegistryUnavailable => "REGISTRY_UNAVAILABLE",
            C::RegistryDigestMismatch => "REGISTRY_DIGEST_MISMATCH",
            C::ManifestUnsupported => "MANIFEST_UNSUPPORTED",
            C::RegistryRefused => "REGISTRY_REFUSED",
            C::TagShared => "TAG_SHARED",
            C::AiProviderUnavailable => "AI_PROVIDER_UNAVAILABLE",
            C::AiProviderError => "AI_PROVIDER_ERROR",
            C::AiStreamTruncated => "AI_STREAM_TRUNCATED",
            C::AiOutputTooLarge => "AI_OUTPUT_TOO_LARGE",
            C::AiProviderTimeout => "AI_PROVIDER_TIMEOUT",
            C::RepositoryUnavailable => "REPOSITORY_UNAVAILABLE",
            C::RepositoryTooLarge => "REPOSITORY_TOO_LARGE",
            C::RepositoryTimeout => "REPOSITORY_TIMEOUT",
            C::GenerationFailed => "GENERATION_FAILED",
            C::Cancelled => "CANCELLED",
            C::CrossSiteRequest => "CROSS_SITE_REQUEST",
            C::InternalError => "INTERNAL_ERROR",
        }
    }

    /// The HTTP status every answer with this code carries.
    pub fn status(self) -> u16 {
        use ErrorCode as C;
        match self {
            C::ValidationError
            | C::InvalidCron
            | C::BulkLimitExceeded
            | C::PermissionNotAssignable
            | C::BundleNotStackable
            | C::Cancelled => 400,
            C::Unauthorized | C::InvalidCredentials | C::Sso(_) => 401,
            C::TenantForbidden
            | C::Forbidden
            | C::SelfApprovalForbidden
            | C::StepUpRequired
            | C::ComplianceViolation
            | C::FeatureNotAvailable
            | C::EmailNotVerified
            | C::AccountDisabled
            | C::PasswordChangeRequired
            | C::SsoRequired
            | C::PermissionEscalation
            | C::BundlesDisabled
            | C::MarketplaceManaged
            | C::BundleNotEligible
            | C::CrossSiteRequest => 403,
            C::NotFound | C::BillingPortalNotConfigured => 404,
            C::MethodNotAllowed => 405,
            C::RequestTimeout => 408,
            C::Conflict | C::RegistryDeleteDisabled | C::TagShared => 409,
            C::Gone => 410,
            C::PayloadTooLarge => 413,
            C::AttributeLimitExceeded
            | C::ManifestUnsupported
            | C::RepositoryUnavailable
            | C::RepositoryTooLarge
            | C::GenerationFailed => 422,
            C::QuotaExceeded | C::TooManyAttempts | C::RateLimited => 429,
            C::HeaderTooLarge => 431,
            C::InternalError => 500,
            C::RegistryDigestMismatch
            | C::RegistryRefused
            | C::AiProviderUnavailable
            | C::AiProviderError
            | C::AiStreamTruncated
            | C::AiOutputTooLarge => 502,
            C::ComplianceUnavailable
            | C::ServiceUnavailable
            | C::KmsUnavailable
            | C::RegistryNotConfigured
            | C::RegistryUnavailable => 503,
            C::AiProviderTimeout | C::RepositoryTimeout => 504,
        }
    }

    /// The code the envelope spells `text`, if it is one of ours.
    pub fn parse(text: &str) -> Option<ErrorCode> {
        ErrorCode::all().find(|code| code.as_str() == text)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ErrorCode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        ErrorCode::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown error code `{text}`")))
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;
    use std::collections::HashSet;

    #[test]
    fn every_code_is_spelled_once_and_reads_back() {
        let mut seen = HashSet::new();
        for code in ErrorCode::all() {
            let text = code.as_str();
            assert!(seen.insert(text), "{text} is spelled twice");
            assert!(
                text.chars().all(|c| c.is_ascii_uppercase() || c == '_'),
                "{text} is not of the envelope's form"
            );
            assert_eq!(ErrorCode::parse(text), Some(code));
            let wire = serde_json::to_value(code).unwrap();
            assert_eq!(serde_json::from_value::<ErrorCode>(wire).unwrap(), code);
            assert!((400..600).contains(&code.status()));
        }
        assert_eq!(seen.len(), 55 + tenancy::sso::Refusal::ALL.len());
        assert_eq!(ErrorCode::parse("NOT_A_CODE"), None);
        assert!(serde_json::from_value::<ErrorCode>(serde_json::json!("nope")).is_err());
    }

    #[test]
    fn the_codes_of_the_semantics_table_keep_their_status() {
        // SEMANTICS.md section 5, row by row.
        for (text, status) in [
            ("VALIDATION_ERROR", 400),
            ("INVALID_CRON", 400),
            ("BULK_LIMIT_EXCEEDED", 400),
            ("ATTRIBUTE_LIMIT_EXCEEDED", 422),
            ("UNAUTHORIZED", 401),
            ("TENANT_FORBIDDEN", 403),
            ("FORBIDDEN", 403),
            ("SELF_APPROVAL_FORBIDDEN", 403),
            ("STEP_UP_REQUIRED", 403),
            ("NOT_FOUND", 404),
            ("CONFLICT", 409),
            ("QUOTA_EXCEEDED", 429),
            ("PAYLOAD_TOO_LARGE", 413),
            ("COMPLIANCE_VIOLATION", 403),
            ("REQUEST_TIMEOUT", 408),
            ("COMPLIANCE_UNAVAILABLE", 503),
            ("SERVICE_UNAVAILABLE", 503),
            ("FEATURE_NOT_AVAILABLE", 403),
            ("INVALID_CREDENTIALS", 401),
            ("TOO_MANY_ATTEMPTS", 429),
            ("GONE", 410),
            ("EMAIL_NOT_VERIFIED", 403),
            ("SSO_REQUIRED", 403),
            ("KMS_UNAVAILABLE", 503),
            ("RATE_LIMITED", 429),
            ("ACCOUNT_DISABLED", 403),
            ("PASSWORD_CHANGE_REQUIRED", 403),
            ("SSO_STATE_INVALID", 401),
        ] {
            let code = ErrorCode::parse(text).unwrap();
            assert_eq!(code.status(), status, "{text}");
        }
    }
}
