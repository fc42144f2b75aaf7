//! The routes of one area: Scans, schedules and posture.

use super::*;

/// The area's routes.
pub(super) fn routes() -> Vec<Route> {
    vec![
        // Scans, schedules and posture.
        post("/api/compliance/scans", "startScan", compliance(ComplianceWrite), scans::start)
            .doc("Start a scan of the organization's inventory; answers 202 at once, a worker sweeps it. filter.orgId is replaced by the organization's; name, accessModifier and project narrow the sweep")
            .body_of::<scans::ScanBody>()
            .answers::<scans::Scan>(202),
        get("/api/compliance/scans", "listScans", compliance(ComplianceRead), scans::list)
            .doc("The organization's scans, newest first")
            .query_of::<scans::ScanQuery>()
            .paged(&["createdAt"])
            .pages::<scans::Scan>("scans"),
        get("/api/compliance/scans/{id}", "getScan", compliance(ComplianceRead), scans::get)
            .doc("One scan, with its counts")
            .answers::<scans::Scan>(200),
        get("/api/compliance/scans/{id}/results", "scanResults", compliance(ComplianceRead), scans::results)
            .doc("The results of one scan, one per entity judged, narrowed to one result")
            .query_of::<scans::ResultQuery>()
            .paged(&["createdAt"])
            .pages::<scans::ScanEntityResult>("results"),
        post("/api/compliance/scans/{id}/cancel", "cancelScan", compliance(ComplianceWrite), scans::cancel)
            .doc("Cancel a running scan (it stops within one batch); 409 when it has ended")
            .answers::<scans::Scan>(200),
        get("/api/compliance/scan-schedules", "listScanSchedules", compliance(ComplianceRead), scans::schedules)
            .doc("The organization's recurring scans")
            .paged(&["createdAt"])
            .pages::<scans::ScanSchedule>("schedules"),
        post("/api/compliance/scan-schedules", "createScanSchedule", compliance(ComplianceWrite), scans::create_schedule)
            .doc("Schedule a recurring scan: five cron fields (minute hour dayOfMonth month dayOfWeek, UTC); 400 INVALID_CRON names the field")
            .body_of::<scans::ScheduleBody>()
            .answers::<scans::ScanSchedule>(201),
        put("/api/compliance/scan-schedules/{id}", "updateScanSchedule", compliance(ComplianceWrite), scans::update_schedule)
            .doc("Change a schedule's target and/or cron expression")
            .body_of::<scans::ScheduleChange>()
            .answers::<scans::ScanSchedule>(200),
        patch("/api/compliance/scan-schedules/{id}/active", "toggleScanSchedule", compliance(ComplianceWrite), scans::toggle_schedule)
            .doc("Activate or deactivate a schedule")
            .body_of::<scans::ActiveBody>()
            .answers::<scans::ScanSchedule>(200),
        delete("/api/compliance/scan-schedules/{id}", "deleteScanSchedule", compliance(ComplianceWrite), scans::delete_schedule)
            .doc("Deactivate a schedule (it is kept, inactive)")
            .answers::<scans::ScanSchedule>(200),
        get("/api/compliance/posture", "compliancePosture", compliance(ComplianceRead), scans::posture)
            .doc("The organization's entities by current result and the rules failing most, from the stored results")
            .query_of::<scans::PostureQuery>()
            .answers::<scans::CompliancePosture>(200),
        get("/api/compliance/posture/policy-report", "policyReport", compliance(ComplianceRead), scans::policy_report)
            .doc("The posture of one target as a Kubernetes PolicyReport (wgpolicyk8s.io/v1alpha2), answered as is (no envelope): the summary over every entity, the results of a page of entities")
            .query_of::<scans::ReportQuery>()
            .paged(&["createdAt"])
            .bare::<crate::policy_report::PolicyReport>(),
    ]
}
