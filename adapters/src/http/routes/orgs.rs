//! The routes of one area: Organizations, members and Roles, invitations, platform administration.

use super::*;

/// The area's routes.
pub(super) fn routes() -> Vec<Route> {
    vec![
        // Organizations.
        get("/api/me/organizations", "myOrganizations", Access::User, organizations::mine)
            .doc("The organizations the caller belongs to, with their roles")
            .paged(&["createdAt"])
            .pages::<organizations::MyOrganization>("organizations"),
        get("/api/organization", "activeOrganization", org_member(), organizations::active)
            .doc("The `x-org-id` organization")
            .answers::<organizations::Organization>(200),
        post("/api/organization", "createOrganization", Access::User, organizations::create)
            .doc("Create an organization, or a team under `parentOrgId` (the `org:settings` permission there)")
            .body_of::<organizations::CreateOrganization>()
            .answers::<organizations::Organization>(201),
        get("/api/organization/{id}", "getOrganization", org_path(OwnManagedOrSuperAdmin), organizations::get)
            .doc("One organization")
            .answers::<organizations::Organization>(200),
        put("/api/organization/{id}", "updateOrganization", org_path(tenancy::Access::SuperAdmin), organizations::update)
            .doc("Rename an organization")
            .body_of::<organizations::UpdateOrganization>()
            .answers::<organizations::Organization>(200),
        delete("/api/organization/{id}", "deleteOrganization", Access::SuperAdmin { step_up: true }, organizations::delete)
            .doc("Soft-delete an organization and its teams (audit org.soft_delete, in its chain and the system organization's): its members can no longer act in it, it leaves every listing, its running scans end and its schedules stop, a team's usage leaves its root's pool; its data is kept for ORG_RESTORE_DAYS (30), then purged but for its audit chain. Deleted already: 409")
            .answers::<Deleted>(200),
        post("/api/organization/{id}/restore", "restoreOrganization", Access::SuperAdmin { step_up: true }, organizations::restore)
            .doc("Restore a soft-deleted organization and the teams deleted with it, exactly as they were (audit org.restore): within ORG_RESTORE_DAYS of the delete, else 410 GONE; not deleted, restored meanwhile, a team whose root is deleted, or a name another organization took meanwhile: 409")
            .answers::<organizations::Organization>(200),
        patch("/api/organization/{id}/tier", "changeTier", org_path(tenancy::Access::SuperAdmin).stepped_up(), organizations::change_tier)
            .doc("Change an organization's tier (audit admin.org.tier.update). A tier change keeps nothing the new tier cannot buy: the add-on bundles it is not eligible for are removed in the same transaction, each audited as billing.addon.remove, and listed in `removedBundles`")
            .body_of::<organizations::ChangeTier>()
            .answers::<organizations::TierChanged>(200),
        get("/api/organization/{id}/export", "exportOrganization", org_path(Needs(OrgSettings)), organizations::export)
            .doc("Everything the organization holds about its members, teams, roles and invitations")
            .answers::<organizations::OrganizationExport>(200),
        patch("/api/organization/{id}/transfer-owner", "transferOwner", org_path(Needs(OrgSettings)).stepped_up(), organizations::transfer_owner)
            .doc("Hand the ownership to another active member")
            .body_of::<organizations::TransferOwner>()
            .answers::<organizations::Organization>(200),
        get("/api/organization/{id}/teams", "listTeams", org_path(Member), organizations::teams)
            .doc("The organization's teams")
            .paged(&["createdAt"])
            .pages::<organizations::Organization>("teams"),
        // Members and roles.
        get("/api/organization/{id}/members", "listMembers", org_path(Member), members::list)
            .doc("The organization's members")
            .paged(&["createdAt"])
            .pages::<members::Member>("members"),
        post("/api/organization/{id}/members", "addMember", org_path(Needs(MembersManage)), members::add)
            .doc("Add a member")
            .body_of::<members::AddMember>()
            .answers::<members::Member>(201),
        post("/api/organization/{id}/members/bulk-add", "bulkAddMember", org_path(Needs(MembersManage)), members::bulk_add)
            .doc("Add a user to several teams of the organization")
            .feature(Feature::BulkOperations)
            .body_of::<members::BulkAdd>()
            .answers::<members::BulkAdded>(201),
        patch("/api/organization/{id}/members/{userId}", "changeMemberRole", org_path(Needs(MembersManage)), members::change_role)
            .doc("Change a member's role")
            .body_of::<members::ChangeMemberRole>()
            .answers::<members::Member>(200),
        delete("/api/organization/{id}/members/{userId}", "removeMember", org_path(Needs(MembersManage)), members::remove)
            .doc("Remove a member")
            .answers::<members::MemberRemoved>(200),
        patch("/api/organization/{id}/members/{userId}/activate", "activateMember", org_path(Needs(MembersManage)), members::activate)
            .doc("Activate a member")
            .answers::<members::Member>(200),
        patch("/api/organization/{id}/members/{userId}/deactivate", "deactivateMember", org_path(Needs(MembersManage)), members::deactivate)
            .doc("Deactivate a member")
            .answers::<members::Member>(200),
        get("/api/organization/{id}/roles", "listRoles", org_path(Member), members::roles)
            .doc("The organization's Roles")
            .paged(&["createdAt"])
            .pages::<members::Role>("roles"),
        post("/api/organization/{id}/roles", "createRole", org_path(Needs(RolesManage)), members::create_role)
            .doc("Define a custom Role")
            .body_of::<members::CreateRole>()
            .answers::<members::Role>(201),
        put("/api/organization/{id}/roles/{roleId}", "updateRole", org_path(Needs(RolesManage)), members::update_role)
            .doc("Change a custom Role")
            .body_of::<members::UpdateRole>()
            .answers::<members::Role>(200),
        delete("/api/organization/{id}/roles/{roleId}", "deleteRole", org_path(Needs(RolesManage)), members::delete_role)
            .doc("Delete a custom Role")
            .answers::<Deleted>(200),
        post("/api/organization/{id}/roles/{roleId}/members", "addRoleMember", org_path(Needs(RolesManage)), members::add_role_member)
            .doc("Give a member a Role")
            .body_of::<members::RoleMember>()
            .answers::<members::Role>(201),
        delete("/api/organization/{id}/roles/{roleId}/members/{userId}", "removeRoleMember", org_path(Needs(RolesManage)), members::remove_role_member)
            .doc("Take a Role from a member")
            .answers::<members::RoleMemberRemoved>(200),
        // Single sign-on.
        get("/api/organization/{id}/idp", "listIdentityProviders", org_path(Needs(OrgSettings)), sso::list)
            .doc("The root organization's identity-provider configurations (never their client secrets); `active` is false while disabled or without the `sso` feature (a downgrade disables, never deletes)")
            .answers_list::<sso::IdentityProvider>(200),
        post("/api/organization/{id}/idp", "createIdentityProvider", org_path(Needs(OrgSettings)), sso::create)
            .doc("Add an identity-provider configuration (at most 5: a sixth is 409; the `sso` feature, else 403 FEATURE_NOT_AVAILABLE). Its discovery document is fetched and must name the issuer exactly (400 naming `issuer` otherwise); the client secret is stored sealed (audit org.idp.upsert)")
            .feature(Feature::Sso)
            .body_of::<sso::PutIdentityProvider>()
            .answers::<sso::IdentityProvider>(201),
        put("/api/organization/{id}/idp/{idpId}", "replaceIdentityProvider", org_path(Needs(OrgSettings)), sso::replace)
            .doc("Replace a configuration at the `version` read (stale: 409); a `clientSecret` left out is kept (audit org.idp.upsert)")
            .feature(Feature::Sso)
            .body_of::<sso::PutIdentityProvider>()
            .answers::<sso::IdentityProvider>(200),
        delete("/api/organization/{id}/idp/{idpId}", "deleteIdentityProvider", org_path(Needs(OrgSettings)), sso::remove)
            .doc("Delete a configuration and the identities linked through it (audit org.idp.delete)")
            .answers::<Deleted>(200),
        get("/api/organization/{id}/domains", "listDomains", org_path(Needs(OrgSettings)), sso::domains)
            .doc("The e-mail domains the organization claims, each with the TXT record that proves it")
            .answers_list::<sso::Domain>(200),
        post("/api/organization/{id}/domains", "claimDomain", org_path(Needs(OrgSettings)), sso::claim_domain)
            .doc("Claim an e-mail domain (public mail domains refused; at most 20): answers the TXT record to publish (audit org.domain.claim)")
            .body_of::<sso::ClaimDomain>()
            .answers::<sso::Domain>(201),
        post("/api/organization/{id}/domains/{domain}/verify", "verifyDomain", org_path(Needs(OrgSettings)), sso::verify_domain)
            .doc("Look up the domain's TXT record: found, the domain is verified (audit org.domain.verify); not found, 400 naming the record; verified by another organization, 409")
            .answers::<sso::Domain>(200),
        delete("/api/organization/{id}/domains/{domain}", "deleteDomain", org_path(Needs(OrgSettings)), sso::remove_domain)
            .doc("Give up a claimed domain (audit org.domain.delete)")
            .answers::<Deleted>(200),
        get("/api/organization/{id}/sso", "getSsoEnforcement", org_path(Needs(OrgSettings)), sso::enforcement)
            .doc("Whether the organization requires its single sign-on, and its break-glass accounts")
            .answers::<sso::Enforcement>(200),
        put("/api/organization/{id}/sso", "setSsoEnforcement", org_path(Needs(OrgSettings)).stepped_up(), sso::set_enforcement)
            .doc("Require single sign-on (after `graceHours`) or stop requiring it: while required, password sessions and personal access tokens not issued through the organization's single sign-on are refused in it and its teams (403 SSO_REQUIRED); service tokens are not affected. Requiring needs the `sso` feature and an enabled configuration (409). Audit org.sso.enforcement")
            .body_of::<sso::PutEnforcement>()
            .answers::<sso::Enforcement>(200),
        put("/api/organization/{id}/sso/break-glass/{userId}", "armBreakGlass", org_path(Needs(OrgSettings)).stepped_up(), sso::arm)
            .doc("Arm a break-glass account (an active member keeps password access while armed: at most two at once, at most 30 days; audit org.break-glass.arm)")
            .body_of::<sso::ArmBreakGlass>()
            .answers::<sso::Enforcement>(200),
        delete("/api/organization/{id}/sso/break-glass/{userId}", "disarmBreakGlass", org_path(Needs(OrgSettings)), sso::disarm)
            .doc("Disarm a break-glass account (audit org.break-glass.disarm)")
            .answers::<sso::Enforcement>(200),
        post("/api/organization/{id}/exports", "exportOrganizationArchive", org_path(Needs(OrgSettings)), crate::http::exports::org_request)
            .doc("Ask for an export of the organization as a background job (202), as super-admins may (one at a time, 409; audit admin.org.export)")
            .answers::<crate::http::exports::ExportJob>(202),
        get("/api/organization/{id}/exports/{jobId}", "organizationExportStatus", org_path(Needs(OrgSettings)), crate::http::exports::org_status)
            .doc("An export job of the organization")
            .answers::<crate::http::exports::ExportJob>(200),
        get("/api/organization/{id}/exports/{jobId}/download", "organizationExportDownload", org_path(Needs(OrgSettings)), crate::http::exports::org_download)
            .doc("The export's archive (application/zip): 409 until it is done, 410 once its 24 hours passed")
            .zip(),
        get("/api/organization/{id}/ai", "organizationAiSettings", org_path(Needs(OrgSettings)), crate::http::ai_settings::get)
            .doc("The organization's own AI settings, as its admins read them (never the key: only its last four characters)")
            .answers::<crate::services::ai_settings::AiSettings>(200),
        get("/api/organization/{id}/kms", "organizationKeyStatus", org_path(Needs(OrgSettings)), keys::org_status)
            .doc("Whether the organization's secrets are under a key its customer holds, and whether that key works (`orphaned`: operations that need one of its secrets answer 503 KMS_UNAVAILABLE until the key works again). A team's secrets are under its root's key")
            .answers::<keys::KeyStatus>(200),
        // Invitations.
        post("/api/invitation/send", "sendInvitation", compliance(InvitationsManage), invitations::send)
            .doc("Invite someone by e-mail")
            .body_of::<invitations::SendInvitation>()
            .answers::<invitations::Invitation>(201),
        get("/api/invitation", "listInvitations", compliance(InvitationsManage), invitations::list)
            .doc("The organization's invitations")
            .paged(&["createdAt"])
            .pages::<invitations::Invitation>("invitations"),
        delete("/api/invitation/{id}", "revokeInvitation", compliance(InvitationsManage), invitations::revoke)
            .doc("Revoke an invitation")
            .answers::<invitations::Invitation>(200),
        post("/api/invitation/{id}/resend", "resendInvitation", compliance(InvitationsManage), invitations::resend)
            .doc("Send an invitation again")
            .answers::<invitations::Invitation>(200),
        post("/api/invitation/{id}/accept", "acceptInvitation", Access::User, invitations::accept)
            .doc("Accept an invitation as its invitee (the token's e-mail; anyone else's is 404): the caller joins with the invited role, within the account's seats (429 QUOTA_EXCEEDED beyond them); 409 once it is no longer pending (audit invitation.accept)")
            .answers::<members::Member>(201),
        // Platform administration of an organization's sign-in and keys.
        get("/api/admin/organizations/{id}/idp", "adminListIdentityProviders", org_path(tenancy::Access::SuperAdmin), sso::admin_list)
            .doc("A root organization's identity-provider configurations, as a super-admin sees them")
            .answers_list::<sso::IdentityProvider>(200),
        post("/api/admin/organizations/{id}/idp", "adminCreateIdentityProvider", org_path(tenancy::Access::SuperAdmin).stepped_up(), sso::admin_create)
            .doc("Add a configuration for an organization (as its admins may; audit admin.org-idp.upsert)")
            .body_of::<sso::PutIdentityProvider>()
            .answers::<sso::IdentityProvider>(201),
        put("/api/admin/organizations/{id}/idp/{idpId}", "adminReplaceIdentityProvider", org_path(tenancy::Access::SuperAdmin).stepped_up(), sso::admin_replace)
            .doc("Replace a configuration at the `version` read (audit admin.org-idp.upsert)")
            .body_of::<sso::PutIdentityProvider>()
            .answers::<sso::IdentityProvider>(200),
        delete("/api/admin/organizations/{id}/idp/{idpId}", "adminDeleteIdentityProvider", org_path(tenancy::Access::SuperAdmin).stepped_up(), sso::admin_remove)
            .doc("Delete a configuration (audit admin.org-idp.delete)")
            .answers::<Deleted>(200),
        get("/api/admin/organizations/{id}/kms", "getOrganizationKms", org_path(tenancy::Access::SuperAdmin), keys::get)
            .doc("An organization's key configuration: the customer key (provider, reference, Vault's address; never a credential), its checks, or the platform key")
            .answers::<keys::KeyConfiguration>(200),
        put("/api/admin/organizations/{id}/kms", "putOrganizationKms", org_path(tenancy::Access::SuperAdmin).stepped_up(), keys::put)
            .doc("Put a root organization's secrets (and its teams') under a key its customer holds (Enterprise, or the system organization; else 403 FEATURE_NOT_AVAILABLE): the key is proven first (a probe wrapped and unwrapped, its state described; a key that does not work is 400 naming `keyRef`, an unreachable provider 503 KMS_UNAVAILABLE), then the organization's data keys are rewrapped under it, nothing else rewritten (audit admin.org.kms-config.upsert)")
            .body_of::<keys::PutKeyConfiguration>()
            .answers::<keys::KeyConfiguration>(200),
        delete("/api/admin/organizations/{id}/kms", "deleteOrganizationKms", org_path(tenancy::Access::SuperAdmin).stepped_up(), keys::delete)
            .doc("Put an organization's secrets back under the platform key: its data keys are rewrapped first, and nothing changes (409) when that fails (no platform key, the customer key no longer unwraps); no configuration: 404 (audit admin.org.kms-config.delete)")
            .answers::<keys::KeyConfiguration>(200),
    ]
}
