//! `/messages/announcements` and `/messages/unread`.

use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use entitlements::Tier;
use messaging::{Audience, Phase, Severity, Teams};
use serde::{Deserialize, Serialize};

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query, SortOrder};
use crate::http::gate::Granted;
use crate::http::response::{Answer, Deleted, Paged};
use crate::http::state::{AppState, Caller};
use crate::services::announcements::{self, AnnouncementRecord, Asker, Draft, Unread, View};

/// Who an announcement reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AudienceKind {
    /// The `x-org-id` organization (and, with `includeTeams` or `teamIds`, teams of it).
    Organization,
    /// The organizations of `organizationIds` (super-admins).
    Organizations,
    /// Every organization (super-admins).
    Everyone,
    /// Every organization of `tier` (super-admins).
    Tier,
}

/// A new announcement.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AnnouncementBody {
    #[schema(min_length = 1, max_length = 200)]
    title: String,
    /// Plain text or Markdown (a safe subset: no HTML passes); at most
    /// `MESSAGE_BODY_MAX_CHARS` characters.
    #[schema(min_length = 1)]
    body: String,
    /// `info` (default), `warning` or `critical`.
    severity: Option<Severity>,
    /// When it starts being shown (default now).
    starts_at: Option<DateTime<Utc>>,
    /// When it stops being shown (none: until removed).
    ends_at: Option<DateTime<Utc>>,
    /// Whether members may dismiss it (default true).
    dismissible: Option<bool>,
    /// Who it reaches (default `organization`).
    audience: Option<AudienceKind>,
    /// With `organization`: every team of the organization too.
    include_teams: Option<bool>,
    /// With `organization`: these teams of it too.
    team_ids: Option<Vec<String>>,
    /// With `organizations`: the organizations.
    organization_ids: Option<Vec<String>>,
    /// With `tier`: the tier.
    tier: Option<Tier>,
}

/// An announcement's new text and window (its audience stays).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AnnouncementEdit {
    #[schema(min_length = 1, max_length = 200)]
    title: String,
    #[schema(min_length = 1)]
    body: String,
    /// Default `info`.
    severity: Option<Severity>,
    /// Default: unchanged.
    starts_at: Option<DateTime<Utc>>,
    /// None: until removed.
    ends_at: Option<DateTime<Utc>>,
    /// Default true.
    dismissible: Option<bool>,
}

/// An announcement.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Announcement {
    pub id: String,
    pub audience: AudienceKind,
    /// The organization, for an organization's announcement.
    pub org_id: Option<String>,
    pub include_teams: bool,
    pub team_ids: Vec<String>,
    pub organization_ids: Vec<String>,
    pub tier: Option<Tier>,
    pub title: String,
    /// The text as posted.
    pub body: String,
    /// The text as HTML: a safe subset of Markdown, no HTML of the author's.
    pub body_html: String,
    pub severity: Severity,
    pub starts_at: DateTime<Utc>,
    pub ends_at: Option<DateTime<Utc>>,
    /// Where it stands now.
    pub phase: Phase,
    pub dismissible: bool,
    /// When the reader dismissed it.
    pub dismissed_at: Option<DateTime<Utc>>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Announcement {
    pub(crate) fn of(a: AnnouncementRecord, now: DateTime<Utc>) -> Announcement {
        let (audience, org_id, include_teams, team_ids, organization_ids, tier) = match a.audience {
            Audience::Organization { org_id, teams } => {
                let (all, listed) = match teams {
                    Teams::None => (false, Vec::new()),
                    Teams::All => (true, Vec::new()),
                    Teams::Listed(listed) => (false, listed),
                };
                (
                    AudienceKind::Organization,
                    Some(org_id),
                    all,
                    listed,
                    Vec::new(),
                    None,
                )
            }
            Audience::Organizations(listed) => (
                AudienceKind::Organizations,
                None,
                false,
                Vec::new(),
                listed,
                None,
            ),
            Audience::Everyone => (
                AudienceKind::Everyone,
                None,
                false,
                Vec::new(),
                Vec::new(),
                None,
            ),
            Audience::Tier(tier) => (
                AudienceKind::Tier,
                None,
                false,
                Vec::new(),
                Vec::new(),
                Some(tier),
            ),
        };
        Announcement {
            id: a.id,
            audience,
            org_id,
            include_teams,
            team_ids,
            organization_ids,
            tier,
            title: a.title,
            body_html: messaging::render(&a.body),
            body: a.body,
            severity: a.severity,
            starts_at: a.window.starts_at,
            ends_at: a.window.ends_at,
            phase: a.window.phase(now),
            dismissible: a.dismissible,
            dismissed_at: a.dismissed_at,
            created_by: a.created_by,
            created_at: a.created_at,
            updated_at: a.updated_at,
        }
    }
}

/// Who asks, as the announcement service sees them (a handler's helper: it reads the
/// parts the permission check needs from the state axum hands the handler).
async fn asker<'a>(
    state: &AppState,
    caller: &'a Caller,
    granted: &'a Granted,
) -> Result<Asker<'a>, ApiError> {
    let manages = granted
        .permissions
        .contains(&tenancy::Permission::MessagesManage)
        || crate::services::access::holds(
            &state.infra.store,
            &state.config,
            &state.replica.kept,
            caller,
            &granted.org.id,
            tenancy::Permission::MessagesManage,
        )
        .await?;
    Ok(Asker {
        caller,
        org: &granted.org,
        super_admin: granted.super_admin,
        manages,
    })
}

fn audience_of(body: &AnnouncementBody, org_id: &str) -> Result<Audience, ApiError> {
    let kind = body.audience.unwrap_or(AudienceKind::Organization);
    let stray =
        |field: &'static str| ApiError::invalid_field(field, "does not go with this audience");
    if kind != AudienceKind::Organization
        && (body.include_teams.is_some() || body.team_ids.is_some())
    {
        return Err(stray(if body.team_ids.is_some() {
            "teamIds"
        } else {
            "includeTeams"
        }));
    }
    if kind != AudienceKind::Organizations && body.organization_ids.is_some() {
        return Err(stray("organizationIds"));
    }
    if kind != AudienceKind::Tier && body.tier.is_some() {
        return Err(stray("tier"));
    }
    Ok(match kind {
        AudienceKind::Organization => Audience::Organization {
            org_id: org_id.to_owned(),
            teams: match (body.include_teams.unwrap_or(false), &body.team_ids) {
                (true, Some(_)) => {
                    return Err(ApiError::invalid_field(
                        "teamIds",
                        "name teams, or include them all, not both",
                    ))
                }
                (true, None) => Teams::All,
                (false, Some(teams)) if !teams.is_empty() => Teams::Listed(teams.clone()),
                (false, _) => Teams::None,
            },
        },
        AudienceKind::Organizations => Audience::Organizations(
            body.organization_ids
                .clone()
                .ok_or_else(|| ApiError::invalid_field("organizationIds", "is required"))?,
        ),
        AudienceKind::Everyone => Audience::Everyone,
        AudienceKind::Tier => Audience::Tier(
            body.tier
                .ok_or_else(|| ApiError::invalid_field("tier", "is required"))?,
        ),
    })
}

/// `POST /messages/announcements`.
pub(crate) async fn post(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<AnnouncementBody>,
) -> Result<Answer<Announcement>, ApiError> {
    let now = Utc::now();
    let audience = audience_of(&body, &granted.org.id)?;
    let draft = Draft {
        title: body.title,
        body: body.body,
        severity: body.severity,
        starts_at: body.starts_at,
        ends_at: body.ends_at,
        dismissible: body.dismissible,
    };
    let posted = announcements::post(
        &state.infra.store,
        &state.config,
        asker(&state, &caller, &granted).await?,
        audience,
        draft,
        now,
    )
    .await?;
    Ok(Answer::created(Announcement::of(posted, now)))
}

/// `PUT /messages/announcements/{id}`.
pub(crate) async fn edit(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<AnnouncementEdit>,
) -> Result<Answer<Announcement>, ApiError> {
    let now = Utc::now();
    let draft = Draft {
        title: body.title,
        body: body.body,
        severity: body.severity,
        starts_at: body.starts_at,
        ends_at: body.ends_at,
        dismissible: body.dismissible,
    };
    let edited = announcements::edit(
        &state.infra.store,
        &state.config,
        asker(&state, &caller, &granted).await?,
        &id,
        draft,
        now,
    )
    .await?;
    Ok(Answer::ok(Announcement::of(edited, now)))
}

/// `DELETE /messages/announcements/{id}`.
pub(crate) async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Deleted>, ApiError> {
    announcements::remove(
        &state.infra.store,
        asker(&state, &caller, &granted).await?,
        &id,
    )
    .await?;
    Ok(Answer::ok(Deleted::new(id)))
}

/// `POST /messages/announcements/{id}/dismiss`.
pub(crate) async fn dismiss(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Announcement>, ApiError> {
    let now = Utc::now();
    let dismissed = announcements::dismiss(
        &state.infra.store,
        asker(&state, &caller, &granted).await?,
        &id,
        now,
    )
    .await?;
    Ok(Answer::ok(Announcement::of(dismissed, now)))
}

/// Which announcements a list shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ListView {
    /// Those active now that reach the organization (the default).
    Active,
    /// Every one the organization's admins manage, whatever its window
    /// (`messages:manage`).
    Managed,
    /// Every platform-wide one (super-admins).
    Platform,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    #[param(inline)]
    view: Option<ListView>,
    /// With `active`: the ones the reader dismissed too.
    include_dismissed: Option<bool>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

/// `GET /messages/announcements`.
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Query(q): Query<ListQuery>,
) -> Result<Paged<Announcement>, ApiError> {
    let page = q
        .page
        .check_sorted(state.config.http.max_page_limit, &["startsAt"], "startsAt")?;
    let view = match q.view.unwrap_or(ListView::Active) {
        ListView::Active => View::Active {
            include_dismissed: q.include_dismissed.unwrap_or(false),
        },
        ListView::Managed => View::Managed,
        ListView::Platform => View::Platform,
    };
    let now = Utc::now();
    let (items, total) = announcements::list(
        &state.infra.store,
        asker(&state, &caller, &granted).await?,
        view,
        now,
        (page.limit, page.offset, page.sort_order == SortOrder::Asc),
    )
    .await?;
    let items = items
        .into_iter()
        .map(|a| Announcement::of(a, now))
        .collect();
    Ok(Paged::new("announcements", items, total, page))
}

/// `GET /messages/unread`.
pub(crate) async fn unread(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
) -> Result<Answer<Unread>, ApiError> {
    Ok(Answer::ok(
        announcements::unread(
            &state.infra.store,
            asker(&state, &caller, &granted).await?,
            Utc::now(),
        )
        .await?,
    ))
}
