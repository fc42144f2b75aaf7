//! Every page of the console in the real browser, at 1280 and at 375 pixels wide:
//! axe-core (npm, loaded by the test into the page, never served) finds no serious
//! or critical violation; the page is usable by keyboard (the first Tab reaches the
//! skip link, focus is visible, no control is taken out of the tab order); a
//! screenshot of each is kept under `target/console-screenshots/pages/`.

use std::time::Duration;

use fantoccini::actions::{InputSource, KeyAction, KeyActions};

use super::console::{browser, scene, screenshots, Browser};
use super::*;

/// axe-core's script, installed by `scripts/test` (`AXE_CORE`).
fn axe_source() -> String {
    let path = std::env::var("AXE_CORE").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../target/axe/node_modules/axe-core/axe.min.js"
        )
        .to_owned()
    });
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "axe-core checks every console page: scripts/test installs it with npm ({path}: {e})"
        )
    })
}

/// The serious and critical violations axe-core finds on the page shown, each as
/// `rule (impact): the elements`.
async fn violations(b: &Browser, axe: &str) -> Vec<String> {
    b.client
        .execute(&format!("{axe}\n;return true;"), vec![])
        .await
        .expect("axe-core loads into the page");
    let found = b
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             axe.run(document, { resultTypes: ['violations'] })
               .then(r => done(r.violations
                 .filter(v => v.impact === 'serious' || v.impact === 'critical')
                 .map(v => v.id + ' (' + v.impact + '): ' + v.nodes.slice(0, 5).map(n => n.target.join(' ')).join(', '))))
               .catch(e => done(['axe-core failed: ' + e]));",
            vec![],
        )
        .await
        .expect("axe-core runs");
    serde_json::from_value(found).unwrap()
}

/// Presses Tab once.
async fn tab(b: &Browser) {
    let keys = KeyActions::new("keyboard".to_owned())
        .then(KeyAction::Down { value: '\u{e004}' })
        .then(KeyAction::Up { value: '\u{e004}' });
    b.client.perform_actions(keys).await.unwrap();
    b.client.release_actions().await.unwrap();
}

/// The page by keyboard: from the top, the first Tab reaches the skip link (on a
/// page with navigation; else the first control of the page's content), which shows
/// its focus; no control is taken out of the tab order or put before the others.
async fn by_keyboard(b: &Browser, name: &str) {
    b.client
        .execute(
            "document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0);",
            vec![],
        )
        .await
        .unwrap();
    tab(b).await;
    let focused = b
        .client
        .execute(
            "const e = document.activeElement; const s = getComputedStyle(e);
             const first = document.querySelector('a.skip') ||
               document.querySelector('main a[href], main button, main input:not([type=hidden]), main select, main textarea');
             return [e === first, e.outerHTML.slice(0, 120), s.outlineStyle, s.outlineWidth];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(focused[0], true, "{name}: the first Tab reaches {focused}");
    assert_ne!(
        focused[2], "none",
        "{name}: the focus is not visible: {focused}"
    );
    assert_ne!(
        focused[3], "0px",
        "{name}: the focus is not visible: {focused}"
    );
    let out_of_order = b
        .client
        .execute(
            "return Array.from(document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea, [tabindex]'))
               .filter(e => e.tabIndex !== 0 && !e.disabled)
               .map(e => e.outerHTML.slice(0, 120));",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        out_of_order,
        json!([]),
        "{name}: controls out of the tab order"
    );
}

/// Checks the page shown at both widths and keeps its screenshots.
async fn check(b: &Browser, axe: &str, name: &str) {
    let dir = screenshots().join("pages");
    std::fs::create_dir_all(&dir).unwrap();
    for width in [1280u32, 375] {
        b.client.set_window_size(width, 1000).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let found = violations(b, axe).await;
        assert_eq!(found, Vec::<String>::new(), "{name} at {width} px");
        let overflow = b
            .client
            .execute(
                "const width = document.documentElement.clientWidth;
                 const over = document.documentElement.scrollWidth - width;
                 if (over <= 0) return over;
                 return Array.from(document.querySelectorAll('body *'))
                   .filter(e => e.getBoundingClientRect().right > width + 1 && !(e.closest('.scroll') && e.closest('.scroll') !== e))
                   .filter(e => !Array.from(e.children).some(c => c.getBoundingClientRect().right > width + 1))
                   .concat(Array.from(document.querySelectorAll('body *')).filter(e => e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0 && getComputedStyle(e).overflowX === 'visible'))
                   .slice(0, 5).map(e => e.tagName + '#' + e.id + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right) + ' ' + e.textContent.slice(0, 40));",
                vec![],
            )
            .await
            .unwrap();
        assert!(
            overflow.as_i64().is_some_and(|o| o <= 0),
            "{name} at {width} px scrolls sideways by {overflow} px"
        );
        let png = b.client.screenshot().await.unwrap();
        std::fs::write(dir.join(format!("{name}-{width}.png")), png).unwrap();
    }
    b.client.set_window_size(1280, 1000).await.unwrap();
    by_keyboard(b, name).await;
}

async fn every_page_passes_axe_core_by_keyboard_at_both_widths(app: &TestApp) {
    let app = &app.beside(&[("QUOTA_TIER_DEVELOPER_SEATS", "-1")]).await;
    let axe = axe_source();
    let scene = scene(app).await;
    let base = &scene.base;
    let b = browser().await;

    b.open(&format!("{base}/console/login")).await;
    check(&b, &axe, "login").await;
    b.open(&format!("{base}/console/verify-email?token=x"))
        .await;
    check(&b, &axe, "verify-email").await;

    b.sign_in(base, "alice@example.com").await;
    let org = &scene.acme;
    let rule = &scene.blocking_rule;
    let pages = [
        ("posture", format!("/console/posture?org={org}")),
        ("rules", format!("/console/rules?org={org}")),
        (
            "rule-history",
            format!("/console/rules?org={org}&history={rule}"),
        ),
        ("rule-new", format!("/console/rules/edit?org={org}")),
        (
            "rule-edit",
            format!("/console/rules/edit?org={org}&rule={rule}"),
        ),
        ("catalog", format!("/console/catalog?org={org}")),
        ("exemptions", format!("/console/exemptions?org={org}")),
        ("inventory", format!("/console/inventory?org={org}")),
        ("scans", format!("/console/scans?org={org}")),
        ("audit", format!("/console/audit?org={org}")),
        ("billing", format!("/console/billing?org={org}")),
        ("inbox", format!("/console/inbox?org={org}")),
        ("conversations", format!("/console/conversations?org={org}")),
        ("templates", format!("/console/rules/templates?org={org}")),
        ("dashboards", format!("/console/dashboards?org={org}")),
        ("alerts", format!("/console/alerts?org={org}")),
        ("people", format!("/console/people?org={org}")),
        ("settings", format!("/console/settings?org={org}")),
        ("account", format!("/console/account?org={org}")),
    ];
    // Every page of the navigation is among them.
    let navigation: Vec<String> = serde_json::from_value(
        b.client
            .execute(
                "return Array.from(document.querySelectorAll('nav a')).map(a => a.pathname);",
                vec![],
            )
            .await
            .unwrap(),
    )
    .unwrap();
    for link in &navigation {
        assert!(
            pages
                .iter()
                .any(|(_, p)| p.starts_with(&format!("{link}?"))),
            "{link} is not checked"
        );
    }
    for (name, path) in &pages {
        b.open(&format!("{base}{path}")).await;
        assert!(b.lands_on(path.split('?').next().unwrap()).await, "{name}");
        assert!(
            b.count("#error").await == 0,
            "{name}: {}",
            b.text("#error").await
        );
        check(&b, &axe, name).await;
    }
    // The super-admin's page.
    b.client
        .find(fantoccini::Locator::Css("header form.inline button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(b.lands_on("/console/login").await);
    b.sign_in(base, ROOT_EMAIL).await;
    b.open(&format!("{base}/console/admin/users")).await;
    check(&b, &axe, "admin-users").await;
}

on_both_backends!(every_page_passes_axe_core_by_keyboard_at_both_widths);
