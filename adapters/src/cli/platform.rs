//! The platform's command-line operations (document 2, "What the service does" item
//! 8): `upload-plugin` and `create-pipeline`, calling the server at `PLATFORM_URL`
//! with the bearer token of `PLATFORM_TOKEN`. A refusal (403 COMPLIANCE_VIOLATION,
//! 503 COMPLIANCE_UNAVAILABLE, any error) prints the error's message with its code
//! and exits 1; a file that cannot be used exits 2. (`deploy` needs a cloud provider
//! and is not offered.)

use serde_json::Value;

use super::{bad_input, source, Failure};

/// Where the platform is and who calls it.
#[derive(Debug, Clone)]
pub struct Platform {
    /// `PLATFORM_URL` (default http://localhost:3000).
    pub url: String,
    /// `PLATFORM_TOKEN`.
    pub token: String,
}

fn refused(message: String) -> Failure {
    Failure { message, code: 1 }
}

/// The answer's `data`, or the error's `CODE: message` (with the violations' rule
/// names for a compliance block).
async fn answer(
    response: Result<reqwest::Response, reqwest::Error>,
    url: &str,
) -> Result<Value, Failure> {
    let response = response.map_err(|e| refused(format!("{url}: {e}")))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if status.is_success() {
        return Ok(body.get("data").cloned().unwrap_or(body));
    }
    let code = body.get("code").and_then(Value::as_str).unwrap_or("ERROR");
    let message = body
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| text.chars().take(500).collect(), str::to_owned);
    let rules: Vec<String> = body
        .pointer("/details/violations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| {
            Some(format!(
                "{} ({}, {})",
                v.get("ruleName")?.as_str()?,
                v.get("severity")?.as_str()?,
                v.get("field")?.as_str()?
            ))
        })
        .collect();
    let violations = if rules.is_empty() {
        String::new()
    } else {
        format!("; violations: {}", rules.join(", "))
    };
    Err(refused(format!(
        "{} {code}: {message}{violations}",
        status.as_u16()
    )))
}

/// `compliance upload-plugin --file F --organization ORG --name N --version V`: the
/// ZIP is checked here first (its manifest must name N and V), then uploaded.
pub async fn upload_plugin(
    platform: &Platform,
    (file, organization): (&str, &str),
    (name, version): (&str, &str),
    access: &str,
) -> Result<Value, Failure> {
    let bytes = std::fs::read(file).map_err(|e| bad_input(format!("{file}: {e}")))?;
    let inspected =
        crate::archive::inspect(&bytes).map_err(|e| bad_input(format!("{file}: {e}")))?;
    if inspected.manifest.name != name || inspected.manifest.version != version {
        return Err(bad_input(format!(
            "{file}: the manifest names `{}` version `{}`, not `{name}` version `{version}`",
            inspected.manifest.name, inspected.manifest.version
        )));
    }
    let boundary = format!("compliance-{}", crate::new_id());
    let mut body = Vec::with_capacity(bytes.len() + 512);
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"plugin\"; filename=\"plugin.zip\"\r\nContent-Type: application/zip\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(&bytes);
    body.extend_from_slice(
        format!(
            "\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"accessModifier\"\r\n\r\n{access}\r\n--{boundary}--\r\n"
        )
        .as_bytes(),
    );
    let url = format!("{}/api/plugins", platform.url.trim_end_matches('/'));
    let response = reqwest::Client::new()
        .post(&url)
        .bearer_auth(&platform.token)
        .header("x-org-id", organization)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await;
    answer(response, &url).await
}

/// `compliance create-pipeline --file F --project P --organization ORG`: the file is
/// the create body in JSON or YAML (`pipelineName`, `accessModifier`, `props`);
/// `project` is set from `--project`, `organization` kept when the file names it
/// (else set to ORG), and ORG is the organization the request acts in (`x-org-id`).
pub async fn create_pipeline(
    platform: &Platform,
    file: &str,
    (project, organization): (&str, &str),
) -> Result<Value, Failure> {
    let mut body: Value = source::Source::read(file, &mut false)?.parse()?;
    let Some(object) = body.as_object_mut() else {
        return Err(bad_input(format!("{file}: the pipeline must be an object")));
    };
    object.insert("project".to_owned(), Value::from(project));
    object
        .entry("organization")
        .or_insert_with(|| Value::from(organization));
    let url = format!("{}/api/pipelines", platform.url.trim_end_matches('/'));
    let response = reqwest::Client::new()
        .post(&url)
        .bearer_auth(&platform.token)
        .header("x-org-id", organization)
        .json(&body)
        .send()
        .await;
    answer(response, &url).await
}

/// `compliance login`: signs in at `url` and answers the session (`accessToken`,
/// `refreshToken`, `tokenType`, `expiresIn`).
pub async fn login(
    url: &str,
    (identifier, password): (&str, &str),
    org: Option<&str>,
) -> Result<Value, Failure> {
    let endpoint = format!("{}/api/auth/login", url.trim_end_matches('/'));
    let mut body = serde_json::json!({"identifier": identifier, "password": password});
    if let (Some(org), Some(object)) = (org, body.as_object_mut()) {
        object.insert("orgId".into(), Value::from(org));
    }
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| refused(e.to_string()))?;
    answer(client.post(&endpoint).json(&body).send().await, &endpoint).await
}

/// The events of a backfill file: a JSON array, one envelope, or one envelope per
/// line; every one checked (the first malformed one names its place).
pub fn report_events(text: &str) -> Result<Vec<Value>, Failure> {
    let trimmed = text.trim_start();
    let events: Vec<Value> = if trimmed.starts_with('[') {
        serde_json::from_str(text).map_err(|e| bad_input(format!("not a JSON array: {e}")))?
    } else {
        let mut events = Vec::new();
        let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
        for (i, value) in stream.by_ref().enumerate() {
            events.push(value.map_err(|e| bad_input(format!("event {}: {e}", i + 1)))?);
        }
        events
    };
    if events.is_empty() {
        return Err(bad_input("the file holds no events".to_owned()));
    }
    for (i, event) in events.iter().enumerate() {
        reporting::ExecutionEvent::parse(event)
            .map_err(|e| bad_input(format!("event {}: {e}", i + 1)))?;
    }
    Ok(events)
}

/// `compliance report ingest`: sends `events` in batches of `batch`; the totals.
pub async fn ingest_reports(
    platform: &Platform,
    events: &[Value],
    batch: usize,
) -> Result<Value, Failure> {
    let endpoint = format!("{}/api/reports/events", platform.url.trim_end_matches('/'));
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .map_err(|e| refused(e.to_string()))?;
    let (mut received, mut stored, mut executions) = (0u64, 0u64, 0u64);
    for chunk in events.chunks(batch.clamp(1, 1000)) {
        let sent = client
            .post(&endpoint)
            .bearer_auth(&platform.token)
            .json(chunk)
            .send()
            .await;
        let data = answer(sent, &endpoint).await?;
        let count = |key: &str| data.get(key).and_then(Value::as_u64).unwrap_or(0);
        received += count("received");
        stored += count("stored");
        executions += count("executions");
    }
    Ok(serde_json::json!({"received": received, "stored": stored, "executions": executions}))
}
