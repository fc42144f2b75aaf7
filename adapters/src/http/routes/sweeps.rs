//! The routes of one area: Scans, schedules and posture.

use super::*;

/// The area's routes.
pub(super) fn routes() -> Vec<Route> {
    vec![
        // Scans, schedules and posture.
        post("/api/compliance/scans", "startScan", compliance(ComplianceWrite), scans::start)
            .doc("Start a scan of the organization's inventory; answers 202 at once, a worker sweeps it. filter.orgId is replaced by the organization's; name, accessModifier and project narrow the sweep")
            .body(body(
                &[
                    ("target", one_of(&["plugin", "pipeline", "all"])),
                    ("filter", json!({
                        "type": "object",
                        "properties": {
                            "orgId": string(),
                            "name": text(200),
                            "accessModifier": one_of(&["public", "private"]),
                            "project": text(200),
                        },
                        "additionalProperties": false,
                    })),
                ],
                &["target"],
            ))
            .ok(202, envelope(reference("Scan"))),
        get("/api/compliance/scans", "listScans", compliance(ComplianceRead), scans::list)
            .doc("The organization's scans, newest first")
            .query({
                let mut q = vec![
                    query("target", one_of(&["plugin", "pipeline", "all"])),
                    query("status", one_of(&["running", "completed", "cancelled", "failed"])),
                ];
                q.extend(paging(&["createdAt"]));
                q
            })
            .ok(200, page("scans", reference("Scan"))),
        get("/api/compliance/scans/{id}", "getScan", compliance(ComplianceRead), scans::get)
            .doc("One scan, with its counts")
            .ok(200, envelope(reference("Scan"))),
        get("/api/compliance/scans/{id}/results", "scanResults", compliance(ComplianceRead), scans::results)
            .doc("The results of one scan, one per entity judged, narrowed to one result")
            .query({
                let mut q = vec![query("result", one_of(&["pass", "warn", "block", "error"]))];
                q.extend(paging(&["createdAt"]));
                q
            })
            .ok(200, page("results", reference("ScanResult"))),
        post("/api/compliance/scans/{id}/cancel", "cancelScan", compliance(ComplianceWrite), scans::cancel)
            .doc("Cancel a running scan (it stops within one batch); 409 when it has ended")
            .ok(200, envelope(reference("Scan"))),
        get("/api/compliance/scan-schedules", "listScanSchedules", compliance(ComplianceRead), scans::schedules)
            .doc("The organization's recurring scans")
            .query(paging(&["createdAt"]))
            .ok(200, page("schedules", reference("ScanSchedule"))),
        post("/api/compliance/scan-schedules", "createScanSchedule", compliance(ComplianceWrite), scans::create_schedule)
            .doc("Schedule a recurring scan: five cron fields (minute hour dayOfMonth month dayOfWeek, UTC); 400 INVALID_CRON names the field")
            .body(body(
                &[("target", one_of(&["plugin", "pipeline", "all"])), ("cronExpression", text(200))],
                &["target", "cronExpression"],
            ))
            .ok(201, envelope(reference("ScanSchedule"))),
        put("/api/compliance/scan-schedules/{id}", "updateScanSchedule", compliance(ComplianceWrite), scans::update_schedule)
            .doc("Change a schedule's target and/or cron expression")
            .body({
                let mut b = body(
                    &[("target", one_of(&["plugin", "pipeline", "all"])), ("cronExpression", text(200))],
                    &[],
                );
                if let Some(o) = b.as_object_mut() {
                    o.insert("minProperties".to_owned(), json!(1));
                }
                b
            })
            .ok(200, envelope(reference("ScanSchedule"))),
        patch("/api/compliance/scan-schedules/{id}/active", "toggleScanSchedule", compliance(ComplianceWrite), scans::toggle_schedule)
            .doc("Activate or deactivate a schedule")
            .body(body(&[("isActive", boolean())], &["isActive"]))
            .ok(200, envelope(reference("ScanSchedule"))),
        delete("/api/compliance/scan-schedules/{id}", "deleteScanSchedule", compliance(ComplianceWrite), scans::delete_schedule)
            .doc("Deactivate a schedule (it is kept, inactive)")
            .ok(200, envelope(reference("ScanSchedule"))),
        get("/api/compliance/posture", "compliancePosture", compliance(ComplianceRead), scans::posture)
            .doc("The organization's entities by current result and the rules failing most, from the stored results")
            .query(vec![
                query("target", target()),
                query("top", json!({"type": "integer", "minimum": 1, "maximum": 100})),
            ])
            .ok(200, envelope(reference("Posture"))),
        get("/api/compliance/posture/policy-report", "policyReport", compliance(ComplianceRead), scans::policy_report)
            .doc("The posture of one target as a Kubernetes PolicyReport (wgpolicyk8s.io/v1alpha2), answered as is (no envelope): the summary over every entity, the results of a page of entities")
            .query({
                let mut q = vec![parameter("target", "query", true, target())];
                q.extend(paging(&["createdAt"]));
                q
            })
            .ok(200, reference("PolicyReport")),
    ]
}
