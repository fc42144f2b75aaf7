//! Billing (document 3): `/bundles`, the subscription, add-on previews and changes,
//! the portal, and the platform's seat limit.

use std::collections::BTreeSet;

use axum::extract::{Path, State};
use axum::Extension;
use chrono::Utc;
use entitlements::{
    AppliedBundle, BillingProvider, BundleChange, BundleId, Feature, Grant, Limit, LimitBreakdown,
    Tier,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::extract::Json;
use crate::http::gate::Granted;
use crate::http::response::Answer;
use crate::http::state::{AppState, Caller, ServiceCaller};
use crate::services::billing::{self, Offer, SeatActor, SeatLimit, SubscriptionView};

/// An add-on and how many units of it (1 when left out).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AddonBody {
    /// A bundle id, in any case.
    #[schema(value_type = BundleId)]
    bundle_id: String,
    #[schema(minimum = 1, maximum = 10000)]
    quantity: Option<i64>,
}

/// An account root's seat limit and purchased features.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SeatLimitBody {
    /// -1 unlimited.
    #[schema(minimum = -1)]
    seats: i64,
    #[schema(value_type = Option<Vec<Feature>>)]
    features: Option<Vec<String>>,
    /// The sender's version of the change; one older than the last applied is 409.
    #[schema(minimum = 0)]
    version: Option<i64>,
}

/// A bundle as offered to the account's tier.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleOffer {
    pub id: BundleId,
    /// What one unit grants.
    pub grant: Grant,
    pub monthly_cents: u64,
    pub annual_cents: u64,
    pub monthly_usd: f64,
    pub annual_usd: f64,
    /// Whether more than one unit may be held.
    pub stackable: bool,
    pub eligible_tiers: Vec<Tier>,
}

impl From<Offer> for BundleOffer {
    fn from(o: Offer) -> Self {
        BundleOffer {
            id: o.id,
            grant: o.grant,
            monthly_cents: o.monthly_cents,
            annual_cents: o.annual_cents,
            monthly_usd: o.monthly_usd,
            annual_usd: o.annual_usd,
            stackable: o.stackable,
            eligible_tiers: o.eligible_tiers,
        }
    }
}

/// The bundles offered, none unless the operator enabled them and billing is direct.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Bundles {
    pub enabled: bool,
    pub bundles: Vec<BundleOffer>,
}

/// The effective entitlement: each limit with its base and bundle contributions.
#[derive(Debug, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Entitlement {
    pub tier: Tier,
    pub limits: Vec<LimitBreakdown>,
    pub features: BTreeSet<Feature>,
    /// Features bought or granted (synchronized to the platform).
    pub purchased_features: BTreeSet<Feature>,
    pub idp_configurations: u32,
}

/// An account's billing subscription and the entitlement it gives.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subscription {
    /// The `{id}` of the add-on endpoints.
    pub id: String,
    /// The account root.
    pub org_id: String,
    pub tier: Tier,
    pub status: String,
    pub billing_provider: BillingProvider,
    pub addons: Vec<AppliedBundle>,
    /// Raised by every change.
    pub version: i64,
    pub entitlement: Entitlement,
}

impl From<SubscriptionView> for Subscription {
    fn from(v: SubscriptionView) -> Self {
        let e = v.entitlement;
        Subscription {
            id: v.id,
            org_id: v.org_id,
            tier: v.tier,
            status: v.status,
            billing_provider: v.billing_provider,
            addons: v.addons,
            version: v.version,
            entitlement: Entitlement {
                tier: e.tier,
                limits: e.limits,
                features: e.features,
                purchased_features: e.purchased_features,
                idp_configurations: e.idp_configurations,
            },
        }
    }
}

/// The billing portal's address.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Portal {
    pub url: String,
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
) -> Result<Answer<Bundles>, ApiError> {
    let (enabled, offers) =
        billing::offers(&state.infra.store, &state.config, &granted.org).await?;
    Ok(Answer::ok(Bundles {
        enabled,
        bundles: offers.into_iter().map(BundleOffer::from).collect(),
    }))
}

/// `GET /subscriptions/current`: the account's subscription.
pub(crate) async fn current(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<Subscription>, ApiError> {
    let view = billing::subscription(&state.infra.store, &state.config, &granted.org).await?;
    Ok(Answer::ok(view.into()))
}

/// `POST /subscriptions/:id/addons/preview`: the subscription after the change,
/// nothing committed.
pub(crate) async fn preview(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<AddonBody>,
) -> Result<Answer<Subscription>, ApiError> {
    let change = set_change(&body)?;
    let view =
        billing::preview(&state.infra.store, &state.config, &granted.org, &id, change).await?;
    Ok(Answer::ok(view.into()))
}

/// `POST /subscriptions/:id/addons`: add an add-on or set its quantity.
pub(crate) async fn add(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<AddonBody>,
) -> Result<Answer<Subscription>, ApiError> {
    let change = set_change(&body)?;
    let view = billing::change(
        &state.infra.store,
        &state.config,
        &state.replica.allowances,
        &caller,
        &granted.org,
        &id,
        change,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(view.into()))
}

/// `DELETE /subscriptions/:id/addons/:bundleId`.
pub(crate) async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((id, bundle_id)): Path<(String, String)>,
) -> Result<Answer<Subscription>, ApiError> {
    let change = BundleChange::Remove {
        bundle: bundle(&bundle_id)?,
    };
    let view = billing::change(
        &state.infra.store,
        &state.config,
        &state.replica.allowances,
        &caller,
        &granted.org,
        &id,
        change,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(view.into()))
}

/// `POST /portal`: the billing portal's address for the account.
pub(crate) async fn portal(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<Portal>, ApiError> {
    let url = billing::portal(&state.infra.store, &state.config, &granted.org).await?;
    Ok(Answer::ok(Portal { url }))
}

/// `PUT /organization/:id/seat-limit` (a super-admin or the billing service).
pub(crate) async fn seat_limit(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    service: Option<Extension<ServiceCaller>>,
    Path(org_id): Path<String>,
    Json(body): Json<SeatLimitBody>,
) -> Result<Answer<Subscription>, ApiError> {
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
        &state.infra.store,
        &state.config,
        &state.replica.allowances,
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
    Ok(Answer::ok(view.into()))
}
