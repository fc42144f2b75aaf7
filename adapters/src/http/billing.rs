//! Billing (document 3): `/bundles`, the subscription, add-on previews and changes,
//! the portal, and the platform's seat limit.

use std::collections::BTreeSet;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Extension;
use chrono::Utc;
use entitlements::{BundleChange, BundleId, Feature, Limit};
use serde::Deserialize;
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::extract::Json;
use crate::http::gate::Granted;
use crate::http::response::ok;
use crate::http::state::{AppState, Caller, ServiceCaller};
use crate::services::billing::{self, SeatActor, SeatLimit};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AddonBody {
    bundle_id: String,
    quantity: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SeatLimitBody {
    seats: i64,
    features: Option<Vec<String>>,
    version: Option<i64>,
}

fn bundle(id: &str) -> Result<BundleId, ApiError> {
    BundleId::parse(id).ok_or_else(|| {
        let ids: Vec<&str> = BundleId::ALL.iter().map(|b| b.as_str()).collect();
        ApiError::invalid_field(
            "bundleId",
            format!("`{id}` is not one of {}", ids.join(", ")),
        )
    })
}

fn set_change(body: &AddonBody) -> Result<BundleChange, ApiError> {
    let quantity = body.quantity.unwrap_or(1);
    let quantity = u32::try_from(quantity).map_err(|_| {
        ApiError::invalid_field(
            "quantity",
            format!("must be between 1 and {}", entitlements::MAX_QUANTITY),
        )
    })?;
    Ok(BundleChange::Set {
        bundle: bundle(&body.bundle_id)?,
        quantity,
    })
}

/// `GET /bundles`: the bundles offered to the caller's tier.
pub(crate) async fn bundles(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Response, ApiError> {
    let (enabled, offers) = billing::offers(&state, &granted.org).await?;
    Ok(ok(
        StatusCode::OK,
        json!({"enabled": enabled, "bundles": offers}),
    ))
}

/// `GET /subscriptions/current`: the account's subscription.
pub(crate) async fn current(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Response, ApiError> {
    Ok(ok(
        StatusCode::OK,
        billing::subscription(&state, &granted.org).await?,
    ))
}

/// `POST /subscriptions/:id/addons/preview`: the subscription after the change,
/// nothing committed.
pub(crate) async fn preview(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<AddonBody>,
) -> Result<Response, ApiError> {
    let change = set_change(&body)?;
    Ok(ok(
        StatusCode::OK,
        billing::preview(&state, &granted.org, &id, change).await?,
    ))
}

/// `POST /subscriptions/:id/addons`: add an add-on or set its quantity.
pub(crate) async fn add(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<AddonBody>,
) -> Result<Response, ApiError> {
    let change = set_change(&body)?;
    let view = billing::change(&state, &caller, &granted.org, &id, change, Utc::now()).await?;
    Ok(ok(StatusCode::OK, view))
}

/// `DELETE /subscriptions/:id/addons/:bundleId`.
pub(crate) async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((id, bundle_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let change = BundleChange::Remove {
        bundle: bundle(&bundle_id)?,
    };
    let view = billing::change(&state, &caller, &granted.org, &id, change, Utc::now()).await?;
    Ok(ok(StatusCode::OK, view))
}

/// `POST /portal`: the billing portal's address for the account.
pub(crate) async fn portal(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Response, ApiError> {
    let url = billing::portal(&state, &granted.org).await?;
    Ok(ok(StatusCode::OK, json!({"url": url})))
}

/// `PUT /organization/:id/seat-limit` (a super-admin or the billing service).
pub(crate) async fn seat_limit(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    service: Option<Extension<ServiceCaller>>,
    Path(org_id): Path<String>,
    Json(body): Json<SeatLimitBody>,
) -> Result<Response, ApiError> {
    let seats = Limit::from_wire(body.seats).ok_or_else(|| {
        ApiError::invalid_field("seats", "must be -1 (unlimited) or a non-negative integer")
    })?;
    let features = body
        .features
        .map(|names| {
            names
                .iter()
                .map(|name| {
                    serde_json::from_value::<Feature>(json!(name)).map_err(|_| {
                        ApiError::invalid_field("features", format!("`{name}` is not a feature"))
                    })
                })
                .collect::<Result<BTreeSet<Feature>, ApiError>>()
        })
        .transpose()?;
    let version = body
        .version
        .map(|v| {
            u64::try_from(v)
                .ok()
                .filter(|v| i64::try_from(*v).is_ok())
                .ok_or_else(|| ApiError::invalid_field("version", "must be a non-negative integer"))
        })
        .transpose()?;
    let actor = match (&caller, &service) {
        (Some(Extension(caller)), _) => SeatActor::Admin(caller),
        (None, Some(Extension(service))) => SeatActor::Service(&service.service),
        (None, None) => return Err(ApiError::internal("the route admits nobody")),
    };
    let view = billing::set_seat_limit(
        &state,
        actor,
        &org_id,
        SeatLimit {
            seats,
            features,
            version,
        },
        Utc::now(),
    )
    .await?;
    Ok(ok(StatusCode::OK, view))
}
