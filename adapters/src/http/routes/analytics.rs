//! The routes of one area: reporting (execution analytics).

use super::*;
use crate::services::reports::Ingested;

/// The area's routes.
pub(super) fn routes() -> Vec<Route> {
    vec![
        post("/api/reports/events", "ingestReportEvents", Access::Service, reports::ingest)
            .doc("Ingest CodePipeline execution events as EventBridge delivers them (Pipeline, Stage and Action Execution State Change), one envelope or an array of up to 1000 (4 MiB): each stored once by its `id`, its execution derived again from all its events (the same whatever their order), in the organization that registered the pipeline's resource name (`/api/pipelines/registry`); a name no organization (or more than one) registered waits aside until one does. A malformed event refuses the whole batch with 400 naming it (`[3].detail.state`)")
            .body_of::<serde_json::Value>()
            .body_limit(crate::services::reports::MAX_BATCH_BYTES)
            .answers::<Ingested>(200),
        get("/api/reports/execution/count", "reportExecutionCount", compliance(ReportsRead), reports::count)
            .doc("Executions per pipeline with their breakdown by final state (total, succeeded, failed, stopped, canceled, superseded, running), the `limit` pipelines with the most")
            .query_of::<crate::services::reports::ReportParams>()
            .answers::<crate::services::reports::CountReport>(200),
        get("/api/reports/execution/success-rate", "reportSuccessRate", compliance(ReportsRead), reports::success_rate)
            .doc("Successes, failures and their rate over the range and per bucket (`granularity`: hour, day, week; empty buckets as zeros). SUCCEEDED is a success, FAILED and STOPPED failures; CANCELED, SUPERSEDED and running executions count in neither; the rate is null without either")
            .query_of::<crate::services::reports::ReportParams>()
            .answers::<crate::services::reports::SuccessRateReport>(200),
        get("/api/reports/execution/duration", "reportDuration", compliance(ReportsRead), reports::duration)
            .doc("Duration of finished executions (succeeded, failed, stopped) in milliseconds: count, min, mean, median, p95 (linear interpolation between closest ranks), max, overall and for the `limit` pipelines with the highest p95")
            .query_of::<crate::services::reports::ReportParams>()
            .answers::<crate::services::reports::DurationReport>(200),
        get("/api/reports/execution/stage-failures", "reportStageFailures", compliance(ReportsRead), reports::stage_failures)
            .doc("A heat map of stage failures: the `limit` stages that failed most, each with its failures per bucket (`granularity`), empty buckets as zeros")
            .query_of::<crate::services::reports::ReportParams>()
            .answers::<crate::services::reports::StageFailureReport>(200),
        get("/api/reports/execution/stage-bottlenecks", "reportStageBottlenecks", compliance(ReportsRead), reports::stage_bottlenecks)
            .doc("The slowest stages: the `limit` (pipeline, stage) pairs with the highest p95 duration of their ended runs, with count, min, mean, median, p95 and max")
            .query_of::<crate::services::reports::ReportParams>()
            .answers::<crate::services::reports::BottleneckReport>(200),
        get("/api/reports/execution/errors", "reportErrors", compliance(ReportsRead), reports::errors)
            .doc("Failed executions by error category, the `limit` largest with their share: the category of the latest failed action (source, build, test, deploy, approval, invoke, or action for another), else stage, else pipeline; a stopped execution is stopped")
            .query_of::<crate::services::reports::ReportParams>()
            .answers::<crate::services::reports::ErrorReport>(200),
        get("/api/reports/plugins/summary", "reportPluginSummary", compliance(ReportsRead), reports::plugin_summary)
            .doc("The plugin inventory now (total, active, public, private, by build status) and the build attempts that began in the range by outcome; `pluginName` narrows both to one plugin")
            .query_of::<crate::services::reports::ReportParams>()
            .answers::<crate::services::reports::PluginSummaryReport>(200),
        get("/api/reports/plugins/build-success-rate", "reportBuildSuccessRate", compliance(ReportsRead), reports::build_success_rate)
            .doc("Image build attempts built over attempts ended (a timeout is a failure), over the range and per bucket (`granularity`), empty buckets as zeros")
            .query_of::<crate::services::reports::ReportParams>()
            .answers::<crate::services::reports::BuildRateReport>(200),
        get("/api/reports/plugins/build-duration", "reportBuildDuration", compliance(ReportsRead), reports::build_duration)
            .doc("Build attempt durations in milliseconds (count, min, mean, median, p95, max), overall and for the `limit` plugins with the highest p95")
            .query_of::<crate::services::reports::ReportParams>()
            .answers::<crate::services::reports::BuildDurationReport>(200),
        get("/api/reports/plugins/build-failures", "reportBuildFailures", compliance(ReportsRead), reports::build_failures)
            .doc("Why build attempts failed, the `limit` most frequent reasons with their share: `timed out`, or the last line the builder wrote")
            .query_of::<crate::services::reports::ReportParams>()
            .answers::<crate::services::reports::BuildFailureReport>(200),
        get("/api/reports/unattributed", "reportUnattributed", Access::SuperAdmin { step_up: false }, reports::unattributed)
            .doc("Resource names whose execution events arrived but that no single organization registered, with how many executions wait")
            .answers::<reports::UnattributedList>(200),
    ]
}
