//! The one format of a sealed secret, and the cipher behind it.
//!
//! `enc:v2:<version>:<base64 of nonce || ciphertext>`: AES-256-GCM under version
//! `<version>` of its organization's data key, with where the secret lives
//! ([`Binding`]: organization, table, column, row) as associated data, so that a value
//! copied into another row, column or organization does not open. The data key's row
//! names the key-encryption key that wraps it (`org_data_keys.kek_ref`): a new
//! key-encryption key rewraps that row and never touches a secret.
//!
//! Values written before (`enc:v1:<base64 of nonce || ciphertext>`, under the
//! platform key with no binding, and plain text stored when no key was set) are still
//! read; the background pass rewrites them in this format.

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;

/// The prefix of a value sealed in the current format.
pub const SEALED: &str = "enc:v2:";
/// The prefix of a value sealed under the platform key alone, before.
pub const LEGACY: &str = "enc:v1:";

const NONCE: usize = 12;

/// Why a value could not be sealed or opened (never the key, never the secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a secret cannot be sealed or opened: {0}")]
pub struct SealError(pub &'static str);

/// A 256-bit key: a data key, or the platform's key-encryption key. Its `Debug`
/// prints nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct Key([u8; 32]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// A new random key.
    pub fn generate() -> Result<Key, SealError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|_| SealError("no randomness"))?;
        Ok(Key(bytes))
    }

    /// A key of exactly 32 bytes.
    pub fn from_slice(bytes: &[u8]) -> Option<Key> {
        <[u8; 32]>::try_from(bytes).ok().map(Key)
    }

    /// Reads a key written as 32 bytes of base64 or as 64 hex digits.
    pub fn from_text(text: &str) -> Option<Key> {
        let text = text.trim();
        hex::decode(text)
            .ok()
            .and_then(|b| Key::from_slice(&b))
            .or_else(|| BASE64.decode(text).ok().and_then(|b| Key::from_slice(&b)))
    }

    /// The raw bytes, for a provider that wraps them.
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// A short public name of the key (the first 8 bytes of its SHA-256, as hex):
    /// enough to tell keys apart, nothing to learn the key from.
    pub fn fingerprint(&self) -> String {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(self.0);
        hex::encode(digest.get(..8).unwrap_or_default())
    }

    /// `nonce || ciphertext` of `plain` under this key, bound to `aad`.
    pub fn encrypt(&self, aad: &[u8], plain: &[u8]) -> Result<Vec<u8>, SealError> {
        let cipher = aes_gcm::Aes256Gcm::new_from_slice(&self.0)
            .map_err(|_| SealError("the key must be 32 bytes"))?;
        let nonce = aes_gcm::Aes256Gcm::generate_nonce(&mut OsRng);
        let sealed = cipher
            .encrypt(&nonce, Payload { msg: plain, aad })
            .map_err(|_| SealError("encryption failed"))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// Opens what [`Key::encrypt`] made, bound to the same `aad`.
    pub fn decrypt(&self, aad: &[u8], sealed: &[u8]) -> Result<Vec<u8>, SealError> {
        let cipher = aes_gcm::Aes256Gcm::new_from_slice(&self.0)
            .map_err(|_| SealError("the key must be 32 bytes"))?;
        let (nonce, body) = sealed
            .split_at_checked(NONCE)
            .ok_or(SealError("too short"))?;
        cipher
            .decrypt(
                aes_gcm::Nonce::from_slice(nonce),
                Payload { msg: body, aad },
            )
            .map_err(|_| SealError("wrong key, wrong place, or altered"))
    }
}

/// Where a secret lives: sealed there, it opens only there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding<'a> {
    /// The organization whose data key seals it (`_platform` for accounts' secrets).
    pub org_id: &'a str,
    /// The table.
    pub table: &'a str,
    /// The column.
    pub column: &'a str,
    /// The row's id.
    pub row_id: &'a str,
}

impl Binding<'_> {
    /// The associated data: every part with its length, so that no two bindings
    /// read alike (`a|bc` and `ab|c`).
    pub fn associated_data(&self) -> Vec<u8> {
        let mut out = b"compliance-secret/v2".to_vec();
        for part in [self.org_id, self.table, self.column, self.row_id] {
            out.extend_from_slice(&(part.len() as u64).to_be_bytes());
            out.extend_from_slice(part.as_bytes());
        }
        out
    }
}

/// A stored value, as it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored<'a> {
    /// Stored before any key was set: the secret itself.
    Plain(&'a str),
    /// `enc:v1`: under the platform key, unbound.
    Legacy(&'a str),
    /// `enc:v2`: under a version of its organization's data key.
    Sealed {
        /// The data key's version.
        version: u32,
        /// `base64(nonce || ciphertext)`.
        body: &'a str,
    },
}

impl<'a> Stored<'a> {
    /// Reads a stored value's form.
    pub fn parse(stored: &'a str) -> Result<Stored<'a>, SealError> {
        if let Some(rest) = stored.strip_prefix(SEALED) {
            let (version, body) = rest
                .split_once(':')
                .ok_or(SealError("no data-key version"))?;
            let version = version
                .parse()
                .map_err(|_| SealError("the data-key version is not a number"))?;
            Ok(Stored::Sealed { version, body })
        } else if let Some(body) = stored.strip_prefix(LEGACY) {
            Ok(Stored::Legacy(body))
        } else {
            Ok(Stored::Plain(stored))
        }
    }
}

/// Seals `plain` under `key` (version `version`), bound to `binding`.
pub fn seal(
    key: &Key,
    version: u32,
    binding: &Binding<'_>,
    plain: &str,
) -> Result<String, SealError> {
    let sealed = key.encrypt(&binding.associated_data(), plain.as_bytes())?;
    Ok(format!("{SEALED}{version}:{}", BASE64.encode(sealed)))
}

/// Opens the body of an `enc:v2` value under `key`, bound to `binding`.
pub fn open(key: &Key, binding: &Binding<'_>, body: &str) -> Result<String, SealError> {
    let bytes = BASE64.decode(body).map_err(|_| SealError("not base64"))?;
    let plain = key.decrypt(&binding.associated_data(), &bytes)?;
    String::from_utf8(plain).map_err(|_| SealError("not UTF-8"))
}

/// Opens the body of an `enc:v1` value under the platform key `key` (no binding).
pub fn open_legacy(key: &Key, body: &str) -> Result<String, SealError> {
    let bytes = BASE64.decode(body).map_err(|_| SealError("not base64"))?;
    let plain = key.decrypt(&[], &bytes)?;
    String::from_utf8(plain).map_err(|_| SealError("not UTF-8"))
}

/// Seals as `enc:v1` did (tests of the rewrite only).
#[doc(hidden)]
pub fn seal_legacy(key: &Key, plain: &str) -> Result<String, SealError> {
    Ok(format!(
        "{LEGACY}{}",
        BASE64.encode(key.encrypt(&[], plain.as_bytes())?)
    ))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn binding<'a>(org: &'a str, row: &'a str) -> Binding<'a> {
        Binding {
            org_id: org,
            table: "notification_preferences",
            column: "webhook_secret",
            row_id: row,
        }
    }

    #[test]
    fn a_value_opens_only_where_it_was_sealed() {
        let key = Key::generate().unwrap();
        let here = binding("org-a", "org-a");
        let sealed = seal(&key, 3, &here, "s3cret").unwrap();
        let Ok(Stored::Sealed { version, body }) = Stored::parse(&sealed) else {
            panic!("{sealed}")
        };
        assert_eq!(version, 3);
        assert!(!sealed.contains("s3cret"));
        assert_eq!(open(&key, &here, body).unwrap(), "s3cret");
        for elsewhere in [
            binding("org-b", "org-a"),
            binding("org-a", "org-b"),
            Binding {
                column: "totp_secret",
                ..here
            },
            Binding {
                table: "accounts",
                ..here
            },
        ] {
            assert!(open(&key, &elsewhere, body).is_err(), "{elsewhere:?}");
        }
        let other = Key::generate().unwrap();
        assert!(open(&other, &here, body).is_err());
        // The parts are delimited by their lengths.
        assert_ne!(
            binding("ab", "c").associated_data(),
            binding("a", "bc").associated_data()
        );
    }

    #[test]
    fn older_forms_read_as_they_were_written() {
        let key = Key::from_text(&"11".repeat(32)).unwrap();
        let legacy = seal_legacy(&key, "old").unwrap();
        assert_eq!(
            Stored::parse(&legacy).unwrap(),
            Stored::Legacy(legacy.trim_start_matches(LEGACY))
        );
        assert_eq!(
            open_legacy(&key, legacy.trim_start_matches(LEGACY)).unwrap(),
            "old"
        );
        assert_eq!(Stored::parse("plain").unwrap(), Stored::Plain("plain"));
        assert!(Stored::parse("enc:v2:x:abc").is_err());
        assert!(Stored::parse("enc:v2:abc").is_err());
        assert_eq!(format!("{key:?}"), "Key(..)");
        assert_eq!(key.fingerprint().len(), 16);
    }

    proptest! {
        #[test]
        fn sealed_opens_with_its_own_context_only(
            secret in "\\PC{0,64}",
            org in "[a-z0-9-]{1,12}",
            row in "[a-z0-9-]{1,12}",
            other_org in "[a-z0-9-]{1,12}",
            version in 1u32..1000,
        ) {
            let key = Key::generate().unwrap();
            let here = binding(&org, &row);
            let sealed = seal(&key, version, &here, &secret).unwrap();
            let Ok(Stored::Sealed { version: v, body }) = Stored::parse(&sealed) else {
                panic!("{sealed}")
            };
            prop_assert_eq!(v, version);
            prop_assert_eq!(open(&key, &here, body).unwrap(), secret);
            if other_org != org {
                prop_assert!(open(&key, &binding(&other_org, &row), body).is_err());
            }
        }
    }
}
