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
        get("/api/messages/announcements", "listAnnouncements", org_member(), announcements::list)
            .doc("Announcements: by default the active ones that reach the organization (its own, its parent's that include it, platform-wide ones for everyone, its tier or a list naming it), without those the reader dismissed (`includeDismissed=true` adds them); `view=managed` every one the organization's admins posted, whatever its window (`messages:manage`); `view=platform` every platform-wide one (super-admins). Newest start first")
            .query_of::<announcements::ListQuery>()
            .paged(&["startsAt"])
            .pages::<announcements::Announcement>("announcements"),
        post("/api/messages/announcements", "postAnnouncement", compliance(MessagesManage), announcements::post)
            .doc("Post an announcement: to the organization (and with `includeTeams` every team of it, or `teamIds` some), or, for a super-admin, to `organizations` (`organizationIds`), `everyone` or one `tier`. A title (200), a body (plain text or a safe subset of Markdown, MESSAGE_BODY_MAX_CHARS), a severity, a window (`startsAt`, default now; `endsAt`, none: until removed), whether members may dismiss it. Audited as message.announcement.create with identifiers only")
            .body_of::<announcements::AnnouncementBody>()
            .answers::<announcements::Announcement>(201),
        put("/api/messages/announcements/{id}", "editAnnouncement", compliance(MessagesManage), announcements::edit)
            .doc("Change an announcement's title, body, severity, window and dismissibility (not its audience): the organization's own by its admins, a platform-wide one by super-admins. What is left out takes the defaults of a new one, but `startsAt`, which stays. Audited as message.announcement.update")
            .body_of::<announcements::AnnouncementEdit>()
            .answers::<announcements::Announcement>(200),
        delete("/api/messages/announcements/{id}", "deleteAnnouncement", compliance(MessagesManage), announcements::remove)
            .doc("Remove an announcement (its dismissals with it), by the same peers as an edit. Audited as message.delete with identifiers only")
            .answers::<Deleted>(200),
        post("/api/messages/announcements/{id}/dismiss", "dismissAnnouncement", org_member(), announcements::dismiss)
            .doc("Dismiss an active announcement for the reader (stored on the server, per user, on every device); 409 when it is not dismissible; again changes nothing")
            .answers::<announcements::Announcement>(200),
        get("/api/messages/unread", "unreadCounts", org_member(), announcements::unread)
            .doc("The reader's unread counts in the organization: `inbox` (notifications not marked read), `announcements` (active, reaching it, not dismissed), `conversations` (messages by others after the reader's markers) and their `total`")
            .answers::<crate::services::announcements::Unread>(200),
        get("/api/messages/conversations", "listConversations", org_member(), conversations::list)
            .doc("The reader's conversations in the organization (those they take part in and have not left), latest message first, each with its participants and the reader's unread count")
            .paged(&["lastMessageAt"])
            .pages::<conversations::Conversation>("conversations"),
        post("/api/messages/conversations", "startConversation", org_member(), conversations::start)
            .doc("Start a conversation with other active members of the organization (`participants`: user ids, at most CONVERSATION_MAX_PARTICIPANTS with the author), an optional `subject` and the first message's `body`. Never across organizations: someone who is not a member is 400 naming `participants`. Counts toward MESSAGES_PER_MINUTE (429). Not audited")
            .body_of::<conversations::ConversationBody>()
            .answers::<conversations::Conversation>(201),
        get("/api/messages/conversations/{id}/messages", "conversationMessages", org_member(), conversations::messages)
            .doc("A conversation's messages, newest first, by keyset: `before` a message id, `limit` 1 to 100 (50); `nextBefore` continues. 404 for a conversation the reader does not take part in")
            .query_of::<conversations::MessagesQuery>()
            .answers::<conversations::MessagePage>(200),
        post("/api/messages/conversations/{id}/messages", "postConversationMessage", org_member(), conversations::post)
            .doc("Write to a conversation the reader takes part in (MESSAGE_BODY_MAX_CHARS; MESSAGES_PER_MINUTE, else 429 RATE_LIMITED). Not audited")
            .body_of::<conversations::MessageBody>()
            .answers::<conversations::ConversationMessage>(201),
        post("/api/messages/conversations/{id}/read", "readConversation", org_member(), conversations::read)
            .doc("Move the reader's read marker to the latest message")
            .answers::<conversations::Conversation>(200),
        delete("/api/messages/conversations/{id}/participants/me", "leaveConversation", org_member(), conversations::leave)
            .doc("Leave a conversation: it is no longer listed or streamed to the reader")
            .answers::<Deleted>(200),
        delete("/api/messages/conversations/{id}/messages/{messageId}", "deleteConversationMessage", org_member(), conversations::delete_message)
            .doc("Delete a message: its author (unaudited), or an admin of the organization (`messages:manage`), audited as message.delete with identifiers only, never the body")
            .answers::<Deleted>(200),
        get("/api/messages/stream", "messageStream", org_member(), conversations::stream)
            .doc("Server-sent events for the reader in the organization, on every replica (a message posted through any replica arrives within a second): `message` (a new message of a conversation they take part in), `announcement` (one posted or changed that reaches the organization and is active), `resync` (the stream fell behind: read the lists again); a keep-alive comment every 15 seconds. The same token as the API, checked again every second with the reader's membership (the stream ends when either fails); a stream ends after 15 minutes (clients reconnect); at most MESSAGE_STREAMS_PER_USER open per user on a replica (429)")
            .event_stream(),
        patch("/api/messages/{id}/read", "markMessageRead", org_member(), messages::mark_read)
            .doc("Mark a message read")
            .answers::<messages::Message>(200),
        delete("/api/messages/{id}", "deleteMessage", compliance(OrgSettings), messages::delete)
            .doc("Delete a message (admins and owner)")
            .answers::<Deleted>(200),
    ]
}
