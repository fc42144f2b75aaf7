//! Request counts and latencies by route and status, in Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

const BUCKETS: [f64; 10] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0,
];

/// The methods a series is labelled with; any other is counted as `other`.
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE",
];

/// A request's method as a label: a standard method, or `other`.
fn method_label(method: &str) -> &'static str {
    METHODS
        .into_iter()
        .find(|known| *known == method)
        .unwrap_or("other")
}

#[derive(Debug, Default, Clone)]
struct Series {
    count: u64,
    sum: f64,
    buckets: [u64; BUCKETS.len()],
}

/// A section of `/metrics` read from the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsSection {
    /// The audit outbox's depth and age.
    Outbox,
    /// The re-evaluation queue's depth.
    Reevaluation,
    /// Reporting's unattributed events.
    Reports,
}

impl MetricsSection {
    const ALL: [MetricsSection; 3] = [
        MetricsSection::Outbox,
        MetricsSection::Reevaluation,
        MetricsSection::Reports,
    ];

    /// The `section` label.
    pub fn label(self) -> &'static str {
        match self {
            MetricsSection::Outbox => "outbox",
            MetricsSection::Reevaluation => "reevaluation",
            MetricsSection::Reports => "reports",
        }
    }

    fn index(self) -> usize {
        match self {
            MetricsSection::Outbox => 0,
            MetricsSection::Reevaluation => 1,
            MetricsSection::Reports => 2,
        }
    }
}

/// The server's metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, String, u16), Series>>,
    denied_unknown: std::sync::atomic::AtomicU64,
    csp_violations: std::sync::atomic::AtomicU64,
    /// Re-evaluation events processed, retried and dead, scans started and entities
    /// scanned (this process).
    counters: [std::sync::atomic::AtomicU64; 5],
    /// Notification attempts sent, failed, retried, and notifications held (this
    /// process).
    notifications: [std::sync::atomic::AtomicU64; 4],
    /// Sections of `/metrics` that could not be read, by [`MetricsSection`].
    section_errors: [std::sync::atomic::AtomicU64; 3],
}

impl Metrics {
    /// Records one request. The labels take no value from the client beyond a fixed
    /// set: the method is one of the standard ones or `other`, the route is a
    /// declared route's template or `unmatched` (the router's), the status a number.
    pub fn observe(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        if let Ok(mut requests) = self.requests.lock() {
            let series = requests
                .entry((method_label(method), route.to_owned(), status))
                .or_default();
            series.count += 1;
            series.sum += seconds;
            for (bucket, bound) in series.buckets.iter_mut().zip(BUCKETS) {
                if seconds <= bound {
                    *bucket += 1;
                }
            }
        }
    }

    /// Counts a denied request that named an organization that does not exist (no
    /// audit chain is created for it).
    pub fn denied_unknown_organization(&self) {
        self.denied_unknown
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Counts a browser's report of a console page breaking its content security
    /// policy.
    pub fn csp_violation(&self) {
        self.csp_violations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Re-evaluation events done.
    pub fn reevaluated(&self, events: u64) {
        self.counters[0].fetch_add(events, std::sync::atomic::Ordering::Relaxed);
    }

    /// A re-evaluation that failed: retried, or dead.
    pub fn reevaluation_failed(&self, dead: bool) {
        let counter = if dead {
            &self.counters[2]
        } else {
            &self.counters[1]
        };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// A notification attempt recorded with the log's `status`.
    pub fn notification(&self, status: &str) {
        let index = match status {
            "sent" => 0,
            "failed" | "disabled" => 1,
            "retrying" => 2,
            "held" => 3,
            _ => return,
        };
        if let Some(counter) = self.notifications.get(index) {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// A scan started (requested, or by a schedule).
    pub fn scan_started(&self) {
        self.counters[3].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Entities judged by scans.
    pub fn scanned(&self, entities: u64) {
        self.counters[4].fetch_add(entities, std::sync::atomic::Ordering::Relaxed);
    }

    /// A section of `/metrics` could not be read.
    pub fn section_failed(&self, section: MetricsSection) {
        if let Some(counter) = self.section_errors.get(section.index()) {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP metrics_section_errors_total Sections of /metrics that could not be read from the database (their families are missing from that scrape).\n");
        out.push_str("# TYPE metrics_section_errors_total counter\n");
        for section in MetricsSection::ALL {
            let value = self
                .section_errors
                .get(section.index())
                .map_or(0, |c| c.load(std::sync::atomic::Ordering::Relaxed));
            let _ = writeln!(
                out,
                "metrics_section_errors_total{{section=\"{}\"}} {value}",
                section.label()
            );
        }
        for (i, (name, help)) in [
            (
                "reevaluation_processed_total",
                "Re-evaluation events processed.",
            ),
            (
                "reevaluation_retried_total",
                "Re-evaluations that failed and will be retried.",
            ),
            (
                "reevaluation_dead_total",
                "Re-evaluations that failed for the last time.",
            ),
            ("scans_started_total", "Scans started by this process."),
            (
                "scan_entities_total",
                "Entities judged by the scans this process swept.",
            ),
        ]
        .into_iter()
        .enumerate()
        {
            let value = self
                .counters
                .get(i)
                .map_or(0, |c| c.load(std::sync::atomic::Ordering::Relaxed));
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        }
        for (i, (name, help)) in [
            (
                "notifications_sent_total",
                "Notification attempts delivered.",
            ),
            (
                "notifications_failed_total",
                "Notification deliveries that failed for good (or were turned off by a 410).",
            ),
            (
                "notifications_retried_total",
                "Notification attempts that failed and will be retried.",
            ),
            (
                "notifications_held_total",
                "Notification deliveries held for a digest.",
            ),
        ]
        .into_iter()
        .enumerate()
        {
            let value = self
                .notifications
                .get(i)
                .map_or(0, |c| c.load(std::sync::atomic::Ordering::Relaxed));
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        }
        out.push_str("# HELP console_csp_violations_total Content-Security-Policy violations browsers reported on console pages.\n");
        out.push_str("# TYPE console_csp_violations_total counter\n");
        let _ = writeln!(
            out,
            "console_csp_violations_total {}",
            self.csp_violations
                .load(std::sync::atomic::Ordering::Relaxed)
        );
        out.push_str("# HELP authz_denied_unknown_organization_total Denied requests naming an organization that does not exist.\n");
        out.push_str("# TYPE authz_denied_unknown_organization_total counter\n");
        let _ = writeln!(
            out,
            "authz_denied_unknown_organization_total {}",
            self.denied_unknown
                .load(std::sync::atomic::Ordering::Relaxed)
        );
        out.push_str("# HELP http_requests_total Requests by method, route and status.\n");
        out.push_str("# TYPE http_requests_total counter\n");
        let requests = match self.requests.lock() {
            Ok(requests) => requests.clone(),
            Err(_) => return out,
        };
        for ((method, route, status), series) in &requests {
            let _ = writeln!(out, "http_requests_total{{method=\"{method}\",route=\"{route}\",status=\"{status}\"}} {}", series.count);
        }
        out.push_str(
            "# HELP http_request_duration_seconds Request latency by method, route and status.\n",
        );
        out.push_str("# TYPE http_request_duration_seconds histogram\n");
        for ((method, route, status), series) in &requests {
            let labels = format!("method=\"{method}\",route=\"{route}\",status=\"{status}\"");
            for (bound, count) in BUCKETS.iter().zip(series.buckets) {
                let _ = writeln!(
                    out,
                    "http_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {count}"
                );
            }
            let _ = writeln!(
                out,
                "http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                series.count
            );
            let _ = writeln!(
                out,
                "http_request_duration_seconds_sum{{{labels}}} {}",
                series.sum
            );
            let _ = writeln!(
                out,
                "http_request_duration_seconds_count{{{labels}}} {}",
                series.count
            );
        }
        out
    }
}
