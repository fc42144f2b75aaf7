//! A customer master key in AWS KMS, by ARN: `Encrypt` and `Decrypt` with the
//! encryption context `{orgId}`, `DescribeKey` for its state. Requests are the KMS
//! JSON protocol (`X-Amz-Target: TrentService.<Action>`), signed with Signature
//! Version 4 under the platform's credentials (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`: the customer's key policy grants them
//! the key); `AWS_KMS_ENDPOINT_URL` overrides the regional address.

use std::time::{Duration, SystemTime};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{json, Value};

use super::provider::{FailureClass, KeyFailure, KeyFuture, KeyProvider};
use super::sealed::Key;
use crate::config::AwsCredentials;

/// How long one KMS request may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The most of a KMS answer read.
const MAX_ANSWER: usize = 64 * 1024;

/// A key in AWS KMS.
#[derive(Debug, Clone)]
pub struct AwsKms {
    client: reqwest::Client,
    arn: String,
    region: String,
    endpoint: String,
    credentials: Option<AwsCredentials>,
}

/// The region of a KMS key ARN (`arn:<partition>:kms:<region>:<account>:key/<id>`, or
/// an `alias/<name>`), or why it is not one.
pub fn region_of(arn: &str) -> Result<&str, &'static str> {
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(partition), Some("kms"), Some(region), Some(account), Some(resource)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err("must be a KMS key ARN: arn:aws:kms:<region>:<account>:key/<id>");
    };
    let word = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    let named = resource
        .strip_prefix("key/")
        .or_else(|| resource.strip_prefix("alias/"))
        .is_some_and(|name| word(name.replace('/', "-").as_str()));
    if !(word(partition) && word(region) && account.chars().all(|c| c.is_ascii_digit()) && named) {
        return Err("must be a KMS key ARN: arn:aws:kms:<region>:<account>:key/<id>");
    }
    Ok(region)
}

impl AwsKms {
    /// The key `arn`, reached at `endpoint` (else the region's KMS address).
    pub fn new(
        client: reqwest::Client,
        arn: &str,
        endpoint: Option<&str>,
        credentials: Option<AwsCredentials>,
    ) -> Result<AwsKms, &'static str> {
        let region = region_of(arn)?.to_owned();
        let endpoint = endpoint
            .map(|e| e.trim_end_matches('/').to_owned())
            .unwrap_or_else(|| format!("https://kms.{region}.amazonaws.com"));
        Ok(AwsKms {
            client,
            arn: arn.to_owned(),
            region,
            endpoint,
            credentials,
        })
    }

    async fn call(&self, action: &str, body: Value) -> Result<Value, KeyFailure> {
        let Some(credentials) = &self.credentials else {
            return Err(KeyFailure::new(
                FailureClass::AccessDenied,
                "the platform has no AWS credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)",
            ));
        };
        let body = body.to_string();
        let target = format!("TrentService.{action}");
        let url = format!("{}/", self.endpoint);
        let headers = [
            ("content-type", "application/x-amz-json-1.1"),
            ("x-amz-target", target.as_str()),
        ];
        let signed = sign(credentials, &self.region, &url, &headers, body.as_bytes())
            .map_err(|why| KeyFailure::new(FailureClass::Refused, why))?;
        let mut request = self.client.post(&url).timeout(TIMEOUT).body(body);
        for (name, value) in headers.iter().copied().chain(
            signed
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str())),
        ) {
            request = request.header(name, value);
        }
        let response = request.send().await.map_err(|e| {
            KeyFailure::new(
                FailureClass::Unreachable,
                format!("KMS did not answer: {}", without_url(&e)),
            )
        })?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| {
            KeyFailure::new(
                FailureClass::Unreachable,
                format!("KMS's answer was cut: {}", without_url(&e)),
            )
        })?;
        let answer: Value = serde_json::from_slice(bytes.get(..MAX_ANSWER).unwrap_or(&bytes))
            .unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(answer);
        }
        Err(failure_of(status.as_u16(), &answer))
    }
}

/// The reqwest error without the URL it names (no query, no secret, just the cause).
fn without_url(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "no answer within 10 s".to_owned()
    } else if error.is_connect() {
        "cannot connect".to_owned()
    } else {
        "the request failed".to_owned()
    }
}

/// A KMS error answer (`{"__type": "...Exception", "message": ...}`) as a class.
fn failure_of(status: u16, answer: &Value) -> KeyFailure {
    let kind = answer
        .get("__type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = kind.rsplit('#').next().unwrap_or(kind);
    let class = match kind {
        "DisabledException" => FailureClass::Disabled,
        "KMSInvalidStateException" => FailureClass::PendingDeletion,
        "AccessDeniedException" | "UnrecognizedClientException" | "InvalidSignatureException" => {
            FailureClass::AccessDenied
        }
        "NotFoundException" => FailureClass::NotFound,
        "KMSInternalException" | "DependencyTimeoutException" | "ThrottlingException" => {
            FailureClass::Unreachable
        }
        _ if status >= 500 => FailureClass::Unreachable,
        _ => FailureClass::Refused,
    };
    let message = answer
        .get("message")
        .or_else(|| answer.get("Message"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let message: String = message.chars().take(200).collect();
    KeyFailure::new(class, format!("KMS answered {status} {kind}: {message}"))
}

/// The Signature Version 4 headers of a request to KMS in `region`.
fn sign(
    credentials: &AwsCredentials,
    region: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Vec<(String, String)>, String> {
    use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
    use aws_sigv4::sign::v4;
    let identity = aws_credential_types::Credentials::new(
        credentials.access_key_id.clone(),
        credentials.secret_access_key.expose().to_owned(),
        credentials
            .session_token
            .as_ref()
            .map(|t| t.expose().to_owned()),
        None,
        "environment",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("kms")
        .time(SystemTime::now())
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| format!("the request cannot be signed: {e}"))?
        .into();
    let signable = SignableRequest::new(
        "POST",
        url,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| format!("the request cannot be signed: {e}"))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| format!("the request cannot be signed: {e}"))?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect())
}

impl KeyProvider for AwsKms {
    fn reference(&self) -> String {
        format!("aws-kms:{}", self.arn)
    }

    fn wrap<'a>(&'a self, org_id: &'a str, key: &'a Key) -> KeyFuture<'a, String> {
        Box::pin(async move {
            let answer = self
                .call(
                    "Encrypt",
                    json!({"KeyId": self.arn, "Plaintext": BASE64.encode(key.bytes()),
                           "EncryptionContext": {"orgId": org_id}}),
                )
                .await?;
            answer
                .get("CiphertextBlob")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| KeyFailure::new(FailureClass::Refused, "no CiphertextBlob"))
        })
    }

    fn unwrap<'a>(&'a self, org_id: &'a str, wrapped: &'a str) -> KeyFuture<'a, Key> {
        Box::pin(async move {
            let answer = self
                .call(
                    "Decrypt",
                    json!({"KeyId": self.arn, "CiphertextBlob": wrapped,
                           "EncryptionContext": {"orgId": org_id}}),
                )
                .await?;
            answer
                .get("Plaintext")
                .and_then(Value::as_str)
                .and_then(|p| BASE64.decode(p).ok())
                .and_then(|bytes| Key::from_slice(&bytes))
                .ok_or_else(|| KeyFailure::new(FailureClass::Refused, "no 32-byte Plaintext"))
        })
    }

    fn describe(&self) -> KeyFuture<'_, ()> {
        Box::pin(async move {
            let answer = self.call("DescribeKey", json!({"KeyId": self.arn})).await?;
            let metadata = answer.get("KeyMetadata").unwrap_or(&Value::Null);
            let state = metadata
                .get("KeyState")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match state {
                "Enabled" => Ok(()),
                "Disabled" => Err(KeyFailure::new(
                    FailureClass::Disabled,
                    "the key is disabled",
                )),
                "PendingDeletion" | "PendingReplicaDeletion" => Err(KeyFailure::new(
                    FailureClass::PendingDeletion,
                    "the key is scheduled for deletion",
                )),
                "" if metadata.get("Enabled").and_then(Value::as_bool) == Some(true) => Ok(()),
                other => Err(KeyFailure::new(
                    FailureClass::Refused,
                    format!(
                        "the key's state is `{}`",
                        other.chars().take(40).collect::<String>()
                    ),
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_arns_are_read_and_others_refused() {
        assert_eq!(
            region_of(
                "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
            ),
            Ok("eu-west-1")
        );
        assert_eq!(
            region_of("arn:aws-us-gov:kms:us-gov-west-1:111122223333:alias/ci/keys"),
            Ok("us-gov-west-1")
        );
        for bad in [
            "",
            "1234abcd-12ab",
            "arn:aws:s3:eu-west-1:111122223333:key/abc",
            "arn:aws:kms:eu-west-1:acct:key/abc",
            "arn:aws:kms:eu-west-1:111122223333:key/",
            "arn:aws:kms::111122223333:key/abc",
            "arn:aws:kms:eu-west-1:111122223333:bucket/abc",
        ] {
            assert!(region_of(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn kms_errors_are_classed() {
        let of = |kind: &str| failure_of(400, &json!({"__type": kind, "message": "m"})).class;
        assert_eq!(of("DisabledException"), FailureClass::Disabled);
        assert_eq!(
            of("com.amazonaws.kms#KMSInvalidStateException"),
            FailureClass::PendingDeletion
        );
        assert_eq!(of("AccessDeniedException"), FailureClass::AccessDenied);
        assert_eq!(of("NotFoundException"), FailureClass::NotFound);
        assert_eq!(of("InvalidCiphertextException"), FailureClass::Refused);
        assert_eq!(
            failure_of(503, &Value::Null).class,
            FailureClass::Unreachable
        );
    }
}
