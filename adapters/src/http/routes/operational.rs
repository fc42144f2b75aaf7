//! The routes of one area: Health, readiness, metrics and the OpenAPI document.

use super::*;

/// The area's routes.
pub(super) fn routes() -> Vec<Route> {
    vec![
        // Operational.
        get("/health", "health", Access::Public, system::health)
            .doc("The process is up")
            .answers::<system::ServerStatus>(200),
        get("/ready", "ready", Access::Public, system::ready)
            .doc("The database answers")
            .answers::<system::ServerStatus>(200),
        get("/metrics", "metrics", Access::Public, system::metrics)
            .doc("Prometheus metrics")
            .text(),
        get("/openapi.json", "openapi", Access::Public, system::openapi)
            .doc("This document")
            .json_document(),
    ]
}
