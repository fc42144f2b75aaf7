//! Signed checkpoints of the audit chains (`AUDIT_CHECKPOINT_*`).

use super::Reader;

/// Signed checkpoints of the audit chains (`AUDIT_CHECKPOINT_*`); absent without a key.
#[derive(Debug, Clone)]
pub struct CheckpointSettings {
    /// The signing key (`AUDIT_CHECKPOINT_KEY`: a file path or the key itself, in the
    /// signed-note private-key form). The database never holds it.
    pub signer: audit_chain::NoteSigner,
    /// The deployment's name in each checkpoint's origin (`AUDIT_CHECKPOINT_ORIGIN`,
    /// default: the key's name).
    pub origin: String,
    /// `AUDIT_CHECKPOINT_INTERVAL_SECONDS` (300).
    pub interval_seconds: u64,
    /// `AUDIT_CHECKPOINT_EVENTS` (1000): a chain this many appends past its last
    /// checkpoint gets a new one without waiting for the interval.
    pub events: u64,
    /// `AUDIT_CHECKPOINT_DIR`: where each checkpoint is also written as a file.
    pub dir: Option<std::path::PathBuf>,
}

/// Reads the section; `None` (with a warning) when no key is set.
pub(super) fn checkpoint_settings(r: &mut Reader<'_>) -> Option<CheckpointSettings> {
    match r.raw("AUDIT_CHECKPOINT_KEY").filter(|v| !v.is_empty()) {
        None => {
            r.warn("AUDIT_CHECKPOINT_KEY is unset: signed audit checkpoints are off".to_owned());
            None
        }
        Some(value) => {
            // The key itself, or a file that holds it.
            let text = if value.starts_with("PRIVATE+KEY+") {
                Ok(value.to_owned())
            } else {
                std::fs::read_to_string(value)
                    .map_err(|e| format!("cannot read the key file `{value}`: {e}"))
                    .map(|t| {
                        t.lines()
                            .find(|l| l.starts_with("PRIVATE+KEY+"))
                            .unwrap_or_default()
                            .to_owned()
                    })
            };
            match text.and_then(|t| {
                audit_chain::NoteSigner::from_private_key(&t).map_err(|e| e.to_string())
            }) {
                Ok(signer) => {
                    let origin = r.string("AUDIT_CHECKPOINT_ORIGIN", signer.name());
                    Some(CheckpointSettings {
                        origin,
                        interval_seconds: r.positive("AUDIT_CHECKPOINT_INTERVAL_SECONDS", 300),
                        events: r.positive("AUDIT_CHECKPOINT_EVENTS", 1000),
                        dir: r
                            .raw("AUDIT_CHECKPOINT_DIR")
                            .filter(|v| !v.is_empty())
                            .map(std::path::PathBuf::from),
                        signer,
                    })
                }
                Err(message) => {
                    r.fail("AUDIT_CHECKPOINT_KEY", message);
                    None
                }
            }
        }
    }
}
