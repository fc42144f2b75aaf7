//! Pages rendered as they stand: a template or the failure page, the console's own
//! small pages (empty, failure, sign-in, continue), and text pasted into a form read as
//! an object.

use super::*;

/// Renders a template, or the failure page.
pub fn render(template: &impl Template, status: StatusCode) -> Response {
    match template.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(error) => failure(&Refusal {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: ErrorCode::InternalError,
            message: format!("the page could not be rendered: {error}"),
        }),
    }
}

/// The query that shows a page again for the organization a form named.
pub fn again(org: String) -> HashMap<String, String> {
    HashMap::from([("org".to_owned(), org)])
}

/// A refusal as a page of its own (a signed-out session goes to sign in).
pub fn failure(refusal: &Refusal) -> Response {
    if refusal.signed_out() {
        return Redirect::to("/console/login").into_response();
    }
    let page = FailurePage {
        status: refusal.status.as_u16(),
        code: refusal.code.as_str(),
        message: &refusal.message,
        style: assets::STYLE.path(),
    };
    match page.render() {
        Ok(html) => (refusal.status, Html(html)).into_response(),
        Err(_) => (refusal.status, refusal.message.clone()).into_response(),
    }
}

#[derive(Template)]
#[template(path = "console/empty.html")]
pub(super) struct EmptyPage {
    frame: Frame,
}

/// How a page names the visitor: the account's e-mail (with its name when set), as
/// `GET /api/me` answers it; a user with no account here (a token of another
/// issuer) by the session's e-mail, and only without one by id.
pub(super) async fn who(visitor: &Visitor) -> Result<String, Refusal> {
    match visitor.api.get::<Me>("/api/me", None).await {
        Ok(Me { account, .. }) => Ok(match account.name.filter(|name| !name.is_empty()) {
            Some(name) => format!("{name} ({})", account.email),
            None => account.email,
        }),
        Err(refusal) if refusal.status == StatusCode::NOT_FOUND => Ok(visitor
            .session
            .email
            .clone()
            .unwrap_or_else(|| visitor.session.user_id.clone())),
        Err(refusal) => Err(refusal),
    }
}

/// A page for a visitor who belongs to no organization yet.
pub fn empty(frame: Frame) -> Response {
    render(&EmptyPage { frame }, StatusCode::OK)
}

#[derive(Template)]
#[template(path = "console/failure.html")]
pub(super) struct FailurePage<'a> {
    status: u16,
    code: &'a str,
    message: &'a str,
    style: &'static str,
}

#[derive(Template)]
#[template(path = "console/login.html")]
pub(super) struct LoginPage<'a> {
    error: Option<&'a str>,
    identifier: &'a str,
    style: &'static str,
}

/// The sign-in page.
pub fn login(error: Option<&str>, identifier: &str, status: StatusCode) -> Response {
    render(
        &LoginPage {
            error,
            identifier,
            style: assets::STYLE.path(),
        },
        status,
    )
}

#[derive(Template)]
#[template(path = "console/continue.html")]
pub(super) struct ContinuePage<'a> {
    title: &'a str,
    to: &'a str,
    style: &'static str,
}

/// A page that moves the browser on to `to` by itself (a new navigation from this
/// site: the cookies a cross-site redirect chain would not carry are sent).
pub fn continue_to(title: &str, to: &str) -> Response {
    render(
        &ContinuePage {
            title,
            to,
            style: assets::STYLE.path(),
        },
        StatusCode::OK,
    )
}

/// What a page answers when its frame or its reads were refused.
pub fn refused(refusal: Refusal) -> Response {
    failure(&refusal)
}

/// A pasted document: a JSON object, or YAML that reads as one.
pub fn pasted_object(text: &str) -> Option<serde_json::Value> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .or_else(|| serde_yaml_ng::from_str::<serde_json::Value>(text).ok())
        .filter(serde_json::Value::is_object)
}
