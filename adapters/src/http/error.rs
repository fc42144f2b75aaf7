//! The one error type of the server: the error envelope of document 2, with the
//! codes of SEMANTICS.md 5.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// An error answered in the envelope `{success: false, statusCode, code, message, details?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The machine-readable code, for example `VALIDATION_ERROR`.
    pub code: &'static str,
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
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            details: None,
            audited: false,
        }
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
        ApiError::new(StatusCode::BAD_REQUEST, "VALIDATION_ERROR", message)
    }

    /// 400 `VALIDATION_ERROR` naming the field at fault.
    pub fn invalid_field(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        ApiError::validation(format!("{field}: {message}"))
            .with_details(json!({"field": field, "problem": message}))
    }

    /// 401 `UNAUTHORIZED`.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", message)
    }

    /// 403 `TENANT_FORBIDDEN`.
    pub fn tenant_forbidden() -> Self {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "TENANT_FORBIDDEN",
            "x-org-id is missing or names an organization you do not belong to",
        )
    }

    /// 403 `FORBIDDEN`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, "FORBIDDEN", message)
    }

    /// 404 `NOT_FOUND`.
    pub fn not_found(what: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            format!("{what} not found"),
        )
    }

    /// 409 `CONFLICT`.
    pub fn conflict(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::CONFLICT, "CONFLICT", message)
    }

    /// 413 `PAYLOAD_TOO_LARGE`.
    pub fn payload_too_large() -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "PAYLOAD_TOO_LARGE",
            "the request body is too large",
        )
    }

    /// 503 `SERVICE_UNAVAILABLE`.
    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "SERVICE_UNAVAILABLE",
            message,
        )
    }

    /// 500 `INTERNAL_ERROR`; the cause is logged, not shown.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(%cause, "internal error");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL_ERROR",
            "internal error",
        )
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
            "statusCode": self.status.as_u16(),
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
            self.status.as_u16(),
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
        let retry_after = match self.status {
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
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

/// The status and code of SEMANTICS.md 5 for a refusal of tenancy (the pure crate knows
/// nothing of HTTP).
fn tenancy_status(error: &tenancy::TenancyError) -> (StatusCode, &'static str) {
    use tenancy::TenancyError as E;
    match error {
        E::TeamUnderTeam | E::TeamUnderSystem | E::NewOwnerNotMember => {
            (StatusCode::BAD_REQUEST, "VALIDATION_ERROR")
        }
        E::Escalation(_) => (StatusCode::FORBIDDEN, "PERMISSION_ESCALATION"),
        E::NotAssignable(_) => (StatusCode::BAD_REQUEST, "PERMISSION_NOT_ASSIGNABLE"),
        E::BuiltInRole(_) | E::SystemExists | E::AlreadyOwner | E::LastSuperAdmin => {
            (StatusCode::CONFLICT, "CONFLICT")
        }
        E::NotBootstrapIdentifier | E::OwnerOnly | E::SuperAdminOnly => {
            (StatusCode::FORBIDDEN, "FORBIDDEN")
        }
        E::StepUpRequired => (StatusCode::FORBIDDEN, "STEP_UP_REQUIRED"),
    }
}

impl From<tenancy::TenancyError> for ApiError {
    fn from(error: tenancy::TenancyError) -> Self {
        let (status, code) = tenancy_status(&error);
        let details = match &error {
            tenancy::TenancyError::Escalation(missing)
            | tenancy::TenancyError::NotAssignable(missing) => {
                Some(json!({"permissions": missing}))
            }
            _ => None,
        };
        ApiError {
            status,
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
        R::InvalidCredentials => {
            ApiError::new(StatusCode::UNAUTHORIZED, "INVALID_CREDENTIALS", message)
        }
        R::TooManyAttempts { retry_after } => {
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, "TOO_MANY_ATTEMPTS", message)
                .with_details(json!({"retryAfter": retry_after}))
        }
        R::EmailNotVerified => ApiError::new(StatusCode::FORBIDDEN, "EMAIL_NOT_VERIFIED", message),
        R::InvalidToken(_) => ApiError::unauthorized(message),
        R::NotYourOrganization => ApiError::tenant_forbidden(),
        R::SessionRequired => ApiError::forbidden(message),
        R::AccountDisabled => ApiError::new(StatusCode::FORBIDDEN, "ACCOUNT_DISABLED", message),
        R::PasswordChangeRequired => {
            ApiError::new(StatusCode::FORBIDDEN, "PASSWORD_CHANGE_REQUIRED", message)
        }
    }
}

/// The image registry's failures: what the caller can act on, with a code of ours.
fn registry_error(error: crate::outbound::registry::RegistryError) -> ApiError {
    use crate::outbound::registry::RegistryError as R;
    let message = error.to_string();
    match error {
        R::NotConfigured => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "REGISTRY_NOT_CONFIGURED",
            message,
        ),
        R::NotFound(_) => ApiError::new(StatusCode::NOT_FOUND, "NOT_FOUND", message),
        R::DeletesDisabled => {
            ApiError::new(StatusCode::CONFLICT, "REGISTRY_DELETE_DISABLED", message)
        }
        R::Unreachable(cause) => {
            tracing::warn!(%cause, "the image registry is unavailable");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "REGISTRY_UNAVAILABLE",
                message,
            )
        }
        R::DigestMismatch {
            expected, actual, ..
        } => ApiError::new(StatusCode::BAD_GATEWAY, "REGISTRY_DIGEST_MISMATCH", message)
            .with_details(json!({"expected": expected, "actual": actual})),
        R::Unsupported(_) => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "MANIFEST_UNSUPPORTED",
            message,
        ),
        R::Refused { status, code, .. } => {
            ApiError::new(StatusCode::BAD_GATEWAY, "REGISTRY_REFUSED", message)
                .with_details(json!({"registryStatus": status, "registryCode": code}))
        }
        R::SharedDigest { digest, tags } => {
            ApiError::new(StatusCode::CONFLICT, "TAG_SHARED", message)
                .with_details(json!({"digest": digest, "tags": tags}))
        }
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
                A::Unreachable { provider, .. } => {
                    ("AI_PROVIDER_UNAVAILABLE", json!({"provider": provider}))
                }
                A::Refused {
                    provider, status, ..
                } => (
                    "AI_PROVIDER_ERROR",
                    json!({"provider": provider, "providerStatus": status}),
                ),
                A::Failed { provider, .. } => (
                    "AI_PROVIDER_ERROR",
                    json!({"provider": provider, "reason": "error_event"}),
                ),
                A::Truncated { provider } => ("AI_STREAM_TRUNCATED", json!({"provider": provider})),
                A::TooLarge { provider, max } => (
                    "AI_OUTPUT_TOO_LARGE",
                    json!({"provider": provider, "maxBytes": max}),
                ),
            };
            ApiError::new(StatusCode::BAD_GATEWAY, code, message).with_details(details)
        }
        E::Timeout { provider, seconds } => {
            ApiError::new(StatusCode::GATEWAY_TIMEOUT, "AI_PROVIDER_TIMEOUT", message)
                .with_details(json!({"provider": provider, "seconds": seconds}))
        }
        E::Repository(G::Refused(_)) => ApiError::invalid_field("url", message),
        E::Repository(G::Unavailable(_)) => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "REPOSITORY_UNAVAILABLE",
            message,
        ),
        E::Repository(G::TooLarge(max)) => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "REPOSITORY_TOO_LARGE",
            message,
        )
        .with_details(json!({"maxBytes": max})),
        E::Repository(G::Timeout(seconds)) => {
            ApiError::new(StatusCode::GATEWAY_TIMEOUT, "REPOSITORY_TIMEOUT", message)
                .with_details(json!({"seconds": seconds}))
        }
        E::Exhausted {
            kind,
            attempts,
            problems,
        } => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "GENERATION_FAILED",
            format!("no usable {kind} after {attempts} attempts"),
        )
        .with_details(json!({"attempts": attempts, "problems": problems})),
        E::Busy { limit } => ApiError::new(StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED", message)
            .with_details(json!({"limit": limit, "retryAfterSeconds": 5})),
        // Nobody reads it: the client went away.
        E::Cancelled => ApiError::new(StatusCode::BAD_REQUEST, "CANCELLED", message),
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
            E::Gone(why) => ApiError::new(StatusCode::GONE, "GONE", why),
            error @ E::FeatureNotAvailable { feature, tier } => ApiError::new(
                StatusCode::FORBIDDEN,
                "FEATURE_NOT_AVAILABLE",
                error.to_string(),
            )
            .with_details(json!({"feature": feature.name(), "tier": tier.name()})),
            error @ E::TierRequired { what, tier } => ApiError::new(
                StatusCode::FORBIDDEN,
                "FEATURE_NOT_AVAILABLE",
                error.to_string(),
            )
            .with_details(
                json!({"feature": what, "tier": tier.name(), "requiredTier": "enterprise"}),
            ),
            error @ E::KeyUnavailable(_) => {
                tracing::warn!(%error, "a secret's key cannot be used: failing closed");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "KMS_UNAVAILABLE",
                    error.to_string(),
                )
            }
            E::Rules(error) => ApiError::rules(error),
            E::Limit(limit) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "ATTRIBUTE_LIMIT_EXCEEDED",
                limit.to_string(),
            )
            .with_details(json!({"limit": limit.limit, "max": limit.max, "actual": limit.actual})),
            E::Malformed(why) => ApiError::validation(why),
            E::Cron(error) => {
                ApiError::new(StatusCode::BAD_REQUEST, "INVALID_CRON", error.to_string())
                    .with_details(json!({
                        "field": "cronExpression",
                        "cronField": error.field.map(|f| f.name()),
                        "problem": error.message,
                    }))
            }
            E::Unavailable => {
                tracing::warn!("a compliance check could not be made: failing closed");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "COMPLIANCE_UNAVAILABLE",
                    "the compliance rules could not be loaded in time",
                )
            }
            E::Exemption(refusal @ ExemptionRefusal::SelfReview) => ApiError::new(
                StatusCode::FORBIDDEN,
                "SELF_APPROVAL_FORBIDDEN",
                refusal.to_string(),
            ),
            E::Exemption(refusal @ ExemptionRefusal::Transition { .. }) => {
                ApiError::conflict(refusal.to_string())
            }
            E::Blocked(evaluation) => ApiError::new(
                StatusCode::FORBIDDEN,
                "COMPLIANCE_VIOLATION",
                "the organization's compliance rules block it",
            )
            .with_details(
                json!({"violations": evaluation.violations, "exempted": evaluation.exempted}),
            ),
            E::Violations(details) => ApiError::new(
                StatusCode::FORBIDDEN,
                "COMPLIANCE_VIOLATION",
                "the organization's compliance rules block it",
            )
            .with_details(details),
            E::Quota { dimension, refusal } => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "QUOTA_EXCEEDED",
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
                let (status, code) = match &refusal {
                    P::BundlesDisabled => (StatusCode::FORBIDDEN, "BUNDLES_DISABLED"),
                    P::MarketplaceManaged => (StatusCode::FORBIDDEN, "MARKETPLACE_MANAGED"),
                    P::NotEligible { .. } => (StatusCode::FORBIDDEN, "BUNDLE_NOT_ELIGIBLE"),
                    P::NotStackable(_) => (StatusCode::BAD_REQUEST, "BUNDLE_NOT_STACKABLE"),
                    P::UnknownBundle(_) | P::InvalidQuantity(_) => {
                        (StatusCode::BAD_REQUEST, "VALIDATION_ERROR")
                    }
                    P::NotHeld(_) => (StatusCode::NOT_FOUND, "NOT_FOUND"),
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
                ApiError::new(status, code, refusal.to_string()).with_details(details)
            }
            E::NotConfigured(code, why) => ApiError::new(StatusCode::NOT_FOUND, code, why),
            E::Registry(error) => registry_error(error),
            E::Generation(error) => generation_error(error),
            error @ E::RateLimited {
                limit,
                retry_after_seconds,
                ..
            } => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "RATE_LIMITED",
                error.to_string(),
            )
            .with_details(json!({"limit": limit, "retryAfterSeconds": retry_after_seconds})),
            E::Tenancy(refusal) => refusal.into(),
            E::SignIn(refusal) => signin_refusal(refusal),
            E::SsoRefused {
                refusal,
                link_token,
            } => ApiError::new(StatusCode::UNAUTHORIZED, refusal.code(), refusal.message())
                .with_details(match link_token {
                    Some(token) => json!({"reason": refusal.reason(), "linkToken": token}),
                    None => json!({"reason": refusal.reason()}),
                }),
            ref error @ E::SsoRequired { ref org_name } => {
                ApiError::new(StatusCode::FORBIDDEN, "SSO_REQUIRED", error.to_string())
                    .with_details(json!({
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
        }
    }
}
