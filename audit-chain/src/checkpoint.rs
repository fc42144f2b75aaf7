//! Signed checkpoints: what a chain looked like (its key, last `seq`, head hash and
//! the time), as a C2SP signed note signed with Ed25519 by a key the database does not
//! hold. A plain hash chain cannot see its newest rows deleted, nor a rewrite that
//! recomputes every later hash; checking the chain against its checkpoints sees both.
//!
//! The note (every line ends with a newline):
//!
//! ```text
//! <origin>/audit/<chainKey>
//! <seq>
//! <head hash, lowercase hex>
//! time <RFC 3339 UTC, seconds>
//!
//! — <key name> <base64(key id ‖ Ed25519 signature)>
//! ```
//!
//! As in C2SP signed-note: the key id is the first 4 bytes of
//! SHA-256(`<key name>` ‖ `\n` ‖ `0x01` ‖ public key); the signature covers the text
//! above the blank line, final newline included; the verifier key is written
//! `<name>+<key id, hex>+<base64(0x01 ‖ public key)>` and the private key
//! `PRIVATE+KEY+<name>+<key id, hex>+<base64(0x01 ‖ seed)>`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use chrono::{DateTime, SecondsFormat, Utc};
use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::event::SealedEvent;

/// The algorithm byte of Ed25519 keys in signed notes.
const ALG_ED25519: u8 = 0x01;
/// The prefix of a signature line.
const SIGNATURE_PREFIX: &str = "\u{2014} ";

/// Why a key, a note or a checkpoint was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    /// The key text is not a signed-note key of this form.
    #[error("malformed key: {0}")]
    MalformedKey(&'static str),
    /// The note is not a signed note, or its text is not a checkpoint.
    #[error("malformed note: {0}")]
    MalformedNote(&'static str),
    /// No signature by the verifier's key, or one that does not verify.
    #[error("the note is not signed by `{0}`")]
    BadSignature(String),
}

fn key_id(name: &str, public: &[u8; 32]) -> [u8; 4] {
    let mut hash = Sha256::new();
    hash.update(name.as_bytes());
    hash.update(b"\n");
    hash.update([ALG_ED25519]);
    hash.update(public);
    let digest = hash.finalize();
    let mut id = [0u8; 4];
    id.copy_from_slice(digest.get(..4).unwrap_or(&[0; 4]));
    id
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('+') && !name.chars().any(char::is_whitespace)
}

/// Splits `<name>+<hex id>+<base64 key>` and checks the name, the algorithm byte, the
/// key length and that the id matches.
fn split_key(text: &str, len: usize) -> Result<(String, [u8; 4], Vec<u8>), CheckpointError> {
    let mut parts = text.trim().splitn(3, '+');
    let (Some(name), Some(id), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(CheckpointError::MalformedKey("expected name+id+key"));
    };
    if !valid_name(name) {
        return Err(CheckpointError::MalformedKey("bad key name"));
    }
    let id = hex::decode(id).map_err(|_| CheckpointError::MalformedKey("the id is not hex"))?;
    let key = STANDARD
        .decode(key)
        .map_err(|_| CheckpointError::MalformedKey("the key is not base64"))?;
    match key.split_first() {
        Some((&ALG_ED25519, rest)) if rest.len() == len => {
            let id: [u8; 4] = id
                .try_into()
                .map_err(|_| CheckpointError::MalformedKey("the id is not 4 bytes"))?;
            Ok((name.to_owned(), id, rest.to_vec()))
        }
        Some((&ALG_ED25519, _)) => Err(CheckpointError::MalformedKey("wrong key length")),
        _ => Err(CheckpointError::MalformedKey("not an Ed25519 key")),
    }
}

/// A signer: a named Ed25519 key.
#[derive(Clone)]
pub struct NoteSigner {
    name: String,
    id: [u8; 4],
    key: SigningKey,
}

impl std::fmt::Debug for NoteSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoteSigner")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl NoteSigner {
    /// A signer from a 32-byte seed (the caller brings the randomness).
    pub fn from_seed(name: &str, seed: [u8; 32]) -> Result<Self, CheckpointError> {
        if !valid_name(name) {
            return Err(CheckpointError::MalformedKey("bad key name"));
        }
        let key = SigningKey::from_bytes(&seed);
        let id = key_id(name, key.verifying_key().as_bytes());
        Ok(NoteSigner {
            name: name.to_owned(),
            id,
            key,
        })
    }

    /// Parses `PRIVATE+KEY+<name>+<id>+<base64(0x01 ‖ seed)>`.
    ///
    /// ```
    /// use audit_chain::NoteSigner;
    /// let skey = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
    /// let signer = NoteSigner::from_private_key(skey).unwrap();
    /// assert_eq!(signer.verifier_key(), "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW");
    /// ```
    pub fn from_private_key(text: &str) -> Result<Self, CheckpointError> {
        let rest = text
            .trim()
            .strip_prefix("PRIVATE+KEY+")
            .ok_or(CheckpointError::MalformedKey("expected PRIVATE+KEY+..."))?;
        let (name, id, seed) = split_key(rest, 32)?;
        let seed: [u8; 32] = seed
            .try_into()
            .map_err(|_| CheckpointError::MalformedKey("wrong key length"))?;
        let signer = NoteSigner::from_seed(&name, seed)?;
        if signer.id != id {
            return Err(CheckpointError::MalformedKey(
                "the id does not match the key",
            ));
        }
        Ok(signer)
    }

    /// The key's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The private key text (keep it out of the database).
    pub fn private_key(&self) -> String {
        let mut bytes = vec![ALG_ED25519];
        bytes.extend_from_slice(self.key.as_bytes());
        format!(
            "PRIVATE+KEY+{}+{}+{}",
            self.name,
            hex::encode(self.id),
            STANDARD.encode(bytes)
        )
    }

    /// The verifier key text, for anyone who checks notes.
    pub fn verifier_key(&self) -> String {
        let mut bytes = vec![ALG_ED25519];
        bytes.extend_from_slice(self.key.verifying_key().as_bytes());
        format!(
            "{}+{}+{}",
            self.name,
            hex::encode(self.id),
            STANDARD.encode(bytes)
        )
    }

    /// The verifier of this signer's notes.
    pub fn verifier(&self) -> NoteVerifier {
        NoteVerifier {
            name: self.name.clone(),
            id: self.id,
            key: self.key.verifying_key(),
        }
    }

    /// Signs a note text (which must end with a newline): the text, a blank line and
    /// the signature line.
    ///
    /// ```
    /// use audit_chain::NoteSigner;
    /// let skey = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
    /// let text = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
    /// let note = NoteSigner::from_private_key(skey).unwrap().sign(text).unwrap();
    /// assert_eq!(note, format!("{text}\n— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"));
    /// ```
    pub fn sign(&self, text: &str) -> Result<String, CheckpointError> {
        check_text(text)?;
        let signature = self.key.sign(text.as_bytes());
        let mut blob = self.id.to_vec();
        blob.extend_from_slice(&signature.to_bytes());
        Ok(format!(
            "{text}\n{SIGNATURE_PREFIX}{} {}\n",
            self.name,
            STANDARD.encode(blob)
        ))
    }
}

fn check_text(text: &str) -> Result<(), CheckpointError> {
    if !text.ends_with('\n') {
        return Err(CheckpointError::MalformedNote(
            "the text must end with a newline",
        ));
    }
    if text.contains("\n\n") || text.starts_with('\n') {
        return Err(CheckpointError::MalformedNote("the text has a blank line"));
    }
    Ok(())
}

/// A verifier: a named Ed25519 public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteVerifier {
    name: String,
    id: [u8; 4],
    key: VerifyingKey,
}

impl NoteVerifier {
    /// Parses `<name>+<id>+<base64(0x01 ‖ public key)>`.
    pub fn from_verifier_key(text: &str) -> Result<Self, CheckpointError> {
        let (name, id, key) = split_key(text, 32)?;
        let bytes: [u8; 32] = key
            .try_into()
            .map_err(|_| CheckpointError::MalformedKey("wrong key length"))?;
        let key = VerifyingKey::from_bytes(&bytes)
            .map_err(|_| CheckpointError::MalformedKey("not a valid Ed25519 point"))?;
        if key_id(&name, key.as_bytes()) != id {
            return Err(CheckpointError::MalformedKey(
                "the id does not match the key",
            ));
        }
        Ok(NoteVerifier { name, id, key })
    }

    /// The key's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The note's text, if a signature line by this key verifies over it.
    pub fn open<'n>(&self, note: &'n str) -> Result<&'n str, CheckpointError> {
        let split = note
            .rfind("\n\n")
            .ok_or(CheckpointError::MalformedNote("no signature block"))?;
        let text = note.get(..=split).unwrap_or_default();
        let signatures = note.get(split + 2..).unwrap_or_default();
        check_text(text)?;
        for line in signatures.lines() {
            let Some(rest) = line.strip_prefix(SIGNATURE_PREFIX) else {
                return Err(CheckpointError::MalformedNote(
                    "a signature line is malformed",
                ));
            };
            let Some((name, blob)) = rest.split_once(' ') else {
                return Err(CheckpointError::MalformedNote(
                    "a signature line is malformed",
                ));
            };
            if name != self.name {
                continue;
            }
            let Ok(blob) = STANDARD.decode(blob) else {
                continue;
            };
            let (Some(id), Some(sig)) = (blob.get(..4), blob.get(4..)) else {
                continue;
            };
            if id != self.id {
                continue;
            }
            let Ok(signature) = Signature::from_slice(sig) else {
                continue;
            };
            if self.key.verify(text.as_bytes(), &signature).is_ok() {
                return Ok(text);
            }
        }
        Err(CheckpointError::BadSignature(self.name.clone()))
    }
}

/// What one chain looked like at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// The deployment's name (`AUDIT_CHECKPOINT_ORIGIN`).
    pub deployment: String,
    /// The chain.
    pub chain_key: String,
    /// Its last `seq`.
    pub seq: u64,
    /// Its head hash.
    pub hash: String,
    /// When it was signed.
    pub time: DateTime<Utc>,
}

impl Checkpoint {
    /// The note text.
    pub fn text(&self) -> String {
        format!(
            "{}/audit/{}\n{}\n{}\ntime {}\n",
            self.deployment,
            self.chain_key,
            self.seq,
            self.hash,
            self.time.to_rfc3339_opts(SecondsFormat::Secs, true)
        )
    }

    /// Signs the checkpoint: the signed note.
    pub fn sign(&self, signer: &NoteSigner) -> Result<String, CheckpointError> {
        signer.sign(&self.text())
    }

    /// Verifies a signed checkpoint note and reads it.
    ///
    /// ```
    /// use audit_chain::{Checkpoint, NoteSigner};
    /// use chrono::{TimeZone, Utc};
    /// let signer = NoteSigner::from_seed("acme-audit", [7; 32]).unwrap();
    /// let cp = Checkpoint { deployment: "acme".into(), chain_key: "org-1".into(), seq: 42,
    ///                       hash: "ab".repeat(32), time: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() };
    /// let note = cp.sign(&signer).unwrap();
    /// assert!(note.starts_with("acme/audit/org-1\n42\n"));
    /// assert_eq!(Checkpoint::open(&note, &signer.verifier()).unwrap(), cp);
    /// let other = NoteSigner::from_seed("acme-audit", [8; 32]).unwrap();
    /// assert!(Checkpoint::open(&note, &other.verifier()).is_err());
    /// ```
    pub fn open(note: &str, verifier: &NoteVerifier) -> Result<Checkpoint, CheckpointError> {
        let text = verifier.open(note)?;
        let mut lines = text.lines();
        let bad = CheckpointError::MalformedNote;
        let origin = lines.next().ok_or(bad("no origin line"))?;
        let (deployment, chain_key) = origin
            .split_once("/audit/")
            .ok_or(bad("the origin does not name a chain"))?;
        let seq = lines
            .next()
            .and_then(|l| l.parse::<u64>().ok())
            .ok_or(bad("no seq line"))?;
        let hash = lines
            .next()
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or(bad("no hash line"))?;
        let time = lines
            .next()
            .and_then(|l| l.strip_prefix("time "))
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .ok_or(bad("no time line"))?
            .with_timezone(&Utc);
        Ok(Checkpoint {
            deployment: deployment.to_owned(),
            chain_key: chain_key.to_owned(),
            seq,
            hash: hash.to_owned(),
            time,
        })
    }
}

/// Whether a chain is due a new checkpoint: it advanced since its last one, and that
/// one is `interval_seconds` old, or `events` appends behind, or there is none yet.
pub fn checkpoint_due(
    head_seq: u64,
    last: Option<(u64, DateTime<Utc>)>,
    now: DateTime<Utc>,
    interval_seconds: i64,
    events: u64,
) -> bool {
    match last {
        None => head_seq > 0,
        Some((seq, at)) => {
            head_seq > seq
                && ((now - at).num_seconds() >= interval_seconds
                    || head_seq.saturating_sub(seq) >= events)
        }
    }
}

/// What checking a chain against its checkpoints found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "kind"
)]
pub enum CheckpointProblem {
    /// The chain ends before a signed checkpoint: its newest rows were deleted.
    Truncated {
        /// The checkpoint's seq.
        seq: u64,
        /// The chain's last seq (0 when empty).
        last_seq: u64,
    },
    /// The row at a checkpoint's seq does not carry the signed hash: rewritten.
    Rewritten {
        /// The seq.
        seq: u64,
        /// The signed hash.
        signed: String,
        /// The stored row's hash.
        stored: String,
    },
    /// A stored checkpoint does not verify with the key: refused.
    BadSignature {
        /// Its seq, when it could be read.
        seq: Option<u64>,
    },
}

/// The verdict on a chain's checkpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointVerdict {
    /// True when every checkpoint verified and the chain agrees with all of them.
    pub ok: bool,
    /// How many checkpoints were checked.
    pub checked: usize,
    /// The latest checkpoint's seq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_seq: Option<u64>,
    /// Checkpoints whose row lies in a pruned prefix (tolerated).
    pub pruned: usize,
    /// The first problem found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<CheckpointProblem>,
}

/// Checks a chain against its checkpoints while the chain streams by, in `seq`
/// order; memory grows with the checkpoints, not with the chain.
#[derive(Debug, Clone)]
pub struct CheckpointCheck {
    /// (seq, signed hash), ascending.
    expected: Vec<(u64, String)>,
    next: usize,
    first_seq: Option<u64>,
    last_seq: u64,
    pruned: usize,
    problem: Option<CheckpointProblem>,
}

impl CheckpointCheck {
    /// Verifies each signed note with `verifier` (a bad one is the problem found) and
    /// prepares the check of the chain `chain_key` against them.
    pub fn new<'a>(
        chain_key: &str,
        notes: impl IntoIterator<Item = &'a str>,
        verifier: &NoteVerifier,
    ) -> Self {
        let mut expected = Vec::new();
        let mut problem = None;
        for note in notes {
            match Checkpoint::open(note, verifier) {
                Ok(cp) if cp.chain_key == chain_key => expected.push((cp.seq, cp.hash)),
                Ok(_) | Err(_) => {
                    if problem.is_none() {
                        let seq = note.lines().nth(1).and_then(|l| l.parse().ok());
                        problem = Some(CheckpointProblem::BadSignature { seq });
                    }
                }
            }
        }
        expected.sort();
        expected.dedup();
        CheckpointCheck {
            expected,
            next: 0,
            first_seq: None,
            last_seq: 0,
            pruned: 0,
            problem,
        }
    }

    /// Feeds the next row of the chain.
    pub fn push(&mut self, row: &SealedEvent) {
        if self.first_seq.is_none() {
            self.first_seq = Some(row.seq);
            // Checkpoints below the first surviving row lie in a pruned prefix.
            while self
                .expected
                .get(self.next)
                .is_some_and(|(seq, _)| *seq < row.seq)
            {
                self.pruned += 1;
                self.next += 1;
            }
        }
        self.last_seq = row.seq;
        while let Some((seq, hash)) = self.expected.get(self.next) {
            if *seq > row.seq {
                break;
            }
            if *seq == row.seq && *hash != row.hash && self.problem.is_none() {
                self.problem = Some(CheckpointProblem::Rewritten {
                    seq: *seq,
                    signed: hash.clone(),
                    stored: row.hash.clone(),
                });
            }
            self.next += 1;
        }
    }

    /// The verdict once the chain has been read to its end.
    pub fn finish(self) -> CheckpointVerdict {
        let latest_seq = self.expected.last().map(|(seq, _)| *seq);
        let mut problem = self.problem;
        if problem.is_none() {
            if let Some(seq) = latest_seq.filter(|seq| *seq > self.last_seq) {
                problem = Some(CheckpointProblem::Truncated {
                    seq,
                    last_seq: self.last_seq,
                });
            }
        }
        CheckpointVerdict {
            ok: problem.is_none(),
            checked: self.expected.len(),
            latest_seq,
            pruned: self.pruned,
            problem,
        }
    }
}
