//! The console, in a real browser: Debian's chromium driven through chromedriver
//! (WebDriver) against the server's router on loopback. Screenshots of each page are
//! kept under `target/console-screenshots/`.

use crate::api::{pagination, Answer};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use adapters::http::wire::{
    ChainVerdict, CompliancePosture, OrgQuotas, Organization, RuleImpact, Scan, Subscription,
};
use adapters::services::reports::SuccessRateReport;
use adapters::services::scans::{self, SweepSettings};
use adapters::workers::checkpoints;
use entitlements::Tier;
use fantoccini::{Client, ClientBuilder, Locator};

use super::fixtures::pipeline_as;
use super::*;
use adapters::code::ErrorCode;

pub(super) const PASSWORD: &str = "correct horse battery";

/// A chromedriver process (in a process group of its own, with the browser it
/// starts) and the browser profile it used, all gone when dropped: the whole group
/// is killed, so no browser outlives its test.
struct Driver(Child, PathBuf);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

async fn listening(port: u16) -> bool {
    tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_ok()
}

/// A browser session (headless chromium) with its driver.
pub(super) struct Browser {
    pub(super) client: Client,
    _driver: Driver,
}

pub(super) async fn browser() -> Browser {
    let port = super::crash::free_port();
    let child = Command::new(std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into()))
        .arg(format!("--port={port}"))
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver runs the console's tests: scripts/test installs Debian's chromium and chromium-driver");
    for _ in 0..400 {
        if listening(port).await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let profile = std::env::temp_dir().join(format!("console-profile-{}", uuid::Uuid::new_v4()));
    let driver = Driver(child, profile.clone());
    let capabilities = json!({
        "goog:chromeOptions": {
            "binary": std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-crash-reporter", "--disable-breakpad",
                     "--window-size=1280,1000", format!("--user-data-dir={}", profile.display())]
        }
    });
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities.as_object().unwrap().clone())
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a chromium session");
    Browser {
        client,
        _driver: driver,
    }
}

/// The router served on a loopback port (the console's pages call the API inside
/// it, as in `serve`).
pub(super) async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://127.0.0.1:{port}")
}

pub(super) fn screenshots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl Browser {
    pub(super) async fn open(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    pub(super) async fn text(&self, css: &str) -> String {
        // The page's script may replace the element between finding and reading it.
        for _ in 0..20 {
            let found = self
                .client
                .wait()
                .at_most(Duration::from_secs(20))
                .for_element(Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("no `{css}`: {e}"));
            if let Ok(text) = found.text().await {
                return text;
            }
        }
        panic!("`{css}` kept changing under the reader");
    }

    async fn attr(&self, css: &str, name: &str) -> Option<String> {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap()
            .attr(name)
            .await
            .unwrap()
    }

    pub(super) async fn count(&self, css: &str) -> usize {
        self.client.find_all(Locator::Css(css)).await.unwrap().len()
    }

    pub(super) async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no `{css}`: {e}"))
            .click()
            .await
            .unwrap();
    }

    pub(super) async fn type_into(&self, css: &str, text: &str) {
        let field = self.client.find(Locator::Css(css)).await.unwrap();
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    /// The page's controls without an accessible name (a label, an `aria-label` or
    /// their own text).
    async fn unlabelled(&self) -> Vec<String> {
        let found = self
            .client
            .execute(
                "return Array.from(document.querySelectorAll('input:not([type=hidden]), select, textarea, button'))
                   .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.textContent.trim())
                   .map(e => e.outerHTML);",
                vec![],
            )
            .await
            .unwrap();
        serde_json::from_value(found).unwrap()
    }

    pub(super) async fn shot(&self, name: &str) {
        assert_eq!(self.unlabelled().await, Vec::<String>::new(), "{name}");
        let png = self.client.screenshot().await.unwrap();
        std::fs::write(screenshots().join(format!("{name}.png")), png).unwrap();
    }

    pub(super) async fn sign_in(&self, base: &str, email: &str) {
        self.open(&format!("{base}/console")).await;
        assert!(self.client.current_url().await.unwrap().path() == "/console/login");
        self.type_into("#identifier", email).await;
        // By keyboard: Enter in the password field submits.
        self.type_into("#password", &format!("{PASSWORD}\u{E007}"))
            .await;
        if !self.lands_on("/console/posture").await {
            let main = self.text("main").await;
            panic!("signing in as {email} did not reach the posture: {main}");
        }
    }

    /// Waits for the page at `path` (a form's answer arrives after the click).
    pub(super) async fn lands_on(&self, path: &str) -> bool {
        for _ in 0..400 {
            if self.client.current_url().await.unwrap().path() == path {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    async fn switch_to(&self, org: &str) {
        self.client
            .find(Locator::Css("#org-switch"))
            .await
            .unwrap()
            .select_by_value(org)
            .await
            .unwrap();
        self.click("header form.switcher button").await;
        for _ in 0..400 {
            let url = self.client.current_url().await.unwrap();
            if url.query_pairs().any(|(k, v)| k == "org" && v == org) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the switcher did not open {org}");
    }

    async fn sign_out(&self, base: &str) {
        self.open(&format!("{base}/console/inbox")).await;
        self.click("header form.inline button").await;
        assert!(self.lands_on("/console/login").await, "signing out");
    }

    /// Waits until `css`'s text is no longer `pending`; the text.
    async fn settled(&self, css: &str, pending: &str) -> String {
        for _ in 0..400 {
            let text = self.text(css).await;
            if text != pending {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("`{css}` stayed `{pending}`");
    }

    /// What the page's own origin answers at `path`, fetched by the page (its
    /// cookie included).
    async fn fetched(&self, path: &str) -> String {
        self.client
            .execute(
                "return fetch(arguments[0], {credentials: 'same-origin'}).then(r => r.text());",
                vec![json!(path)],
            )
            .await
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned()
    }
}

pub(super) async fn register(app: &TestApp, email: &str) -> String {
    app.register(email, PASSWORD).await.user_id
}

pub(super) async fn access(app: &TestApp, email: &str) -> String {
    app.login(email, PASSWORD).await.access_token
}

/// A registered person who signed in and created an organization: their access
/// token and its id.
pub(super) async fn owner(app: &TestApp, email: &str, name: &str) -> (String, String) {
    register(app, email).await;
    let token = access(app, email).await;
    let org = app
        .by(&token)
        .post("/api/organization")
        .json(json!({ "name": name }))
        .await
        .expect(StatusCode::CREATED)
        .id();
    (token, org)
}

fn state_of(app: &TestApp) -> AppState {
    AppState::new(
        test_config(&[]),
        app.store.clone(),
        Arc::new(adapters::audit::AuditCounters::default()),
    )
}

async fn claimed_scan(state: &AppState) -> Option<adapters::storage::ScanRecord> {
    let now = Utc::now();
    state
        .infra
        .store
        .claim_scan("test-sweeper", now, now + chrono::Duration::seconds(30))
        .await
        .unwrap()
}

const SWEEP: SweepSettings = SweepSettings {
    concurrency: 2,
    batch: 3,
    lease: Duration::from_secs(30),
};

/// The people and the organization of the scenario.
pub(super) struct Scene {
    pub(super) base: String,
    pub(super) acme: String,
    beta: String,
    alice: String,
    bob: String,
    root: String,
    exemption: String,
    pub(super) blocking_rule: String,
}

/// Alice owns `acme` (five pipelines judged by a scan against two rules, one
/// blocking) and `beta`; Bob is an admin of `acme`; root is the super-admin. Alice
/// asked for an exemption; services posted audit events and a checkpoint is signed.
pub(super) async fn scene(app: &TestApp) -> Scene {
    let alice_id = register(app, "alice@example.com").await;
    let bob_id = register(app, "bob@example.com").await;
    let state = state_of(app);
    adapters::services::accounts::provision(
        &state.infra.store,
        &state.config,
        &state.infra.passwords,
        (ROOT_EMAIL, PASSWORD.to_owned()),
        Utc::now(),
    )
    .await
    .unwrap();
    let _ = alice_id;
    let alice = access(app, "alice@example.com").await;
    let bob = access(app, "bob@example.com").await;
    let root = access(app, ROOT_EMAIL).await;
    let create = |name: &'static str| {
        let alice = alice.clone();
        async move {
            app.by(&alice)
                .post("/api/organization")
                .json(json!({"name": name}))
                .await
                .expect(StatusCode::CREATED)
                .id()
        }
    };
    let acme = create("acme").await;
    let beta = create("beta").await;
    app.by(&alice)
        .post("/api/organization")
        .json(json!({"name": "web", "parentOrgId": acme}))
        .await
        .expect(StatusCode::CREATED);
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": bob_id, "role": "admin"}))
        .await
        .expect(StatusCode::CREATED);
    let mut pipelines = Vec::new();
    for (name, modifier) in [
        ("pub-one", "public"),
        ("pubtwo", "public"),
        ("web-app", "private"),
        ("api-core", "private"),
        ("legacy1", "private"),
    ] {
        pipelines.push(
            app.by(&alice)
                .org(&acme)
                .post("/api/pipelines")
                .json(pipeline_as(name, modifier))
                .await
                .expect(StatusCode::CREATED)
                .id(),
        );
    }
    let mut rules = Vec::new();
    for rule in [
        json!({"name": "Private only", "target": "pipeline", "severity": "error",
               "field": "accessModifier", "operator": "eq", "value": "private"}),
        json!({"name": "Named by convention", "target": "pipeline", "severity": "warning",
               "field": "pipelineName", "operator": "regex", "value": "^[a-z]+-[a-z]+$"}),
    ] {
        rules.push(
            app.by(&alice)
                .org(&acme)
                .post("/api/compliance/rules")
                .json(rule)
                .await
                .expect(StatusCode::CREATED)
                .id(),
        );
    }
    // A scan judges them all (as the sweeper workers would).
    app.by(&alice)
        .org(&acme)
        .post("/api/compliance/scans")
        .json(json!({"target": "pipeline"}))
        .await
        .expect(StatusCode::ACCEPTED);
    let never = || false;
    while let Some(claimed) = claimed_scan(&state).await {
        scans::sweep(&state, &claimed, SWEEP, &never).await.unwrap();
    }
    let exemption = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/exemptions")
        .json(json!({"ruleId": rules[0], "entityId": pipelines[0], "reason": "public by design"}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    let service = app.service_token("plugin");
    for n in 0..5 {
        let (status, body) = app
            .post_event(
                &service,
                Some(&format!("console-{acme}-{n}")),
                json!({"action": "plugin.upload", "actorId": "u", "orgId": acme,
                       "targetType": "plugin", "targetId": format!("p{n}"),
                       "details": {"n": n, "ratio": 0.5, "name": "é\u{2028}"}}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    app.relay().await;
    let settings = test_config(&[]).checkpoints.unwrap();
    assert!(
        checkpoints::round(&app.store, &settings, Utc::now())
            .await
            .unwrap()
            >= 1
    );
    Scene {
        base: serve(app.router.clone()).await,
        acme,
        beta,
        alice,
        bob,
        root,
        exemption,
        blocking_rule: rules[0].clone(),
    }
}

pub(super) async fn csp_violations(app: &TestApp) -> u64 {
    let response = app
        .router
        .clone()
        .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .unwrap();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("console_csp_violations_total "))
        .unwrap()
        .parse()
        .unwrap()
}

async fn the_console_in_a_real_browser(app: &TestApp) {
    // Members join Developer organizations (one seat by default).
    let app = &app.beside(&[("QUOTA_TIER_DEVELOPER_SEATS", "-1")]).await;
    let scene = scene(app).await;
    let base = &scene.base;
    let b = browser().await;
    let violations_before = csp_violations(app).await;

    // Signing in: the login page, then the posture page, on a __Host- cookie.
    b.open(&format!("{base}/")).await;
    assert_eq!(
        b.client.current_url().await.unwrap().path(),
        "/console/login"
    );
    b.shot("login").await;
    b.sign_in(base, "alice@example.com").await;
    let cookies = b.client.get_all_cookies().await.unwrap();
    let session = cookies
        .iter()
        .find(|c| c.name() == "__Host-compliance_console")
        .expect("the session cookie");
    assert_eq!(session.http_only(), Some(true));
    assert_eq!(session.secure(), Some(true));
    assert_eq!(
        session.same_site().map(|s| format!("{s:?}")).as_deref(),
        Some("Strict")
    );
    assert_eq!(session.path(), Some("/"));

    // Switching organization.
    // Roots by name, each followed by its teams.
    let options: Vec<String> = serde_json::from_value(
        b.client
            .execute("return Array.from(document.querySelectorAll('#org-switch option')).map(o => o.textContent);", vec![])
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(options, ["acme", "acme / web", "beta"]);
    b.switch_to(&scene.beta).await;
    assert_eq!(b.text("h1 small").await, "beta");
    b.switch_to(&scene.acme).await;
    assert_eq!(b.text("h1 small").await, "acme");
    b.shot("posture").await;

    // The posture's numbers are the API's.
    let posture: CompliancePosture = app
        .by(&scene.alice)
        .org(&scene.acme)
        .get("/api/compliance/posture")
        .await
        .data();
    let pipelines = &posture.by_target["pipeline"];
    assert_eq!((pipelines.total, pipelines.block), (5, 2), "{posture:?}");
    let counts = json!(pipelines);
    for status in ["total", "pass", "warn", "block", "error"] {
        let shown = b
            .text(&format!(
                "#posture-counts tr[data-target='pipeline'] td.{status}"
            ))
            .await;
        assert_eq!(shown, counts[status].to_string(), "{status}");
    }
    assert!(b.text("#failing-rules").await.contains("Private only"));

    // Filtered by status and rule; the exports equal the API's answer.
    b.open(&format!(
        "{base}/console/posture?org={}&target=pipeline&status=block&rule={}",
        scene.acme, scene.blocking_rule
    ))
    .await;
    let Answer(status, report) = app
        .by(&scene.alice)
        .org(&scene.acme)
        .get(format!(
            "/api/compliance/posture/policy-report?target=pipeline&status=block&rule={}",
            scene.blocking_rule
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "the two public pipelines: {report}");
    assert!(results.iter().all(|r| r["rule"] == "Private only"));
    assert_eq!(b.count("#results tbody tr").await, results.len());
    assert_eq!(b.text("#matched").await.split(' ').next(), Some("2"));
    let csv_href = b.attr("#export-csv", "href").await.unwrap();
    let csv = b.fetched(&csv_href).await;
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("entityId,entity,rule,result,severity,message")
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), results.len(), "{csv}");
    for (row, result) in rows.iter().zip(results) {
        assert!(
            row.starts_with(&format!(
                "{},{},Private only,fail,",
                result["resources"][0]["uid"].as_str().unwrap(),
                result["resources"][0]["name"].as_str().unwrap()
            )),
            "{row}"
        );
    }
    let json_href = b.attr("#export-json", "href").await.unwrap();
    let exported: Value = serde_json::from_str(&b.fetched(&json_href).await).unwrap();
    // The same results (each stamped with the instant the report was read).
    let unstamped = |report: &Value| {
        let mut results = report["results"].clone();
        for r in results.as_array_mut().unwrap() {
            r.as_object_mut().unwrap().remove("timestamp");
        }
        results
    };
    assert_eq!(unstamped(&exported), unstamped(&report));
    assert_eq!(exported["summary"], report["summary"]);
    // The export holds every entity: its page is the whole.
    let mut annotations = report["metadata"]["annotations"].clone();
    annotations["compliance/page-limit"] = annotations["compliance/page-total"].clone();
    assert_eq!(exported["metadata"]["annotations"], annotations);
    b.shot("posture-filtered").await;

    // Every page, with its screenshot; none breaks the content security policy.
    for page in ["rules", "catalog", "inventory", "billing", "inbox"] {
        b.open(&format!("{base}/console/{page}?org={}", scene.acme))
            .await;
        assert!(b.count("main#content").await == 1, "{page}");
        b.shot(page).await;
    }

    // Alice's own exemption shows no review button; Bob approves it.
    b.open(&format!("{base}/console/exemptions?org={}", scene.acme))
        .await;
    let row = format!("tr[data-exemption='{}']", scene.exemption);
    assert!(b.text(&row).await.contains("your own request"));
    assert_eq!(b.count(&format!("{row} button")).await, 0);
    b.shot("exemptions").await;
    b.sign_out(base).await;
    b.sign_in(base, "bob@example.com").await;
    b.open(&format!("{base}/console/exemptions?org={}", scene.acme))
        .await;
    b.click(&format!("{row} button[value='approve']")).await;
    assert!(
        b.text("#notice").await.contains("approved"),
        "{}",
        b.text("main").await
    );
    assert_eq!(b.text(&format!("{row} td.status")).await, "approved");
    let Answer(_, list) = app
        .by(&scene.bob)
        .org(&scene.acme)
        .get("/api/compliance/exemptions")
        .await;
    assert_eq!(list["exemptions"][0]["status"], "approved", "{list}");
    b.sign_out(base).await;

    // Alice starts a scan, sees its progress move live, and cancels it.
    b.sign_in(base, "alice@example.com").await;
    b.open(&format!("{base}/console/scans?org={}", scene.acme))
        .await;
    b.click("#start-scan button").await;
    let notice = b.text("#notice").await;
    let id = notice
        .strip_prefix("Done: scan ")
        .and_then(|rest| rest.strip_suffix(" started"))
        .unwrap_or_else(|| panic!("{notice}"))
        .to_owned();
    let progress = format!("#scan-{id} label");
    assert_eq!(b.text(&progress).await, "running: 0 of 5 judged");
    let state = state_of(app);
    let claimed = claimed_scan(&state).await.unwrap();
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let after_one = || calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 1;
    scans::sweep(&state, &claimed, SWEEP, &after_one)
        .await
        .unwrap();
    let moved = b.settled(&progress, "running: 0 of 5 judged").await;
    assert_eq!(
        moved, "running: 3 of 5 judged",
        "the page follows without reload"
    );
    b.shot("scans").await;
    b.click(&format!("tr[data-scan='{id}'] button[value='cancel']"))
        .await;
    // The click posts the form; the notice changes once the answer's page is shown.
    assert_eq!(
        b.settled("#notice", &format!("Done: scan {id} started"))
            .await,
        format!("Done: scan {id} is cancelled")
    );
    let scan: Scan = app
        .by(&scene.alice)
        .org(&scene.acme)
        .get(format!("/api/compliance/scans/{id}"))
        .await
        .data();
    assert_eq!(scan.status, "cancelled");

    // A form another origin's page posts is refused, and changes nothing.
    let Answer(_, before) = app
        .by(&scene.alice)
        .org(&scene.acme)
        .get("/api/compliance/scans")
        .await;
    let target = format!("{base}/console/scans");
    let acme = scene.acme.clone();
    let evil = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let target = target.clone();
            let acme = acme.clone();
            async move {
                axum::response::Html(format!(
                    "<form id=f method=post action='{target}'><input name=org value='{acme}'><input name=action value=start><input name=target value=pipeline><input name=csrf value=guessed></form><script>document.getElementById('f').submit()</script>"
                ))
            }
        }),
    );
    let evil_base = serve(evil).await;
    b.open(&evil_base).await;
    let refused = b.settled("#error", "").await;
    assert_eq!(
        refused,
        "this form did not come from this console's own page"
    );
    let Answer(_, after) = app
        .by(&scene.alice)
        .org(&scene.acme)
        .get("/api/compliance/scans")
        .await;
    assert_eq!(pagination(&before).total, pagination(&after).total);
    b.sign_out(base).await;

    // Root verifies the chain: the server's and the browser's verdicts agree.
    b.sign_in(base, ROOT_EMAIL).await;
    b.open(&format!("{base}/console/audit?org={}&verify=1", scene.acme))
        .await;
    let verdict: ChainVerdict = app
        .by(&scene.root)
        .get(format!("/api/audit/verify?orgId={}", scene.acme))
        .await
        .data();
    let n = verdict.count;
    assert!(n >= 5, "{verdict:?}");
    let latest = verdict.checkpoints.as_ref().expect("checkpoints are on")["latestSeq"]
        .as_u64()
        .unwrap();
    assert_eq!(
        b.text("#server-verdict").await,
        format!("{n} of {n} events valid")
    );
    let browser_verdict = b.settled("#browser-verdict", "checking…").await;
    assert_eq!(
        browser_verdict,
        format!("{n} of {n} events valid, checkpoint at seq {latest} verified")
    );
    b.shot("audit").await;

    // An exported chain file dropped on the page is checked there too.
    let export = app
        .router
        .clone()
        .oneshot(
            Request::get(format!("/api/audit/export?orgId={}", scene.acme))
                .header("authorization", format!("Bearer {}", scene.root))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(export.status(), StatusCode::OK);
    let bytes = http_body_util::BodyExt::collect(export.into_body())
        .await
        .unwrap()
        .to_bytes();
    let file = std::env::temp_dir().join(format!("chain-{}.jsonl", uuid::Uuid::new_v4()));
    std::fs::write(&file, &bytes).unwrap();
    b.client
        .find(Locator::Css("#chain-file"))
        .await
        .unwrap()
        .send_keys(file.to_str().unwrap())
        .await
        .unwrap();
    let file_verdict = b.settled("#file-verdict", "no file yet").await;
    let file_verdict = if file_verdict == "checking…" {
        b.settled("#file-verdict", "checking…").await
    } else {
        file_verdict
    };
    assert_eq!(
        file_verdict,
        format!("{n} of {n} events valid, checkpoint at seq {latest} verified")
    );
    // The same bytes dropped on the zone (a drop event carrying the file).
    b.open(&format!("{base}/console/audit?org={}", scene.acme))
        .await;
    b.client
        .execute(
            "const dt = new DataTransfer();
             dt.items.add(new File([arguments[0]], 'chain.jsonl', {type: 'application/x-ndjson'}));
             const zone = document.getElementById('dropzone');
             zone.dispatchEvent(new DragEvent('dragover', {dataTransfer: dt, bubbles: true, cancelable: true}));
             zone.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));
             return true;",
            vec![json!(String::from_utf8(bytes.to_vec()).unwrap())],
        )
        .await
        .unwrap();
    let mut dropped = String::new();
    for _ in 0..400 {
        dropped = b.text("#file-verdict").await;
        if dropped != "no file yet" && dropped != "checking…" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        dropped,
        format!("{n} of {n} events valid, checkpoint at seq {latest} verified")
    );
    // The same file with one row's details changed: the first broken seq.
    let tampered: Vec<String> = String::from_utf8(bytes.to_vec())
        .unwrap()
        .lines()
        .map(|line| {
            let mut value: Value = serde_json::from_str(line).unwrap();
            if value["seq"] == 3 {
                value["details"]["n"] = json!(99);
            }
            value.to_string()
        })
        .collect();
    std::fs::write(&file, tampered.join("\n")).unwrap();
    b.open(&format!("{base}/console/audit?org={}", scene.acme))
        .await;
    b.client
        .find(Locator::Css("#chain-file"))
        .await
        .unwrap()
        .send_keys(file.to_str().unwrap())
        .await
        .unwrap();
    let mut shown = String::new();
    for _ in 0..400 {
        shown = b.text("#file-verdict").await;
        if shown.starts_with("broken") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(shown.starts_with("broken at seq 3 "), "{shown}");
    assert_eq!(
        b.attr("#file-verdict", "data-broken-seq").await.as_deref(),
        Some("3")
    );
    b.shot("audit-file").await;
    let _ = std::fs::remove_file(&file);

    // One stored row tampered with: both verdicts name its seq.
    app.sql(&format!(
        r#"UPDATE audit_events SET details = '{{"n": 99}}' WHERE chain_key = '{}' AND seq = 3"#,
        scene.acme
    ))
    .await;
    b.open(&format!("{base}/console/audit?org={}&verify=1", scene.acme))
        .await;
    assert_eq!(
        b.attr("#server-verdict", "data-broken-seq")
            .await
            .as_deref(),
        Some("3")
    );
    assert!(b
        .text("#server-verdict")
        .await
        .starts_with("broken at seq 3"));
    let browser_verdict = b.settled("#browser-verdict", "checking…").await;
    assert!(
        browser_verdict.starts_with("broken at seq 3 "),
        "{browser_verdict}"
    );
    assert_eq!(
        b.attr("#browser-verdict", "data-broken-seq")
            .await
            .as_deref(),
        Some("3")
    );
    b.shot("audit-tampered").await;

    // No page broke the policy; an inline script does, and the browser reports it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(csp_violations(app).await, violations_before);
    b.client
        .execute(
            "const s = document.createElement('script'); s.textContent = 'window.x = 1'; document.body.appendChild(s); return true;",
            vec![],
        )
        .await
        .unwrap();
    let mut reported = violations_before;
    for _ in 0..400 {
        reported = csp_violations(app).await;
        if reported > violations_before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        reported > violations_before,
        "the policy's reports reach the server"
    );
    b.client.clone().close().await.unwrap();
}

/// A console request to the router: its status, headers and page.
pub(super) async fn visit(
    app: &TestApp,
    method: &str,
    path: &str,
    (cookie, host): (Option<&str>, &str),
    form: Option<&[(&str, &str)]>,
    headers: &[(&str, &str)],
) -> (StatusCode, axum::http::HeaderMap, String) {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", host);
    if let Some(cookie) = cookie {
        request = request.header("cookie", format!("__Host-compliance_console={cookie}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = match form {
        Some(fields) => {
            request = request.header("content-type", "application/x-www-form-urlencoded");
            Body::from(serde_urlencoded::to_string(fields).unwrap())
        }
        None => Body::empty(),
    };
    let response = app
        .router
        .clone()
        .oneshot(request.body(body).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

pub(super) const HOST: &str = "127.0.0.1:3000";

/// Signs in through the console's form; the cookie's value and the whole header.
pub(super) async fn console_session(
    app: &TestApp,
    email: &str,
    host: &str,
    extra: &[(&str, &str)],
) -> (String, String) {
    let origin = format!("http://{host}");
    let mut headers = vec![("origin", origin.as_str())];
    headers.extend_from_slice(extra);
    let (status, answer, page) = visit(
        app,
        "POST",
        "/console/login",
        (None, host),
        Some(&[("identifier", email), ("password", PASSWORD)]),
        &headers,
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{page}");
    assert_eq!(answer["location"], "/console");
    let set = answer["set-cookie"].to_str().unwrap().to_owned();
    let value = set
        .split(';')
        .next()
        .and_then(|pair| pair.split_once('='))
        .map(|(_, v)| v.to_owned())
        .unwrap();
    (value, set)
}

/// A console page for the holder of `cookie` on loopback: its status and text.
pub(super) async fn page_of(app: &TestApp, cookie: &str, path: &str) -> (StatusCode, String) {
    let (status, _, page) = visit(app, "GET", path, (Some(cookie), HOST), None, &[]).await;
    (status, page)
}

/// A form posted by the holder of `cookie` on loopback: the status and the page.
pub(super) async fn post_form(
    app: &TestApp,
    cookie: &str,
    path: &str,
    fields: &[(&str, &str)],
) -> (StatusCode, String) {
    let (status, _, page) = visit(app, "POST", path, (Some(cookie), HOST), Some(fields), &[]).await;
    (status, page)
}

pub(super) fn form_token(page: &str) -> String {
    regex::Regex::new(r#"name="csrf" value="([0-9a-f]{64})""#)
        .unwrap()
        .captures(page)
        .and_then(|c| c.get(1))
        .map(|m| m.as_str().to_owned())
        .expect("a form token on the page")
}

async fn every_console_answer_carries_its_headers(app: &TestApp) {
    owner(app, "alice@example.com", "acme").await;
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (status, headers, _) = visit(app, "GET", "/", (None, HOST), None, &[]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers["location"], "/console");
    // Without a session every page sends the visitor to sign in.
    let (status, headers, _) = visit(app, "GET", "/console/audit", (None, HOST), None, &[]).await;
    assert_eq!(
        (status, headers["location"].to_str().unwrap()),
        (StatusCode::SEE_OTHER, "/console/login")
    );
    let (status, _, _) = visit(
        app,
        "GET",
        "/console/posture",
        (Some("made-up"), HOST),
        None,
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let mut script = String::new();
    let script_tag =
        regex::Regex::new(r#"src="(/console/assets/console\.[0-9a-f]{16}\.js)""#).unwrap();
    let (status, headers, _) = visit(
        app,
        "GET",
        "/console/login",
        (Some(&cookie), HOST),
        None,
        &[],
    )
    .await;
    assert_eq!(
        (status, headers["location"].to_str().unwrap()),
        (StatusCode::SEE_OTHER, "/console"),
        "signed in already"
    );
    let (status, headers, _) = visit(app, "GET", "/console/login", (None, HOST), None, &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("frame-ancestors 'none'"));
    for path in [
        "/console/posture",
        "/console/rules",
        "/console/catalog",
        "/console/exemptions",
        "/console/inventory",
        "/console/scans",
        "/console/audit",
        "/console/billing",
        "/console/inbox",
    ] {
        let (status, headers, page) =
            visit(app, "GET", path, (Some(&cookie), HOST), None, &[]).await;
        assert_eq!(status, StatusCode::OK, "{path}: {page}");
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert!(
            csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"),
            "{csp}"
        );
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["referrer-policy"], "same-origin", "{path}");
        assert_eq!(headers["cache-control"], "no-store", "{path}");
        assert!(
            !page.contains("<script>") && !page.contains(" style="),
            "{path}: no inline code"
        );
        if let Some(found) = script_tag.captures(&page) {
            script = found[1].to_owned();
        }
    }
    // A hostile organization named in the address is a bad request, not a failure.
    for org in ["a%0Ab", "%FF%FE", "x%00y"] {
        let (status, _, page) = visit(
            app,
            "GET",
            &format!("/console/posture?org={org}"),
            (Some(&cookie), HOST),
            None,
            &[],
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{org}");
        if org == "a%0Ab" {
            assert!(page.contains("id=\"error\""), "{org}");
        }
    }
    // The script is served under its content's hash, cached for good; another name is not.
    let (status, headers, text) = visit(app, "GET", &script, (None, HOST), None, &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers["cache-control"],
        "public, max-age=31536000, immutable"
    );
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
    assert!(text.contains("crypto.subtle"));
    let (status, _, _) = visit(
        app,
        "GET",
        "/console/assets/console.0000000000000000.js",
        (None, HOST),
        None,
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

async fn the_session_cookie_is_opaque_hashed_and_strict(app: &TestApp) {
    register(app, "alice@example.com").await;
    let (cookie, set) = console_session(app, "alice@example.com", HOST, &[]).await;
    assert_eq!(
        set,
        format!("__Host-compliance_console={cookie}; Path=/; Max-Age=43200; HttpOnly; Secure; SameSite=Strict")
    );
    assert_eq!(cookie.len(), 43, "32 random bytes, base64url");
    // Only its hash is stored.
    let stored: Vec<String> = sqlx::query_scalar("SELECT id_hash FROM console_sessions")
        .fetch_all(adapters::storage::pool_for_tests(&app.store))
        .await
        .unwrap();
    use sha2::Digest;
    assert_eq!(
        stored,
        vec![hex::encode(sha2::Sha256::digest(cookie.as_bytes()))]
    );
    // Plain HTTP off loopback: no Secure, so no __Host- prefix either.
    let (_, set) = console_session(app, "alice@example.com", "console.example.com", &[]).await;
    assert!(
        set.starts_with("compliance_console=") && !set.contains("Secure"),
        "{set}"
    );
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    // Behind a proxy that says TLS (and is trusted to say so): Secure again.
    let behind = app.beside(&[("TRUST_PROXY_HEADERS", "true")]).await;
    let (_, set) = console_session(
        &behind,
        "alice@example.com",
        "console.example.com",
        &[("x-forwarded-proto", "https")],
    )
    .await;
    assert!(
        set.starts_with("__Host-compliance_console=") && set.contains("; Secure;"),
        "{set}"
    );
    // A wrong password shows the API's own refusal, and sets nothing.
    let (status, headers, page) = visit(
        app,
        "POST",
        "/console/login",
        (None, HOST),
        Some(&[
            ("identifier", "alice@example.com"),
            ("password", "wrong password!"),
        ]),
        &[("origin", "http://127.0.0.1:3000")],
    )
    .await;
    let Answer(api_status, api) = app
        .public()
        .post("/api/auth/login")
        .json(json!({"identifier": "alice@example.com", "password": "wrong password!"}))
        .await;
    assert_eq!(status, api_status);
    assert!(headers.get("set-cookie").is_none());
    assert!(page.contains(api["message"].as_str().unwrap()), "{page}");
}

async fn forms_without_this_pages_token_or_origin_change_nothing(app: &TestApp) {
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &cookie, "/console/scans").await;
    let token = form_token(&page);
    let scans = || async {
        app.by(&alice)
            .org(&acme)
            .get("/api/compliance/scans")
            .await
            .pagination()
            .total
    };
    let start = |csrf: &'static str| {
        [
            ("org", acme.as_str()),
            ("action", "start"),
            ("target", "pipeline"),
            ("csrf", csrf),
        ]
    };
    let leaked: &'static str = Box::leak(token.clone().into_boxed_str());
    for (fields, headers, why) in [
        (start(""), vec![], "no token"),
        (
            start("0000000000000000000000000000000000000000000000000000000000000000"),
            vec![],
            "another token",
        ),
        (
            start(leaked),
            vec![("sec-fetch-site", "cross-site")],
            "a cross-site fetch",
        ),
        (
            start(leaked),
            vec![("sec-fetch-site", "same-site")],
            "a sibling site",
        ),
        (
            start(leaked),
            vec![("origin", "http://evil.example")],
            "another origin",
        ),
        (start(leaked), vec![("origin", "null")], "an opaque origin"),
    ] {
        let (status, _, page) = visit(
            app,
            "POST",
            "/console/scans",
            (Some(&cookie), HOST),
            Some(&fields),
            &headers,
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{why}");
        assert!(
            page.contains("this form did not come from this console"),
            "{why}: {page}"
        );
    }
    // A login form posted from another origin is refused too.
    let (status, _, _) = visit(
        app,
        "POST",
        "/console/login",
        (None, HOST),
        Some(&[("identifier", "alice@example.com"), ("password", PASSWORD)]),
        &[("origin", "http://evil.example")],
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(scans().await, 0, "nothing started");
    let (status, _, page) = visit(
        app,
        "POST",
        "/console/scans",
        (Some(&cookie), HOST),
        Some(&start(leaked)),
        &[
            ("origin", "http://127.0.0.1:3000"),
            ("sec-fetch-site", "same-origin"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("started"), "{page}");
    assert_eq!(scans().await, 1);
    // An action the page does not have, and an id that is not one.
    let (status, page) = post_form(
        app,
        &cookie,
        "/console/scans",
        &[
            ("org", acme.as_str()),
            ("action", "cancel"),
            ("id", "../../api/x"),
            ("csrf", leaked),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(page.contains("not an id"), "{page}");
}

async fn signing_out_or_revoking_ends_the_console_session(app: &TestApp) {
    register(app, "alice@example.com").await;
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &cookie, "/console/inbox").await;
    let token = form_token(&page);
    let (status, headers, _) = visit(
        app,
        "POST",
        "/console/logout",
        (Some(&cookie), HOST),
        Some(&[("csrf", &token)]),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(headers["set-cookie"]
        .to_str()
        .unwrap()
        .contains("Max-Age=0"));
    let (status, headers, _) = visit(
        app,
        "GET",
        "/console/inbox",
        (Some(&cookie), HOST),
        None,
        &[],
    )
    .await;
    assert_eq!(
        (status, headers["location"].to_str().unwrap()),
        (StatusCode::SEE_OTHER, "/console/login")
    );
    let ended: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM refresh_families WHERE revoked_at IS NOT NULL")
            .fetch_one(adapters::storage::pool_for_tests(&app.store))
            .await
            .unwrap();
    assert_eq!(ended, 1, "the sign-in's family ended with it");
    assert_eq!(app.audited("user.logout").await.len(), 1);
    // A revoke-all through the API ends a console session at once.
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (status, _) = page_of(app, &cookie, "/console/inbox").await;
    assert_eq!(status, StatusCode::OK);
    let api = access(app, "alice@example.com").await;
    let Answer(status, _) = app.by(&api).post("/api/me/tokens/revoke-all").await;
    assert!(status.is_success());
    let (status, _) = page_of(app, &cookie, "/console/inbox").await;
    assert_eq!(status, StatusCode::SEE_OTHER);
}

async fn buttons_follow_the_gate_and_refusals_show_its_message(app: &TestApp) {
    let app = &app.beside(&[("QUOTA_TIER_DEVELOPER_SEATS", "-1")]).await;
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let carol_id = register(app, "carol@example.com").await;
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": carol_id, "role": "member"}))
        .await
        .expect(StatusCode::CREATED);
    let pipeline = app
        .by(&alice)
        .org(&acme)
        .post("/api/pipelines")
        .json(pipeline_as("pub-one", "public"))
        .await
        .id();
    let rule = app
        .by(&alice).org(&acme).post("/api/compliance/rules").json(json!({"name": "Private only", "target": "pipeline", "severity": "warning", "field": "accessModifier", "operator": "eq", "value": "private"}))
        .await.id();
    let exemption = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/exemptions")
        .json(json!({"ruleId": rule, "entityId": pipeline, "reason": "why not"}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    // Carol, a member, sees the request but no review button, and no scan button.
    let (cookie, _) = console_session(app, "carol@example.com", HOST, &[]).await;
    // Every page answers her, without what she may not read.
    for page in [
        "posture",
        "rules",
        "catalog",
        "exemptions",
        "inventory",
        "scans",
        "audit",
        "billing",
        "inbox",
    ] {
        let (status, text) = page_of(app, &cookie, &format!("/console/{page}")).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "{page}: {}",
            text.get(text.find("<main").unwrap_or(0)..)
                .unwrap_or("")
                .chars()
                .take(300)
                .collect::<String>()
        );
    }
    let (_, inventory) = page_of(app, &cookie, "/console/inventory").await;
    assert!(
        inventory.contains("id=\"withheld\"")
            && inventory.contains("the build queue, the dead letters"),
        "the queue is the admins'"
    );
    let (status, page) = page_of(app, &cookie, "/console/exemptions").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains(&exemption));
    assert!(
        !page.contains("value=\"approve\""),
        "no approve button for a member"
    );
    let carol = access(app, "carol@example.com").await;
    let Answer(api_status, api) = app
        .by(&carol)
        .org(&acme)
        .put(format!("/api/compliance/exemptions/{exemption}/review"))
        .json(json!({"decision": "approve"}))
        .await;
    assert_eq!(api_status, StatusCode::FORBIDDEN);
    // Forced anyway: the API's refusal, with its status and its words.
    let token = form_token(&page);
    let (status, page) = post_form(
        app,
        &cookie,
        "/console/exemptions",
        &[
            ("org", acme.as_str()),
            ("action", "approve"),
            ("id", exemption.as_str()),
            ("csrf", token.as_str()),
        ],
    )
    .await;
    assert_eq!(status, api_status);
    let message = api["message"].as_str().unwrap().replace('`', "&#96;");
    assert!(
        page.contains(&message) || page.contains(api["message"].as_str().unwrap()),
        "{page}"
    );
    let Answer(_, list) = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/exemptions")
        .await;
    assert_eq!(list["exemptions"][0]["status"], "requested");
    let (_, scans) = page_of(app, &cookie, "/console/scans").await;
    let Answer(scan_status, _) = app
        .by(&carol)
        .org(&acme)
        .post("/api/compliance/scans")
        .json(json!({"target": "pipeline"}))
        .await;
    assert_eq!(
        scans.contains("id=\"start-scan\""),
        scan_status == StatusCode::ACCEPTED
    );
    // Alice, the owner, sees the buttons (but not on her own request).
    let (alice_cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &alice_cookie, "/console/scans").await;
    assert!(page.contains("id=\"start-scan\""));
    let (_, page) = page_of(app, &alice_cookie, "/console/exemptions").await;
    assert!(page.contains("your own request") && !page.contains("value=\"approve\""));
}

async fn a_step_up_action_asks_for_the_password_again(app: &TestApp) {
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    adapters::services::accounts::provision(
        &state_of(app).infra.store,
        &state_of(app).config,
        &state_of(app).infra.passwords,
        (ROOT_EMAIL, PASSWORD.to_owned()),
        Utc::now(),
    )
    .await
    .unwrap();
    // Alice may not change a tier: no such form for her.
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &cookie, &format!("/console/billing?org={acme}")).await;
    assert!(!page.contains("id=\"change-tier\""));
    let (root, _) = console_session(app, ROOT_EMAIL, HOST, &[]).await;
    let (status, page) = page_of(app, &root, &format!("/console/billing?org={acme}")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("id=\"change-tier\""));
    let token = form_token(&page);
    let change = |password: &'static str| {
        [
            ("org", acme.clone()),
            ("action", "tier".to_owned()),
            ("tier", "team".to_owned()),
            ("password", password.to_owned()),
            ("csrf", token.clone()),
        ]
    };
    let fields = change("not the password");
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (status, page) = post_form(app, &root, "/console/billing", &fields).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a refusal shown, not a sign-out: {page}"
    );
    assert!(page.contains("id=\"error\""), "{page}");
    let tier = || async {
        app.by(&alice)
            .get(format!("/api/organization/{acme}"))
            .await
            .data::<Organization>()
            .tier
    };
    assert_eq!(tier().await, Tier::Developer);
    let fields = change(PASSWORD);
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (status, page) = post_form(app, &root, "/console/billing", &fields).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("the tier is now team"), "{page}");
    assert_eq!(tier().await, Tier::Team);
}

async fn the_policy_report_filters_by_status_and_rule(app: &TestApp) {
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let rule = app
        .by(&alice).org(&acme).post("/api/compliance/rules").json(json!({"name": "Named by convention", "target": "pipeline", "severity": "warning", "field": "pipelineName", "operator": "regex", "value": "^[a-z]+-[a-z]+$"}))
        .await.id();
    for name in ["web-app", "legacy1", "legacy2"] {
        app.by(&alice)
            .org(&acme)
            .post("/api/pipelines")
            .json(pipeline_as(name, "private"))
            .await
            .expect(StatusCode::CREATED);
    }
    let report = |query: String| {
        let alice = alice.clone();
        let acme = acme.clone();
        async move {
            app.by(&alice)
                .org(&acme)
                .get(format!(
                    "/api/compliance/posture/policy-report?target=pipeline{query}"
                ))
                .await
        }
    };
    let names = |report: &Value| -> Vec<String> {
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                format!(
                    "{}:{}",
                    r["resources"][0]["name"].as_str().unwrap(),
                    r["result"].as_str().unwrap()
                )
            })
            .collect()
    };
    let Answer(status, all) = report(String::new()).await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(
        names(&all),
        ["web-app:pass", "legacy1:warn", "legacy2:warn"]
    );
    let Answer(_, warned) = report("&status=warn".into()).await;
    assert_eq!(names(&warned), ["legacy1:warn", "legacy2:warn"]);
    assert_eq!(
        warned["metadata"]["annotations"]["compliance/page-total"],
        "2"
    );
    assert_eq!(
        warned["metadata"]["annotations"]["compliance/filter-status"],
        "warn"
    );
    assert_eq!(
        warned["summary"], all["summary"],
        "the summary stays over every entity"
    );
    let Answer(_, by_rule) = report(format!("&rule={rule}&limit=1&offset=1")).await;
    assert_eq!(names(&by_rule), ["legacy2:warn"]);
    assert_eq!(
        by_rule["metadata"]["annotations"]["compliance/filter-rule"],
        rule.as_str()
    );
    let Answer(_, none) = report("&status=block".into()).await;
    assert_eq!(names(&none), Vec::<String>::new());
    for (query, field) in [
        ("&status=failing", "status"),
        ("&status=", "status"),
        ("&rule=%00x", "NUL"),
        (&*format!("&rule={}", "r".repeat(201)), "rule"),
    ] {
        let Answer(status, body) = report(query.to_owned()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(code(status, &body), ErrorCode::ValidationError, "{query}");
        let text = body.to_string();
        assert!(text.contains(field), "{query}: {body}");
    }
}

/// Issue 51: an export holds every row of its filter (13 entities gave 10 rows, the
/// API's default page), the page names the person by e-mail, a posture page the
/// visitor may not read answers the API's refusal and status (never "0 entities"),
/// and the console's own requests to the API are in the request metrics.
async fn exports_are_whole_refusals_show_and_the_console_is_counted(app: &TestApp) {
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let small = app
        .beside(&[
            ("MAX_PAGE_LIMIT", "5"),
            ("QUOTA_TIER_DEVELOPER_PIPELINES", "-1"),
        ])
        .await;
    for i in 0..13 {
        small
            .by(&alice)
            .org(&acme)
            .post("/api/pipelines")
            .json(pipeline_as(&format!("app{i:02}"), "private"))
            .await
            .expect(StatusCode::CREATED);
    }
    let (cookie, _) = console_session(&small, "alice@example.com", HOST, &[]).await;
    let (status, csv) = page_of(
        &small,
        &cookie,
        &format!("/console/posture/export.csv?org={acme}&target=pipeline"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{csv}");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    let mut entities: Vec<&str> = rows.iter().filter_map(|r| r.split(',').nth(1)).collect();
    entities.dedup();
    assert_eq!(entities.len(), 13, "{csv}");
    let (status, json) = page_of(
        &small,
        &cookie,
        &format!("/console/posture/export.json?org={acme}&target=pipeline"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{json}");
    let report: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["results"].as_array().unwrap().len(), 13, "{report}");
    let annotations = &report["metadata"]["annotations"];
    assert_eq!(annotations["compliance/page-total"], "13");
    assert_eq!(annotations["compliance/page-offset"], "0");
    assert_eq!(annotations["compliance/page-limit"], "13");
    assert_eq!(report["kind"], "PolicyReport");

    // Named by e-mail, never by id (the address is not verified: no SMTP here).
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &cookie, &format!("/console/posture?org={acme}")).await;
    assert!(page.contains("Signed in as alice@example.com"), "{page}");

    // Another organization's posture: the API's refusal and status.
    let other = app.org("mallory", "other").await;
    let (status, page) = page_of(app, &cookie, &format!("/console/posture?org={other}")).await;
    assert!(
        status == StatusCode::FORBIDDEN || status == StatusCode::NOT_FOUND,
        "{status}: {page}"
    );
    assert!(!page.contains("0 entities"), "{page}");
    let (status, _) = page_of(
        app,
        &cookie,
        &format!("/console/posture/export.csv?org={other}&target=pipeline"),
    )
    .await;
    assert!(status == StatusCode::FORBIDDEN || status == StatusCode::NOT_FOUND);

    // The console's requests to the API are counted as the console's.
    let (_, metrics) = app
        .send(Request::get("/metrics").body(Body::empty()).unwrap())
        .await;
    let metrics = metrics.as_str().unwrap_or_default();
    assert!(
        metrics.contains(r#"http_requests_total{method="GET",route="console:/api/compliance/posture",status="200"}"#),
        "{metrics}"
    );
    small.stop().await;
}

async fn quotas_show_as_bars_and_an_add_on_is_previewed_before_purchase(app: &TestApp) {
    let app = &app
        .beside(&[
            ("BILLING_BUNDLES_ENABLED", "true"),
            ("QUOTA_TIER_DEVELOPER_SEATS", "-1"),
        ])
        .await;
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    super::billing::set_tier(app, &acme, "pro").await;
    for name in ["one-a", "two-b"] {
        app.by(&alice)
            .org(&acme)
            .post("/api/pipelines")
            .json(pipeline_as(name, "private"))
            .await
            .expect(StatusCode::CREATED);
    }
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (status, page) = page_of(app, &cookie, "/console/billing").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    // Every quota the API states, as a bar of its used against its limit.
    let quotas = app
        .by(&alice)
        .org(&acme)
        .get("/api/quotas")
        .await
        .data::<OrgQuotas>()
        .quotas;
    assert!(!quotas.is_empty());
    for (name, q) in &quotas {
        if q.limit < 0 {
            assert!(page.contains(&format!("data-quota=\"{name}\"")), "{name}");
            continue;
        }
        let bar = format!(
            "<meter id=\"m-{name}\" min=\"0\" max=\"{}\" value=\"{}\"",
            q.limit, q.used
        );
        assert!(page.contains(&bar), "{name}: {bar}");
    }
    assert_eq!(quotas["pipelines"].used, 2);
    // The purchase button shows only after the preview, which buys nothing.
    assert!(page.contains("aria-label=\"Preview SEAT_PACK\""));
    assert!(!page.contains("value=\"purchase\""));
    let token = form_token(&page);
    let seats = || async {
        app.by(&alice)
            .org(&acme)
            .get("/api/subscriptions/current")
            .await
            .data::<Subscription>()
            .addons
            .len()
    };
    let (status, page) = post_form(
        app,
        &cookie,
        "/console/billing",
        &[
            ("org", acme.as_str()),
            ("action", "preview"),
            ("bundleId", "SEAT_PACK"),
            ("csrf", token.as_str()),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        page.contains("with SEAT_PACK the limits would be: ") && page.contains("seats 6"),
        "{page}"
    );
    assert!(page.contains("aria-label=\"Purchase SEAT_PACK\""));
    assert_eq!(seats().await, 0, "a preview buys nothing");
    let (status, page) = post_form(
        app,
        &cookie,
        "/console/billing",
        &[
            ("org", acme.as_str()),
            ("action", "purchase"),
            ("bundleId", "SEAT_PACK"),
            ("csrf", token.as_str()),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("SEAT_PACK added"), "{page}");
    assert_eq!(seats().await, 1);
}

async fn announcements_are_dismissed_from_the_inbox(app: &TestApp) {
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let id = app
        .by(&alice)
        .org(&acme)
        .post("/api/messages/announcements")
        .json(json!({"title": "Maintenance <b>tonight</b>", "body": "From 22:00."}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &cookie, "/console/inbox").await;
    assert!(
        page.contains("Maintenance &#60;b&#62;tonight&#60;/b&#62;"),
        "escaped"
    );
    assert!(!page.contains("<b>tonight"));
    let token = form_token(&page);
    let (status, page) = post_form(
        app,
        &cookie,
        "/console/inbox",
        &[
            ("org", acme.as_str()),
            ("action", "dismiss"),
            ("id", id.as_str()),
            ("csrf", token.as_str()),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        page.contains(&format!("announcement {id} dismissed")),
        "{page}"
    );
    assert!(
        !page.contains("value=\"dismiss\""),
        "dismissed once: {page}"
    );
    let Answer(_, list) = app
        .by(&alice)
        .org(&acme)
        .get("/api/messages/announcements?includeDismissed=true")
        .await;
    assert!(!list["announcements"][0]["dismissedAt"].is_null(), "{list}");
}

async fn announcements_show_as_a_banner_on_every_page(app: &TestApp) {
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let post = |title: &'static str, dismissible: bool| {
        let (alice, acme) = (alice.clone(), acme.clone());
        async move {
            app.by(&alice)
                .org(&acme)
                .post("/api/messages/announcements")
                .json(
                    json!({"title": title, "body": "From 22:00.", "severity": "warning",
                                "dismissible": dismissible}),
                )
                .await
                .expect(StatusCode::CREATED)
                .id()
        }
    };
    let maintenance = post("Maintenance tonight", true).await;
    let pinned = post("Read the policy", false).await;
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    for path in [
        "/console/rules",
        "/console/people",
        "/console/account",
        "/console/audit",
    ] {
        let (status, page) = page_of(app, &cookie, path).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(
            page.contains(&format!("data-announcement=\"{maintenance}\"")),
            "{path}"
        );
        assert!(page.contains("Maintenance tonight") && page.contains("Read the policy"));
    }
    let (_, page) = page_of(app, &cookie, "/console/rules").await;
    let banner = |id: &str| {
        page.split(&format!("data-announcement=\"{id}\""))
            .nth(1)
            .and_then(|rest| rest.split("</section>").next())
            .unwrap()
            .to_owned()
    };
    assert!(banner(&maintenance).contains("value=\"dismiss\""));
    assert!(
        !banner(&pinned).contains("value=\"dismiss\""),
        "not dismissible"
    );
    assert!(
        banner(&maintenance).contains("class=\"announcement warning\"")
            || page.contains("class=\"announcement warning\"")
    );
    let token = form_token(&page);
    let (status, _) = post_form(
        app,
        &cookie,
        "/console/inbox",
        &[
            ("org", &acme),
            ("action", "dismiss"),
            ("id", &maintenance),
            ("csrf", &token),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, page) = page_of(app, &cookie, "/console/rules").await;
    assert!(
        !page.contains(&format!("data-announcement=\"{maintenance}\"")),
        "dismissed"
    );
    assert!(page.contains(&format!("data-announcement=\"{pinned}\"")));
    let Answer(_, list) = app
        .by(&alice)
        .org(&acme)
        .get("/api/messages/announcements")
        .await;
    assert_eq!(list["announcements"].as_array().unwrap().len(), 1, "{list}");
}

async fn a_feature_the_account_lacks_shows_no_control(app: &TestApp) {
    let app = &app.beside(&[("FEATURES_FOR_ALL_TIERS", "")]).await;
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let Answer(status, body) = app
        .by(&alice)
        .org(&acme)
        .get(format!("/api/audit?orgId={acme}"))
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "a Developer account has no audit trail: {body}"
    );
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (status, page) = page_of(app, &cookie, "/console/audit").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("id=\"no-trail\""));
    assert!(!page.contains("Refused:"), "not asked, so not refused");
}

async fn the_catalog_subscribes_activates_pins_and_previews(app: &TestApp) {
    let (system, root) = app.system().await;
    let rule = app
        .rule(
            &root,
            &system,
            json!({"name": "Private only", "target": "pipeline", "severity": "warning",
                   "field": "accessModifier", "operator": "eq", "value": "private",
                   "scope": "published"}),
        )
        .await;
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    for (name, modifier) in [("pub-one", "public"), ("web-app", "private")] {
        app.by(&alice)
            .org(&acme)
            .post("/api/pipelines")
            .json(pipeline_as(name, modifier))
            .await
            .expect(StatusCode::CREATED);
    }
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (status, page) = page_of(app, &cookie, "/console/catalog").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("not subscribed") && page.contains("value=\"subscribe\""));
    let token = form_token(&page);
    let act = |action: &'static str| {
        let (cookie, token, acme, rule) =
            (cookie.clone(), token.clone(), acme.clone(), rule.clone());
        async move {
            post_form(
                app,
                &cookie,
                "/console/catalog",
                &[
                    ("org", &acme),
                    ("action", action),
                    ("ruleId", &rule),
                    ("csrf", &token),
                ],
            )
            .await
        }
    };
    // The preview before enabling: the API's own figures.
    let impact: RuleImpact = app
        .by(&alice).org(&acme).post("/api/compliance/subscriptions/preview/impact").json(json!({"rule": {"name": "Private only", "target": "pipeline", "severity": "warning",
                                  "field": "accessModifier", "operator": "eq", "value": "private"}}))
        .await
        .data();
    let (status, page) = act("preview").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        page.contains(&format!(
            "impact of Private only: it would fail {} of {} pipeline entities",
            impact.failing, impact.evaluated
        )),
        "{impact:?}"
    );
    let subscription = || async {
        let Answer(_, list) = app
            .by(&alice)
            .org(&acme)
            .get("/api/compliance/subscriptions")
            .await;
        list["subscriptions"][0].clone()
    };
    assert!(
        subscription().await.is_null(),
        "a preview subscribes to nothing"
    );
    let (status, page) = act("subscribe").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains(&format!("subscribed to {rule}")));
    // As the API subscribes: inactive until activated.
    let inactive = subscription().await["isActive"].clone();
    assert!(page.contains(if inactive == true {
        "value=\"deactivate\""
    } else {
        "value=\"activate\""
    }));
    let (_, page) = act("activate").await;
    assert!(page.contains(&format!("{rule} activated")));
    assert_eq!(subscription().await["isActive"], true);
    assert!(page.contains("value=\"deactivate\""));
    let (_, page) = act("deactivate").await;
    assert!(page.contains(&format!("{rule} deactivated")));
    assert_eq!(subscription().await["isActive"], false);
    let (_, page) = act("pin").await;
    assert!(
        page.contains(&format!("{rule} pinned at version 1")),
        "{page}"
    );
    assert_eq!(subscription().await["pinnedVersion"], 1);
    assert!(page.contains("pinned at 1"));
    // Subscribed twice: the API's refusal, shown.
    let (status, page) = act("subscribe").await;
    assert!(status.is_client_error(), "{status}");
    assert!(page.contains("id=\"error\""));
}

/// Dashboards and alerts in the browser: a panel's points are the report's
/// buckets, the alert's state and its test answer show, the posture's trend is
/// drawn; no CSP violation.
async fn dashboards_and_alerts_draw_the_reports_numbers(app: &TestApp) {
    use super::alerts::{execution, ingest, ARN};
    let hook = Arc::new(super::notifications::Seen::default());
    let hook_url = super::notifications::webhook_receiver(hook.clone()).await;
    let app = &app.beside(&[("WEBHOOK_ALLOW_PRIVATE", "true")]).await;
    let violations_before = csp_violations(app).await;
    let (token, org) = owner(app, "dana@example.com", "delivery").await;
    let pipeline = app
        .by(&token)
        .org(&org)
        .post("/api/pipelines")
        .json(pipeline_as("web", "public"))
        .await
        .expect(StatusCode::CREATED)
        .id();
    app.by(&token)
        .org(&org)
        .post("/api/pipelines/registry")
        .json(json!({"arn": ARN, "pipelineId": pipeline}))
        .await
        .expect(StatusCode::OK);
    let now = Utc::now();
    let mut events = Vec::new();
    for (i, (hours_ago, state)) in [
        (30, "SUCCEEDED"),
        (29, "FAILED"),
        (5, "FAILED"),
        (4, "FAILED"),
        (3, "SUCCEEDED"),
    ]
    .iter()
    .enumerate()
    {
        events.extend(execution(
            &format!("e{i}"),
            now - chrono::Duration::hours(*hours_ago),
            40,
            state,
        ));
    }
    ingest(app, events).await;
    app
        .by(&token).org(&org).post("/api/dashboards").json(json!({"title": "Web delivery", "panels": [
            {"title": "Success rate", "kind": "timeseries", "report": "execution/success-rate", "params": {"granularity": "day"}, "position": {"x": 0, "y": 0, "w": 24, "h": 6}},
            {"title": "p95", "kind": "stat", "report": "execution/duration", "params": {}, "position": {"x": 0, "y": 6, "w": 8, "h": 3}},
            {"title": "Stage failures", "kind": "heatmap", "report": "execution/stage-failures", "params": {"granularity": "day"}, "position": {"x": 0, "y": 9, "w": 24, "h": 6}},
        ]}))
        .await.expect(StatusCode::CREATED);
    let dest = app
        .by(&token)
        .org(&org)
        .post("/api/alerts/destinations")
        .json(json!({"name": "hook", "kind": "webhook", "url": hook_url}))
        .await
        .id();
    app.by(&token)
        .org(&org)
        .post("/api/alerts/rules")
        .json(json!({
            "name": "web failing", "metric": "failure_rate", "params": {"pipelineId": pipeline},
            "comparison": "gt", "threshold": 0.5, "window": "1d", "destinations": [dest]}))
        .await
        .expect(StatusCode::CREATED);
    adapters::services::alerts::evaluate_due(
        &app.state.infra.store,
        &app.state.config,
        &app.state.infra.reporting,
        Utc::now(),
    )
    .await
    .unwrap();
    adapters::services::posture::snapshot(
        &app.state.infra.store,
        &org,
        "hourly",
        now - chrono::Duration::days(1),
    )
    .await
    .unwrap();

    let base = serve(app.router.clone()).await;
    let b = browser().await;
    b.sign_in(&base, "dana@example.com").await;
    b.open(&format!("{base}/console/dashboards?org={org}&range=week"))
        .await;
    assert_eq!(b.text("#dashboard-title").await, "Web delivery");
    // The chart's points are the report's buckets that have a rate.
    let points = b
        .client
        .find_all(Locator::Css("#panel-0 circle.point"))
        .await
        .unwrap();
    let mut drawn = Vec::new();
    for p in points {
        let start = p.attr("data-start").await.unwrap().unwrap();
        let value: f64 = p
            .attr("data-value")
            .await
            .unwrap()
            .unwrap()
            .parse()
            .unwrap();
        drawn.push((start, value));
    }
    let to = Utc::now();
    let report: SuccessRateReport = app
        .by(&token)
        .org(&org)
        .get(format!(
            "/api/reports/execution/success-rate?granularity=day&from={}&to={}",
            (to - chrono::Duration::days(7)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            to.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ))
        .await
        .data();
    let expected: Vec<(String, f64)> = report
        .series
        .iter()
        .filter_map(|b| {
            b.rate.rate.map(|rate| {
                (
                    b.start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    rate,
                )
            })
        })
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(drawn, expected);
    assert!(b.text("#panel-0 figcaption").await.contains("UTC"));
    // One heat map row (the Build stage failed), a cell per day of the range.
    assert_eq!(b.count("#panel-2 rect.heat").await, 8);
    let failed_days: std::collections::BTreeSet<_> = [29, 5, 4]
        .iter()
        .map(|h| (now - chrono::Duration::hours(*h)).date_naive())
        .collect();
    assert_eq!(
        b.count("#panel-2 rect.heat:not([data-value='0'])").await,
        failed_days.len()
    );
    b.shot("dashboards").await;

    b.open(&format!("{base}/console/alerts?org={org}")).await;
    assert_eq!(b.text("#alert-rules td.state").await, "firing");
    assert!(b.text("#firing").await.contains("web failing"));
    b.click("#alert-destinations button").await;
    assert!(b.lands_on("/console/alerts").await);
    let notice = b.text(".notice").await;
    assert!(
        notice.contains("test sent") && notice.contains("sent (200"),
        "{notice}"
    );
    assert_eq!(hook.requests.lock().unwrap().len(), 1);
    b.shot("alerts").await;

    b.open(&format!("{base}/console/posture?org={org}")).await;
    assert_eq!(b.count("#posture-trend circle.point.s1").await, 1);
    b.shot("posture-trend").await;
    assert_eq!(csp_violations(app).await, violations_before);
}

on_both_backends!(
    dashboards_and_alerts_draw_the_reports_numbers,
    exports_are_whole_refusals_show_and_the_console_is_counted,
    the_console_in_a_real_browser,
    every_console_answer_carries_its_headers,
    the_session_cookie_is_opaque_hashed_and_strict,
    forms_without_this_pages_token_or_origin_change_nothing,
    signing_out_or_revoking_ends_the_console_session,
    buttons_follow_the_gate_and_refusals_show_its_message,
    a_step_up_action_asks_for_the_password_again,
    the_policy_report_filters_by_status_and_rule,
    quotas_show_as_bars_and_an_add_on_is_previewed_before_purchase,
    announcements_are_dismissed_from_the_inbox,
    announcements_show_as_a_banner_on_every_page,
    a_feature_the_account_lacks_shows_no_control,
    the_catalog_subscribes_activates_pins_and_previews,
);
