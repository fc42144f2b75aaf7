//! The organization export's archive: a ZIP of newline-delimited JSON files (one per
//! resource, `audit.jsonl` the organization's audit chain as `compliance audit
//! verify` reads it) and `manifest.json`, written last, naming each file with its
//! size, its number of lines and its SHA-256. [`ArchiveWriter`] writes one file at
//! a time, a line at a time (nothing is held but the line); [`verify`] checks an
//! archive offline, streaming each file through its hash.

use std::io::{Read, Write};
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The manifest's name in the archive.
pub const MANIFEST: &str = "manifest.json";
/// The audit chain's file in the archive.
pub const AUDIT_FILE: &str = "audit.jsonl";
/// The manifest's format.
pub const FORMAT: u32 = 1;

/// What the archive holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: u32,
    /// The organization exported.
    pub org_id: String,
    /// When the export was made.
    pub created_at: DateTime<Utc>,
    /// Every file but the manifest, in the order written.
    pub files: Vec<FileEntry>,
}

/// One file of the archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileEntry {
    /// Its name.
    pub name: String,
    /// Its size in bytes (uncompressed).
    pub bytes: u64,
    /// Its lines.
    pub lines: u64,
    /// Its SHA-256, hex.
    pub sha256: String,
}

/// Why an archive could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The file system failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The ZIP format failed.
    #[error("{0}")]
    Zip(#[from] zip::result::ZipError),
    /// JSON did not serialize or parse.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// The archive is not what its manifest says.
    #[error("{0}")]
    Invalid(String),
}

struct Open {
    name: String,
    hash: Sha256,
    bytes: u64,
    lines: u64,
}

/// Writes an archive to a file, one JSON line at a time.
pub struct ArchiveWriter {
    zip: zip::ZipWriter<std::fs::File>,
    open: Option<Open>,
    files: Vec<FileEntry>,
}

impl ArchiveWriter {
    /// A new archive at `path` (created or truncated).
    pub fn create(path: &Path) -> Result<ArchiveWriter, ArchiveError> {
        Ok(ArchiveWriter {
            zip: zip::ZipWriter::new(std::fs::File::create(path)?),
            open: None,
            files: Vec::new(),
        })
    }

    fn close_file(&mut self) {
        if let Some(open) = self.open.take() {
            self.files.push(FileEntry {
                name: open.name,
                bytes: open.bytes,
                lines: open.lines,
                sha256: hex::encode(open.hash.finalize()),
            });
        }
    }

    /// Starts the file `name` (the one before it is done).
    pub fn begin(&mut self, name: &str) -> Result<(), ArchiveError> {
        self.close_file();
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .large_file(true);
        self.zip.start_file(name, options)?;
        self.open = Some(Open {
            name: name.to_owned(),
            hash: Sha256::new(),
            bytes: 0,
            lines: 0,
        });
        Ok(())
    }

    /// Writes one line of the current file.
    pub fn line(&mut self, value: &serde_json::Value) -> Result<(), ArchiveError> {
        let mut text = serde_json::to_vec(value)?;
        text.push(b'\n');
        let Some(open) = self.open.as_mut() else {
            return Err(ArchiveError::Invalid("a line before any file".to_owned()));
        };
        self.zip.write_all(&text)?;
        open.hash.update(&text);
        open.bytes += text.len() as u64;
        open.lines += 1;
        Ok(())
    }

    /// Writes the manifest and closes the archive.
    pub fn finish(
        mut self,
        org_id: &str,
        created_at: DateTime<Utc>,
    ) -> Result<Manifest, ArchiveError> {
        self.close_file();
        let manifest = Manifest {
            format: FORMAT,
            org_id: org_id.to_owned(),
            created_at,
            files: std::mem::take(&mut self.files),
        };
        self.zip
            .start_file(MANIFEST, zip::write::SimpleFileOptions::default())?;
        self.zip.write_all(&serde_json::to_vec_pretty(&manifest)?)?;
        self.zip.finish()?;
        Ok(manifest)
    }
}

/// What [`verify`] found for one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileCheck {
    /// Its name.
    pub name: String,
    /// Whether its bytes are the manifest's.
    pub ok: bool,
    /// What differs, when something does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Checks an archive against its manifest: every file it names is there with its
/// size, lines and SHA-256, and nothing else is. Answers the manifest and each
/// file's check; an archive that cannot be read, or has no manifest, is an error.
pub fn verify(path: &Path) -> Result<(Manifest, Vec<FileCheck>), ArchiveError> {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(path)?)?;
    let manifest: Manifest = {
        let mut file = archive
            .by_name(MANIFEST)
            .map_err(|_| ArchiveError::Invalid(format!("no {MANIFEST} in the archive")))?;
        let mut text = Vec::new();
        file.by_ref()
            .take(16 * 1024 * 1024)
            .read_to_end(&mut text)?;
        serde_json::from_slice(&text)?
    };
    if manifest.format != FORMAT {
        return Err(ArchiveError::Invalid(format!(
            "manifest format {} (this verifier reads {FORMAT})",
            manifest.format
        )));
    }
    let mut checks = Vec::new();
    for entry in &manifest.files {
        let problem = match archive.by_name(&entry.name) {
            Err(_) => Some("missing from the archive".to_owned()),
            Ok(mut file) => {
                let mut hash = Sha256::new();
                let (mut bytes, mut lines) = (0u64, 0u64);
                let mut buffer = vec![0u8; 64 * 1024];
                let mut failed = None;
                loop {
                    match file.read(&mut buffer) {
                        Ok(0) => break,
                        Ok(n) => {
                            let chunk = buffer.get(..n).unwrap_or_default();
                            hash.update(chunk);
                            bytes += n as u64;
                            lines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
                        }
                        Err(e) => {
                            // A damaged entry fails its CRC or its inflation.
                            failed = Some(format!("unreadable: {e}"));
                            break;
                        }
                    }
                }
                let digest = hex::encode(hash.finalize());
                failed.or(if digest != entry.sha256 {
                    Some(format!(
                        "SHA-256 {digest}, the manifest says {}",
                        entry.sha256
                    ))
                } else if bytes != entry.bytes || lines != entry.lines {
                    Some(format!(
                        "{bytes} bytes in {lines} lines, the manifest says {} in {}",
                        entry.bytes, entry.lines
                    ))
                } else {
                    None
                })
            }
        };
        checks.push(FileCheck {
            name: entry.name.clone(),
            ok: problem.is_none(),
            problem,
        });
    }
    for name in archive.file_names() {
        if name != MANIFEST && !manifest.files.iter().any(|f| f.name == name) {
            checks.push(FileCheck {
                name: name.to_owned(),
                ok: false,
                problem: Some("not named by the manifest".to_owned()),
            });
        }
    }
    Ok((manifest, checks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_verifies_and_a_changed_byte_is_found() {
        let dir = std::env::temp_dir().join(format!("org-export-{}", crate::new_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("export.zip");
        let mut writer = ArchiveWriter::create(&path).unwrap();
        writer.begin("rules.jsonl").unwrap();
        for n in 0..1000 {
            writer
                .line(&serde_json::json!({"id": n, "name": "x"}))
                .unwrap();
        }
        writer.begin("empty.jsonl").unwrap();
        let manifest = writer.finish("acme", Utc::now()).unwrap();
        assert_eq!(manifest.files.len(), 2);
        assert_eq!(manifest.files[0].lines, 1000);
        let (_, checks) = verify(&path).unwrap();
        assert!(checks.iter().all(|c| c.ok), "{checks:?}");
        // One byte of the stored (compressed) data changed: found.
        let mut bytes = std::fs::read(&path).unwrap();
        let at = 200;
        bytes[at] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        let found = match verify(&path) {
            Ok((_, checks)) => checks.iter().any(|c| !c.ok),
            Err(_) => true,
        };
        assert!(found);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
