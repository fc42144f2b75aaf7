//! The organization's people: members (add, change the membership role, activate,
//! deactivate, remove), Roles (a custom Role made of permissions the author holds,
//! given to and taken from members, deleted), invitations (send, resend, revoke) and
//! the ownership handed to another member (with the owner's password, a step-up).

use std::collections::HashMap;

use askama::Template;
use axum::http::Method;
use axum::response::Response;
use serde::de::IgnoredAny;
use serde_json::json;

use super::api::{self, act, segment, Call, Refusal};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::Visitor;
use super::{field, Console};
use crate::http::invitations::Invitation;
use crate::http::members::{Member, Role};

/// Where the page lives.
pub const PATH: &str = "/console/people";

/// A member as a row.
pub struct MemberRow {
    user_id: String,
    who: String,
    role: String,
    active: bool,
    joined: String,
    roles: String,
}

/// A Role as a row.
pub struct RoleRow {
    id: String,
    name: String,
    built_in: bool,
    permissions: String,
    holders: Vec<(String, String)>,
}

/// An invitation as a row.
pub struct InvitationRow {
    id: String,
    email: String,
    role: String,
    status: String,
    pending: bool,
    sent: i64,
    last_sent: String,
}

#[derive(Template)]
#[template(path = "console/people.html")]
struct PeoplePage {
    frame: Frame,
    members: Vec<MemberRow>,
    roles: Vec<RoleRow>,
    invitations: Vec<InvitationRow>,
    /// The permissions a custom Role may be made of: those the visitor holds.
    grantable: Vec<&'static str>,
    /// Whether the visitor owns the organization (the transfer is theirs).
    owner: bool,
}

/// The page: [`page::get`] and [`page::post`] are its handlers.
pub struct Page;

impl page::Acting for Page {
    const PLACE: (&'static str, &'static str) = ("People", PATH);

    async fn show(
        console: &Console,
        visitor: &Visitor,
        mut frame: Frame,
        _q: &HashMap<String, String>,
        outcome: Option<Result<String, Refusal>>,
    ) -> Result<Response, Refusal> {
        let org = segment(&frame.org)?.to_owned();
        let members = frame
            .list::<Member>(
                visitor,
                ("listMembers", "members"),
                &format!("/api/organization/{org}/members?limit=100"),
                "members",
            )
            .await?
            .items;
        let roles = frame
            .list::<Role>(
                visitor,
                ("listRoles", "Roles"),
                &format!("/api/organization/{org}/roles?limit=100"),
                "roles",
            )
            .await?
            .items;
        let invitations = frame
            .list::<Invitation>(
                visitor,
                ("listInvitations", "invitations"),
                "/api/invitation?limit=100",
                "invitations",
            )
            .await?
            .items;
        let named = |user: &str| {
            members
                .iter()
                .find(|m| m.user_id == user)
                .and_then(|m| m.email.clone())
                .unwrap_or_else(|| user.to_owned())
        };
        let member_rows = members
            .iter()
            .map(|m| MemberRow {
                user_id: m.user_id.clone(),
                who: m.email.clone().unwrap_or_else(|| m.user_id.clone()),
                role: api::wire(&m.role),
                active: m.active,
                joined: api::instant(&m.created_at),
                roles: roles
                    .iter()
                    .filter(|r| !r.built_in && r.members.contains(&m.user_id))
                    .map(|r| r.name.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
            .collect();
        let role_rows = roles
            .iter()
            .map(|r| RoleRow {
                id: r.id.clone(),
                name: r.name.clone(),
                built_in: r.built_in,
                permissions: r
                    .permissions
                    .iter()
                    .map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                holders: r.members.iter().map(|u| (u.clone(), named(u))).collect(),
            })
            .collect();
        let invitation_rows = invitations
            .into_iter()
            .map(|i| InvitationRow {
                pending: api::wire(&i.status) == "pending",
                status: api::wire(&i.status),
                role: api::wire(&i.role),
                last_sent: api::instant(&i.last_sent_at),
                sent: i.sent_count,
                id: i.id,
                email: i.email,
            })
            .collect();
        let grantable = if frame.may("createRole") {
            page::held_permissions(console, visitor, &frame.org)
                .await?
                .into_iter()
                .map(|p| p.as_str())
                .collect()
        } else {
            Vec::new()
        };
        let owner = members
            .iter()
            .any(|m| m.user_id == visitor.session.user_id && api::wire(&m.role) == "owner");
        let code = frame.settle(outcome);
        Ok(page::render(
            &PeoplePage {
                frame,
                members: member_rows,
                roles: role_rows,
                invitations: invitation_rows,
                grantable,
                owner,
            },
            code,
        ))
    }

    /// `POST /console/people`: members (`add`, `role`, `activate`, `deactivate`,
    /// `remove`), Roles (`create-role`, `delete-role`, `give-role`, `take-role`),
    /// invitations (`invite`, `resend`, `revoke`) and `transfer`.
    async fn act(
        visitor: &Visitor,
        form: &HashMap<String, String>,
        org: &str,
    ) -> Result<String, Refusal> {
        let base = format!("/api/organization/{}", segment(org)?);
        let api = &visitor.api;
        match field(form, "action") {
            "add" => {
                let body = json!({"userId": field(form, "userId"), "role": field(form, "role")});
                let added: Member = act(
                    api,
                    (Method::POST, &format!("{base}/members")),
                    org,
                    Some(body),
                )
                .await?;
                Ok(format!(
                    "{} added as {}",
                    added.email.unwrap_or(added.user_id),
                    api::wire(&added.role)
                ))
            }
            "role" => {
                let user = segment(field(form, "userId"))?;
                let body = json!({"role": field(form, "role")});
                let changed: Member = act(
                    api,
                    (Method::PATCH, &format!("{base}/members/{user}")),
                    org,
                    Some(body),
                )
                .await?;
                Ok(format!(
                    "{} is now {}",
                    changed.email.unwrap_or(changed.user_id),
                    api::wire(&changed.role)
                ))
            }
            verb @ ("activate" | "deactivate") => {
                let user = segment(field(form, "userId"))?;
                let changed: Member = act(
                    api,
                    (Method::PATCH, &format!("{base}/members/{user}/{verb}")),
                    org,
                    None,
                )
                .await?;
                Ok(format!(
                    "{} {}",
                    changed.email.unwrap_or(changed.user_id),
                    if changed.active {
                        "activated"
                    } else {
                        "deactivated"
                    }
                ))
            }
            "remove" => {
                let user = segment(field(form, "userId"))?;
                act::<IgnoredAny>(
                    api,
                    (Method::DELETE, &format!("{base}/members/{user}")),
                    org,
                    None,
                )
                .await?;
                Ok(format!("{user} removed"))
            }
            "create-role" => {
                let permissions: Vec<&str> = form
                    .iter()
                    .filter_map(|(key, value)| {
                        key.strip_prefix("permission:").filter(|_| value == "on")
                    })
                    .collect();
                let body = json!({"name": field(form, "name"), "permissions": permissions});
                let made: Role = act(
                    api,
                    (Method::POST, &format!("{base}/roles")),
                    org,
                    Some(body),
                )
                .await?;
                Ok(format!("Role {} created", made.name))
            }
            "delete-role" => {
                let role = segment(field(form, "roleId"))?;
                act::<IgnoredAny>(
                    api,
                    (Method::DELETE, &format!("{base}/roles/{role}")),
                    org,
                    None,
                )
                .await?;
                Ok(format!("Role {role} deleted"))
            }
            "give-role" => {
                let role = segment(field(form, "roleId"))?;
                let body = json!({"userId": field(form, "userId")});
                let given: Role = act(
                    api,
                    (Method::POST, &format!("{base}/roles/{role}/members")),
                    org,
                    Some(body),
                )
                .await?;
                Ok(format!("Role {} given", given.name))
            }
            "take-role" => {
                let role = segment(field(form, "roleId"))?;
                let user = segment(field(form, "userId"))?;
                act::<IgnoredAny>(
                    api,
                    (
                        Method::DELETE,
                        &format!("{base}/roles/{role}/members/{user}"),
                    ),
                    org,
                    None,
                )
                .await?;
                Ok(format!("Role {role} taken from {user}"))
            }
            "invite" => {
                let body = json!({"email": field(form, "email"), "role": field(form, "role")});
                let sent: Invitation =
                    act(api, (Method::POST, "/api/invitation/send"), org, Some(body)).await?;
                Ok(format!(
                    "{} invited as {}",
                    sent.email,
                    api::wire(&sent.role)
                ))
            }
            "resend" => {
                let id = segment(field(form, "id"))?;
                let sent: Invitation = act(
                    api,
                    (Method::POST, &format!("/api/invitation/{id}/resend")),
                    org,
                    None,
                )
                .await?;
                Ok(format!("the invitation of {} sent again", sent.email))
            }
            "revoke" => {
                let id = segment(field(form, "id"))?;
                let revoked: Invitation = act(
                    api,
                    (Method::DELETE, &format!("/api/invitation/{id}")),
                    org,
                    None,
                )
                .await?;
                Ok(format!("the invitation of {} revoked", revoked.email))
            }
            "transfer" => {
                let proof = api
                    .step_up(form.get("password").map_or("", String::as_str))
                    .await?;
                let user = field(form, "userId");
                let _: IgnoredAny = api
                    .data(Call {
                        method: Some(Method::PATCH),
                        uri: &format!("{base}/transfer-owner"),
                        org: Some(org),
                        body: Some(json!({ "userId": user })),
                        step_up: Some(&proof),
                        ..Call::default()
                    })
                    .await?;
                Ok(format!("the organization now belongs to {user}"))
            }
            _ => Err(unknown_action()),
        }
    }
}
