//! The routes of one area: compliance rules, the published catalog and subscriptions, exemptions, policies and templates, the check log, notification preferences, validation.

use super::*;

/// The area's routes.
pub(super) fn routes() -> Vec<Route> {
    vec![
        // Rules.
        get("/api/compliance/rules", "listRules", compliance(ComplianceRead), rules::list)
            .doc("The organization's rules")
            .query(rule_filters())
            .ok(200, rule_page()),
        post("/api/compliance/rules", "createRule", compliance(ComplianceWrite), rules::create)
            .doc("Create a rule (validated: operator, value, regex, conditions)")
            .body(rule_body())
            .ok(201, envelope(reference("Rule"))),
        get("/api/compliance/rules/{id}", "getRule", compliance(ComplianceRead), rules::get)
            .doc("One rule")
            .ok(200, envelope(reference("Rule"))),
        put("/api/compliance/rules/{id}", "updateRule", compliance(ComplianceWrite), rules::update)
            .doc("Replace a rule (a new version)")
            .body(rule_body())
            .ok(200, envelope(reference("Rule"))),
        delete("/api/compliance/rules/{id}", "deleteRule", compliance(ComplianceWrite), rules::delete)
            .doc("Delete a rule")
            .ok(200, done("id", "deleted")),
        get("/api/compliance/rules/{id}/history", "ruleHistory", compliance(ComplianceRead), rules::history)
            .doc("A rule's versions")
            .ok(200, envelope(array(object(
                &[
                    ("version", integer()),
                    ("change", any()),
                    ("changedBy", string()),
                    ("changedAt", instant()),
                    ("rule", any()),
                ],
                &["version", "changedBy", "changedAt"],
            )))),
        // The published catalog and subscriptions.
        get("/api/compliance/published-rules", "publishedRules", compliance(ComplianceRead), catalog::catalog)
            .doc("The published catalog")
            .query(rule_filters())
            .ok(200, rule_page()),
        get("/api/compliance/subscriptions", "listSubscriptions", compliance(ComplianceRead), catalog::list)
            .doc("The organization's subscriptions")
            .query(paging(&["createdAt"]))
            .ok(200, page("subscriptions", object(
                &[("ruleId", string()), ("isActive", boolean()), ("pinnedVersion", nullable(integer()))],
                &["ruleId", "isActive"],
            ))),
        post("/api/compliance/subscriptions", "subscribe", compliance(ComplianceWrite), catalog::subscribe)
            .doc("Subscribe to a published rule (inactive until activated)")
            .body(rule_ref())
            .ok(201, envelope(object(
                &[("ruleId", string()), ("isActive", boolean()), ("pinnedVersion", nullable(integer()))],
                &["ruleId", "isActive"],
            ))),
        post("/api/compliance/subscriptions/clone", "cloneSubscription", compliance(ComplianceWrite), catalog::clone)
            .doc("Copy a published rule into the organization's own rules")
            .body(rule_ref())
            .ok(201, envelope(reference("Rule"))),
        post("/api/compliance/subscriptions/auto-subscribe", "autoSubscribe", compliance(ComplianceWrite), catalog::auto_subscribe)
            .doc("Subscribe to every published rule")
            .ok(200, envelope(object(&[("subscribed", integer()), ("published", integer())], &["subscribed", "published"]))),
        post("/api/compliance/subscriptions/bulk", "bulkActivate", compliance(ComplianceWrite), catalog::bulk)
            .doc("Activate or deactivate several subscriptions")
            .body(body(
                &[
                    ("ruleIds", json!({"type": "array", "items": string(), "minItems": 1, "maxItems": 500})),
                    ("isActive", boolean()),
                ],
                &["ruleIds", "isActive"],
            ))
            .ok(200, envelope(object(&[("ruleIds", array(string())), ("isActive", boolean())], &["ruleIds", "isActive"]))),
        get("/api/compliance/subscriptions/enforced", "enforcedRules", compliance(ComplianceRead), catalog::enforced)
            .doc("The effective rule set: own rules and active subscriptions")
            .ok(200, envelope(array(reference("Rule")))),
        post("/api/compliance/subscriptions/preview/impact", "previewImpact", compliance(ComplianceRead), catalog::impact)
            .doc("Which validated entities a rule would fail")
            .body(body(&[("rule", rule_body())], &["rule"]))
            .ok(200, envelope(object(
                &[("target", target()), ("evaluated", integer()), ("failing", integer()), ("samples", array(any()))],
                &["target", "evaluated", "failing", "samples"],
            ))),
        post("/api/compliance/subscriptions/preview", "previewRule", compliance(ComplianceRead), catalog::preview)
            .doc("Evaluate a rule on attributes without saving anything")
            .body(body(&[("rule", rule_body()), ("attributes", json!({"type": "object"}))], &["rule", "attributes"]))
            .ok(200, envelope(evaluation())),
        patch("/api/compliance/subscriptions/{ruleId}", "setSubscriptionActive", compliance(ComplianceWrite), catalog::set_active)
            .doc("Activate or deactivate a subscription")
            .body(body(&[("isActive", boolean())], &["isActive"]))
            .ok(200, envelope(object(&[("ruleId", string()), ("isActive", boolean())], &["ruleId", "isActive"]))),
        delete("/api/compliance/subscriptions/{ruleId}", "unsubscribe", compliance(ComplianceWrite), catalog::unsubscribe)
            .doc("Unsubscribe")
            .ok(200, done("ruleId", "unsubscribed")),
        post("/api/compliance/subscriptions/{ruleId}/pin", "pinSubscription", compliance(ComplianceWrite), catalog::pin)
            .doc("Pin the subscription to the rule's current version")
            .ok(200, envelope(object(&[("ruleId", string()), ("pinnedVersion", nullable(integer()))], &["ruleId"]))),
        delete("/api/compliance/subscriptions/{ruleId}/pin", "unpinSubscription", compliance(ComplianceWrite), catalog::unpin)
            .doc("Follow the rule's latest version again")
            .ok(200, envelope(object(&[("ruleId", string()), ("pinnedVersion", nullable(integer()))], &["ruleId"]))),
        // Exemptions.
        get("/api/compliance/exemptions", "listExemptions", compliance(ComplianceRead), exemptions::list_exemptions)
            .doc("The organization's exemptions")
            .query(listing(vec![
                query("status", one_of(&["requested", "approved", "rejected", "revoked"])),
                query("ruleId", string()),
                query("entityId", string()),
            ]))
            .ok(200, page("exemptions", reference("Exemption"))),
        post("/api/compliance/exemptions", "requestExemption", compliance(ComplianceWrite), exemptions::request)
            .doc("Ask for an exemption of one entity from one rule")
            .body(exemption_fields(("entityId", text(200))))
            .ok(201, envelope(reference("Exemption"))),
        post("/api/compliance/exemptions/bulk", "requestExemptions", compliance(ComplianceWrite), exemptions::request_bulk)
            .doc("Ask for exemptions of up to 500 entities from one rule")
            .body(exemption_fields(("entityIds", json!({"type": "array", "items": text(200), "minItems": 1, "maxItems": 500}))))
            .ok(201, envelope(object(&[("ids", array(string())), ("count", integer())], &["ids", "count"]))),
        put("/api/compliance/exemptions/{id}/review", "reviewExemption", compliance(ComplianceReview), exemptions::review)
            .doc("Approve or reject an exemption (never one's own)")
            .body(body(&[("decision", one_of(&["approve", "reject"])), ("note", nullable(string()))], &["decision"]))
            .ok(200, envelope(reference("Exemption"))),
        delete("/api/compliance/exemptions/{id}", "revokeExemption", compliance(ComplianceWrite), exemptions::revoke)
            .doc("Revoke an exemption")
            .ok(200, envelope(reference("Exemption"))),
        // Policies and templates.
        get("/api/compliance/policies", "listPolicies", compliance(ComplianceRead), policies::list_policies)
            .doc("The organization's policies")
            .query(listing(vec![query("name", string())]))
            .ok(200, page("policies", reference("Policy"))),
        post("/api/compliance/policies", "createPolicy", compliance(ComplianceWrite), policies::create_policy)
            .doc("Create a policy (a named set of rules)")
            .body(policy_body())
            .ok(201, envelope(reference("Policy"))),
        get("/api/compliance/policies/{id}", "getPolicy", compliance(ComplianceRead), policies::get_policy)
            .doc("One policy")
            .ok(200, envelope(reference("Policy"))),
        put("/api/compliance/policies/{id}", "updatePolicy", compliance(ComplianceWrite), policies::update_policy)
            .doc("Change a policy")
            .body(policy_body())
            .ok(200, envelope(reference("Policy"))),
        delete("/api/compliance/policies/{id}", "deletePolicy", compliance(ComplianceWrite), policies::delete_policy)
            .doc("Delete a policy")
            .ok(200, done("id", "deleted")),
        get("/api/compliance/templates", "listTemplates", compliance(ComplianceRead), templates::templates)
            .doc("Template rules and policies")
            .ok(200, envelope(object(
                &[("rules", array(reference("Rule"))), ("policies", array(reference("Policy")))],
                &["rules", "policies"],
            ))),
        post("/api/compliance/templates/apply", "applyTemplate", compliance(ComplianceWrite), templates::apply)
            .doc("Instantiate a template rule in the organization")
            .body(body(&[("templateId", text(200)), ("name", text(200))], &["templateId"]))
            .ok(201, envelope(reference("Rule"))),
        post("/api/compliance/templates/rules/{id}/clone", "cloneTemplateRule", compliance(ComplianceWrite), templates::clone_rule)
            .doc("Copy a template rule (an optional body renames it)")
            .optional_body(clone_body())
            .ok(201, envelope(reference("Rule"))),
        post("/api/compliance/templates/policies/{id}/clone", "cloneTemplatePolicy", compliance(ComplianceWrite), templates::clone_policy)
            .doc("Copy a template policy and its rules, all or nothing")
            .optional_body(clone_body())
            .ok(201, envelope(reference("Policy"))),
        // The check log and notification preferences.
        get("/api/compliance/audit", "checkLog", compliance(ComplianceRead), check_log::checks)
            .doc("The organization's validation log")
            .query(listing(vec![
                query("target", target()),
                query("result", schema_value::<compliance_core::Outcome>()),
                query("entityId", string()),
            ]))
            .pages::<check_log::CheckEntry>("entries"),
        get("/api/compliance/notification-preferences", "notificationPreferences", compliance(ComplianceRead), preferences::preferences)
            .doc("The organization's notification preference (the secret is never returned)")
            .ok(200, envelope(reference("NotificationPreference"))),
        put("/api/compliance/notification-preferences", "saveNotificationPreferences", compliance(ComplianceRead), preferences::save_preferences)
            .doc("Change the notification preference (the organization's admins or owner): a field left out keeps its value; null or an empty value clears webhookUrl, webhookSecret and targetUsers (then every admin and the owner are e-mailed); null for another field is 400; targetUsers are e-mail addresses (CR, LF, spaces refused)")
            .body(body(
                &[
                    ("emailEnabled", boolean()),
                    ("targetUsers", nullable(json!({"type": "array", "maxItems": crate::services::preferences::MAX_TARGET_USERS, "items": {"type": "string", "format": "email", "maxLength": 254}}))),
                    ("webhookUrl", nullable(string())),
                    ("webhookSecret", nullable(string())),
                    ("digestMode", one_of(&["immediate", "daily", "weekly"])),
                    ("notifyWarnings", boolean()),
                ],
                &[],
            ))
            .ok(200, envelope(reference("NotificationPreference"))),
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
