//! Announcements: an organization's admins post to it and, if they choose, its teams;
//! a super-admin posts to every organization, a list of them, or one tier. Members
//! read the active ones that reach their organization and dismiss them (on the
//! server, per user). Creation and deletion are audited with identifiers only; an
//! edit is audited as `message.announcement.update` (this server's addition).

use chrono::{DateTime, SubsecRound, Utc};
use messaging::{Audience, Severity, Teams, Window};
use serde_json::json;

use super::{ServiceError, ServiceResult};
use crate::config::Config;
use crate::services::context::{event, Caller};
/// An announcement, as the workflows answer it.
pub use crate::storage::AnnouncementRecord;
use crate::storage::{unit_of_work, AnnouncementFields, OrgRecord, Reader, Store};

/// What a request says an announcement is, before it is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draft {
    /// One line.
    pub title: String,
    /// The text.
    pub body: String,
    /// Default `info`.
    pub severity: Option<Severity>,
    /// Default now (a new one) or unchanged (an edit).
    pub starts_at: Option<DateTime<Utc>>,
    /// None: until removed.
    pub ends_at: Option<DateTime<Utc>>,
    /// Default true.
    pub dismissible: Option<bool>,
}

/// A draft checked: its text within the limits, its window in order (instants as
/// stored, to the microsecond, so an end a nanosecond after its start is refused
/// rather than kept equal to it).
fn checked(
    config: &Config,
    draft: Draft,
    default_start: DateTime<Utc>,
) -> ServiceResult<AnnouncementFields> {
    let refused = |e: messaging::MessageError| ServiceError::invalid(e.field, e.message);
    let starts_at = draft.starts_at.unwrap_or(default_start).trunc_subsecs(6);
    Ok(AnnouncementFields {
        title: messaging::check_text("title", &draft.title, messaging::TITLE_MAX, true)
            .map_err(refused)?,
        body: messaging::check_text("body", &draft.body, config.messages.body_max, false)
            .map_err(refused)?,
        severity: draft.severity.unwrap_or(Severity::Info),
        window: Window::new(starts_at, draft.ends_at.map(|end| end.trunc_subsecs(6)))
            .map_err(refused)?,
        dismissible: draft.dismissible.unwrap_or(true),
    })
}

/// The most organizations or teams one announcement names.
pub const MAX_TARGETS: usize = 100;

/// Who is asking, where: the organization of `x-org-id`, and what the gate found.
#[derive(Debug, Clone, Copy)]
pub struct Asker<'a> {
    /// The caller.
    pub caller: &'a Caller,
    /// The organization.
    pub org: &'a OrgRecord,
    /// A super-admin.
    pub super_admin: bool,
    /// Holds `messages:manage` there.
    pub manages: bool,
}

fn reader<'a>(asker: &Asker<'a>) -> Reader<'a> {
    Reader {
        org_id: &asker.org.id,
        parent_org_id: asker.org.parent_org_id.as_deref(),
        tier: asker.org.tier,
        user_id: &asker.caller.user_id,
    }
}

fn audience_name(audience: &Audience) -> &'static str {
    match audience {
        Audience::Organization { .. } => "organization",
        Audience::Organizations(_) => "organizations",
        Audience::Everyone => "everyone",
        Audience::Tier(_) => "tier",
    }
}

/// Checks that the audience names only what exists and the asker may reach.
async fn check_audience(
    store: &Store,
    asker: &Asker<'_>,
    audience: &Audience,
) -> ServiceResult<()> {
    if audience.is_platform() && !asker.super_admin {
        return Err(ServiceError::Forbidden(
            "only a super-admin posts to other organizations, every organization or a tier",
        ));
    }
    match audience {
        Audience::Organization {
            teams: Teams::Listed(teams),
            org_id,
        } => {
            if teams.len() > MAX_TARGETS {
                return Err(ServiceError::invalid(
                    "teamIds",
                    format!("at most {MAX_TARGETS} teams"),
                ));
            }
            for team in teams {
                let found = store.organization(team).await?;
                if found.and_then(|t| t.parent_org_id).as_deref() != Some(org_id.as_str()) {
                    return Err(ServiceError::invalid(
                        "teamIds",
                        format!("`{team}` is not a team of this organization"),
                    ));
                }
            }
        }
        Audience::Organizations(listed) => {
            if listed.is_empty() || listed.len() > MAX_TARGETS {
                return Err(ServiceError::invalid(
                    "organizationIds",
                    format!("name 1 to {MAX_TARGETS} organizations"),
                ));
            }
            for org in listed {
                if store.organization(org).await?.is_none() {
                    return Err(ServiceError::invalid(
                        "organizationIds",
                        format!("`{org}` is not an organization"),
                    ));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Posts an announcement.
pub async fn post(
    store: &Store,
    config: &Config,
    asker: Asker<'_>,
    audience: Audience,
    draft: Draft,
    now: DateTime<Utc>,
) -> ServiceResult<AnnouncementRecord> {
    let fields = checked(config, draft, now)?;
    check_audience(store, &asker, &audience).await?;
    let id = crate::new_id();
    let audit = [event(
        asker.caller,
        "message.announcement.create",
        &asker.org.id,
        "announcement",
        &id,
        json!({"audience": audience_name(&audience), "severity": fields.severity.as_str(), "dismissible": fields.dismissible}),
    )];
    unit_of_work!(store, |tx| {
        tx.create_announcement(&id, &audience, &fields, &asker.caller.user_id, now)
            .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    posted(store, &id).await
}

/// The announcement `id` as its managers reach it: an organization's by its admins
/// (`messages:manage` in it), a platform one by super-admins. One the asker cannot
/// see is not found; one they see but may not manage is forbidden.
async fn managed(store: &Store, asker: &Asker<'_>, id: &str) -> ServiceResult<AnnouncementRecord> {
    let found = store
        .announcement(id)
        .await?
        .ok_or(ServiceError::NotFound("announcement".into()))?;
    match &found.audience {
        Audience::Organization { org_id, .. } if org_id == &asker.org.id => {
            if asker.manages || asker.super_admin {
                Ok(found)
            } else {
                Err(ServiceError::Forbidden(
                    "the `messages:manage` permission is required",
                ))
            }
        }
        Audience::Organization { .. } => Err(ServiceError::NotFound("announcement".into())),
        _ if asker.super_admin => Ok(found),
        _ => {
            let viewer = messaging::Viewer {
                org_id: &asker.org.id,
                parent_org_id: asker.org.parent_org_id.as_deref(),
                tier: asker.org.tier,
            };
            if found.audience.reaches(&viewer) {
                Err(ServiceError::Forbidden(
                    "only a super-admin edits or removes a platform-wide announcement",
                ))
            } else {
                Err(ServiceError::NotFound("announcement".into()))
            }
        }
    }
}

/// Changes what an announcement says and when.
pub async fn edit(
    store: &Store,
    config: &Config,
    asker: Asker<'_>,
    id: &str,
    draft: Draft,
    now: DateTime<Utc>,
) -> ServiceResult<AnnouncementRecord> {
    let found = managed(store, &asker, id).await?;
    let fields = checked(config, draft, found.window.starts_at)?;
    let audit = [event(
        asker.caller,
        "message.announcement.update",
        &asker.org.id,
        "announcement",
        &found.id,
        json!({"severity": fields.severity.as_str(), "dismissible": fields.dismissible}),
    )];
    unit_of_work!(store, |tx| {
        tx.update_announcement(&found.id, &fields, now).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    posted(store, &found.id).await
}

/// Removes an announcement (audited as `message.delete`).
pub async fn remove(store: &Store, asker: Asker<'_>, id: &str) -> ServiceResult<()> {
    let found = managed(store, &asker, id).await?;
    let audit = [event(
        asker.caller,
        "message.delete",
        &asker.org.id,
        "announcement",
        &found.id,
        json!({"kind": "announcement"}),
    )];
    unit_of_work!(store, |tx| {
        tx.delete_announcement(&found.id).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })
}

/// Which announcements a list shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Those active now that reach the organization (dismissed ones when asked).
    Active {
        /// Include those the reader dismissed.
        include_dismissed: bool,
    },
    /// Every one the organization's admins manage, whatever their window.
    Managed,
    /// Every platform-wide one (super-admins).
    Platform,
}

/// A page of announcements.
pub async fn list(
    store: &Store,
    asker: Asker<'_>,
    view: View,
    now: DateTime<Utc>,
    (limit, offset, ascending): (u32, u64, bool),
) -> ServiceResult<(Vec<AnnouncementRecord>, u64)> {
    Ok(match view {
        View::Active { include_dismissed } => {
            store
                .visible_announcements(
                    reader(&asker),
                    now,
                    include_dismissed,
                    (limit, offset),
                    ascending,
                )
                .await?
        }
        View::Managed if asker.manages || asker.super_admin => {
            store
                .managed_announcements(Some(&asker.org.id), (limit, offset), ascending)
                .await?
        }
        View::Platform if asker.super_admin => {
            store
                .managed_announcements(None, (limit, offset), ascending)
                .await?
        }
        View::Managed => {
            return Err(ServiceError::Forbidden(
                "the `messages:manage` permission is required",
            ))
        }
        View::Platform => {
            return Err(ServiceError::Forbidden(
                "only a super-admin lists platform-wide announcements",
            ))
        }
    })
}

/// Dismisses an announcement for the reader: it must reach their organization now
/// and be dismissible (409 otherwise); a second dismissal changes nothing.
pub async fn dismiss(
    store: &Store,
    asker: Asker<'_>,
    id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<AnnouncementRecord> {
    let found = store
        .announcement(id)
        .await?
        .ok_or(ServiceError::NotFound("announcement".into()))?;
    let viewer = messaging::Viewer {
        org_id: &asker.org.id,
        parent_org_id: asker.org.parent_org_id.as_deref(),
        tier: asker.org.tier,
    };
    if !found.audience.reaches(&viewer) || found.window.phase(now) != messaging::Phase::Active {
        return Err(ServiceError::NotFound("announcement".into()));
    }
    if !found.dismissible {
        return Err(ServiceError::Conflict(
            "this announcement cannot be dismissed".to_owned(),
        ));
    }
    let dismissed_at = store
        .dismiss_announcement(id, &asker.caller.user_id, now)
        .await?;
    Ok(AnnouncementRecord {
        dismissed_at: Some(dismissed_at),
        ..found
    })
}

/// The reader's unread counts: the inbox's unread messages, the announcements that
/// reach them undismissed, and messages by others after their read markers.
pub async fn unread(store: &Store, asker: Asker<'_>, now: DateTime<Utc>) -> ServiceResult<Unread> {
    let (_, inbox) = store.messages(&asker.org.id, Some(true), 0, 0).await?;
    let announcements = store.unread_announcements(reader(&asker), now).await?;
    let conversations = store
        .unread_conversation_messages(&asker.org.id, &asker.caller.user_id)
        .await?;
    Ok(Unread {
        inbox,
        announcements,
        conversations,
        total: inbox + announcements + conversations,
    })
}

/// One unread count per user.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct Unread {
    /// The organization's inbox messages not marked read.
    pub inbox: u64,
    /// Active announcements that reach the reader and that they have not dismissed.
    pub announcements: u64,
    /// Messages by others after the reader's markers in their conversations.
    pub conversations: u64,
    /// The sum.
    pub total: u64,
}

/// An announcement as its unit wrote it.
async fn posted(store: &Store, id: &str) -> ServiceResult<AnnouncementRecord> {
    store
        .announcement(id)
        .await?
        .ok_or_else(|| ServiceError::NotFound(format!("announcement `{id}`").into()))
}
