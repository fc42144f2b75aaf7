//! The one error type of the server: the error envelope of document 2, with the
//! codes of SEMANTICS.md 5.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

pub use crate::code::ErrorCode;

/// An error answered in the envelope `{success: false, statusCode, code, message, details?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The machine-readable code (which decides the status).
    pub code: ErrorCode,
    /// One line for a human.
    pub message: String,
    /// Structured context.
    pub details: Option<Value>,
    /// The refusal was already audited as `authz.denied` (by the gate), so the guard
    /// does not audit it again. Never part of the answer.
    pub audited: bool,
}

impl From<crate::auth::AuthError> for ApiError {
    fn from(error: crate::auth::AuthError) -> Self {
        match error {
            crate::auth::AuthError::Rejected(why) => ApiError::unauthorized(why),
            signing @ crate::auth::AuthError::Signing(_) => ApiError::internal(signing),
        }
    }
}

impl ApiError {
    /// An error with no details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            details: None,
            audited: false,
        }
    }

    /// Its HTTP status (the code's).
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The same refusal, marked as audited already.
    pub fn audited(mut self) -> Self {
        self.audited = true;
        self
    }

    /// Adds details.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 400 `VALIDATION_ERROR`.
    pub fn validation(message: impl Into<String>) -> Self {
        ApiError::new(ErrorCode::ValidationError, message)
    }

    /// 400 `VALIDATION_ERROR` naming the field at fault.
    pub fn invalid_field(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        ApiError::validation(format!("{field}: {message}"))
            .with_details(json!({"field": field, "problem": message}))
    }

    /// 401 `UNAUTHORIZED`.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::new(ErrorCode::Unauthorized, message)
    }

    /// 403 `TENANT_FORBIDDEN`.
    pub fn tenant_forbidden() -> Self {
        ApiError::new(
            ErrorCode::TenantForbidden,
            "x-org-id is missing or names an organization you do not belong to",
        )
    }

    /// 403 `FORBIDDEN`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(ErrorCode::Forbidden, message)
    }

    /// 404 `NOT_FOUND`.
    pub fn not_found(what: &str) -> Self {
        ApiError::new(ErrorCode::NotFound, format!("{what} not found"))
    }

    /// 409 `CONFLICT`.
    pub fn conflict(message: impl Into<String>) -> Self {
        ApiError::new(ErrorCode::Conflict, message)
    }

    /// 413 `PAYLOAD_TOO_LARGE`.
    pub fn payload_too_large() -> Self {
        ApiError::new(ErrorCode::PayloadTooLarge, "the request body is too large")
    }

    /// 503 `SERVICE_UNAVAILABLE`.
    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError::new(ErrorCode::ServiceUnavailable, message)
    }

    /// 500 `INTERNAL_ERROR`; the cause is logged, not shown.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(%cause, "internal error");
        ApiError::new(ErrorCode::InternalError, "internal error")
    }

    /// 400 `VALIDATION_ERROR` for rules compliance-core refuses, listing every
    /// problem with the field it concerns in `details.problems`.
    pub fn rules(error: compliance_core::Error) -> Self {
        match error {
            compliance_core::Error::InvalidRules { problems } => {
                let message = problems
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ");
                ApiError::validation(message).with_details(json!({ "problems": problems }))
            }
            other => ApiError::validation(other.to_string()),
        }
    }

    /// The envelope.
    pub fn body(&self) -> Value {
        let mut body = json!({
            "success": false,
            "statusCode": self.status().as_u16(),
            "code": self.code,
            "message": self.message,
        });
        if let (Some(details), Some(object)) = (&self.details, body.as_object_mut()) {
            object.insert("details".into(), details.clone());
        }
        body
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status().as_u16(),
            self.code,
            self.message
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        // A 429 that knows when to come back says it in `Retry-After` too; a 503 (the
        // database or a service this one needs is away, a failover under way) asks to
        // come back in a second.
        let retry_after = match self.status() {
            StatusCode::TOO_MANY_REQUESTS => self
                .details
                .as_ref()
                .and_then(|details| details.get("retryAfter")?.as_u64()),
            StatusCode::SERVICE_UNAVAILABLE => Some(
                self.details
                    .as_ref()
                    .and_then(|details| details.get("retryAfter")?.as_u64())
                    .unwrap_or(1),
            ),
            _ => None,
        };
        let mut response = (self.status(), axum::Json(self.body())).into_response();
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

/// The code of SEMANTICS.md 5 for a refusal of tenancy (the pure crate knows
/// nothing of HTTP).
fn tenancy_code(error: &tenancy::TenancyError) -> ErrorCode {
    use tenancy::TenancyError as E;
    match error {
        E::TeamUnderTeam | E::TeamUnderSystem | E::NewOwnerNotMember => ErrorCode::ValidationError,
        E::Escalation(_) => ErrorCode::PermissionEscalation,
        E::NotAssignable(_) => ErrorCode::PermissionNotAssignable,
        E::BuiltInRole(_) | E::SystemExists | E::AlreadyOwner | E::LastSuperAdmin => {
            ErrorCode::Conflict
        }
        E::NotBootstrapIdentifier | E::OwnerOnly | E::SuperAdminOnly => ErrorCode::Forbidden,
        E::StepUpRequired => ErrorCode::StepUpRequired,
    }
}

impl From<tenancy::TenancyError> for ApiError {
    fn from(error: tenancy::TenancyError) -> Self {
        let code = tenancy_code(&error);
        let details = match &error {
            tenancy::TenancyError::Escalation(missing)
            | tenancy::TenancyError::NotAssignable(missing) => {
                Some(json!({"permissions": missing}))
            }
            _ => None,
        };
        ApiError {
            code,
            message: error.to_string(),
            details,
            audited: false,
        }
    }
}

/// The status and code of a refused sign-in (SEMANTICS.md 5).
fn signin_refusal(refusal: crate::services::accounts::SignInRefusal) -> ApiError {
    use crate::services::accounts::SignInRefusal as R;
    let message = refusal.to_string();
    match refusal {
        R::InvalidCredentials => ApiError::new(ErrorCode::InvalidCredentials, message),
        R::TooManyAttempts { retry_after } => ApiError::new(ErrorCode::TooManyAttempts, message)
            .with_details(json!({"retryAfter": retry_after})),
        R::EmailNotVerified => ApiError::new(ErrorCode::EmailNotVerified, message),
        R::InvalidToken(_) => ApiError::unauthorized(message),
        R::NotYourOrganization => ApiError::tenant_forbidden(),
        R::SessionRequired => ApiError::forbidden(message),
        R::AccountDisabled => ApiError::new(ErrorCode::AccountDisabled, message),
        R::PasswordChangeRequired => ApiError::new(ErrorCode::PasswordChangeRequired, message),
    }
}

/// The image registry's failures: what the caller can act on, with a code of ours.
fn registry_error(error: crate::outbound::registry::RegistryError) -> ApiError {
    use crate::outbound::registry::RegistryError as R;
    let message = error.to_string();
    match error {
        R::NotConfigured => ApiError::new(ErrorCode::RegistryNotConfigured, message),
        R::NotFound(_) => ApiError::new(ErrorCode::NotFound, message),
        R::DeletesDisabled => ApiError::new(ErrorCode::RegistryDeleteDisabled, message),
        R::Unreachable(cause) => {
            tracing::warn!(%cause, "the image registry is unavailable");
            ApiError::new(ErrorCode::RegistryUnavailable, message)
        }
        R::DigestMismatch {
            expected, actual, ..
        } => ApiError::new(ErrorCode::RegistryDigestMismatch, message)
            .with_details(json!({"expected": expected, "actual": actual})),
        R::Unsupported(_) => ApiError::new(ErrorCode::ManifestUnsupported, message),
        R::Refused { status, code, .. } => ApiError::new(ErrorCode::RegistryRefused, message)
            .with_details(json!({"registryStatus": status, "registryCode": code})),
        R::SharedDigest { digest, tags } => ApiError::new(ErrorCode::TagShared, message)
            .with_details(json!({"digest": digest, "tags": tags})),
    }
}

/// A generation's failures: the provider's (502, 504), the repository's (422, 504),
/// and every attempt refused (422 `GENERATION_FAILED` with the last problems).
fn generation_error(error: crate::services::generation::GenerationError) -> ApiError {
    use crate::outbound::ai::AiError as A;
    use crate::outbound::git::GitError as G;
    use crate::services::generation::GenerationError as E;
    let message = error.to_string();
    match error {
        E::Provider(failure) => {
            let (code, details) = match &failure {
                A::Unreachable { provider, .. } => (
                    ErrorCode::AiProviderUnavailable,
                    json!({"provider": provider}),
                ),
                A::Refused {
                    provider, status, ..
                } => (
                    ErrorCode::AiProviderError,
                    json!({"provider": provider, "providerStatus": status}),
                ),
                A::Failed { provider, .. } => (
                    ErrorCode::AiProviderError,
                    json!({"provider": provider, "reason": "error_event"}),
                ),
                A::Truncated { provider } => {
                    (ErrorCode::AiStreamTruncated, json!({"provider": provider}))
                }
                A::TooLarge { provider, max } => (
                    ErrorCode::AiOutputTooLarge,
                    json!({"provider": provider, "maxBytes": max}),
                ),
            };
            ApiError::new(code, message).with_details(details)
        }
        E::Timeout { provider, seconds } => ApiError::new(ErrorCode::AiProviderTimeout, message)
            .with_details(json!({"provider": provider, "seconds": seconds})),
        E::Repository(G::Refused(_)) => ApiError::invalid_field("url", message),
        E::Repository(G::Unavailable(_)) => {
            ApiError::new(ErrorCode::RepositoryUnavailable, message)
        }
        E::Repository(G::TooLarge(max)) => ApiError::new(ErrorCode::RepositoryTooLarge, message)
            .with_details(json!({"maxBytes": max})),
        E::Repository(G::Timeout(seconds)) => ApiError::new(ErrorCode::RepositoryTimeout, message)
            .with_details(json!({"seconds": seconds})),
        E::Exhausted {
            kind,
            attempts,
            problems,
        } => ApiError::new(
            ErrorCode::GenerationFailed,
            format!("no usable {kind} after {attempts} attempts"),
        )
        .with_details(json!({"attempts": attempts, "problems": problems})),
        E::Busy { limit } => ApiError::new(ErrorCode::RateLimited, message)
            .with_details(json!({"limit": limit, "retryAfterSeconds": 5})),
        // Nobody reads it: the client went away.
        E::Cancelled => ApiError::new(ErrorCode::Cancelled, message),
    }
}

impl From<crate::services::ServiceError> for ApiError {
    fn from(error: crate::services::ServiceError) -> Self {
        use crate::services::ServiceError as E;
        use compliance_core::ExemptionRefusal;
        match error {
            E::Invalid { field, message } => ApiError::invalid_field(field, message),
            E::NotFound(what) => ApiError::not_found(&what),
            E::Conflict(why) => ApiError::conflict(why),
            E::Forbidden(why) => ApiError::forbidden(why),
            E::Gone(why) => ApiError::new(ErrorCode::Gone, why),
            error @ E::FeatureNotAvailable { feature, tier } => {
                ApiError::new(ErrorCode::FeatureNotAvailable, error.to_string())
                    .with_details(json!({"feature": feature.name(), "tier": tier.name()}))
            }
            error @ E::TierRequired { what, tier } => {
                ApiError::new(ErrorCode::FeatureNotAvailable, error.to_string()).with_details(
                    json!({"feature": what, "tier": tier.name(), "requiredTier": "enterprise"}),
                )
            }
            error @ E::KeyUnavailable(_) => {
                tracing::warn!(%error, "a secret's key cannot be used: failing closed");
                ApiError::new(ErrorCode::KmsUnavailable, error.to_string())
            }
            E::Rules(error) => ApiError::rules(error),
            E::Limit(limit) => ApiError::new(ErrorCode::AttributeLimitExceeded, limit.to_string())
                .with_details(
                    json!({"limit": limit.limit, "max": limit.max, "actual": limit.actual}),
                ),
            E::Malformed(why) => ApiError::validation(why),
            E::Cron(error) => ApiError::new(ErrorCode::InvalidCron, error.to_string())
                .with_details(json!({
                    "field": "cronExpression",
                    "cronField": error.field.map(|f| f.name()),
                    "problem": error.message,
                })),
            E::Unavailable => {
                tracing::warn!("a compliance check could not be made: failing closed");
                ApiError::new(
                    ErrorCode::ComplianceUnavailable,
                    "the compliance rules could not be loaded in time",
                )
            }
            E::Exemption(refusal @ ExemptionRefusal::SelfReview) => {
                ApiError::new(ErrorCode::SelfApprovalForbidden, refusal.to_string())
            }
            E::Exemption(refusal @ ExemptionRefusal::Transition { .. }) => {
                ApiError::conflict(refusal.to_string())
            }
            E::Blocked(evaluation) => ApiError::new(
                ErrorCode::ComplianceViolation,
                "the organization's compliance rules block it",
            )
            .with_details(
                json!({"violations": evaluation.violations, "exempted": evaluation.exempted}),
            ),
            E::Violations(details) => ApiError::new(
                ErrorCode::ComplianceViolation,
                "the organization's compliance rules block it",
            )
            .with_details(details),
            E::Quota { dimension, refusal } => ApiError::new(
                ErrorCode::QuotaExceeded,
                format!(
                    "the {dimension} quota is exhausted: {} used of {}",
                    refusal.used, refusal.limit
                ),
            )
            .with_details(json!({
                "dimension": dimension,
                "limit": refusal.limit,
                "used": refusal.used,
                "requested": refusal.requested,
            })),
            E::Purchase(refusal) => {
                use entitlements::PurchaseError as P;
                let code = match &refusal {
                    P::BundlesDisabled => ErrorCode::BundlesDisabled,
                    P::MarketplaceManaged => ErrorCode::MarketplaceManaged,
                    P::NotEligible { .. } => ErrorCode::BundleNotEligible,
                    P::NotStackable(_) => ErrorCode::BundleNotStackable,
                    P::UnknownBundle(_) | P::InvalidQuantity(_) => ErrorCode::ValidationError,
                    P::NotHeld(_) => ErrorCode::NotFound,
                };
                let details = match &refusal {
                    P::NotEligible { bundle, tier } => json!({"bundleId": bundle, "tier": tier}),
                    P::NotStackable(bundle) | P::UnknownBundle(bundle) | P::NotHeld(bundle) => {
                        json!({"bundleId": bundle})
                    }
                    P::InvalidQuantity(quantity) => {
                        json!({"field": "quantity", "quantity": quantity})
                    }
                    P::BundlesDisabled | P::MarketplaceManaged => json!({}),
                };
                ApiError::new(code, refusal.to_string()).with_details(details)
            }
            E::NotConfigured(why) => ApiError::new(ErrorCode::BillingPortalNotConfigured, why),
            E::Registry(error) => registry_error(error),
            E::Generation(error) => generation_error(error),
            error @ E::RateLimited {
                limit,
                retry_after_seconds,
                ..
            } => ApiError::new(ErrorCode::RateLimited, error.to_string())
                .with_details(json!({"limit": limit, "retryAfterSeconds": retry_after_seconds})),
            E::Tenancy(refusal) => refusal.into(),
            E::SignIn(refusal) => signin_refusal(refusal),
            E::SsoRefused {
                refusal,
                link_token,
            } => ApiError::new(ErrorCode::Sso(refusal), refusal.message()).with_details(
                match link_token {
                    Some(token) => json!({"reason": refusal.reason(), "linkToken": token}),
                    None => json!({"reason": refusal.reason()}),
                },
            ),
            ref error @ E::SsoRequired { ref org_name } => {
                ApiError::new(ErrorCode::SsoRequired, error.to_string()).with_details(json!({
                    "organization": org_name,
                    "signIn": format!("/api/auth/sso/start?org={org_name}"),
                }))
            }
            E::Broken(why) => ApiError::internal(why),
            E::StoreRefused(why) => ApiError::validation(why),
            E::StoreUnavailable(cause) => {
                tracing::warn!(%cause, "database unavailable");
                ApiError::unavailable("the database is unavailable")
            }
            E::Stopping => ApiError::unavailable("the server is stopping"),
            E::Contended(cause) => {
                tracing::warn!(%cause, "a transaction kept rolling back for conflicts");
                ApiError::unavailable("the database is busy with conflicting changes")
            }
        }
    }
}
