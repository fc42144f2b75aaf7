//! Quotas and billing: usage against limits per dimension as bars, the add-ons with
//! a preview before purchase, and (for super-admins) the tier, a step-up action that
//! asks for the password again.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::Method;
use axum::response::Response;
use entitlements::BundleId;
use serde_json::json;

use super::api::{self, act, segment, Call, Refusal};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::{Posted, Visitor};
use super::{field, Console};
use crate::http::billing::{Bundles, Subscription};
use crate::http::organizations::TierChanged;
use crate::http::quotas::OrgQuotas;

/// One quota.
pub struct Usage {
    name: String,
    used: u64,
    limit: i64,
    unlimited: bool,
    reset_at: String,
}

/// A bundle offered.
pub struct Offer {
    id: &'static str,
    monthly: String,
    grant: String,
    held: u32,
}

#[derive(Template)]
#[template(path = "console/billing.html")]
struct BillingPage {
    frame: Frame,
    tier: String,
    usage: Vec<Usage>,
    offers: Vec<Offer>,
    bundles_enabled: bool,
    previewed: String,
    tiers: [&'static str; 4],
}

async fn show(
    console: &Console,
    visitor: &Visitor,
    q: &HashMap<String, String>,
    (outcome, previewed): (Option<Result<String, Refusal>>, String),
) -> Result<Response, Refusal> {
    let mut frame = Frame::load(
        console,
        visitor,
        q,
        ("Quotas and billing", "/console/billing"),
    )
    .await?;
    if frame.org.is_empty() {
        return Ok(page::empty(frame));
    }
    let quotas: Option<OrgQuotas> = frame
        .read(visitor, ("myQuotas", "quotas"), "/api/quotas")
        .await?;
    let tier = quotas
        .as_ref()
        .map(|q| api::wire(&q.tier))
        .unwrap_or_default();
    // By name, as the answer's map keeps them.
    let usage: Vec<Usage> = quotas
        .into_iter()
        .flat_map(|q| q.quotas)
        .map(|(name, q)| Usage {
            name,
            used: q.used,
            limit: q.limit,
            unlimited: q.limit < 0,
            reset_at: q.reset_at.as_ref().map(api::instant).unwrap_or_default(),
        })
        .collect();
    let subscription: Option<Subscription> = frame
        .read(
            visitor,
            ("currentSubscription", "the subscription"),
            "/api/subscriptions/current",
        )
        .await?;
    let held: HashMap<BundleId, u32> = subscription
        .into_iter()
        .flat_map(|s| s.addons)
        .map(|a| (a.bundle, a.quantity))
        .collect();
    let bundles: Option<Bundles> = frame
        .read(visitor, ("listBundles", "add-ons"), "/api/bundles")
        .await?;
    let bundles_enabled = bundles.as_ref().is_some_and(|b| b.enabled);
    let offers = bundles
        .into_iter()
        .flat_map(|b| b.bundles)
        .map(|b| Offer {
            monthly: api::wire(&b.monthly_usd),
            grant: serde_json::to_string(&b.grant).unwrap_or_default(),
            held: held.get(&b.id).copied().unwrap_or(0),
            id: b.id.as_str(),
        })
        .collect();
    let code = frame.settle(outcome);
    Ok(page::render(
        &BillingPage {
            frame,
            tier,
            usage,
            offers,
            bundles_enabled,
            previewed,
            tiers: ["developer", "pro", "team", "enterprise"],
        },
        code,
    ))
}

/// `GET /console/billing`.
pub async fn page(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    show(&console, &visitor, &q, (None, String::new()))
        .await
        .unwrap_or_else(page::refused)
}

/// The limits an entitlement states, in one line (`seats 11, pipelines 300, ...`;
/// -1 is unlimited).
fn limits_line(subscription: &Subscription) -> String {
    subscription
        .entitlement
        .limits
        .iter()
        .map(|l| format!("{} {}", api::wire(&l.dimension), api::wire(&l.total)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `POST /console/billing`: `preview` and `purchase` an add-on; `tier` (step-up).
pub async fn action(State(console): State<Console>, posted: Posted) -> Response {
    let Posted { visitor, form } = posted;
    let org = field(&form, "org").to_owned();
    let bundle = field(&form, "bundleId").to_owned();
    let mut previewed = String::new();
    let outcome = async {
        match field(&form, "action") {
            kind @ ("preview" | "purchase") => {
                let current: Subscription = visitor
                    .api
                    .get("/api/subscriptions/current", Some(&org))
                    .await?;
                let suffix = if kind == "preview" { "/preview" } else { "" };
                let uri = format!(
                    "/api/subscriptions/{}/addons{suffix}",
                    segment(&current.id)?
                );
                let after: Subscription = act(
                    &visitor.api,
                    (Method::POST, &uri),
                    &org,
                    Some(json!({"bundleId": bundle})),
                )
                .await?;
                if kind == "preview" {
                    previewed = bundle.clone();
                    Ok(format!(
                        "with {bundle} the limits would be: {}",
                        limits_line(&after)
                    ))
                } else {
                    Ok(format!(
                        "{bundle} added; the limits are now: {}",
                        limits_line(&after)
                    ))
                }
            }
            "tier" => {
                let proof = visitor
                    .api
                    .step_up(form.get("password").map_or("", String::as_str))
                    .await?;
                let uri = format!("/api/organization/{}/tier", segment(&org)?);
                let done: TierChanged = visitor
                    .api
                    .data(Call {
                        method: Some(Method::PATCH),
                        uri: &uri,
                        org: Some(&org),
                        body: Some(json!({"tier": field(&form, "tier")})),
                        step_up: Some(&proof),
                        ..Call::default()
                    })
                    .await?;
                Ok(format!(
                    "the tier is now {}",
                    api::wire(&done.organization.tier)
                ))
            }
            _ => Err(unknown_action()),
        }
    }
    .await;
    show(
        &console,
        &visitor,
        &page::again(org),
        (Some(outcome), previewed),
    )
    .await
    .unwrap_or_else(page::refused)
}
