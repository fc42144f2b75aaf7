//! Messages: announcements (windows, audiences, dismissals, permissions), conversations
//! (participants, order, read markers, leaving, deletes), the unread count, limits,
//! retention, and the live stream, in one process and across two on one PostgreSQL
//! database.

use crate::api::{pagination, Answer};
use adapters::http::wire::{Announcement, AudienceKind, Conversation, MessagePage};
use adapters::services::announcements::Unread;
use messaging::{Phase, Severity};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use chrono::Utc;
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::*;
use adapters::code::ErrorCode;

/// acme (alice owns it; bob and carol are members), its teams t1 and t2 (bob is a
/// member of t1), and other (dave owns it).
struct World {
    acme: String,
    t1: String,
    t2: String,
    other: String,
}

async fn member(app: &TestApp, owner: &str, org: &str, user: &str) {
    let token = app.token(owner, &format!("{owner}@example.com"));
    app.by(&token)
        .post(format!("/api/organization/{org}/members"))
        .json(json!({"userId": user, "role": "member"}))
        .await
        .expect(StatusCode::CREATED);
}

async fn team(app: &TestApp, parent: &str, name: &str) -> String {
    let alice = token(app, "alice");
    app.by(&alice)
        .post("/api/organization")
        .json(json!({"name": name, "parentOrgId": parent}))
        .await
        .expect(StatusCode::CREATED)
        .id()
}

async fn world(app: &TestApp) -> World {
    let acme = app.org("alice", "acme").await;
    for user in ["bob", "carol"] {
        member(app, "alice", &acme, user).await;
    }
    let t1 = team(app, &acme, "t1").await;
    let t2 = team(app, &acme, "t2").await;
    member(app, "alice", &t1, "bob").await;
    let other = app.org("dave", "other").await;
    World {
        acme,
        t1,
        t2,
        other,
    }
}

fn token(app: &TestApp, user: &str) -> String {
    app.token(user, &format!("{user}@example.com"))
}

async fn announce(app: &TestApp, user: &str, org: &str, body: Value) -> Answer {
    app.by(&token(app, user))
        .org(org)
        .post("/api/messages/announcements")
        .json(body)
        .await
}

async fn visible(app: &TestApp, user: &str, org: &str, query: &str) -> Vec<String> {
    let Answer(status, body) = app
        .by(&token(app, user))
        .org(org)
        .get(format!("/api/messages/announcements{query}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["announcements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["title"].as_str().unwrap().to_owned())
        .collect()
}

async fn unread(app: &TestApp, user: &str, org: &str) -> Unread {
    app.by(&token(app, user))
        .org(org)
        .get("/api/messages/unread")
        .await
        .expect(StatusCode::OK)
        .data()
}

fn hours(h: i64) -> String {
    (Utc::now() + chrono::Duration::hours(h)).to_rfc3339()
}

async fn announcement_windows_dismissals_and_permissions(app: &TestApp) {
    let w = world(app).await;
    let post = |title: &str, extra: Value| {
        let mut body =
            json!({"title": title, "body": "Deploys **pause** at 18:00 <script>alert(1)</script>"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let now: Announcement = announce(app, "alice", &w.acme, post("now", json!({})))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!(
        (now.phase, now.severity, now.dismissible),
        (Phase::Active, Severity::Info, true)
    );
    let html = &now.body_html;
    assert!(
        html.contains("<strong>pause</strong>") && html.contains("&lt;script&gt;"),
        "{html}"
    );
    assert!(!html.contains("<script>"), "{html}");
    let later = post("later", json!({"startsAt": hours(1)}));
    let ended = post("ended", json!({"startsAt": hours(-2), "endsAt": hours(-1)}));
    let pinned = post(
        "pinned",
        json!({"dismissible": false, "severity": "critical"}),
    );
    for body in [later, ended, pinned] {
        let Answer(status, answer) = announce(app, "alice", &w.acme, body).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
    // Members see the active ones only.
    assert_eq!(visible(app, "bob", &w.acme, "").await, ["pinned", "now"]);
    assert_eq!(unread(app, "bob", &w.acme).await.announcements, 2);

    // Dismissed per user, on the server; again changes nothing.
    let id = &now.id;
    let path = format!("/api/messages/announcements/{id}/dismiss");
    let first: Announcement = app
        .by(&token(app, "bob"))
        .org(&w.acme)
        .post(&path)
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(first.dismissed_at.is_some());
    let again: Announcement = app
        .by(&token(app, "bob"))
        .org(&w.acme)
        .post(&path)
        .await
        .data();
    assert_eq!(again.dismissed_at, first.dismissed_at);
    assert_eq!(visible(app, "bob", &w.acme, "").await, ["pinned"]);
    assert_eq!(
        visible(app, "bob", &w.acme, "?includeDismissed=true").await,
        ["pinned", "now"]
    );
    assert_eq!(visible(app, "carol", &w.acme, "").await, ["pinned", "now"]);
    assert_eq!(unread(app, "bob", &w.acme).await.announcements, 1);
    assert_eq!(unread(app, "carol", &w.acme).await.announcements, 2);

    // Not dismissible: 409; not active: 404.
    let Answer(_, managed) = app
        .by(&token(app, "alice"))
        .org(&w.acme)
        .get("/api/messages/announcements?view=managed")
        .await;
    assert_eq!(pagination(&managed).total, 4, "{managed}");
    let id_of = |title: &str| {
        managed["announcements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["title"] == title)
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let phases: Vec<(String, String)> = managed["announcements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["title"].as_str().unwrap().to_owned(),
                a["phase"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        phases.contains(&("later".into(), "scheduled".into())),
        "{phases:?}"
    );
    assert!(
        phases.contains(&("ended".into(), "ended".into())),
        "{phases:?}"
    );
    let dismiss = |title: &str| format!("/api/messages/announcements/{}/dismiss", id_of(title));
    app.by(&token(app, "bob"))
        .org(&w.acme)
        .post(dismiss("pinned"))
        .await
        .expect(StatusCode::CONFLICT);
    for title in ["later", "ended"] {
        let Answer(status, _) = app
            .by(&token(app, "bob"))
            .org(&w.acme)
            .post(dismiss(title))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{title}");
    }

    // Members neither post, nor list what admins manage, nor edit.
    let Answer(status, body) = announce(app, "bob", &w.acme, post("nope", json!({}))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["details"]["missing"], "messages:manage");
    app.by(&token(app, "bob"))
        .org(&w.acme)
        .get("/api/messages/announcements?view=managed")
        .await
        .expect(StatusCode::FORBIDDEN);
    let edit_path = format!("/api/messages/announcements/{}", id_of("later"));
    let edit = json!({"title": "later, moved", "body": "Now at 19:00", "startsAt": hours(2)});
    app.by(&token(app, "bob"))
        .org(&w.acme)
        .put(&edit_path)
        .json(edit.clone())
        .await
        .expect(StatusCode::FORBIDDEN);
    let edited: Announcement = app
        .by(&token(app, "alice"))
        .org(&w.acme)
        .put(&edit_path)
        .json(edit)
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(
        (edited.title.as_str(), edited.phase),
        ("later, moved", Phase::Scheduled)
    );

    // Bad input: 400 naming the field, nothing stored.
    let soon = hours(1);
    for (body, field) in [
        (json!({"title": "", "body": "x"}), "title"),
        (json!({"title": "t", "body": " "}), "body"),
        (json!({"title": "t", "body": "x".repeat(10_001)}), "body"),
        (json!({"title": "t\nt", "body": "x"}), "title"),
        (
            json!({"title": "t", "body": "x", "startsAt": soon, "endsAt": soon}),
            "endsAt",
        ),
        (
            json!({"title": "t", "body": "x", "startsAt": "2030-01-01T00:00:00.0000001Z", "endsAt": "2030-01-01T00:00:00.0000009Z"}),
            "endsAt",
        ),
        (
            json!({"title": "t", "body": "x", "teamIds": [w.other]}),
            "teamIds",
        ),
        (json!({"title": "t", "body": "x", "tier": "pro"}), "tier"),
        (
            json!({"title": "t", "body": "x", "audience": "organizations"}),
            "organizationIds",
        ),
    ] {
        let Answer(status, answer) = announce(app, "alice", &w.acme, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["details"]["field"], field, "{answer}");
    }
    for body in [
        json!({"title": "t", "body": "x", "severity": "loud"}),
        json!({"title": "t", "body": "x", "colour": "red"}),
        json!({"title": "t"}),
    ] {
        let Answer(status, _) = announce(app, "alice", &w.acme, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    }
    // Only a super-admin posts beyond the organization.
    for audience in [
        json!({"audience": "everyone"}),
        json!({"audience": "tier", "tier": "developer"}),
    ] {
        let Answer(status, _) = announce(app, "alice", &w.acme, post("wide", audience)).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
    }
    let Answer(_, managed_after) = app
        .by(&token(app, "alice"))
        .org(&w.acme)
        .get("/api/messages/announcements?view=managed")
        .await;
    assert_eq!(pagination(&managed_after).total, 4);

    // Removed: gone for everyone, and audited with identifiers only.
    app.by(&token(app, "alice"))
        .org(&w.acme)
        .delete(format!("/api/messages/announcements/{id}"))
        .await
        .expect(StatusCode::OK);
    assert_eq!(visible(app, "carol", &w.acme, "").await, ["pinned"]);
    app.by(&token(app, "carol"))
        .org(&w.acme)
        .post(&path)
        .await
        .expect(StatusCode::NOT_FOUND);
    for (action, count) in [
        ("message.announcement.create", 4),
        ("message.announcement.update", 1),
        ("message.delete", 1),
    ] {
        let events = app.audited(action).await;
        assert_eq!(events.len(), count, "{action}");
        for event in events {
            let text = serde_json::to_string(&event.details).unwrap();
            assert!(
                !text.contains("pause") && !text.contains("19:00") && !text.contains("later"),
                "{text}"
            );
        }
    }
}

async fn announcements_reach_teams_tiers_and_lists_and_nothing_else(app: &TestApp) {
    let w = world(app).await;
    let system = app.org("root", "system").await;
    // dave joins t2's parent? No: dave stays in his own organization.
    member(app, "alice", &w.t2, "carol").await;
    let post = |title: &str, extra: Value| {
        let mut body = json!({"title": title, "body": "text"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    for (title, extra) in [
        ("acme only", json!({})),
        ("acme and its teams", json!({"includeTeams": true})),
        ("acme and t1", json!({"teamIds": [w.t1]})),
    ] {
        let Answer(status, body) = announce(app, "alice", &w.acme, post(title, extra)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    for (title, extra) in [
        (
            "every developer",
            json!({"audience": "tier", "tier": "developer"}),
        ),
        (
            "every enterprise",
            json!({"audience": "tier", "tier": "enterprise"}),
        ),
        (
            "other only",
            json!({"audience": "organizations", "organizationIds": [w.other]}),
        ),
        ("everyone", json!({"audience": "everyone"})),
    ] {
        let Answer(status, body) = announce(app, "root", &system, post(title, extra)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(
        sorted(visible(app, "bob", &w.acme, "").await),
        [
            "acme and its teams",
            "acme and t1",
            "acme only",
            "every developer",
            "everyone"
        ]
    );
    assert_eq!(
        sorted(visible(app, "bob", &w.t1, "").await),
        [
            "acme and its teams",
            "acme and t1",
            "every developer",
            "everyone"
        ]
    );
    assert_eq!(
        sorted(visible(app, "carol", &w.t2, "").await),
        ["acme and its teams", "every developer", "everyone"]
    );
    assert_eq!(
        sorted(visible(app, "dave", &w.other, "").await),
        ["every developer", "everyone", "other only"]
    );
    // The system organization is on the enterprise tier.
    assert_eq!(
        sorted(visible(app, "root", &system, "").await),
        ["every enterprise", "everyone"]
    );

    // Across organizations nothing is reached, and nothing leaks.
    let Answer(_, managed) = app
        .by(&token(app, "alice"))
        .org(&w.acme)
        .get("/api/messages/announcements?view=managed")
        .await;
    let acme_only = managed["announcements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["title"] == "acme only")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let dave = token(app, "dave");
    let edit = json!({"title": "mine now", "body": "x"});
    let path = format!("/api/messages/announcements/{acme_only}");
    app.by(&dave)
        .org(&w.other)
        .put(&path)
        .json(edit.clone())
        .await
        .expect(StatusCode::NOT_FOUND);
    app.by(&dave)
        .org(&w.other)
        .delete(&path)
        .await
        .expect(StatusCode::NOT_FOUND);
    app.by(&dave)
        .org(&w.other)
        .post(format!("{path}/dismiss"))
        .await
        .expect(StatusCode::NOT_FOUND);
    let Answer(status, _) = app
        .by(&dave)
        .org(&w.acme)
        .get("/api/messages/announcements")
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "dave is not a member of acme"
    );
    // A platform-wide one is seen by acme's admin, not changed by them.
    let Answer(_, platform) = app
        .by(&token(app, "root"))
        .org(&system)
        .get("/api/messages/announcements?view=platform")
        .await;
    assert_eq!(pagination(&platform).total, 4, "{platform}");
    let everyone = platform["announcements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["title"] == "everyone")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/api/messages/announcements/{everyone}");
    app.by(&token(app, "alice"))
        .org(&w.acme)
        .put(&path)
        .json(edit.clone())
        .await
        .expect(StatusCode::FORBIDDEN);
    app.by(&token(app, "alice"))
        .org(&w.acme)
        .get("/api/messages/announcements?view=platform")
        .await
        .expect(StatusCode::FORBIDDEN);
    let edited: Announcement = app
        .by(&token(app, "root"))
        .org(&system)
        .put(&path)
        .json(edit)
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(edited.audience, AudienceKind::Everyone);
}

async fn start(app: &TestApp, user: &str, org: &str, body: Value) -> Answer {
    app.by(&token(app, user))
        .org(org)
        .post("/api/messages/conversations")
        .json(body)
        .await
}

async fn write(app: &TestApp, user: &str, org: &str, id: &str, text: &str) -> Answer {
    app.by(&token(app, user))
        .org(org)
        .post(format!("/api/messages/conversations/{id}/messages"))
        .json(json!({"body": text}))
        .await
}

async fn page(app: &TestApp, user: &str, org: &str, id: &str, query: &str) -> Answer {
    app.by(&token(app, user))
        .org(org)
        .get(format!("/api/messages/conversations/{id}/messages{query}"))
        .await
}

async fn conversations_keep_order_read_markers_and_their_organization(app: &TestApp) {
    let w = world(app).await;
    let started: Conversation = start(
        app,
        "alice",
        &w.acme,
        json!({"participants": ["bob", "carol", "bob", "alice"], "subject": "Release", "body": "first, quietly"}),
    )
    .await
    .expect(StatusCode::CREATED)
    .data();
    let id = started.id.clone();
    let people: Vec<&str> = started
        .participants
        .iter()
        .map(|p| p.user_id.as_str())
        .collect();
    assert_eq!(people.len(), 3, "{people:?}");
    assert_eq!(started.unread, 0, "the author has read their own");
    assert_eq!(unread(app, "bob", &w.acme).await.conversations, 1);

    // Order: newest first, by keyset, nothing twice.
    for n in 2..=6 {
        let author = if n % 2 == 0 { "bob" } else { "alice" };
        let Answer(status, body) = write(app, author, &w.acme, &id, &format!("message {n}")).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let mut seen = Vec::new();
    let mut query = "?limit=2".to_owned();
    loop {
        let MessagePage {
            messages,
            next_before,
        } = page(app, "carol", &w.acme, &id, &query)
            .await
            .expect(StatusCode::OK)
            .data();
        seen.extend(messages.into_iter().map(|m| m.body));
        match next_before {
            Some(next) => query = format!("?limit=2&before={next}"),
            None => break,
        }
    }
    assert_eq!(
        seen,
        [
            "message 6",
            "message 5",
            "message 4",
            "message 3",
            "message 2",
            "first, quietly"
        ]
    );
    // Read markers: carol has read nothing; bob everything up to his last but 5.
    assert_eq!(unread(app, "carol", &w.acme).await.conversations, 6);
    assert_eq!(
        unread(app, "bob", &w.acme).await.conversations,
        0,
        "bob wrote the latest: writing moves his marker"
    );
    let read: Conversation = app
        .by(&token(app, "carol"))
        .org(&w.acme)
        .post(format!("/api/messages/conversations/{id}/read"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(read.unread, 0);
    assert_eq!(unread(app, "carol", &w.acme).await.conversations, 0);
    let Answer(_, listed) = app
        .by(&token(app, "bob"))
        .org(&w.acme)
        .get("/api/messages/conversations")
        .await;
    assert_eq!(pagination(&listed).total, 1);
    assert_eq!(listed["conversations"][0]["subject"], "Release");

    // Never across organizations: dave is no member of acme.
    let Answer(status, body) = start(
        app,
        "alice",
        &w.acme,
        json!({"participants": ["dave"], "body": "hi"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["details"]["field"], "participants");
    let dave = token(app, "dave");
    let Answer(status, _) = page(app, "dave", &w.acme, &id, "").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "not a member of acme");
    let Answer(status, body) = page(app, "dave", &w.other, &id, "").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "not in his organization: {body}"
    );
    app.by(&dave)
        .org(&w.other)
        .post(format!("/api/messages/conversations/{id}/messages"))
        .json(json!({"body": "in"}))
        .await
        .expect(StatusCode::NOT_FOUND);
    let Answer(_, his) = app
        .by(&dave)
        .org(&w.other)
        .get("/api/messages/conversations")
        .await;
    assert_eq!(pagination(&his).total, 0);
    // A member who does not take part sees nothing of it either.
    let Answer(bare, _) = start(
        app,
        "alice",
        &w.acme,
        json!({"participants": ["bob"], "body": "just us"}),
    )
    .await;
    assert_eq!(bare, StatusCode::CREATED);
    let Answer(_, carols) = app
        .by(&token(app, "carol"))
        .org(&w.acme)
        .get("/api/messages/conversations")
        .await;
    assert_eq!(pagination(&carols).total, 1);

    // Leaving: no longer listed, no longer written to.
    app.by(&token(app, "carol"))
        .org(&w.acme)
        .delete(format!("/api/messages/conversations/{id}/participants/me"))
        .await
        .expect(StatusCode::OK);
    let Answer(_, carols) = app
        .by(&token(app, "carol"))
        .org(&w.acme)
        .get("/api/messages/conversations")
        .await;
    assert_eq!(pagination(&carols).total, 0);
    let Answer(status, _) = write(app, "carol", &w.acme, &id, "still here?").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let Answer(status, _) = page(app, "carol", &w.acme, &id, "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Deletes: the author's own (unaudited), an admin's of someone's (audited, no body).
    let latest: MessagePage = page(app, "bob", &w.acme, &id, "?limit=10").await.data();
    let by = |body: &str| {
        latest
            .messages
            .iter()
            .find(|m| m.body == body)
            .unwrap()
            .id
            .clone()
    };
    let delete = |message: String| format!("/api/messages/conversations/{id}/messages/{message}");
    // (who, which message, what they get)
    for (user, body, expected) in [
        ("bob", "message 5", StatusCode::FORBIDDEN), // not bob's, and bob is no admin
        ("bob", "message 4", StatusCode::OK),        // his own
        ("alice", "message 2", StatusCode::OK),      // an admin's delete
        ("alice", "message 2", StatusCode::NOT_FOUND),
    ] {
        let Answer(status, answer) = app
            .by(&token(app, user))
            .org(&w.acme)
            .delete(delete(by(body)))
            .await;
        assert_eq!(status, expected, "{user} deletes {body}: {answer}");
    }
    let after: MessagePage = page(app, "bob", &w.acme, &id, "?limit=10").await.data();
    let bodies: Vec<&str> = after.messages.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(
        bodies,
        ["message 6", "message 5", "message 3", "first, quietly"]
    );
    let deleted = app.audited("message.delete").await;
    assert_eq!(deleted.len(), 1, "only the admin's delete");
    let text = serde_json::to_string(&deleted[0].details).unwrap();
    assert!(!text.contains("message 2"), "{text}");
    assert_eq!(deleted[0].details["authorId"], "bob");
    // One-to-one messages write no audit event holding a body.
    app.relay().await;
    let (all, _) = app
        .store
        .audit_events(&adapters::storage::AuditFilter::default(), 10_000, 0, true)
        .await
        .unwrap();
    for event in all {
        let text = serde_json::to_string(&event.details).unwrap();
        assert!(
            !text.contains("quietly") && !text.contains("just us"),
            "{} {text}",
            event.action
        );
    }

    // Bad input.
    for (body, field) in [
        (json!({"participants": [], "body": "x"}), "participants"),
        (
            json!({"participants": ["alice"], "body": "x"}),
            "participants",
        ),
        (json!({"participants": ["bob"], "body": ""}), "body"),
        (
            json!({"participants": ["bob"], "body": "x".repeat(10_001)}),
            "body",
        ),
        (
            json!({"participants": ["bob"], "subject": "a\nb", "body": "x"}),
            "subject",
        ),
    ] {
        let Answer(status, answer) = start(app, "alice", &w.acme, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["details"]["field"], field, "{answer}");
    }
    let Answer(status, answer) = page(app, "bob", &w.acme, &id, "?before=nope").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["details"]["field"], "before");
}

/// The per-minute limit is decided with the write, on every replica: 24 messages of
/// one author posted at once through two replicas with MESSAGES_PER_MINUTE 5 (one
/// written before): exactly four more are written, the rest are 429.
async fn parallel_posts_on_two_replicas_keep_the_minute_exactly(app: &TestApp) {
    let w = world(app).await;
    let first = app.beside(&[("MESSAGES_PER_MINUTE", "5")]).await;
    let second = app.beside(&[("MESSAGES_PER_MINUTE", "5")]).await;
    let id = start(
        &first,
        "alice",
        &w.acme,
        json!({"participants": ["bob"], "body": "0"}),
    )
    .await
    .expect(StatusCode::CREATED)
    .id();
    let alice = token(app, "alice");
    let path = format!("/api/messages/conversations/{id}/messages");
    let requests = |n: std::ops::Range<usize>| {
        n.map(|i| {
            app.by(&alice)
                .org(&w.acme)
                .post(&path)
                .json(json!({"body": i.to_string()}))
                .request()
        })
        .collect::<Vec<_>>()
    };
    let (a, b) = tokio::join!(
        first.concurrently(requests(0..12)),
        second.concurrently(requests(12..24))
    );
    let answers: Vec<_> = a.into_iter().chain(b).collect();
    let written = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .count();
    let limited = answers
        .iter()
        .filter(|(s, body)| {
            *s == StatusCode::TOO_MANY_REQUESTS && code(*s, body) == ErrorCode::RateLimited
        })
        .count();
    assert_eq!((written, limited), (4, 20), "{answers:?}");
    let listed: MessagePage = page(app, "alice", &w.acme, &id, "?limit=100").await.data();
    assert_eq!(listed.messages.len(), 5, "{listed:?}");
    first.stop().await;
    second.stop().await;
}

async fn limits_answer_429_and_400_and_retention_prunes(app: &TestApp) {
    let w = world(app).await;
    let limited = app
        .beside(&[
            ("MESSAGES_PER_MINUTE", "3"),
            ("CONVERSATION_MAX_PARTICIPANTS", "2"),
        ])
        .await;
    let Answer(status, body) = start(
        &limited,
        "alice",
        &w.acme,
        json!({"participants": ["bob", "carol"], "body": "x"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["details"]["field"], "participants");
    let id = start(
        &limited,
        "alice",
        &w.acme,
        json!({"participants": ["bob"], "body": "1"}),
    )
    .await
    .expect(StatusCode::CREATED)
    .id();
    for n in 2..=3 {
        let Answer(status, _) = write(&limited, "alice", &w.acme, &id, &n.to_string()).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let Answer(status, body) = write(&limited, "alice", &w.acme, &id, "4").await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::TOO_MANY_REQUESTS, ErrorCode::RateLimited),
        "{body}"
    );
    assert_eq!(body["details"]["limit"], 3);
    // Another user has their own allowance.
    let Answer(status, _) = write(&limited, "bob", &w.acme, &id, "bob's").await;
    assert_eq!(status, StatusCode::CREATED);
    let messages: MessagePage = page(&limited, "bob", &w.acme, &id, "").await.data();
    assert_eq!(messages.messages.len(), 4);
    limited.stop().await;

    // Retention: messages and ended announcements older than the cutoff go.
    let Answer(status, _) = announce(
        app,
        "alice",
        &w.acme,
        json!({"title": "old", "body": "x", "startsAt": hours(-3), "endsAt": hours(-2)}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let Answer(status, _) = announce(
        app,
        "alice",
        &w.acme,
        json!({"title": "open-ended", "body": "x"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let pruned = app
        .store
        .prune_messages(
            Utc::now() + chrono::Duration::minutes(1),
            Utc::now() + chrono::Duration::minutes(1),
        )
        .await
        .unwrap();
    assert!(pruned >= 5, "{pruned}");
    let Answer(status, gone) = page(app, "bob", &w.acme, &id, "").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "the conversation went with its messages: {gone}"
    );
    let Answer(_, managed) = app
        .by(&token(app, "alice"))
        .org(&w.acme)
        .get("/api/messages/announcements?view=managed")
        .await;
    let titles: Vec<&str> = managed["announcements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["open-ended"]);
}

/// Opens a stream on the in-process router; answers its body.
async fn open_stream(app: &TestApp, user: &str, org: &str) -> (StatusCode, Body) {
    let request = Request::builder()
        .uri("/api/messages/stream")
        .header("authorization", format!("Bearer {}", token(app, user)))
        .header("x-org-id", org)
        .body(Body::empty())
        .unwrap();
    let response = app.router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    (status, response.into_body())
}

/// Reads the stream until an event named `event` comes, or `within` passes.
async fn next_event(body: &mut Body, event: &str, within: Duration) -> Option<Value> {
    let deadline = Instant::now() + within;
    let mut text = String::new();
    while Instant::now() < deadline {
        let frame = tokio::time::timeout(deadline - Instant::now(), body.frame()).await;
        let Ok(Some(Ok(frame))) = frame else {
            return None;
        };
        if let Some(bytes) = frame.data_ref() {
            text.push_str(&String::from_utf8_lossy(bytes));
        }
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let name = block.lines().find_map(|l| l.strip_prefix("event: "));
            let data = block.lines().find_map(|l| l.strip_prefix("data: "));
            if let (Some(name), Some(data)) = (name, data) {
                if name == event {
                    return serde_json::from_str(data).ok();
                }
            }
        }
    }
    None
}

async fn the_stream_carries_a_users_messages_and_announcements_only(app: &TestApp) {
    let w = world(app).await;
    let (status, mut bobs) = open_stream(app, "bob", &w.acme).await;
    assert_eq!(status, StatusCode::OK);
    let (_, mut carols) = open_stream(app, "carol", &w.acme).await;
    let (_, mut daves) = open_stream(app, "dave", &w.other).await;
    let started: Conversation = start(
        app,
        "alice",
        &w.acme,
        json!({"participants": ["bob"], "body": "for bob"}),
    )
    .await
    .expect(StatusCode::CREATED)
    .data();
    let message = next_event(&mut bobs, "message", Duration::from_secs(5))
        .await
        .expect("bob's message");
    assert_eq!(message["body"], "for bob");
    assert_eq!(message["conversationId"], started.id.as_str());
    let Answer(status, _) = announce(
        app,
        "alice",
        &w.acme,
        json!({"title": "acme news", "body": "x"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let news = next_event(&mut carols, "announcement", Duration::from_secs(5))
        .await
        .expect("carol's announcement");
    assert_eq!(news["title"], "acme news");
    // Carol got no message (she is not in the conversation), dave nothing of acme's.
    assert!(
        next_event(&mut carols, "message", Duration::from_millis(800))
            .await
            .is_none()
    );
    assert!(
        next_event(&mut daves, "announcement", Duration::from_millis(800))
            .await
            .is_none()
    );
    assert!(
        next_event(&mut daves, "message", Duration::from_millis(200))
            .await
            .is_none()
    );

    // The same gate as the API.
    let request = Request::builder()
        .uri("/api/messages/stream")
        .header("x-org-id", &w.acme)
        .body(Body::empty())
        .unwrap();
    let (status, _) = app.send(request).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = open_stream(app, "dave", &w.acme).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // At most MESSAGE_STREAMS_PER_USER (5) per user here: bob holds one.
    let mut held = Vec::new();
    for _ in 0..4 {
        let (status, body) = open_stream(app, "bob", &w.acme).await;
        assert_eq!(status, StatusCode::OK);
        held.push(body);
    }
    let (status, _) = open_stream(app, "bob", &w.acme).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    drop(held);
    drop(bobs);
    let (status, _) = open_stream(app, "bob", &w.acme).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "closed streams give their places back"
    );

    // A member removed from the organization: their stream ends within a second or two.
    app.by(&token(app, "alice"))
        .delete(format!("/api/organization/{}/members/carol", w.acme))
        .await
        .expect(StatusCode::OK);
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match carols.frame().await {
                None | Some(Err(_)) => return true,
                Some(Ok(_)) => continue,
            }
        }
    })
    .await;
    assert_eq!(ended, Ok(true), "the removed member's stream ended");
}

/// A feed position skipped over (a transaction that committed after a later one) is
/// handed when it appears, once; nothing is handed twice.
async fn the_feed_hands_a_late_commit_once(app: &TestApp) {
    let w = world(app).await;
    let state = adapters::services::context::AppState::new(
        test_config(&[]),
        app.store.clone(),
        std::sync::Arc::new(adapters::audit::AuditCounters::default()),
    );
    let mut slot = state.replica.feed.open("bob", 5).unwrap();
    let follow = |state: &adapters::services::context::AppState| {
        let state = state.clone();
        async move {
            adapters::replica::feed::follow(&state.infra.store, &state.replica.feed, Utc::now())
                .await
                .unwrap()
        }
    };
    // The first read starts at the end: nothing earlier is live.
    assert_eq!(follow(&state).await, 0);
    let started: Conversation = start(
        app,
        "alice",
        &w.acme,
        json!({"participants": ["bob"], "body": "one"}),
    )
    .await
    .expect(StatusCode::CREATED)
    .data();
    let end = app.store.message_feed_end().await.unwrap();
    let first: MessagePage = page(app, "bob", &w.acme, &started.id, "").await.data();
    let message = first.messages[0].id.clone();
    let row = |seq: i64| {
        format!(
            "INSERT INTO message_feed (seq, kind, ref_id, recipients, created_at) \
             VALUES ({seq}, 'message', '{message}', '[\"bob\"]', '2026-01-01T00:00:00.000000Z')"
        )
    };
    // A later position commits first; the one before it is skipped over.
    app.sql(&row(end + 2)).await;
    assert_eq!(follow(&state).await, 2, "the post and the later position");
    app.sql(&row(end + 1)).await;
    assert_eq!(follow(&state).await, 1, "the late one, when it appears");
    assert_eq!(follow(&state).await, 0, "nothing twice");
    let mut received = 0;
    while slot.events.try_recv().is_ok() {
        received += 1;
    }
    assert_eq!(received, 3);
}

on_both_backends!(
    the_feed_hands_a_late_commit_once,
    announcement_windows_dismissals_and_permissions,
    announcements_reach_teams_tiers_and_lists_and_nothing_else,
    conversations_keep_order_read_markers_and_their_organization,
    limits_answer_429_and_400_and_retention_prunes,
    parallel_posts_on_two_replicas_keep_the_minute_exactly,
    the_stream_carries_a_users_messages_and_announcements_only,
);

/// A message posted through one replica reaches a stream held by the other within
/// a second; quiet streams carry keep-alives.
#[tokio::test]
async fn a_message_posted_on_one_replica_streams_from_the_other() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let client = reqwest::Client::new();
    let vars = [("MESSAGE_STREAM_KEEPALIVE_SECONDS", "1")];
    let ports = [crash::free_port(), crash::free_port()];
    let mut servers = Vec::new();
    for port in ports {
        servers.push(crash::start_with(&url, port, &vars));
        crash::wait_healthy(&client, &format!("http://127.0.0.1:{port}")).await;
    }
    let [a, b] = ports.map(|port| format!("http://127.0.0.1:{port}"));
    let alice = crash::user_token("alice");
    let bob = crash::user_token("bob");
    let org = crash::create_org(&client, &a, &alice, "replicated").await;
    let added = client
        .post(format!("{a}/api/organization/{org}/members"))
        .bearer_auth(&alice)
        .json(&json!({"userId": "bob", "role": "member"}))
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 201);
    let mut stream = client
        .get(format!("{a}/api/messages/stream"))
        .bearer_auth(&bob)
        .header("x-org-id", &org)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    assert_eq!(
        stream.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut latencies = Vec::new();
    let mut text = String::new();
    for n in 0..5 {
        let posted = Instant::now();
        let answer = client
            .post(format!("{b}/api/messages/conversations"))
            .bearer_auth(&alice)
            .header("x-org-id", &org)
            .json(&json!({"participants": ["bob"], "body": format!("across {n}")}))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 201);
        let wanted = format!("across {n}");
        loop {
            let chunk = tokio::time::timeout(Duration::from_secs(5), stream.chunk())
                .await
                .expect("the stream went quiet")
                .unwrap()
                .expect("the stream ended");
            text.push_str(&String::from_utf8_lossy(&chunk));
            if text.contains(&wanted) {
                latencies.push(posted.elapsed());
                break;
            }
        }
    }
    // Keep-alive comments on a quiet stream.
    text.clear();
    let quiet = tokio::time::timeout(Duration::from_secs(3), stream.chunk()).await;
    let chunk = quiet.expect("no keep-alive").unwrap().unwrap();
    assert!(
        String::from_utf8_lossy(&chunk).starts_with(':'),
        "{chunk:?}"
    );
    drop(stream);
    for server in &servers {
        crash::terminate(server);
    }
    drop(servers);
    drop_postgres(&admin_url, &name).await;
    latencies.sort();
    eprintln!("message from replica B to a stream on replica A: {latencies:?}");
    let slowest = latencies.last().copied().unwrap_or_default();
    assert!(slowest < Duration::from_secs(2), "{latencies:?}");
}
