//! The routes of one area: watching the reports (dashboards and alerts).

use super::*;
use crate::services::alerts as alert_service;
use crate::services::dashboards as dashboard_service;

/// The area's routes.
pub(super) fn routes() -> Vec<Route> {
    vec![
        get("/api/reports/compliance/posture-trend", "reportPostureTrend", compliance(ReportsRead), reports::posture_trend)
            .doc("Entities by compliance result over the range and per bucket (`granularity`), from the posture snapshots written every hour and at the end of each scan (kept for REPORT_RETENTION_DAYS): each bucket sums each organization's last snapshot in it; a bucket without one is null")
            .query_of::<crate::services::reports::ReportParams>()
            .answers::<crate::services::posture::PostureTrendReport>(200),
        get("/api/dashboards", "listDashboards", compliance(ReportsRead), dashboards::list)
            .doc("The organization's dashboards, oldest first")
            .paged(&["createdAt"])
            .pages::<dashboard_service::Dashboard>("dashboards"),
        post("/api/dashboards", "createDashboard", compliance(DashboardsWrite), dashboards::create)
            .doc("Make a dashboard: a title and at most 24 panels, each one of the reports with that report's own parameters (checked as the report checks them; `includeTeams` needs `reports:rollup`). Audited as dashboard.create")
            .body_of::<dashboards::DashboardBody>()
            .answers::<dashboard_service::Dashboard>(201),
        get("/api/dashboards/{id}", "getDashboard", compliance(ReportsRead), dashboards::get)
            .doc("One dashboard")
            .answers::<dashboard_service::Dashboard>(200),
        put("/api/dashboards/{id}", "updateDashboard", compliance(DashboardsWrite), dashboards::update)
            .doc("Replace a dashboard's title and panels, carrying the `version` read: another is 409 (no lost update). Audited as dashboard.update")
            .body_of::<dashboards::DashboardBody>()
            .answers::<dashboard_service::Dashboard>(200),
        delete("/api/dashboards/{id}", "deleteDashboard", compliance(DashboardsWrite), dashboards::delete)
            .doc("Delete a dashboard. Audited as dashboard.delete")
            .answers::<Deleted>(200),
        post("/api/dashboards/{id}/clone", "cloneDashboard", compliance(DashboardsWrite), dashboards::clone)
            .doc("Copy a dashboard into the `x-org-id` organization, from it or from `sourceOrgId` (where the caller holds `reports:read`). The body may be left out. Audited as dashboard.clone with the source's id")
            .optional_body_of::<dashboards::DashboardCloneBody>()
            .answers::<dashboard_service::Dashboard>(201),
        get("/api/dashboards/{id}/data", "dashboardData", compliance(ReportsRead), dashboards::data)
            .doc("Every panel's report over the range (`from`, `to`; a panel's own range wins), each computed by the report service as `GET /api/reports/...` computes it")
            .query_of::<dashboards::DataQuery>()
            .answers::<dashboard_service::DashboardData>(200),
        get("/api/alerts/rules", "listAlertRules", compliance(ReportsRead), alerts::rules)
            .doc("The organization's alert rules by name, each with its state")
            .answers::<alerts::RuleList>(200),
        post("/api/alerts/rules", "createAlertRule", compliance(AlertsWrite), alerts::create_rule)
            .doc("Make an alert rule: a metric projected from a report, its parameters, a comparison and threshold (and a recovery threshold), the window (at most 90 days), `minSamples`, `for` (0s or at least ALERT_EVALUATION_INTERVAL_SECONDS), `keepFiringFor`, what no data means, severity, labels, at most 10 destinations, `repeatInterval`, `paused`. Evaluated at once, then every interval. Audited as alert.rule.create")
            .body_of::<alert_service::AlertRuleBody>()
            .answers::<alert_service::AlertRule>(201),
        post("/api/alerts/rules/backtest", "backtestAlertRule", compliance(ReportsRead), alerts::backtest)
            .doc("The transitions and notices a rule body would have made over a past range (at most 90 days, at most 500 evaluations), without saving or sending anything")
            .body_of::<alert_service::BacktestBody>()
            .answers::<alert_service::Backtest>(200),
        get("/api/alerts/rules/{id}", "getAlertRule", compliance(ReportsRead), alerts::rule)
            .doc("One alert rule with its state")
            .answers::<alert_service::AlertRule>(200),
        put("/api/alerts/rules/{id}", "updateAlertRule", compliance(AlertsWrite), alerts::update_rule)
            .doc("Replace an alert rule's definition, carrying the `version` read (required; another is 409); its state stays. Audited as alert.rule.update")
            .body_of::<alert_service::AlertRuleBody>()
            .answers::<alert_service::AlertRule>(200),
        delete("/api/alerts/rules/{id}", "deleteAlertRule", compliance(AlertsWrite), alerts::delete_rule)
            .doc("Delete an alert rule and its history; a rule whose firing notice is unresolved sends its resolve first. Audited as alert.rule.delete")
            .answers::<Deleted>(200),
        get("/api/alerts/rules/{id}/history", "alertRuleHistory", compliance(ReportsRead), alerts::history)
            .doc("A rule's transitions, newest first (the last 200), each with its value, its notice and its deliveries with their outcome")
            .answers::<alerts::History>(200),
        get("/api/alerts/firing", "listFiringAlerts", compliance(ReportsRead), alerts::firing)
            .doc("The organization's rules firing now")
            .answers::<alerts::RuleList>(200),
        get("/api/alerts/destinations", "listAlertDestinations", compliance(ReportsRead), alerts::destinations)
            .doc("The organization's alert destinations (never their secrets: a hint)")
            .answers::<alerts::DestinationList>(200),
        post("/api/alerts/destinations", "createAlertDestination", compliance(AlertsWrite), alerts::create_destination)
            .doc("Make a destination: `email` (1 to 20 addresses, through SMTP_URL), `slack` (an incoming-webhook URL), `webhook` (a URL; signed as Standard Webhooks with `signingSecret`, made and answered once when left out), `pagerduty` (a routing key; PAGERDUTY_EVENTS_URL). URLs follow the webhook address rule. Secrets are sealed and never answered back. Audited as alert.destination.create")
            .body_of::<alert_service::DestinationBody>()
            .answers::<alert_service::Destination>(201),
        post("/api/alerts/destinations/test", "testUnsavedAlertDestination", compliance(AlertsWrite), alerts::test_unsaved)
            .doc("Send a message marked as a test to an unsaved destination, waiting at most 10 s: each target's status, HTTP status, error and latency. Nothing is stored; audited as alert.destination.test; at most ALERT_TESTS_PER_MINUTE per organization and minute (429)")
            .body_of::<alert_service::DestinationBody>()
            .answers::<alert_service::TestResult>(200),
        get("/api/alerts/destinations/{id}", "getAlertDestination", compliance(ReportsRead), alerts::destination)
            .doc("One destination (never its secret: a hint)")
            .answers::<alert_service::Destination>(200),
        put("/api/alerts/destinations/{id}", "updateAlertDestination", compliance(AlertsWrite), alerts::update_destination)
            .doc("Change a destination, carrying the `version` read (required; another is 409); secret fields left out keep the stored secret. Audited as alert.destination.update")
            .body_of::<alert_service::DestinationBody>()
            .answers::<alert_service::Destination>(200),
        delete("/api/alerts/destinations/{id}", "deleteAlertDestination", compliance(AlertsWrite), alerts::delete_destination)
            .doc("Delete a destination; one an alert rule sends to is 409 naming the rules. Audited as alert.destination.delete")
            .answers::<Deleted>(200),
        post("/api/alerts/destinations/{id}/test", "testAlertDestination", compliance(AlertsWrite), alerts::test_saved)
            .doc("Send a message marked as a test to a destination, waiting at most 10 s: each target's status, HTTP status, error and latency. Nothing is written to any alert history; audited as alert.destination.test; at most ALERT_TESTS_PER_MINUTE per organization and minute (429)")
            .answers::<alert_service::TestResult>(200),
    ]
}
