//! The routes of one area: compliance rules, the published catalog and subscriptions, exemptions, policies and templates, the check log, notification preferences, validation.

use super::*;

/// The area's routes.
pub(super) fn routes() -> Vec<Route> {
    vec![
        // Rules.
        get("/api/compliance/rules", "listRules", compliance(ComplianceRead), rules::list)
            .doc("The organization's rules")
            .query_of::<rules::RuleQuery>()
            .paged(&["createdAt"])
            .pages::<rules::OrgRule>("rules"),
        post("/api/compliance/rules", "createRule", compliance(ComplianceWrite), rules::create)
            .doc("Create a rule (validated: operator, value, regex, conditions)")
            .body_of::<compliance_core::Rule>()
            .answers::<rules::OrgRule>(201),
        get("/api/compliance/rules/{id}", "getRule", compliance(ComplianceRead), rules::get)
            .doc("One rule")
            .answers::<rules::OrgRule>(200),
        put("/api/compliance/rules/{id}", "updateRule", compliance(ComplianceWrite), rules::update)
            .doc("Replace a rule (a new version)")
            .body_of::<compliance_core::Rule>()
            .answers::<rules::OrgRule>(200),
        delete("/api/compliance/rules/{id}", "deleteRule", compliance(ComplianceWrite), rules::delete)
            .doc("Delete a rule")
            .answers::<Deleted>(200),
        get("/api/compliance/rules/{id}/history", "ruleHistory", compliance(ComplianceRead), rules::history)
            .doc("A rule's versions")
            .answers_list::<rules::RuleVersion>(200),
        // The published catalog and subscriptions.
        get("/api/compliance/published-rules", "publishedRules", compliance(ComplianceRead), catalog::catalog)
            .doc("The published catalog")
            .query_of::<rules::RuleQuery>()
            .paged(&["createdAt"])
            .pages::<catalog::CatalogRule>("rules"),
        get("/api/compliance/subscriptions", "listSubscriptions", compliance(ComplianceRead), catalog::list)
            .doc("The organization's subscriptions")
            .paged(&["createdAt"])
            .pages::<catalog::RuleSubscription>("subscriptions"),
        post("/api/compliance/subscriptions", "subscribe", compliance(ComplianceWrite), catalog::subscribe)
            .doc("Subscribe to a published rule (inactive until activated)")
            .body_of::<catalog::RuleRef>()
            .answers::<catalog::Subscribed>(201),
        post("/api/compliance/subscriptions/clone", "cloneSubscription", compliance(ComplianceWrite), catalog::clone)
            .doc("Copy a published rule into the organization's own rules")
            .body_of::<catalog::RuleRef>()
            .answers::<rules::OrgRule>(201),
        post("/api/compliance/subscriptions/auto-subscribe", "autoSubscribe", compliance(ComplianceWrite), catalog::auto_subscribe)
            .doc("Subscribe to every published rule")
            .answers::<catalog::AutoSubscribed>(200),
        post("/api/compliance/subscriptions/bulk", "bulkActivate", compliance(ComplianceWrite), catalog::bulk)
            .doc("Activate or deactivate several subscriptions")
            .body_of::<catalog::BulkActivation>()
            .answers::<catalog::BulkActivation>(200),
        get("/api/compliance/subscriptions/enforced", "enforcedRules", compliance(ComplianceRead), catalog::enforced)
            .doc("The effective rule set: own rules and active subscriptions")
            .answers_list::<compliance_core::Rule>(200),
        post("/api/compliance/subscriptions/preview/impact", "previewImpact", compliance(ComplianceRead), catalog::impact)
            .doc("Which validated entities a rule would fail")
            .body_of::<catalog::ImpactPreview>()
            .answers::<catalog::RuleImpact>(200),
        post("/api/compliance/subscriptions/preview", "previewRule", compliance(ComplianceRead), catalog::preview)
            .doc("Evaluate a rule on attributes without saving anything")
            .body_of::<catalog::Preview>()
            .answers::<compliance_core::Evaluation>(200),
        patch("/api/compliance/subscriptions/{ruleId}", "setSubscriptionActive", compliance(ComplianceWrite), catalog::set_active)
            .doc("Activate or deactivate a subscription")
            .body_of::<catalog::Activation>()
            .answers::<catalog::Activated>(200),
        delete("/api/compliance/subscriptions/{ruleId}", "unsubscribe", compliance(ComplianceWrite), catalog::unsubscribe)
            .doc("Unsubscribe")
            .answers::<catalog::Unsubscribed>(200),
        post("/api/compliance/subscriptions/{ruleId}/pin", "pinSubscription", compliance(ComplianceWrite), catalog::pin)
            .doc("Pin the subscription to the rule's current version")
            .answers::<catalog::Pin>(200),
        delete("/api/compliance/subscriptions/{ruleId}/pin", "unpinSubscription", compliance(ComplianceWrite), catalog::unpin)
            .doc("Follow the rule's latest version again")
            .answers::<catalog::Pin>(200),
        // Exemptions.
        get("/api/compliance/exemptions", "listExemptions", compliance(ComplianceRead), exemptions::list_exemptions)
            .doc("The organization's exemptions")
            .query_of::<exemptions::ExemptionQuery>()
            .paged(&["createdAt"])
            .pages::<exemptions::Exemption>("exemptions"),
        post("/api/compliance/exemptions", "requestExemption", compliance(ComplianceWrite), exemptions::request)
            .doc("Ask for an exemption of one entity from one rule")
            .body_of::<exemptions::ExemptionRequest>()
            .answers::<exemptions::Exemption>(201),
        post("/api/compliance/exemptions/bulk", "requestExemptions", compliance(ComplianceWrite), exemptions::request_bulk)
            .doc("Ask for exemptions of up to 500 entities from one rule")
            .body_of::<exemptions::BulkExemptionRequest>()
            .answers::<exemptions::ExemptionIds>(201),
        put("/api/compliance/exemptions/{id}/review", "reviewExemption", compliance(ComplianceReview), exemptions::review)
            .doc("Approve or reject an exemption (never one's own)")
            .body_of::<exemptions::Review>()
            .answers::<exemptions::Exemption>(200),
        delete("/api/compliance/exemptions/{id}", "revokeExemption", compliance(ComplianceWrite), exemptions::revoke)
            .doc("Revoke an exemption")
            .answers::<exemptions::Exemption>(200),
        // Policies and templates.
        get("/api/compliance/policies", "listPolicies", compliance(ComplianceRead), policies::list_policies)
            .doc("The organization's policies")
            .query_of::<policies::PolicyQuery>()
            .paged(&["createdAt"])
            .pages::<policies::Policy>("policies"),
        post("/api/compliance/policies", "createPolicy", compliance(ComplianceWrite), policies::create_policy)
            .doc("Create a policy (a named set of rules)")
            .body_of::<policies::PolicyBody>()
            .answers::<policies::Policy>(201),
        get("/api/compliance/policies/{id}", "getPolicy", compliance(ComplianceRead), policies::get_policy)
            .doc("One policy")
            .answers::<policies::Policy>(200),
        put("/api/compliance/policies/{id}", "updatePolicy", compliance(ComplianceWrite), policies::update_policy)
            .doc("Change a policy")
            .body_of::<policies::PolicyBody>()
            .answers::<policies::Policy>(200),
        delete("/api/compliance/policies/{id}", "deletePolicy", compliance(ComplianceWrite), policies::delete_policy)
            .doc("Delete a policy")
            .answers::<Deleted>(200),
        get("/api/compliance/templates", "listTemplates", compliance(ComplianceRead), templates::templates)
            .doc("Template rules and policies")
            .answers::<templates::Templates>(200),
        post("/api/compliance/templates/apply", "applyTemplate", compliance(ComplianceWrite), templates::apply)
            .doc("Instantiate a template rule in the organization")
            .body_of::<templates::ApplyTemplate>()
            .answers::<rules::OrgRule>(201),
        post("/api/compliance/templates/rules/{id}/clone", "cloneTemplateRule", compliance(ComplianceWrite), templates::clone_rule)
            .doc("Copy a template rule (an optional body renames it)")
            .optional_body_of::<templates::CloneBody>()
            .answers::<rules::OrgRule>(201),
        post("/api/compliance/templates/policies/{id}/clone", "cloneTemplatePolicy", compliance(ComplianceWrite), templates::clone_policy)
            .doc("Copy a template policy and its rules, all or nothing")
            .optional_body_of::<templates::CloneBody>()
            .answers::<policies::Policy>(201),
        // The check log and notification preferences.
        get("/api/compliance/audit", "checkLog", compliance(ComplianceRead), check_log::checks)
            .doc("The organization's validation log")
            .query_of::<check_log::CheckQuery>()
            .paged(&["createdAt"])
            .pages::<check_log::CheckEntry>("entries"),
        get("/api/compliance/notification-preferences", "notificationPreferences", compliance(ComplianceRead), preferences::preferences)
            .doc("The organization's notification preference (the secret is never returned)")
            .answers::<preferences::Preference>(200),
        put("/api/compliance/notification-preferences", "saveNotificationPreferences", compliance(ComplianceRead), preferences::save_preferences)
            .doc("Change the notification preference (the organization's admins or owner): a field left out keeps its value; null or an empty value clears webhookUrl, webhookSecret and targetUsers (then every admin and the owner are e-mailed); null for another field is 400; targetUsers are e-mail addresses (CR, LF, spaces refused)")
            .body_of::<preferences::PreferenceBody>()
            .answers::<preferences::Preference>(200),
        post("/api/compliance/notification-preferences/test", "testNotificationWebhook", compliance(ComplianceRead), preferences::test_webhook)
            .doc("Send a test notification (`\"type\": \"test\"`, signed with webhookSecret as deliveries are) to the saved webhookUrl, even one a 410 turned off (a test turns nothing on or off), by the organization's admins or owner (403 otherwise); answers what the receiver said: `sent` (2xx), `failed` (another status, or none within 10 s), `skipped` (no webhookUrl) or `refused` (an address the server does not send to), with its status and the first 1024 bytes of its answer")
            .answers::<crate::services::preferences::WebhookTest>(200),
        // Validation.
        post("/api/compliance/validate/{target}", "validate", Access::UserOrService(ComplianceRead), validate::live)
            .doc("Check an entity's attributes against the organization's effective rules; recorded in the check log")
            .body_of::<validate::ValidateBody>()
            .answers::<validate::Verdict>(200),
        post("/api/compliance/validate/{target}/dry-run", "validateDryRun", Access::UserOrService(ComplianceRead), validate::dry_run)
            .doc("The same check, recording nothing")
            .body_of::<validate::ValidateBody>()
            .answers::<validate::Verdict>(200),
    ]
}
