//! Quotas and billing: usage against limits per dimension as bars, the add-ons with
//! a preview before purchase, and (for super-admins) the tier, a step-up action that
//! asks for the password again.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::Method;
use axum::response::Response;
use serde_json::{json, Value};

use super::api::{self, act, segment, Call, Refusal};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::{Posted, Visitor};
use super::{field, Console};

/// One quota.
pub struct Usage {
    name: String,
    used: i64,
    limit: i64,
    unlimited: bool,
    reset_at: String,
}

/// A bundle offered.
pub struct Offer {
    id: String,
    monthly: String,
    grant: String,
    held: i64,
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
    let quotas = frame
        .read(visitor, ("myQuotas", "quotas"), "/api/quotas")
        .await?;
    let mut usage: Vec<Usage> = quotas
        .get("quotas")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, q)| {
            let limit = api::number(q, "limit");
            Usage {
                name: name.clone(),
                used: api::number(q, "used"),
                limit,
                unlimited: limit < 0,
                reset_at: api::text(q, "resetAt"),
            }
        })
        .collect();
    usage.sort_by(|a, b| a.name.cmp(&b.name));
    let subscription = frame
        .read(
            visitor,
            ("currentSubscription", "the subscription"),
            "/api/subscriptions/current",
        )
        .await?;
    let held: HashMap<String, i64> = subscription
        .get("addons")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|a| (api::text(a, "bundle"), api::number(a, "quantity")))
        .collect();
    let bundles = frame
        .read(visitor, ("listBundles", "add-ons"), "/api/bundles")
        .await?;
    let offers = bundles
        .get("bundles")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|b| {
            let id = api::text(b, "id");
            Offer {
                monthly: b
                    .get("monthlyUsd")
                    .map(Value::to_string)
                    .unwrap_or_default(),
                grant: b.get("grant").map(Value::to_string).unwrap_or_default(),
                held: held.get(&id).copied().unwrap_or(0),
                id,
            }
        })
        .collect();
    let code = frame.settle(outcome);
    Ok(page::render(
        &BillingPage {
            frame,
            tier: api::text(&quotas, "tier"),
            usage,
            offers,
            bundles_enabled: bundles
                .get("enabled")
                .and_then(Value::as_bool)
                .unwrap_or(false),
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
fn limits_line(subscription: &Value) -> String {
    subscription
        .pointer("/entitlement/limits")
        .and_then(Value::as_array)
        .map(|limits| {
            limits
                .iter()
                .map(|l| format!("{} {}", api::text(l, "dimension"), api::number(l, "total")))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
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
                let current = visitor
                    .api
                    .get("/api/subscriptions/current", Some(&org))
                    .await?;
                let id = api::text(&current, "id");
                let suffix = if kind == "preview" { "/preview" } else { "" };
                let uri = format!("/api/subscriptions/{}/addons{suffix}", segment(&id)?);
                let after = act(
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
                    .json(Call {
                        method: Some(Method::POST),
                        uri: "/api/auth/step-up",
                        body: Some(
                            json!({"password": form.get("password").cloned().unwrap_or_default()}),
                        ),
                        ..Call::default()
                    })
                    .await?;
                let token = api::text(&proof, "stepUpToken");
                let uri = format!("/api/organization/{}/tier", segment(&org)?);
                let done = visitor
                    .api
                    .json(Call {
                        method: Some(Method::PATCH),
                        uri: &uri,
                        org: Some(&org),
                        body: Some(json!({"tier": field(&form, "tier")})),
                        step_up: Some(&token),
                    })
                    .await?;
                Ok(format!("the tier is now {}", api::text(&done, "tier")))
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
