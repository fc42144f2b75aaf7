//! A key in HashiCorp Vault's transit engine: `POST /v1/transit/encrypt/<name>` and
//! `/decrypt/<name>` with `context` = the organization's id (a derived key binds each
//! organization's wrapped key to it), `GET /v1/transit/keys/<name>` for its state.
//! The address and token are the organization's configuration (the token sealed
//! under the platform key).

use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{json, Value};

use super::provider::{FailureClass, KeyFailure, KeyFuture, KeyProvider};
use super::sealed::Key;

const TIMEOUT: Duration = Duration::from_secs(10);

/// A transit key.
#[derive(Clone)]
pub struct VaultTransit {
    client: reqwest::Client,
    address: String,
    name: String,
    token: String,
}

impl std::fmt::Debug for VaultTransit {
    /// The token never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VaultTransit")
            .field("address", &self.address)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Whether `name` may name a transit key (letters, digits, `-`, `_`, `.`; at most 128).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name != "."
        && name != ".."
}

impl VaultTransit {
    /// The key `name` of the Vault at `address`, reached with `token`.
    pub fn new(client: reqwest::Client, address: &str, name: &str, token: &str) -> VaultTransit {
        VaultTransit {
            client,
            address: address.trim_end_matches('/').to_owned(),
            name: name.to_owned(),
            token: token.to_owned(),
        }
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, KeyFailure> {
        let url = format!("{}/v1/transit/{path}/{}", self.address, self.name);
        let mut request = self
            .client
            .request(method, &url)
            .timeout(TIMEOUT)
            .header("x-vault-token", &self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.map_err(|e| {
            let why = if e.is_timeout() {
                "no answer within 10 s"
            } else {
                "cannot connect"
            };
            KeyFailure::new(
                FailureClass::Unreachable,
                format!("Vault did not answer: {why}"),
            )
        })?;
        let status = response.status().as_u16();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            return Ok(answer);
        }
        let said: String = answer
            .get("errors")
            .and_then(Value::as_array)
            .and_then(|e| e.first())
            .and_then(Value::as_str)
            .unwrap_or_default()
            .chars()
            .take(200)
            .collect();
        let class = match status {
            403 => FailureClass::AccessDenied,
            404 => FailureClass::NotFound,
            429 | 500.. => FailureClass::Unreachable,
            _ => FailureClass::Refused,
        };
        Err(KeyFailure::new(
            class,
            format!("Vault answered {status}: {said}"),
        ))
    }
}

fn data<'a>(answer: &'a Value, field: &str) -> Option<&'a str> {
    answer.get("data")?.get(field)?.as_str()
}

impl KeyProvider for VaultTransit {
    fn reference(&self) -> String {
        format!("vault-transit:{}", self.name)
    }

    fn wrap<'a>(&'a self, org_id: &'a str, key: &'a Key) -> KeyFuture<'a, String> {
        Box::pin(async move {
            let body = json!({"plaintext": BASE64.encode(key.bytes()),
                              "context": BASE64.encode(org_id)});
            let answer = self
                .call(reqwest::Method::POST, "encrypt", Some(body))
                .await?;
            data(&answer, "ciphertext")
                .map(str::to_owned)
                .ok_or_else(|| KeyFailure::new(FailureClass::Refused, "no ciphertext"))
        })
    }

    fn unwrap<'a>(&'a self, org_id: &'a str, wrapped: &'a str) -> KeyFuture<'a, Key> {
        Box::pin(async move {
            let body = json!({"ciphertext": wrapped, "context": BASE64.encode(org_id)});
            let answer = self
                .call(reqwest::Method::POST, "decrypt", Some(body))
                .await?;
            data(&answer, "plaintext")
                .and_then(|p| BASE64.decode(p).ok())
                .and_then(|bytes| Key::from_slice(&bytes))
                .ok_or_else(|| KeyFailure::new(FailureClass::Refused, "no 32-byte plaintext"))
        })
    }

    fn describe(&self) -> KeyFuture<'_, ()> {
        Box::pin(async move {
            let answer = self.call(reqwest::Method::GET, "keys", None).await?;
            if answer.get("data").is_some() {
                Ok(())
            } else {
                Err(KeyFailure::new(FailureClass::Refused, "no key data"))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transit_key_names_are_path_safe() {
        assert!(valid_name("ci-keys_1.0"));
        for bad in ["", ".", "..", "a/b", "a b", "a?b", &"k".repeat(129)] {
            assert!(!valid_name(bad), "{bad}");
        }
        let vault = VaultTransit::new(reqwest::Client::new(), "http://v/", "k", "s.TOKEN");
        assert!(!format!("{vault:?}").contains("TOKEN"));
        assert_eq!(vault.reference(), "vault-transit:k");
    }
}
