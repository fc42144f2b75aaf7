//! What every page shares: the frame (who, which organization, the switcher, the
//! navigation, which buttons the API would admit), and rendering.

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

use askama::Template;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::de::DeserializeOwned;

use super::api::{self, Listed, Refusal};
use super::assets;
use super::session::{Posted, Visitor};
use super::{field, Console};
use crate::code::ErrorCode;
use crate::http::guard::{Access, OrgFrom};
use crate::http::organizations::{MyOrganization, Organization};
use crate::services::access;
use crate::services::accounts::Me;
use crate::services::context::Caller;
mod rendering;
pub use rendering::*;
mod admission;
pub use admission::*;

/// The operations the pages may call (their buttons and their reads), judged once
/// per page.
const OPERATIONS: &[&str] = &[
    "compliancePosture",
    "reportPostureTrend",
    "listDashboards",
    "dashboardData",
    "createDashboard",
    "deleteDashboard",
    "listAlertRules",
    "alertRuleHistory",
    "listAlertDestinations",
    "testAlertDestination",
    "listRules",
    "createRule",
    "updateRule",
    "deleteRule",
    "validateDryRun",
    "ruleHistory",
    "listTemplates",
    "applyTemplate",
    "cloneTemplatePolicy",
    "listPolicies",
    "publishedRules",
    "listSubscriptions",
    "listExemptions",
    "listPipelines",
    "listPlugins",
    "buildQueueStatus",
    "deadLetters",
    "listScans",
    "listScanSchedules",
    "myQuotas",
    "currentSubscription",
    "listBundles",
    "inbox",
    "listAnnouncements",
    "subscribe",
    "setSubscriptionActive",
    "pinSubscription",
    "previewImpact",
    "reviewExemption",
    "requestExemption",
    "replayDeadLetter",
    "createPipeline",
    "uploadPlugin",
    "startScan",
    "cancelScan",
    "queryAudit",
    "verifyAudit",
    "previewAddon",
    "addAddon",
    "changeTier",
    "dismissAnnouncement",
    "postAnnouncement",
    "editAnnouncement",
    "deleteAnnouncement",
    "markMessageRead",
    "listConversations",
    "startConversation",
    "conversationMessages",
    "postConversationMessage",
    "readConversation",
    "leaveConversation",
    "policyReport",
    "listMembers",
    "addMember",
    "changeMemberRole",
    "removeMember",
    "activateMember",
    "deactivateMember",
    "listRoles",
    "createRole",
    "deleteRole",
    "addRoleMember",
    "removeRoleMember",
    "sendInvitation",
    "listInvitations",
    "revokeInvitation",
    "resendInvitation",
    "transferOwner",
    "notificationPreferences",
    "saveNotificationPreferences",
    "testNotificationWebhook",
];

/// The pages, in the navigation's order: path, label.
const NAVIGATION: &[(&str, &str)] = &[
    ("/console/posture", "Posture"),
    ("/console/rules", "Rules"),
    ("/console/catalog", "Catalog"),
    ("/console/exemptions", "Exemptions"),
    ("/console/inventory", "Inventory"),
    ("/console/scans", "Scans"),
    ("/console/audit", "Audit"),
    ("/console/billing", "Quotas and billing"),
    ("/console/inbox", "Inbox"),
    ("/console/conversations", "Conversations"),
    ("/console/dashboards", "Dashboards"),
    ("/console/alerts", "Alerts"),
    ("/console/people", "People"),
    ("/console/settings", "Settings"),
    ("/console/account", "Your account"),
];

/// The route table's access for an operation, and the account feature it needs.
fn access_of(operation: &str) -> Option<(Access, Option<entitlements::Feature>)> {
    static TABLE: OnceLock<HashMap<&'static str, (Access, Option<entitlements::Feature>)>> =
        OnceLock::new();
    TABLE
        .get_or_init(|| {
            crate::http::routes::routes()
                .into_iter()
                .map(|route| (route.operation, (route.access, route.feature)))
                .collect()
        })
        .get(operation)
        .copied()
}

/// An organization in the switcher.
pub struct Choice {
    /// Its id.
    pub id: String,
    /// Its name, a team's under its root's.
    pub label: String,
    /// Whether it is the one shown.
    pub selected: bool,
}

/// A link of the navigation.
pub struct Link {
    /// Where.
    pub href: String,
    /// Its text.
    pub label: &'static str,
    /// Whether it is this page.
    pub current: bool,
}

/// What every page shows around its content.
pub struct Frame {
    /// The page's title.
    pub title: &'static str,
    /// The visitor's e-mail or id.
    pub who: String,
    /// The organization shown (empty when the visitor has none).
    pub org: String,
    /// Its name.
    pub org_name: String,
    /// The switcher.
    pub choices: Vec<Choice>,
    /// The navigation.
    pub links: Vec<Link>,
    /// The form token.
    pub csrf: String,
    /// A confirmation to show.
    pub notice: Option<String>,
    /// A refusal to show (the API's message).
    pub error: Option<String>,
    /// Whether the visitor is a super-admin.
    pub super_admin: bool,
    /// What the page does not show because the API would refuse it.
    pub withheld: Vec<&'static str>,
    /// The operations the API would admit here.
    allowed: BTreeSet<&'static str>,
    /// The script's address.
    pub script: &'static str,
    /// The style sheet's address.
    pub style: &'static str,
    /// Set while the session sees as its user for a super-admin: the banner.
    pub impersonation: Option<Banner>,
    /// The active announcements that reach the organization and the visitor has not
    /// dismissed, as banners on every page (at most five, the newest first).
    pub announcements: Vec<Announced>,
}

/// An announcement as every page's banner shows it.
pub struct Announced {
    /// Its id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Its text as posted (shown as text).
    pub body: String,
    /// `info`, `warning` or `critical`.
    pub severity: String,
    /// Whether the visitor may dismiss it.
    pub dismissible: bool,
}

/// The banner every page shows while a super-admin sees as a user.
pub struct Banner {
    /// The super-admin.
    pub admin: String,
    /// Until when (UTC, `HH:MM`).
    pub until: String,
    /// Reads only.
    pub read_only: bool,
}

impl Frame {
    /// `GET uri` in this organization, decoded into the API's own `T`, when the API
    /// would admit `operation`; when it would not, nothing, and `label` is named
    /// among what the page withholds.
    pub async fn read<T: DeserializeOwned>(
        &mut self,
        visitor: &Visitor,
        (operation, label): (&str, &'static str),
        uri: &str,
    ) -> Result<Option<T>, Refusal> {
        if self.may(operation) {
            visitor.api.get(uri, Some(&self.org)).await.map(Some)
        } else {
            self.withheld.push(label);
            Ok(None)
        }
    }

    /// A page of `T`s under `key` (`GET uri`), as [`Frame::read`] judges it: an
    /// empty page when withheld.
    pub async fn list<T: DeserializeOwned>(
        &mut self,
        visitor: &Visitor,
        (operation, label): (&str, &'static str),
        uri: &str,
        key: &str,
    ) -> Result<Listed<T>, Refusal> {
        match self.read(visitor, (operation, label), uri).await? {
            Some(page) => api::listed(page, key),
            None => Ok(Listed::default()),
        }
    }

    /// Whether the API would admit `operation` for the visitor in this organization
    /// (as far as permissions and super-admin go: the API still judges the rest).
    pub fn may(&self, operation: &str) -> bool {
        self.allowed.contains(operation)
    }

    /// Shows an action's outcome: its confirmation, or the API's refusal (whose
    /// status the page answers with).
    pub fn settle(&mut self, outcome: Option<Result<String, Refusal>>) -> StatusCode {
        match outcome {
            None => StatusCode::OK,
            Some(Ok(notice)) => {
                self.notice = Some(notice);
                StatusCode::OK
            }
            Some(Err(refusal)) => {
                self.error = Some(refusal.message);
                refusal.status
            }
        }
    }

    /// The query that keeps the organization.
    pub fn org_query(&self) -> String {
        api::query(&[("org", &self.org)])
    }

    /// Loads the frame: the visitor's organizations, the one asked for (or the first),
    /// and which buttons to show.
    pub async fn load(
        console: &Console,
        visitor: &Visitor,
        query: &HashMap<String, String>,
        (title, path): (&'static str, &str),
    ) -> Result<Frame, Refusal> {
        let asked = query.get("org").map(String::as_str);
        let orgs = visitor
            .api
            .list::<MyOrganization>("/api/me/organizations?limit=100", None, "organizations")
            .await?
            .items;
        let org = asked
            .filter(|o| !o.is_empty())
            .map(str::to_owned)
            .or_else(|| orgs.first().map(|o| o.id.clone()))
            .unwrap_or_default();
        let state = &console.state;
        let super_admin = access::is_super_admin(&state.infra.store, &visitor.session.user_id)
            .await
            .map_err(Refusal::from)?;
        // Roots first, each followed by its teams.
        let mut roots: Vec<&MyOrganization> =
            orgs.iter().filter(|o| o.parent_org_id.is_none()).collect();
        roots.sort_by(|a, b| a.name.cmp(&b.name));
        let mut choices = Vec::new();
        let mut placed = BTreeSet::new();
        for root in roots {
            placed.insert(root.id.as_str());
            choices.push(Choice {
                selected: root.id == org,
                label: root.name.clone(),
                id: root.id.clone(),
            });
            let mut teams: Vec<&MyOrganization> = orgs
                .iter()
                .filter(|o| o.parent_org_id.as_deref() == Some(root.id.as_str()))
                .collect();
            teams.sort_by(|a, b| a.name.cmp(&b.name));
            for team in teams {
                placed.insert(team.id.as_str());
                choices.push(Choice {
                    selected: team.id == org,
                    label: format!("{} / {}", root.name, team.name),
                    id: team.id.clone(),
                });
            }
        }
        // Teams whose root the visitor does not belong to.
        for other in orgs.iter().filter(|o| !placed.contains(o.id.as_str())) {
            choices.push(Choice {
                selected: other.id == org,
                label: other.name.clone(),
                id: other.id.clone(),
            });
        }
        if !org.is_empty() && !choices.iter().any(|c| c.selected) {
            // An organization the visitor is not a member of (a super-admin's look):
            // named as the API names it (a refusal shows on the page's reads).
            let uri = format!("/api/organization/{}", api::segment(&org)?);
            let label = match visitor.api.get::<Organization>(&uri, None).await {
                Ok(found) => found.name,
                Err(refusal) if refusal.signed_out() => return Err(refusal),
                Err(_) => org.clone(),
            };
            choices.push(Choice {
                id: org.clone(),
                label,
                selected: true,
            });
        }
        let org_name = choices
            .iter()
            .find(|c| c.selected)
            .map_or_else(|| org.clone(), |c| c.label.clone());
        let mut allowed = BTreeSet::new();
        if !org.is_empty() {
            let caller = caller_of(console, visitor, &org).await?;
            let parent = orgs
                .iter()
                .find(|o| o.id == org)
                .and_then(|o| o.parent_org_id.clone())
                .unwrap_or_default();
            for &operation in OPERATIONS {
                if admits(console, &caller, (&org, &parent), super_admin, operation).await? {
                    allowed.insert(operation);
                }
            }
        }
        let org_query = api::query(&[("org", &org)]);
        let mut links: Vec<Link> = NAVIGATION
            .iter()
            .map(|&(href, label)| Link {
                href: format!("{href}?{org_query}"),
                label,
                current: href == path,
            })
            .collect();
        if super_admin {
            links.push(Link {
                href: format!("{}?{org_query}", super::admin::USERS),
                label: "Users",
                current: path == super::admin::USERS,
            });
        }
        let impersonation = visitor.session.impersonation.as_ref().map(|imp| Banner {
            admin: imp.admin.clone(),
            until: visitor.session.expires_at.format("%H:%M").to_string(),
            read_only: imp.read_only,
        });
        // The banners are an addition to every page: one the API will not list here
        // (a super-admin's look at an organization that is not theirs) shows none,
        // and only a signed-out session fails the page.
        let announcements = if allowed.contains("listAnnouncements") {
            match visitor
                .api
                .list::<crate::http::announcements::Announcement>(
                    "/api/messages/announcements?limit=5",
                    Some(&org),
                    "announcements",
                )
                .await
            {
                Ok(listed) => listed
                    .items
                    .into_iter()
                    .map(|a| Announced {
                        severity: api::wire(&a.severity),
                        id: a.id,
                        title: a.title,
                        body: a.body,
                        dismissible: a.dismissible,
                    })
                    .collect(),
                Err(refusal) if refusal.signed_out() => return Err(refusal),
                Err(_) => Vec::new(),
            }
        } else {
            Vec::new()
        };
        Ok(Frame {
            title,
            who: who(visitor).await?,
            org,
            org_name,
            choices,
            links,
            csrf: visitor.form_token.clone(),
            notice: None,
            error: None,
            super_admin,
            withheld: Vec::new(),
            allowed,
            script: assets::SCRIPT.path(),
            style: assets::STYLE.path(),
            impersonation,
            announcements,
        })
    }
}

/// A page whose forms act through the API and show the outcome (the confirmation, or
/// the API's refusal) on the page again: [`get`] and [`post`] are its handlers.
pub trait Acting {
    /// Its title and path (the navigation's).
    const PLACE: (&'static str, &'static str);

    /// The page for `q` in the frame loaded for it (an organization shown), with an
    /// action's outcome when there was one.
    fn show(
        console: &Console,
        visitor: &Visitor,
        frame: Frame,
        q: &HashMap<String, String>,
        outcome: Option<Result<String, Refusal>>,
    ) -> impl std::future::Future<Output = Result<Response, Refusal>> + Send;

    /// The posted form's action in the organization `org`: its confirmation, or the
    /// refusal.
    fn act(
        visitor: &Visitor,
        form: &HashMap<String, String>,
        org: &str,
    ) -> impl std::future::Future<Output = Result<String, Refusal>> + Send;
}

/// An [`Acting`] page: its frame loaded, the page without an organization shown as
/// such, else its own.
async fn shown<P: Acting>(
    console: &Console,
    visitor: &Visitor,
    q: &HashMap<String, String>,
    outcome: Option<Result<String, Refusal>>,
) -> Response {
    let frame = match Frame::load(console, visitor, q, P::PLACE).await {
        Ok(frame) => frame,
        Err(refusal) => return refused(refusal),
    };
    if frame.org.is_empty() {
        return empty(frame);
    }
    P::show(console, visitor, frame, q, outcome)
        .await
        .unwrap_or_else(refused)
}

/// `GET` of an [`Acting`] page.
pub async fn get<P: Acting>(
    axum::extract::State(console): axum::extract::State<Console>,
    visitor: Visitor,
    axum::extract::Query(q): axum::extract::Query<HashMap<String, String>>,
) -> Response {
    shown::<P>(&console, &visitor, &q, None).await
}

/// `POST` of an [`Acting`] page's form (its token checked by [`Posted`]): the
/// action, then the page in the same organization with its outcome.
pub async fn post<P: Acting>(
    axum::extract::State(console): axum::extract::State<Console>,
    posted: Posted,
) -> Response {
    let Posted { visitor, form } = posted;
    let org = field(&form, "org").to_owned();
    let outcome = P::act(&visitor, &form, &org).await;
    shown::<P>(&console, &visitor, &again(org), Some(outcome)).await
}
