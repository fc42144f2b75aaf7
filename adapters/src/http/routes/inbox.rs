//! The routes of one area: Notifications: the log and the inbox.

use super::*;

/// The area's routes.
pub(super) fn routes() -> Vec<Route> {
    vec![
        // Notifications: the log and the inbox.
        get("/api/compliance/notifications", "notificationLog", compliance(ComplianceRead), messages::log)
            .doc("Every notification delivery attempt (channel, notification id, status, attempt, response status or error), newest first")
            .query_of::<messages::LogQuery>()
            .paged(&["createdAt"])
            .pages::<messages::NotificationAttempt>("attempts"),
        get("/api/messages", "inbox", org_member(), messages::inbox)
            .doc("The organization's inbox: notifications and announcements, newest first")
            .query_of::<messages::InboxQuery>()
            .paged(&["createdAt"])
            .pages::<messages::Message>("messages"),
        post("/api/messages/announcements", "announce", compliance(OrgSettings), messages::announce)
            .doc("Post an announcement to the organization's inbox (admins and owner)")
            .body_of::<messages::AnnouncementBody>()
            .answers::<messages::Message>(201),
        patch("/api/messages/{id}/read", "markMessageRead", org_member(), messages::mark_read)
            .doc("Mark a message read")
            .answers::<messages::Message>(200),
        delete("/api/messages/{id}", "deleteMessage", compliance(OrgSettings), messages::delete)
            .doc("Delete a message (admins and owner)")
            .answers::<Deleted>(200),
    ]
}
