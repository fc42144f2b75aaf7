//! The routes of one area: Pipelines and plugins.

use super::*;

/// The area's routes.
pub(super) fn routes() -> Vec<Route> {
    vec![
        // Pipelines.
        get("/api/pipelines", "listPipelines", org_member(), pipelines::list)
            .doc("The organization's pipelines")
            .query_of::<pipelines::PipelineQuery>()
            .paged(&pipelines::SORTABLE)
            .pages::<pipelines::Pipeline>("pipelines"),
        get("/api/pipelines/find", "findPipeline", org_member(), pipelines::find)
            .doc("The newest pipeline matching the filters (at least one of project, organization, pipelineName)")
            .query_of::<pipelines::PipelineQuery>()
            .answers::<pipelines::Pipeline>(200),
        get("/api/pipelines/registry", "pipelineRegistry", org_member(), pipelines::registry)
            .doc("The organization's registry: cloud pipeline resource names mapped to pipelines, newest first")
            .paged(&["createdAt"])
            .pages::<pipelines::Registration>("registry"),
        post("/api/pipelines/registry", "registerPipeline", compliance(PipelinesWrite), pipelines::register)
            .doc("Map a cloud pipeline resource name to a pipeline of the organization (upsert; the deploy hook)")
            .body_of::<pipelines::RegistrationBody>()
            .answers::<pipelines::Registration>(200),
        delete("/api/pipelines/registry", "deregisterPipeline", compliance(PipelinesWrite), pipelines::deregister)
            .doc("Remove a registry entry")
            .query_of::<pipelines::ArnQuery>()
            .answers::<pipelines::Deregistered>(200),
        get("/api/pipelines/providers", "pipelineProviders", org_member(), generation::providers)
            .doc("The AI providers configured for generation (AI_OPENAI_*, AI_ANTHROPIC_*, AI_OLLAMA_*) and their models; never a key")
            .answers_list::<generation::AiProvider>(200),
        post("/api/pipelines/generate", "generatePipeline", compliance(PipelinesWrite), generation::generate_pipeline)
            .doc("Generate a pipeline from a prompt (feature ai_pipeline_generation, 403 FEATURE_NOT_AVAILABLE first; then the provider and model, 400 naming either when not configured). One aiCalls unit is charged before the provider is called (429 QUOTA_EXCEEDED past the limit), for the request with its retries, and not refunded when the provider fails. The answer is parsed into a create body, validated and dry-run against the organization's rules; an answer with problems goes back to the model with them, at most twice, then 422 GENERATION_FAILED with details.problems. Provider failures: 502 AI_PROVIDER_ERROR, AI_PROVIDER_UNAVAILABLE, AI_STREAM_TRUNCATED, AI_OUTPUT_TOO_LARGE; 504 AI_PROVIDER_TIMEOUT. Nothing is stored")
            .feature(Feature::AiPipelineGeneration)
            .body_of::<generation::GenerateBody>()
            .answers::<generation::GeneratedPipelineAnswer>(200),
        post("/api/pipelines/generate/stream", "generatePipelineStream", compliance(PipelinesWrite), generation::stream_pipeline)
            .doc("Generate a pipeline as server-sent events: started, text (the model's text as it comes), attempt (each answer checked, with its problems), then result (the body of POST /api/pipelines/generate's data) or error (the error envelope); keep-alive comments while the model is quiet. A provider that fails after its 200 or a stream cut short ends in error, never in result; a client that goes away cancels the provider call. Refusals before the start answer as JSON, as for POST /api/pipelines/generate")
            .feature(Feature::AiPipelineGeneration)
            .body_of::<generation::GenerateBody>()
            .event_stream(),
        post("/api/pipelines/generate/from-url/stream", "generatePipelineFromUrl", compliance(PipelinesWrite), generation::stream_pipeline_from_url)
            .doc("Generate a pipeline for a Git repository, streamed like /generate/stream with a repository event first (languages, build files, CI definitions found). The URL must be http(s), without credentials, and resolve to globally routable addresses only (400 otherwise; AI_ALLOW_PRIVATE_URLS opens private ones); the fetch is shallow and bounded (AI_GIT_TIMEOUT_SECONDS, AI_GIT_MAX_BYTES, AI_GIT_MAX_FILES): a private, absent or unreachable repository ends in error REPOSITORY_UNAVAILABLE, too large REPOSITORY_TOO_LARGE, too slow REPOSITORY_TIMEOUT")
            .feature(Feature::AiPipelineGeneration)
            .body_of::<generation::FromUrlBody>()
            .event_stream(),
        get("/api/pipelines/{id}", "getPipeline", org_member(), pipelines::get)
            .doc("One pipeline")
            .answers::<pipelines::Pipeline>(200),
        post("/api/pipelines", "createPipeline", compliance(PipelinesWrite), pipelines::create)
            .doc("Create a pipeline: checked by the organization's compliance rules (403 COMPLIANCE_VIOLATION with details.violations on a block, 503 COMPLIANCE_UNAVAILABLE when the check cannot be made in 5 s; nothing stored either way) and its pipelines quota (429 QUOTA_EXCEEDED)")
            .body_of::<crate::services::pipelines::PipelineInput>()
            .answers::<pipelines::Pipeline>(201),
        put("/api/pipelines/{id}", "updatePipeline", compliance(PipelinesWrite), pipelines::update)
            .doc("Replace a pipeline, checked by the compliance rules like a create")
            .body_of::<crate::services::pipelines::PipelineInput>()
            .answers::<pipelines::Pipeline>(200),
        delete("/api/pipelines/{id}", "deletePipeline", compliance(PipelinesWrite), pipelines::delete)
            .doc("Delete a pipeline (frees its quota)")
            .answers::<Deleted>(200),
        // Plugins.
        get("/api/plugins", "listPlugins", org_member(), plugins::list)
            .doc("The organization's plugins")
            .query_of::<plugins::PluginQuery>()
            .paged(&plugins::SORTABLE)
            .pages::<plugins::Plugin>("plugins"),
        get("/api/plugins/find", "findPlugin", org_member(), plugins::find)
            .doc("The newest plugin of a name (and version)")
            .query_of::<plugins::PluginQuery>()
            .answers::<plugins::Plugin>(200),
        post("/api/plugins/lookup", "lookupPlugin", org_member(), plugins::lookup)
            .doc("The newest plugin matching a filter body (at least one field)")
            .body_of::<plugins::Lookup>()
            .answers::<plugins::Plugin>(200),
        get("/api/plugins/plugin-usage", "pluginUsage", org_member(), plugins::usage)
            .doc("Per plugin name, how many of the organization's pipelines reference it")
            .answers_list::<plugins::PluginUsage>(200),
        post("/api/plugins", "uploadPlugin", compliance(PluginsWrite), plugins::upload)
            .doc("Upload a plugin: a ZIP with plugin.json (or plugin.yaml) at its root and optionally a Dockerfile; refused with the reason (400) for path traversal, links, more than 1,000 entries, more than 50 MB unpacked, a bomb-like ratio, a missing or invalid manifest. Checked by the compliance rules (403, 503) and the plugins quota (429) like a pipeline; a build job is queued")
            .multipart::<plugins::PluginUpload>(plugins::MAX_UPLOAD_BYTES)
            .answers::<plugins::Plugin>(201),
        post("/api/plugins/deploy-generated", "deployGeneratedPlugin", compliance(PluginsWrite), plugins::deploy_generated)
            .doc("Deploy a generated plugin: packed with its Dockerfile, judged, charged and queued for a build like an upload")
            .body_of::<crate::services::plugins::GeneratedPlugin>()
            .answers::<plugins::Plugin>(201),
        put("/api/plugins/bulk/update", "bulkUpdatePlugins", compliance(PluginsWrite), plugins::bulk_update)
            .doc("Change several plugins, all or nothing; only description, computeType, isDefault, isActive and accessModifier may change (any other field is 400)")
            .feature(Feature::BulkOperations)
            .body_of::<plugins::Bulk>()
            .answers::<plugins::Changed>(200),
        get("/api/plugins/queue/status", "buildQueueStatus", compliance(OrgSettings), builds::queue_status)
            .doc("Build job counts by queue and status (admins: the org:settings permission); a super-admin sees every organization's")
            .answers::<builds::QueueStatus>(200),
        get("/api/plugins/queue/failed", "failedBuilds", compliance(OrgSettings), builds::failed)
            .doc("Builds that ended failed or timed out (the organization's; every organization's for a super-admin)")
            .paged(&["createdAt"])
            .pages::<builds::BuildJob>("jobs"),
        get("/api/plugins/queue/dlq", "deadLetters", compliance(OrgSettings), builds::dead_letters)
            .doc("The dead letter queue (the organization's; every organization's for a super-admin)")
            .paged(&["createdAt"])
            .pages::<builds::BuildJob>("jobs"),
        post("/api/plugins/queue/dlq/{jobId}/replay", "replayDeadLetter", compliance(OrgSettings), builds::replay)
            .doc("Replay a dead letter of the organization: it is marked replayed and a new build of the plugin starts in the dead letter queue with fresh attempts")
            .answers::<builds::BuildJob>(200),
        delete("/api/plugins/queue/dlq", "purgeDeadLetters", Access::SuperAdmin { step_up: false }, builds::purge)
            .doc("Purge every dead letter (audited plugin.dlq.purge)")
            .answers::<builds::Purged>(200),
        get("/api/plugins/providers", "pluginProviders", org_member(), generation::providers)
            .doc("The AI providers configured for generation and their models; never a key")
            .answers_list::<generation::AiProvider>(200),
        post("/api/plugins/generate", "generatePlugin", compliance(PluginsWrite), generation::generate_plugin)
            .doc("Generate a plugin (a POST /api/plugins/deploy-generated body) from a prompt: feature ai_plugin_generation, one aiCalls unit, checked as an upload's manifest and Dockerfile are and dry-run against the organization's rules, with at most two retries; the statuses of POST /api/pipelines/generate. Nothing is stored or built")
            .feature(Feature::AiPluginGeneration)
            .body_of::<generation::GenerateBody>()
            .answers::<generation::GeneratedPluginAnswer>(200),
        post("/api/plugins/generate/stream", "generatePluginStream", compliance(PluginsWrite), generation::stream_plugin)
            .doc("Generate a plugin as server-sent events (the events of POST /api/pipelines/generate/stream)")
            .feature(Feature::AiPluginGeneration)
            .body_of::<generation::GenerateBody>()
            .event_stream(),
        get("/api/plugins/{id}", "getPlugin", org_member(), plugins::get)
            .doc("One plugin")
            .answers::<plugins::Plugin>(200),
        put("/api/plugins/{id}", "updatePlugin", compliance(PluginsWrite), plugins::update)
            .doc("Change a plugin's description, computeType or isDefault (any other field is 400)")
            .body_of::<plugins::Update>()
            .answers::<plugins::Plugin>(200),
        delete("/api/plugins/{id}", "deletePlugin", compliance(PluginsWrite), plugins::delete)
            .doc("Delete a plugin (frees its quota)")
            .answers::<Deleted>(200),
    ]
}
