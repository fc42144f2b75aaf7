//! Where SQL decides in one statement what a pure crate decides too, both agree over
//! a grid of values around the edges: the conditional charge of a quota pool
//! (`entitlements::charge`) and the announcements a reader sees
//! (`messaging::Audience::reaches` and `Window::phase`).

use std::collections::BTreeSet;

use adapters::storage::{AnnouncementFields, Charge, Charged, Reader};
use chrono::{Duration, TimeZone, Utc};
use entitlements::{Limit, QuotaError, Tier};
use messaging::{Audience, Phase, Severity, Teams, Viewer, Window};

use super::*;

/// Every limit (unlimited, zero, small), usage and amount near the edges: the charge
/// is taken exactly when `entitlements::charge` allows it, the pool then holds the
/// usage it answers, and a refusal names its numbers and changes nothing.
async fn the_pool_charge_is_entitlements_rule(app: &TestApp) {
    let now = Utc::now();
    let mut cells = 0;
    for limit in [-1i64, 0, 1, 2, 5] {
        for used in [0i64, 1, 2, 4, 5, 6] {
            for amount in [0u64, 1, 2, 3] {
                let root = format!("grid-{limit}-{used}-{amount}");
                app.sql(&format!(
                    "INSERT INTO quota_pool (root_id, dimension, used, limit_value, period_start)
                     VALUES ('{root}', 'plugins', {used}, {limit}, '')"
                ))
                .await;
                let charge = Charge {
                    org_id: &root,
                    root_id: &root,
                    dimension: "plugins",
                    period: "",
                    amount,
                };
                let mut tx = app.store.transaction().await.unwrap();
                let outcome = tx.charge_now(&charge, None, now).await.unwrap();
                if outcome != Charged::Done {
                    tx.abandon();
                }
                tx.commit().await.unwrap();
                let rule = entitlements::charge(
                    used.unsigned_abs(),
                    Limit::from_wire(limit).unwrap(),
                    amount,
                );
                let pool = app
                    .number(&format!(
                        "SELECT used FROM quota_pool WHERE root_id = '{root}'"
                    ))
                    .await;
                let cell = format!("limit {limit}, used {used}, amount {amount}");
                match (outcome, rule) {
                    (Charged::Done, Ok(after)) => {
                        assert_eq!(pool.unsigned_abs(), after, "{cell}");
                    }
                    (
                        Charged::Refused(refusal),
                        Err(QuotaError::Exceeded {
                            used: u,
                            limit: l,
                            requested,
                        }),
                    ) => {
                        assert_eq!(
                            (refusal.used, refusal.limit, refusal.requested),
                            (u, l, requested),
                            "{cell}"
                        );
                        assert_eq!(pool, used, "{cell}: a refusal changes nothing");
                    }
                    (outcome, rule) => panic!("{cell}: SQL {outcome:?}, entitlements {rule:?}"),
                }
                cells += 1;
            }
        }
    }
    assert_eq!(cells, 120);
}

/// Fifty announcements (ten audiences, five windows) read by five organizations:
/// each sees exactly those `Audience::reaches` and `Window::phase` show it.
async fn the_visible_announcements_are_messaging_rule(app: &TestApp) {
    let now = Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap();
    let hour = Duration::hours(1);
    let own = |org: &str, teams| Audience::Organization {
        org_id: org.to_owned(),
        teams,
    };
    let audiences = [
        own("acme", Teams::None),
        own("acme", Teams::All),
        own("acme", Teams::Listed(vec!["t1".to_owned()])),
        own(
            "acme",
            Teams::Listed(vec!["t2".to_owned(), "t9".to_owned()]),
        ),
        own("other", Teams::All),
        Audience::Organizations(vec!["acme".to_owned()]),
        Audience::Organizations(vec!["t1".to_owned(), "other".to_owned()]),
        Audience::Everyone,
        Audience::Tier(Tier::Pro),
        Audience::Tier(Tier::Team),
    ];
    let windows = [
        Window::new(now - hour, None).unwrap(),
        Window::new(now, None).unwrap(),
        Window::new(now - hour, Some(now)).unwrap(),
        Window::new(now - hour, Some(now + Duration::seconds(1))).unwrap(),
        Window::new(now + hour, None).unwrap(),
    ];
    let mut posted = Vec::new();
    let mut tx = app.store.transaction().await.unwrap();
    for (a, audience) in audiences.iter().enumerate() {
        for (w, window) in windows.iter().enumerate() {
            let id = format!("grid-{a}-{w}");
            let fields = AnnouncementFields {
                title: id.clone(),
                body: "grid".to_owned(),
                severity: Severity::Info,
                window: *window,
                dismissible: true,
            };
            tx.create_announcement(&id, audience, &fields, "someone", now - hour)
                .await
                .unwrap();
            posted.push((id, audience.clone(), *window));
        }
    }
    tx.commit().await.unwrap();
    let viewers = [
        Viewer {
            org_id: "acme",
            parent_org_id: None,
            tier: Tier::Pro,
        },
        Viewer {
            org_id: "t1",
            parent_org_id: Some("acme"),
            tier: Tier::Pro,
        },
        Viewer {
            org_id: "t2",
            parent_org_id: Some("acme"),
            tier: Tier::Pro,
        },
        Viewer {
            org_id: "other",
            parent_org_id: None,
            tier: Tier::Team,
        },
        Viewer {
            org_id: "lone",
            parent_org_id: None,
            tier: Tier::Developer,
        },
    ];
    let mut seen = 0;
    for viewer in viewers {
        let reader = Reader {
            org_id: viewer.org_id,
            parent_org_id: viewer.parent_org_id,
            tier: viewer.tier,
            user_id: "reader",
        };
        let (page, total) = app
            .store
            .visible_announcements(reader, now, true, (1000, 0), false)
            .await
            .unwrap();
        let by_sql: BTreeSet<String> = page.into_iter().map(|a| a.id).collect();
        let by_rule: BTreeSet<String> = posted
            .iter()
            .filter(|(_, audience, window)| {
                audience.reaches(&viewer) && window.phase(now) == Phase::Active
            })
            .map(|(id, _, _)| id.clone())
            .collect();
        assert_eq!(by_sql, by_rule, "{viewer:?}");
        assert_eq!(total, by_rule.len() as u64, "{viewer:?}");
        seen += by_rule.len();
    }
    // The grid sees something and hides something (not two empty sets).
    assert!(seen > 20 && seen < 5 * posted.len(), "{seen}");
}

on_both_backends!(
    the_pool_charge_is_entitlements_rule,
    the_visible_announcements_are_messaging_rule,
);
