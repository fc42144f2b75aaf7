//! Refusals with what their details name: the fields at fault and, for a compliance
//! violation, the violations that block, for forms to show beside their inputs.

use super::*;

/// A refusal with what its details name: the fields at fault (`details.problems`,
/// each `field` with its `message`, as compliance-core reports a rule's problems, or
/// `details.field` with `details.problem`) and, for a `COMPLIANCE_VIOLATION`, the
/// violations that block (`details.violations`).
#[derive(Debug)]
pub struct Named {
    /// The refusal.
    pub refusal: Refusal,
    /// The fields at fault, each with what is wrong.
    pub problems: Vec<(String, String)>,
    /// The compliance rules' violations that block.
    pub violations: Vec<compliance_core::Violation>,
}

impl From<Refusal> for Named {
    fn from(refusal: Refusal) -> Named {
        Named {
            refusal,
            problems: Vec::new(),
            violations: Vec::new(),
        }
    }
}

/// The violations a `COMPLIANCE_VIOLATION`'s details list (none when they do not
/// read as the API writes them).
pub(super) fn violations(envelope: &Value) -> Vec<compliance_core::Violation> {
    envelope
        .get("details")
        .and_then(|d| d.get("violations"))
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// The fields an error envelope's `details` names.
pub(super) fn named_fields(envelope: &Value) -> Vec<(String, String)> {
    #[derive(serde::Deserialize)]
    struct Problem {
        field: String,
        #[serde(alias = "problem")]
        message: String,
    }
    #[derive(serde::Deserialize)]
    struct Details {
        #[serde(default)]
        problems: Vec<Problem>,
        #[serde(flatten)]
        single: Option<Problem>,
    }
    let Some(details) = envelope.get("details") else {
        return Vec::new();
    };
    match serde_json::from_value::<Details>(details.clone()) {
        Ok(details) => details
            .problems
            .into_iter()
            .chain(details.single)
            .map(|p| (p.field, p.message))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// [`act`] for a form whose fields the API may name: a refusal keeps them.
pub async fn act_naming<T: DeserializeOwned>(
    api: &Api,
    (method, uri): (Method, &str),
    org: &str,
    body: Value,
) -> Result<T, Named> {
    send_naming(
        api,
        Call {
            method: Some(method),
            uri,
            org: Some(org),
            body: Some(body),
            ..Call::default()
        },
    )
    .await
}

/// Sends `call`; the success's data decoded into the API's own type `T`, or the
/// refusal with what its details name.
pub async fn send_naming<T: DeserializeOwned>(api: &Api, call: Call<'_>) -> Result<T, Named> {
    let (status, _, bytes) = api.send(call).await?;
    let value: Value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .map_err(|e| Refusal::internal(format!("an answer of the API: {e}")))?
    };
    if !status.is_success() {
        return Err(Named {
            refusal: Refusal::answered(status, &value),
            problems: named_fields(&value),
            violations: violations(&value),
        });
    }
    let data = match value {
        Value::Object(mut map) if map.contains_key("data") && map.contains_key("success") => {
            map.remove("data").unwrap_or(Value::Null)
        }
        other => other,
    };
    Ok(decode(data)?)
}
