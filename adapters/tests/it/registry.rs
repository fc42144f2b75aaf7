//! The image registry's copy and delete against a real registry: Debian's
//! `docker-registry` (distribution 2.8), started here on loopback with a temporary
//! storage root and a random port, seeded through the server's own client. A small
//! HTTP double in front of it makes the cases a healthy registry does not show: a
//! registry that answers mounts with upload sessions, one that serves a manifest
//! whose bytes do not match its digest, one that stops in the middle of a copy, and
//! bearer-token authentication.

use crate::api::Answer;
use adapters::http::wire::{ImageCopy, ImageDelete, MountedCount};
use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use adapters::outbound::registry::{RegistryClient, RegistrySettings};
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Request, StatusCode};
use axum::response::Response;
use base64::Engine as _;
use oci::{Digest, MediaType, Repository, Target};
use serde_json::{json, Value};

use super::*;
use adapters::code::ErrorCode;

/// `tester` / `registry-secret`, as htpasswd holds it (bcrypt, cost 5).
const HTPASSWD: &str = "tester:$2b$05$ubZY1cAcDj6BElaOQJtydeL8zySAW6jh7GWfQzWz29xzHC4qHTgtm\n";
const USER: &str = "tester";
const PASSWORD: &str = "registry-secret";

/// A `docker-registry` process on a random loopback port, killed when dropped.
pub struct Registry {
    child: Arc<Mutex<Child>>,
    pub url: String,
    pub root: std::path::PathBuf,
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Registry {
    /// Starts a registry: deletes allowed or not, basic authentication or none.
    pub async fn start(deletes: bool, basic_auth: bool) -> Registry {
        let root = std::env::temp_dir().join(format!("registry-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(root.join("data")).unwrap();
        let port = crash::free_port();
        let auth = if basic_auth {
            std::fs::write(root.join("htpasswd"), HTPASSWD).unwrap();
            format!(
                "auth:\n  htpasswd:\n    realm: test-realm\n    path: {}\n",
                root.join("htpasswd").display()
            )
        } else {
            String::new()
        };
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: {deletes}\nhttp:\n  addr: 127.0.0.1:{port}\n  relativeurls: true\n{auth}",
            root.join("data").display()
        );
        std::fs::write(root.join("config.yml"), config).unwrap();
        let binary = which("docker-registry").unwrap_or_else(|| {
            panic!("docker-registry is not installed: scripts/test installs Debian's docker-registry package (apt-get install docker-registry)")
        });
        let child = Command::new(binary)
            .arg("serve")
            .arg(root.join("config.yml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let registry = Registry {
            child: Arc::new(Mutex::new(child)),
            url: format!("http://127.0.0.1:{port}"),
            root,
        };
        let client = reqwest::Client::new();
        for _ in 0..200 {
            if let Ok(answer) = client.get(format!("{}/v2/", registry.url)).send().await {
                if answer.status() == 200 || answer.status() == 401 {
                    return registry;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("docker-registry did not answer on {}", registry.url);
    }

    pub fn stop(&self) {
        let mut child = self.child.lock().unwrap();
        let _ = child.kill();
        let _ = child.wait();
    }

    /// A client of it, as the server builds one.
    pub fn client(&self, credentials: bool) -> RegistryClient {
        client_of(&self.url, credentials)
    }

    /// Upload sessions left open in `repository`: those with their `startedat`
    /// (a cancelled session loses it and its data; distribution keeps an empty hash
    /// state until it purges old uploads).
    pub fn open_uploads(&self, repository: &str) -> usize {
        let dir = self
            .root
            .join("data/docker/registry/v2/repositories")
            .join(repository)
            .join("_uploads");
        std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|session| session.path().join("startedat").exists())
                    .count()
            })
            .unwrap_or(0)
    }
}

fn which(binary: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(binary))
            .find(|p| p.is_file())
    })
}

fn client_of(url: &str, credentials: bool) -> RegistryClient {
    RegistryClient::new(&RegistrySettings {
        url: url.to_owned(),
        username: credentials.then(|| USER.to_owned()),
        password: credentials.then(|| adapters::config::Secret::new(PASSWORD)),
    })
    .unwrap()
}

fn repo(name: &str) -> Repository {
    Repository::parse(name).unwrap()
}

fn tag(name: &str) -> Target {
    Target::parse(name).unwrap()
}

/// A seeded image: its manifest's digest and its blobs.
pub struct Seeded {
    pub digest: Digest,
    pub blobs: HashSet<Digest>,
    pub children: Vec<Digest>,
}

/// Pushes an image manifest (and its blobs) into `repository` under `target`.
async fn seed_image(
    client: &RegistryClient,
    repository: &str,
    target: Option<&str>,
    media_type: MediaType,
    config: &[u8],
    layers: &[&[u8]],
) -> Seeded {
    let repository = repo(repository);
    let (config_type, layer_type) = match media_type {
        MediaType::DockerManifest => (
            "application/vnd.docker.container.image.v1+json",
            "application/vnd.docker.image.rootfs.diff.tar.gzip",
        ),
        _ => (
            "application/vnd.oci.image.config.v1+json",
            "application/vnd.oci.image.layer.v1.tar+gzip",
        ),
    };
    let mut blobs = HashSet::new();
    let config_digest = client.push_blob(&repository, config).await.unwrap();
    blobs.insert(config_digest.clone());
    let mut layer_descriptors = Vec::new();
    for layer in layers {
        let digest = client.push_blob(&repository, layer).await.unwrap();
        blobs.insert(digest.clone());
        layer_descriptors
            .push(json!({"mediaType": layer_type, "digest": digest.as_str(), "size": layer.len()}));
    }
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": media_type.as_str(),
        "config": {"mediaType": config_type, "digest": config_digest.as_str(), "size": config.len()},
        "layers": layer_descriptors,
    });
    let bytes = serde_json::to_vec_pretty(&manifest).unwrap();
    let digest = Digest::sha256_of(&bytes);
    let target = target.map_or_else(|| Target::Digest(digest.clone()), tag);
    let put = client
        .put_manifest(&repository, &target, media_type, &bytes)
        .await
        .unwrap();
    assert_eq!(put, digest);
    Seeded {
        digest,
        blobs,
        children: Vec::new(),
    }
}

/// A two-platform OCI image index whose platforms share one layer.
async fn seed_index(client: &RegistryClient, repository: &str, at: &str) -> Seeded {
    let shared: &[u8] = b"shared base layer";
    let amd = seed_image(
        client,
        repository,
        None,
        MediaType::OciManifest,
        br#"{"architecture":"amd64","os":"linux"}"#,
        &[shared, b"amd64 layer"],
    )
    .await;
    let arm = seed_image(
        client,
        repository,
        None,
        MediaType::OciManifest,
        br#"{"architecture":"arm64","os":"linux"}"#,
        &[shared, b"arm64 layer"],
    )
    .await;
    let child = |s: &Seeded, arch: &str| {
        json!({"mediaType": MediaType::OciManifest.as_str(), "digest": s.digest.as_str(), "size": 1,
               "platform": {"architecture": arch, "os": "linux"}})
    };
    let index = json!({
        "schemaVersion": 2,
        "mediaType": MediaType::OciIndex.as_str(),
        "manifests": [child(&amd, "amd64"), child(&arm, "arm64")],
    });
    let bytes = serde_json::to_vec(&index).unwrap();
    let digest = client
        .put_manifest(&repo(repository), &tag(at), MediaType::OciIndex, &bytes)
        .await
        .unwrap();
    Seeded {
        digest,
        blobs: amd.blobs.union(&arm.blobs).cloned().collect(),
        children: vec![amd.digest, arm.digest],
    }
}

/// The system organization (root is its super-admin) and `org-a` (alice owns it).
async fn organizations(app: &TestApp) -> (String, String) {
    let system = app.org("root", "system").await;
    let org_a = app.org("alice", "org-a").await;
    (system, org_a)
}

fn root(app: &TestApp) -> String {
    app.token("root", ROOT_EMAIL)
}

async fn copy(app: &TestApp, token: &str, source: &str, target: &str) -> Answer {
    app.by(token)
        .post("/api/images/copy")
        .json(json!({"source": source, "target": target}))
        .await
}

/// What a copy answers it put: `manifests` manifests, `blobs` blobs.
fn mounted(manifests: u64, blobs: u64) -> MountedCount {
    MountedCount { manifests, blobs }
}

async fn chained(app: &TestApp, action: &str) -> Vec<(String, Value)> {
    app.audited(action)
        .await
        .into_iter()
        .map(|e| (e.chain_key.clone(), e.details.clone()))
        .collect()
}

async fn an_index_is_copied_bottom_up_and_chained_in_both_organizations(app: &TestApp) {
    let registry = Registry::start(true, false).await;
    let client = registry.client(false);
    let seeded = seed_index(&client, "org-a/plugin", "1.0.0").await;
    assert_eq!(
        seeded.blobs.len(),
        5,
        "two configs, two own layers, one shared"
    );
    let (system, org_a) = organizations(app).await;
    let served = app.beside(&[("REGISTRY_URL", registry.url.as_str())]).await;

    let copied: ImageCopy = copy(
        &served,
        &root(app),
        "org-a/plugin:1.0.0",
        "system/plugin:1.0.0",
    )
    .await
    .expect(StatusCode::OK)
    .data();
    assert_eq!(
        (copied.event.as_str(), copied.actor.as_str()),
        ("registry.tag.copy", "root")
    );
    assert_eq!(copied.source_digest, seeded.digest.as_str());
    assert_eq!(copied.target_digest, seeded.digest.as_str());
    assert!(copied.is_promotion_to_system);
    assert_eq!(copied.mounted, mounted(3, 5));

    // The target holds the same index, its children and every blob.
    let target = repo("system/plugin");
    assert_eq!(
        client
            .manifest_digest(&target, &tag("1.0.0"))
            .await
            .unwrap(),
        Some(seeded.digest.clone())
    );
    for child in &seeded.children {
        let fetched = client
            .manifest(&target, &Target::Digest(child.clone()))
            .await
            .unwrap();
        assert_eq!(&fetched.digest, child);
    }
    for blob in &seeded.blobs {
        assert!(client.has_blob(&target, blob).await.unwrap(), "{blob}");
    }
    assert_eq!(registry.open_uploads("system/plugin"), 0);

    // Once in the system organization's chain, once in org-a's: identifiers only.
    let events = chained(app, "registry.tag.copy").await;
    let orgs: HashSet<&str> = events.iter().map(|(org, _)| org.as_str()).collect();
    assert_eq!(
        orgs,
        HashSet::from([system.as_str(), org_a.as_str()]),
        "{events:?}"
    );
    for (_, details) in &events {
        assert_eq!(details["mounted"], json!({"manifests": 3, "blobs": 5}));
        assert_eq!(details["source"], "org-a/plugin:1.0.0");
        assert_eq!(details["isPromotionToSystem"], true);
    }

    // Copied again under another tag: nothing is missing but the tag itself.
    let copied: ImageCopy = copy(
        &served,
        &root(app),
        "org-a/plugin:1.0.0",
        "system/plugin:stable",
    )
    .await
    .expect(StatusCode::OK)
    .data();
    assert_eq!(copied.mounted, mounted(1, 0));
    served.stop().await;
}

async fn a_docker_manifest_and_a_partly_filled_target_copy_only_what_is_missing(app: &TestApp) {
    let registry = Registry::start(true, false).await;
    let client = registry.client(false);
    let seeded = seed_image(
        &client,
        "org-a/tool",
        Some("2.0"),
        MediaType::DockerManifest,
        br#"{"architecture":"amd64"}"#,
        &[b"docker layer one", b"docker layer two"],
    )
    .await;
    let (_, org_a) = organizations(app).await;
    let served = app.beside(&[("REGISTRY_URL", registry.url.as_str())]).await;
    let copied: ImageCopy = copy(&served, &root(app), "org-a/tool:2.0", "org-a/tool-copy:2.0")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(copied.mounted, mounted(1, 3));
    assert!(!copied.is_promotion_to_system);
    let fetched = client
        .manifest(&repo("org-a/tool-copy"), &tag("2.0"))
        .await
        .unwrap();
    assert_eq!(fetched.digest, seeded.digest);
    assert_eq!(fetched.manifest.media_type(), MediaType::DockerManifest);
    // One organization: one event in its chain.
    let events = chained(app, "registry.tag.copy").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].0, org_a);

    // A target that already holds two of the five blobs of an index gets three.
    let index = seed_index(&client, "org-a/partial", "1").await;
    let target = repo("system/partial");
    client
        .push_blob(&target, b"shared base layer")
        .await
        .unwrap();
    client.push_blob(&target, b"amd64 layer").await.unwrap();
    let copied: ImageCopy = copy(&served, &root(app), "org-a/partial:1", "system/partial:1")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(copied.mounted, mounted(3, 3));
    for blob in &index.blobs {
        assert!(client.has_blob(&target, blob).await.unwrap());
    }
    // A copy by digest: the target digest is the source's.
    let by_digest = format!("org-a/partial@{}", index.digest);
    let copied: ImageCopy = copy(&served, &root(app), &by_digest, "org-a/pinned:1")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(copied.source, format!("org-a/partial:{}", index.digest));
    assert_eq!(copied.target_digest, index.digest.as_str());
    served.stop().await;
}

async fn delete_by_tag_and_by_digest_and_a_shared_digest_only_when_forced(app: &TestApp) {
    let registry = Registry::start(true, false).await;
    let client = registry.client(false);
    let one = seed_image(
        &client,
        "org-a/app",
        Some("1"),
        MediaType::OciManifest,
        b"{\"v\":1}",
        &[b"l1"],
    )
    .await;
    let two = seed_image(
        &client,
        "org-a/app",
        Some("2"),
        MediaType::OciManifest,
        b"{\"v\":2}",
        &[b"l2"],
    )
    .await;
    // `latest` names the same manifest as `2`.
    let fetched = client
        .manifest(&repo("org-a/app"), &tag("2"))
        .await
        .unwrap();
    client
        .put_manifest(
            &repo("org-a/app"),
            &tag("latest"),
            MediaType::OciManifest,
            &fetched.bytes,
        )
        .await
        .unwrap();
    let (_, org_a) = organizations(app).await;
    let served = app.beside(&[("REGISTRY_URL", registry.url.as_str())]).await;
    let token = root(app);

    // A tag of its own: deleted by its digest.
    let deleted: ImageDelete = served
        .by(&token)
        .delete("/api/images/org-a/app/manifests/1")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(
        (
            deleted.event.as_str(),
            deleted.actor.as_str(),
            deleted.repo.as_str(),
            deleted.reference.as_str(),
            deleted.digest.as_str()
        ),
        (
            "registry.tag.delete",
            "root",
            "org-a/app",
            "1",
            one.digest.as_str()
        )
    );
    assert_eq!(
        client
            .manifest_digest(&repo("org-a/app"), &tag("1"))
            .await
            .unwrap(),
        None
    );

    // A tag another tag shares: refused, naming it, and nothing is deleted.
    let Answer(status, body) = served
        .by(&token)
        .delete("/api/images/org-a/app/manifests/2")
        .await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::CONFLICT, ErrorCode::TagShared),
        "{body}"
    );
    assert_eq!(body["details"]["tags"], json!(["latest"]));
    assert_eq!(body["details"]["digest"], two.digest.as_str());
    let path = format!("/api/images/org-a/app/manifests/{}", two.digest);
    let Answer(status, body) = served.by(&token).delete(&path).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "by digest, two tags name it: {body}"
    );
    assert_eq!(body["details"]["tags"], json!(["2", "latest"]));
    assert_eq!(
        client
            .manifest_digest(&repo("org-a/app"), &tag("latest"))
            .await
            .unwrap(),
        Some(two.digest.clone())
    );

    // Forced: by digest, and both tags are gone.
    let deleted: ImageDelete = served
        .by(&token)
        .delete(format!("{path}?force=true"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(deleted.reference, two.digest.as_str());
    for gone in ["2", "latest"] {
        assert_eq!(
            client
                .manifest_digest(&repo("org-a/app"), &tag(gone))
                .await
                .unwrap(),
            None
        );
    }
    // Absent now: 404, and nothing more recorded.
    served
        .by(&token)
        .delete("/api/images/org-a/app/manifests/latest")
        .await
        .expect(StatusCode::NOT_FOUND);
    let events = chained(app, "registry.tag.delete").await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events.iter().all(|(org, _)| org == &org_a));
    assert_eq!(events[1].1["force"], true);
    served.stop().await;
}

async fn refusals_and_failures_answer_their_codes_and_record_nothing(app: &TestApp) {
    let (system, _) = organizations(app).await;
    let token = root(app);

    // No registry configured.
    let Answer(status, body) = copy(app, &token, "org-a/plugin:1", "system/plugin:1").await;
    assert_eq!(
        (status, code(status, &body)),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::RegistryNotConfigured
        )
    );

    // Bad input, named; before any call to the registry.
    for (source, target, field) in [
        ("Org-A/plugin:1", "system/plugin:1", "source"),
        ("org-a/plugin", "system/plugin:1", "source"),
        ("org-a/plugin:1", "system/plugin:-1", "target"),
        ("org-a/plugin:1", "127.0.0.1:5000/plugin:1", "target"),
        ("org-a/plugin:1", "org-a/plugin:1", "target"),
    ] {
        let Answer(status, body) = copy(app, &token, source, target).await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{source} -> {target}: {body}"
        );
        assert_eq!(body["details"]["field"], field, "{body}");
    }
    // A NUL anywhere in a body is refused before it is read.
    let Answer(status, body) = copy(app, &token, "org-a/plugin:1\u{0}", "system/plugin:1").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    app.by(&token)
        .post("/api/images/copy")
        .json(json!({"source": "a:1"}))
        .await
        .expect(StatusCode::BAD_REQUEST);
    for (path, field) in [
        ("/api/images/Org/app/manifests/1", "name"),
        ("/api/images/org-a/app/manifests/sha256:xyz", "reference"),
        ("/api/images/org-a/app/tags/1", "name"),
    ] {
        let Answer(status, body) = app.by(&token).delete(path).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert_eq!(body["details"]["field"], field, "{body}");
    }

    // A registry that is not there: 503, quickly.
    let nowhere = format!("http://127.0.0.1:{}", crash::free_port());
    let served = app.beside(&[("REGISTRY_URL", nowhere.as_str())]).await;
    let Answer(status, body) = copy(&served, &token, "org-a/plugin:1", "system/plugin:1").await;
    assert_eq!(
        (status, code(status, &body)),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::RegistryUnavailable
        ),
        "{body}"
    );
    served.stop().await;

    // A registry that does not allow deletes: 409 with our code, the manifest stays.
    let registry = Registry::start(false, false).await;
    let client = registry.client(false);
    let seeded = seed_image(
        &client,
        "org-a/kept",
        Some("1"),
        MediaType::OciManifest,
        b"{}",
        &[b"k"],
    )
    .await;
    let served = app.beside(&[("REGISTRY_URL", registry.url.as_str())]).await;
    let Answer(status, body) = served
        .by(&token)
        .delete("/api/images/org-a/kept/manifests/1")
        .await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::CONFLICT, ErrorCode::RegistryDeleteDisabled),
        "{body}"
    );
    assert_eq!(
        client
            .manifest_digest(&repo("org-a/kept"), &tag("1"))
            .await
            .unwrap(),
        Some(seeded.digest)
    );
    // A source that does not exist: 404.
    let Answer(status, body) = copy(&served, &token, "org-a/missing:1", "system/missing:1").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");

    // Not a super-admin (an organization's owner, the system organization's own
    // member without the Super Admin role): 403, audited as authz.denied there.
    let alice = app.token("alice", "alice@example.com");
    let Answer(status, body) = copy(&served, &alice, "org-a/kept:1", "system/kept:1").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["details"]["missing"], "registry:write");
    served
        .by(&alice)
        .delete("/api/images/org-a/kept/manifests/1")
        .await
        .expect(StatusCode::FORBIDDEN);
    let denied = chained(app, "authz.denied").await;
    assert!(
        denied.iter().any(|(org, _)| org == &system),
        "denied in the system organization's chain: {denied:?}"
    );
    let endpoints: Vec<String> = app
        .audited("authz.denied")
        .await
        .into_iter()
        .filter_map(|e| e.target_id.clone())
        .collect();
    assert!(
        endpoints.iter().any(|t| t == "POST /api/images/copy"),
        "{endpoints:?}"
    );
    assert!(chained(app, "registry.tag.copy").await.is_empty());
    assert!(chained(app, "registry.tag.delete").await.is_empty());
    served.stop().await;
}

/// A copy whose audit write fails after the registry changed (the outbox refuses
/// its insert) answers an error with the registry changed, and the event is not
/// lost: its intent, written before the registry was touched, is recorded once the
/// registry shows the copy. A copy that succeeds leaves no intent behind.
async fn a_completed_copy_is_always_audited(app: &TestApp) {
    let registry = Registry::start(true, false).await;
    let seeded = seed_index(&registry.client(false), "org-a/plugin", "1.0.0").await;
    let (_, org_a) = organizations(app).await;
    let served = app.beside(&[("REGISTRY_URL", registry.url.as_str())]).await;
    copy(
        &served,
        &root(app),
        "org-a/plugin:1.0.0",
        "system/plugin:1.0.0",
    )
    .await
    .expect(StatusCode::OK);
    let intents: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM registry_intents")
        .fetch_one(adapters::storage::pool_for_tests(&app.store))
        .await
        .unwrap();
    assert_eq!(intents, 0, "a settled copy leaves no intent");
    let before = chained(app, "registry.tag.copy").await.len();

    // The outbox refuses inserts (as a database that fails mid-request would).
    let postgres = sqlx::query("SELECT pg_backend_pid()")
        .execute(adapters::storage::pool_for_tests(&app.store))
        .await
        .is_ok();
    if postgres {
        app.sql("CREATE FUNCTION outbox_down() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'the outbox is down'; END $$ LANGUAGE plpgsql").await;
        app.sql("CREATE TRIGGER outbox_down BEFORE INSERT ON audit_outbox FOR EACH ROW EXECUTE FUNCTION outbox_down()").await;
    } else {
        app.sql("CREATE TRIGGER outbox_down BEFORE INSERT ON audit_outbox BEGIN SELECT RAISE(ABORT, 'the outbox is down'); END").await;
    }
    let Answer(status, body) = copy(
        &served,
        &root(app),
        "org-a/plugin:1.0.0",
        "org-a/plugin:copied",
    )
    .await;
    assert!(status.is_server_error(), "{status}: {body}");
    // The registry changed.
    let made = registry
        .client(false)
        .manifest_digest(&repo("org-a/plugin"), &tag("copied"))
        .await
        .unwrap();
    assert_eq!(made, Some(seeded.digest.clone()));
    if postgres {
        app.sql("DROP TRIGGER outbox_down ON audit_outbox").await;
    } else {
        app.sql("DROP TRIGGER outbox_down").await;
    }
    // The registry worker's pass (past its grace) records it.
    let state = adapters::http::AppState::new(
        test_config(&[("REGISTRY_URL", registry.url.as_str())]),
        app.store.clone(),
        Arc::new(adapters::audit::AuditCounters::default()),
    );
    let recorded = adapters::services::images::settle_stale_intents(
        &state.infra.store,
        &state.outbound.registry,
        Utc::now() + chrono::Duration::seconds(1),
    )
    .await
    .unwrap();
    assert_eq!(recorded, 1);
    let events = chained(app, "registry.tag.copy").await;
    assert_eq!(events.len(), before + 1, "{events:?}");
    let (chain, details) = events.last().unwrap();
    assert_eq!(chain, &org_a);
    assert_eq!(details["target"], "org-a/plugin:copied");
    assert_eq!(details["recovered"], true);
    // A second pass records nothing more.
    let again = adapters::services::images::settle_stale_intents(
        &state.infra.store,
        &state.outbound.registry,
        Utc::now() + chrono::Duration::seconds(1),
    )
    .await
    .unwrap();
    assert_eq!(again, 0);
    served.stop().await;
}

on_both_backends!(
    a_completed_copy_is_always_audited,
    an_index_is_copied_bottom_up_and_chained_in_both_organizations,
    a_docker_manifest_and_a_partly_filled_target_copy_only_what_is_missing,
    delete_by_tag_and_by_digest_and_a_shared_digest_only_when_forced,
    refusals_and_failures_answer_their_codes_and_record_nothing,
);

// ---- The double in front of the registry.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Mounts are refused (the registry answers with an upload session).
    NoMount,
    /// Mounts are refused, and blobs are served with their first byte changed.
    NoMountCorruptBlobs,
    /// Manifests are served with one byte more than their digest covers.
    Tamper,
    /// The registry is stopped when the first manifest is put (a proxy answers 502).
    StopAtManifestPut,
    /// Bearer tokens from a token endpoint, given for basic credentials.
    Bearer,
}

struct ProxyState {
    upstream: String,
    mode: Mode,
    registry: Arc<Mutex<Child>>,
    own: String,
    http: reqwest::Client,
}

async fn proxy(registry: &Registry, mode: Mode) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let own = format!("http://{}", listener.local_addr().unwrap());
    let state = Arc::new(ProxyState {
        upstream: registry.url.clone(),
        mode,
        registry: registry.child.clone(),
        own: own.clone(),
        http: reqwest::Client::new(),
    });
    let app = axum::Router::new().fallback(forward).with_state(state);
    tokio::spawn(async move { axum::serve(listener, app).await });
    own
}

const TOKEN: &str = "t0k3n";

async fn forward(State(proxy): State<Arc<ProxyState>>, request: Request<Body>) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let path = parts.uri.path().to_owned();
    let method = parts.method.clone();
    let authorization = parts
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if proxy.mode == Mode::Bearer {
        if path == "/token" {
            let basic =
                base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
            let query = parts.uri.query().unwrap_or_default();
            return if authorization == format!("Basic {basic}")
                && query.contains("service=double")
                && query.contains("scope=")
            {
                Response::new(Body::from(
                    json!({"token": TOKEN, "expires_in": 300}).to_string(),
                ))
            } else {
                status_only(StatusCode::UNAUTHORIZED)
            };
        }
        if authorization != format!("Bearer {TOKEN}") {
            let mut answer = status_only(StatusCode::UNAUTHORIZED);
            let challenge = format!(
                r#"Bearer realm="{}/token",service="double",scope="repository:any:pull""#,
                proxy.own
            );
            answer
                .headers_mut()
                .insert("www-authenticate", challenge.parse().unwrap());
            return answer;
        }
    }
    let mut url = reqwest::Url::parse(&format!("{}{}", proxy.upstream, path)).unwrap();
    let pairs: Vec<(String, String)> = reqwest::Url::parse(&format!("http://x{}", parts.uri))
        .unwrap()
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .filter(|(k, _)| {
            let no_mount = matches!(proxy.mode, Mode::NoMount | Mode::NoMountCorruptBlobs);
            !(no_mount && (k == "mount" || k == "from"))
        })
        .collect();
    if !pairs.is_empty() {
        url.query_pairs_mut().extend_pairs(pairs);
    }
    if proxy.mode == Mode::StopAtManifestPut && method == "PUT" && path.contains("/manifests/") {
        let mut child = proxy.registry.lock().unwrap();
        let _ = child.kill();
        let _ = child.wait();
    }
    let mut upstream = proxy.http.request(method.clone(), url);
    for (name, value) in &parts.headers {
        if !["host", "authorization", "content-length"].contains(&name.as_str()) {
            upstream = upstream.header(name, value);
        }
    }
    let answer = match upstream.body(bytes.to_vec()).send().await {
        Ok(answer) => answer,
        // What a reverse proxy answers for a registry that is gone.
        Err(_) => return status_only(StatusCode::BAD_GATEWAY),
    };
    let status = answer.status();
    let headers: HeaderMap = answer.headers().clone();
    let mut body = answer.bytes().await.unwrap().to_vec();
    let tamper = proxy.mode == Mode::Tamper && method == "GET" && path.contains("/manifests/");
    if tamper {
        body.push(b' ');
    }
    let corrupt = proxy.mode == Mode::NoMountCorruptBlobs
        && method == "GET"
        && path.contains("/blobs/sha256:");
    if let (true, Some(first)) = (corrupt, body.first_mut()) {
        *first ^= 0xff;
    }
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    for (name, value) in &headers {
        let computed = name == "content-length" && method != "HEAD";
        if !computed && name != "transfer-encoding" && name != "connection" {
            response.headers_mut().insert(name, value.clone());
        }
    }
    response
}

fn status_only(status: StatusCode) -> Response {
    let mut answer = Response::new(Body::empty());
    *answer.status_mut() = status;
    answer
}

#[tokio::test]
async fn a_registry_that_will_not_mount_gets_the_bytes_uploaded_and_no_session_left_open() {
    let app = TestApp::sqlite().await;
    let registry = Registry::start(true, false).await;
    let client = registry.client(false);
    let seeded = seed_index(&client, "org-a/plugin", "1.0.0").await;
    organizations(&app).await;
    let double = proxy(&registry, Mode::NoMount).await;
    let served = app.beside(&[("REGISTRY_URL", double.as_str())]).await;
    let copied: ImageCopy = copy(
        &served,
        &root(&app),
        "org-a/plugin:1.0.0",
        "system/plugin:1.0.0",
    )
    .await
    .expect(StatusCode::OK)
    .data();
    assert_eq!(copied.mounted, mounted(3, 5));
    for blob in &seeded.blobs {
        assert!(client.has_blob(&repo("system/plugin"), blob).await.unwrap());
    }
    assert_eq!(
        registry.open_uploads("system/plugin"),
        0,
        "every session completed"
    );
    served.stop().await;
    app.finish().await;
}

#[tokio::test]
async fn a_blob_whose_bytes_do_not_match_is_refused_and_its_upload_session_cancelled() {
    let app = TestApp::sqlite().await;
    let registry = Registry::start(true, false).await;
    let client = registry.client(false);
    seed_index(&client, "org-a/plugin", "1.0.0").await;
    organizations(&app).await;
    let double = proxy(&registry, Mode::NoMountCorruptBlobs).await;
    let served = app.beside(&[("REGISTRY_URL", double.as_str())]).await;
    let Answer(status, body) = copy(
        &served,
        &root(&app),
        "org-a/plugin:1.0.0",
        "system/plugin:1.0.0",
    )
    .await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::BAD_GATEWAY, ErrorCode::RegistryDigestMismatch),
        "{body}"
    );
    assert_eq!(
        registry.open_uploads("system/plugin"),
        0,
        "the session was cancelled"
    );
    assert_eq!(
        client
            .manifest_digest(&repo("system/plugin"), &tag("1.0.0"))
            .await
            .unwrap(),
        None
    );
    assert!(chained(&app, "registry.tag.copy").await.is_empty());
    served.stop().await;
    app.finish().await;
}

#[tokio::test]
async fn a_manifest_that_does_not_match_its_digest_or_a_registry_that_stops_records_nothing() {
    let app = TestApp::sqlite().await;
    organizations(&app).await;
    let token = root(&app);

    let registry = Registry::start(true, false).await;
    seed_index(&registry.client(false), "org-a/plugin", "1").await;
    let tampering = proxy(&registry, Mode::Tamper).await;
    let served = app.beside(&[("REGISTRY_URL", tampering.as_str())]).await;
    let Answer(status, body) = copy(&served, &token, "org-a/plugin:1", "system/plugin:1").await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::BAD_GATEWAY, ErrorCode::RegistryDigestMismatch),
        "{body}"
    );
    served.stop().await;

    // Stopped when the first manifest is put: a clear 503, and no event.
    let stopping = proxy(&registry, Mode::StopAtManifestPut).await;
    let served = app.beside(&[("REGISTRY_URL", stopping.as_str())]).await;
    let Answer(status, body) = copy(&served, &token, "org-a/plugin:1", "system/plugin:1").await;
    assert_eq!(
        (status, code(status, &body)),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::RegistryUnavailable
        ),
        "{body}"
    );
    assert!(
        body["message"].as_str().unwrap().contains("unavailable"),
        "{body}"
    );
    assert!(chained(&app, "registry.tag.copy").await.is_empty());
    served.stop().await;
    app.finish().await;
}

#[tokio::test]
async fn credentials_reach_a_basic_registry_and_a_token_endpoint() {
    let app = TestApp::sqlite().await;
    organizations(&app).await;
    let token = root(&app);

    // Basic: the real registry with an htpasswd file.
    let registry = Registry::start(true, true).await;
    let seeded = seed_index(&registry.client(true), "org-a/plugin", "1").await;
    let served = app
        .beside(&[
            ("REGISTRY_URL", registry.url.as_str()),
            ("REGISTRY_USERNAME", USER),
            ("REGISTRY_PASSWORD", PASSWORD),
        ])
        .await;
    let copied: ImageCopy = copy(&served, &token, "org-a/plugin:1", "system/plugin:1")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(copied.target_digest, seeded.digest.as_str());
    served.stop().await;
    let wrong = app
        .beside(&[
            ("REGISTRY_URL", registry.url.as_str()),
            ("REGISTRY_USERNAME", USER),
            ("REGISTRY_PASSWORD", "wrong"),
        ])
        .await;
    let Answer(status, body) = copy(&wrong, &token, "org-a/plugin:1", "system/plugin:2").await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::BAD_GATEWAY, ErrorCode::RegistryRefused),
        "{body}"
    );
    assert_eq!(body["details"]["registryStatus"], 401);
    wrong.stop().await;

    // Bearer: the double asks for a token from its own endpoint.
    let open = Registry::start(true, false).await;
    seed_index(&open.client(false), "org-a/plugin", "1").await;
    let double = proxy(&open, Mode::Bearer).await;
    let served = app
        .beside(&[
            ("REGISTRY_URL", double.as_str()),
            ("REGISTRY_USERNAME", USER),
            ("REGISTRY_PASSWORD", PASSWORD),
        ])
        .await;
    let copied: ImageCopy = copy(&served, &token, "org-a/plugin:1", "system/plugin:1")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(copied.mounted, mounted(3, 5));
    served.stop().await;
    let anonymous = app.beside(&[("REGISTRY_URL", double.as_str())]).await;
    let Answer(status, body) = copy(&anonymous, &token, "org-a/plugin:1", "system/plugin:2").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    anonymous.stop().await;
    app.finish().await;
}

/// The structured log lines, read from a server process's own output.
#[tokio::test]
async fn the_log_lines_carry_the_documented_fields_and_labels() {
    let registry = Registry::start(true, false).await;
    let client = registry.client(false);
    let seeded = seed_index(&client, "org-a/plugin", "1.0.0").await;
    let dir = std::env::temp_dir().join(format!("registry-log-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let database = format!("sqlite://{}", dir.join("server.db").display());
    let log = dir.join("server.log");
    let port = crash::free_port();
    let server = crash::start_logged(
        &database,
        port,
        &[
            ("REGISTRY_URL", registry.url.as_str()),
            ("BOOTSTRAP_SUPERADMIN_EMAILS", ROOT_EMAIL),
        ],
        &log,
    );
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    crash::wait_healthy(&http, &base).await;
    let token = app_token("root", ROOT_EMAIL);
    crash::create_org(&http, &base, &token, "system").await;
    let copied = http
        .post(format!("{base}/api/images/copy"))
        .bearer_auth(&token)
        .json(&json!({"source": "org-a/plugin:1.0.0", "target": "system/plugin:1.0.0"}))
        .send()
        .await
        .unwrap();
    assert_eq!(copied.status(), 200, "{}", copied.text().await.unwrap());
    let deleted = http
        .delete(format!("{base}/api/images/org-a/plugin/manifests/1.0.0"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200, "{}", deleted.text().await.unwrap());
    drop(server);

    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["eventCategory"] == "audit")
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let copy = &lines[0];
    for label in [
        "service_name",
        "eventCategory",
        "event",
        "actor",
        "pluginName",
        "timestamp",
    ] {
        assert!(copy.get(label).is_some(), "{label}: {copy}");
    }
    assert_eq!(copy["event"], "registry.tag.copy");
    assert_eq!(copy["actor"], "root");
    assert_eq!(copy["pluginName"], "plugin");
    assert_eq!(copy["source"], "org-a/plugin:1.0.0");
    assert_eq!(copy["target"], "system/plugin:1.0.0");
    assert_eq!(copy["sourceDigest"], seeded.digest.as_str());
    assert_eq!(copy["targetDigest"], seeded.digest.as_str());
    assert_eq!(copy["isPromotionToSystem"], true);
    assert_eq!(copy["mounted"], json!({"manifests": 3, "blobs": 5}));
    let delete = &lines[1];
    assert_eq!(delete["event"], "registry.tag.delete");
    assert_eq!(
        (
            delete["repo"].clone(),
            delete["ref"].clone(),
            delete["digest"].clone()
        ),
        (
            json!("org-a/plugin"),
            json!("1.0.0"),
            json!(seeded.digest.as_str())
        )
    );
    assert_eq!(delete["pluginName"], "plugin");
    let _ = std::fs::remove_dir_all(&dir);
}

fn app_token(sub: &str, email: &str) -> String {
    adapters::auth::TokenKeys::hs256(SECRET)
        .sign(&adapters::auth::Claims::user(
            sub,
            Some(email),
            chrono::Utc::now(),
            Duration::from_secs(3600),
        ))
        .unwrap()
}

/// A registry double that asks for Basic credentials and points its tags page's
/// `Link` and its upload session's `Location` at another origin (a second listener,
/// which records every `Authorization` it is sent).
async fn pointing_elsewhere() -> (String, Arc<Mutex<Vec<String>>>) {
    let stolen: Arc<Mutex<Vec<String>>> = Arc::default();
    let thief = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let elsewhere = format!("http://{}", thief.local_addr().unwrap());
    {
        let stolen = stolen.clone();
        let app = axum::Router::new().fallback(move |request: Request<Body>| {
            let stolen = stolen.clone();
            async move {
                if let Some(value) = request.headers().get("authorization") {
                    stolen
                        .lock()
                        .unwrap()
                        .push(value.to_str().unwrap_or_default().to_owned());
                }
                Response::new(Body::from(r#"{"name": "org-a/app", "tags": ["2"]}"#))
            }
        });
        tokio::spawn(async move { axum::serve(thief, app).await });
    }
    let registry = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let own = format!("http://{}", registry.local_addr().unwrap());
    let app = axum::Router::new().fallback(move |request: Request<Body>| {
        let elsewhere = elsewhere.clone();
        async move {
            let basic =
                base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
            let authorized = request
                .headers()
                .get("authorization")
                .is_some_and(|v| v == format!("Basic {basic}").as_str());
            if !authorized {
                let mut answer = status_only(StatusCode::UNAUTHORIZED);
                answer.headers_mut().insert(
                    "www-authenticate",
                    r#"Basic realm="double""#.parse().unwrap(),
                );
                return answer;
            }
            let path = request.uri().path().to_owned();
            if path.ends_with("/tags/list") {
                let mut answer =
                    Response::new(Body::from(r#"{"name": "org-a/app", "tags": ["1"]}"#));
                let link =
                    format!(r#"<{elsewhere}/v2/org-a/app/tags/list?n=100&last=1>; rel="next""#);
                answer.headers_mut().insert("link", link.parse().unwrap());
                return answer;
            }
            if path.ends_with("/blobs/uploads/") {
                let mut answer = status_only(StatusCode::ACCEPTED);
                let location = format!("{elsewhere}/v2/org-a/app/blobs/uploads/session");
                answer
                    .headers_mut()
                    .insert("location", location.parse().unwrap());
                return answer;
            }
            status_only(StatusCode::NOT_FOUND)
        }
    });
    tokio::spawn(async move { axum::serve(registry, app).await });
    (own, stolen)
}

/// The registry's credentials go to its own origin only: a tags page whose `Link`
/// and an upload session whose `Location` name another host are refused as registry
/// errors, and that host is sent nothing.
#[tokio::test]
async fn credentials_go_only_to_the_registry_origin() {
    let (url, stolen) = pointing_elsewhere().await;
    let client = client_of(&url, true);
    let refused = client.tags(&repo("org-a/app")).await.unwrap_err();
    assert!(
        matches!(&refused, adapters::outbound::registry::RegistryError::Refused { code, .. } if code == "FOREIGN_ADDRESS"),
        "{refused:?}"
    );
    let refused = client
        .push_blob(&repo("org-a/app"), b"layer")
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, adapters::outbound::registry::RegistryError::Refused { code, .. } if code == "FOREIGN_ADDRESS"),
        "{refused:?}"
    );
    assert!(
        stolen.lock().unwrap().is_empty(),
        "another origin received {:?}",
        stolen.lock().unwrap()
    );
}
