//! Alerts: the organization's rules with their state, the ones firing, a rule's
//! history (its transitions and each delivery's outcome), and the destinations
//! with a test button that shows each target's answer. Read through the API, into
//! types.

use std::collections::HashMap;

use super::api::{self, act, segment, Refusal};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::Visitor;
use super::{field, Console};
use crate::http::alerts::{DestinationList, History, RuleList};
use crate::services::alerts::{AlertRule, Destination, HistoryEntry, TestResult};
use askama::Template;
use axum::http::Method;
use axum::response::Response;

/// A rule as the page lists it.
pub struct RuleView {
    id: String,
    name: String,
    metric: String,
    comparison: String,
    threshold: f64,
    window: String,
    state: String,
    state_since: Option<String>,
    last_value: Option<f64>,
    severity: String,
    paused: bool,
}

impl From<AlertRule> for RuleView {
    fn from(r: AlertRule) -> RuleView {
        RuleView {
            metric: api::wire(&r.metric),
            comparison: api::wire(&r.comparison),
            state: api::wire(&r.state),
            severity: api::wire(&r.severity),
            state_since: r.state_since.as_ref().map(api::instant),
            id: r.id,
            name: r.name,
            threshold: r.threshold,
            window: r.window,
            last_value: r.last_value,
            paused: r.paused,
        }
    }
}

impl RuleView {
    fn condition(&self) -> String {
        let op = match self.comparison.as_str() {
            "gt" => ">",
            "gte" => "≥",
            "lt" => "<",
            _ => "≤",
        };
        format!(
            "{} {op} {} over {}",
            self.metric, self.threshold, self.window
        )
    }

    fn value(&self) -> String {
        self.last_value
            .map_or("no data".to_owned(), |v| v.to_string())
    }

    fn since(&self) -> String {
        self.state_since.clone().unwrap_or_default()
    }
}

/// A destination as the page lists it.
pub struct DestinationView {
    id: String,
    name: String,
    kind: String,
    addresses: Vec<String>,
    host: Option<String>,
    hint: Option<String>,
}

impl From<Destination> for DestinationView {
    fn from(d: Destination) -> DestinationView {
        DestinationView {
            kind: api::wire(&d.kind),
            id: d.id,
            name: d.name,
            addresses: d.addresses,
            host: d.host,
            hint: d.hint,
        }
    }
}

impl DestinationView {
    fn shown(&self) -> String {
        match self.kind.as_str() {
            "email" => self.addresses.join(", "),
            _ => [self.host.clone(), self.hint.clone()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// One delivery of a notice.
pub struct DeliveryView {
    destination_id: String,
    status: String,
    attempts: u32,
    last_error: Option<String>,
}

/// One transition.
pub struct TransitionView {
    at: String,
    from: String,
    to: String,
    value: Option<f64>,
    notice: Option<String>,
    deliveries: Vec<DeliveryView>,
}

impl From<HistoryEntry> for TransitionView {
    fn from(t: HistoryEntry) -> TransitionView {
        TransitionView {
            at: api::instant(&t.at),
            from: t.from,
            to: t.to,
            value: t.value,
            notice: t.notice,
            deliveries: t
                .deliveries
                .into_iter()
                .map(|d| DeliveryView {
                    destination_id: d.destination_id,
                    status: d.status,
                    attempts: d.attempts,
                    last_error: d.last_error,
                })
                .collect(),
        }
    }
}

impl TransitionView {
    fn value(&self) -> String {
        self.value.map_or("no data".to_owned(), |v| v.to_string())
    }

    fn notice(&self) -> String {
        self.notice.clone().unwrap_or_default()
    }
}

impl DeliveryView {
    fn error(&self) -> String {
        self.last_error.clone().unwrap_or_default()
    }
}

#[derive(Template)]
#[template(path = "console/alerts.html")]
struct AlertsPage {
    frame: Frame,
    rules: Vec<RuleView>,
    firing: Vec<String>,
    destinations: Vec<DestinationView>,
    history: Option<(String, Vec<TransitionView>)>,
}

/// The page: [`page::get`] and [`page::post`] are its handlers.
pub struct Page;

impl page::Acting for Page {
    const PLACE: (&'static str, &'static str) = ("Alerts", "/console/alerts");

    async fn show(
        _console: &Console,
        visitor: &Visitor,
        mut frame: Frame,
        q: &HashMap<String, String>,
        outcome: Option<Result<String, Refusal>>,
    ) -> Result<Response, Refusal> {
        let rules: Vec<RuleView> = frame
            .read::<RuleList>(
                visitor,
                ("listAlertRules", "alert rules"),
                "/api/alerts/rules",
            )
            .await?
            .into_iter()
            .flat_map(|list| list.rules)
            .map(RuleView::from)
            .collect();
        let destinations = frame
            .read::<DestinationList>(
                visitor,
                ("listAlertDestinations", "destinations"),
                "/api/alerts/destinations",
            )
            .await?
            .into_iter()
            .flat_map(|list| list.destinations)
            .map(DestinationView::from)
            .collect();
        let firing = rules
            .iter()
            .filter(|r| r.state == "firing")
            .map(|r| r.name.clone())
            .collect();
        let mut history = None;
        if let Some(id) = q.get("rule").filter(|r| !r.is_empty()) {
            let uri = format!("/api/alerts/rules/{}/history", segment(id)?);
            let answer = frame
                .read::<History>(visitor, ("alertRuleHistory", "the rule's history"), &uri)
                .await?;
            if let Some(answer) = answer {
                let name = rules
                    .iter()
                    .find(|r| r.id == *id)
                    .map_or_else(|| id.clone(), |r| r.name.clone());
                let transitions = answer
                    .transitions
                    .into_iter()
                    .map(TransitionView::from)
                    .collect();
                history = Some((name, transitions));
            }
        }
        let code = frame.settle(outcome);
        Ok(page::render(
            &AlertsPage {
                frame,
                rules,
                firing,
                destinations,
                history,
            },
            code,
        ))
    }

    /// `POST /console/alerts`: `test` a destination (its targets' answers shown).
    async fn act(
        visitor: &Visitor,
        form: &HashMap<String, String>,
        org: &str,
    ) -> Result<String, Refusal> {
        match field(form, "action") {
            "test" => {
                let id = segment(field(form, "id"))?;
                let uri = format!("/api/alerts/destinations/{id}/test");
                let tested: TestResult = act(&visitor.api, (Method::POST, &uri), org, None).await?;
                let shown: Vec<String> = tested
                    .targets
                    .iter()
                    .map(|t| {
                        let mut line = format!("{}: {}", t.target, t.status);
                        if let Some(code) = t.http_status {
                            line.push_str(&format!(" ({code})"));
                        }
                        if let Some(error) = &t.error {
                            line.push_str(&format!(", {error}"));
                        }
                        line.push_str(&format!(", {} ms", t.latency_ms));
                        line
                    })
                    .collect();
                Ok(format!("test sent: {}", shown.join("; ")))
            }
            _ => Err(unknown_action()),
        }
    }
}
