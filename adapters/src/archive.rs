//! Plugin archives: a ZIP with a manifest at its root (`plugin.json` or
//! `plugin.yaml`) and optionally a `Dockerfile` beside it. The archive is hostile
//! input: [`inspect`] reads it in memory and refuses path traversal, links, more
//! than [`MAX_ENTRIES`] entries, more than [`MAX_UNPACKED_BYTES`] unpacked, a
//! compression ratio past [`MAX_RATIO`], and a missing or invalid manifest; nothing is
//! written anywhere. [`unpack`] writes an inspected archive into a directory the
//! caller made (the build worker's temporary directory), enforcing the same limits
//! on what it actually reads.
//!
//! What is judged is what is built. [`inspect`] decompresses every entry (stopping as
//! soon as the total passes [`MAX_UNPACKED_BYTES`]), so an entry whose real size is not
//! the size its header declares, or whose CRC-32 does not match, is refused at upload
//! rather than by the build. And the one build definition a plugin carries is the
//! `Dockerfile` at its root, the file the rules judge: an archive that carries any
//! other (`Containerfile`, `dockerfile`, `Dockerfile.dev`, `x.containerfile`, at any
//! depth) is refused, so no builder can pick a file the rules did not see.
//!
//! The manifest (JSON or YAML):
//!
//! | field | type | |
//! |---|---|---|
//! | `name` | string, 1 to 100 of `a-z A-Z 0-9 . _ -`, starting alphanumeric | required |
//! | `version` | string, 1 to 64 of `a-z A-Z 0-9 . _ + -` | required |
//! | `description` | string, at most 2,000 characters | |
//! | `pluginType` | string, at most 100 characters (the kind of step) | |
//! | `computeType` | string, at most 100 characters (build compute size) | |
//! | `commands` | array of at most 100 strings of at most 4,096 characters | |
//! | `installCommands` | same | |
//!
//! Unknown fields are refused, so a typo is an error rather than a silent default.

use std::io::{Cursor, Read};
use std::path::Path;

use serde::{Deserialize, Serialize};

/// At most this many entries.
pub const MAX_ENTRIES: usize = 1_000;
/// At most this many bytes unpacked, in all.
pub const MAX_UNPACKED_BYTES: u64 = 50 * 1024 * 1024;
/// Unpacked over packed, past which an archive (of more than a mebibyte unpacked)
/// looks like a bomb.
pub const MAX_RATIO: u64 = 100;
/// The manifest and the Dockerfile are read whole; at most this many bytes each.
pub const MAX_DESCRIPTOR_BYTES: u64 = 256 * 1024;

/// Why an archive is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchiveError {
    /// Not a ZIP archive.
    #[error("not a ZIP archive: {0}")]
    NotZip(String),
    /// Too many entries.
    #[error("the archive has {0} entries; at most {MAX_ENTRIES} are allowed")]
    TooManyEntries(usize),
    /// Too large unpacked.
    #[error("the archive unpacks to more than {MAX_UNPACKED_BYTES} bytes")]
    TooLarge,
    /// A compression ratio that looks like a bomb.
    #[error("the archive's compression ratio ({0}:1) looks like a decompression bomb")]
    Bomb(u64),
    /// An entry whose path leaves the archive's directory, or is absolute.
    #[error("the entry `{0}` has a path outside the archive")]
    Traversal(String),
    /// A symbolic link (or another entry that is neither a file nor a directory).
    #[error("the entry `{0}` is a link; links are not allowed")]
    Link(String),
    /// No manifest at the root.
    #[error("no plugin.json or plugin.yaml at the archive's root")]
    NoManifest,
    /// A manifest that does not parse or holds a bad value.
    #[error("invalid manifest: {0}")]
    Manifest(String),
    /// An entry that could not be read.
    #[error("the entry `{0}` cannot be read")]
    Unreadable(String),
    /// An entry whose data is not what its header says: another size, or a CRC-32
    /// that does not match.
    #[error("the entry `{0}` is corrupt: {1}")]
    Corrupt(String, String),
    /// A build definition other than the root `Dockerfile`.
    #[error("the entry `{0}` is a build definition; the only one a plugin may carry is `Dockerfile` at the archive's root")]
    ExtraBuildDefinition(String),
    /// A NUL character in a field that is kept as text.
    #[error("{0}: must not contain a NUL character")]
    Nul(String),
}

/// Whether an entry's file name names a build definition (Dockerfile or
/// Containerfile, in any case, with or without a suffix or a prefix).
pub fn is_build_definition(entry_name: &str) -> bool {
    let base = entry_name
        .rsplit('/')
        .next()
        .unwrap_or(entry_name)
        .to_ascii_lowercase();
    ["dockerfile", "containerfile"].iter().any(|kind| {
        base == *kind
            || base.starts_with(&format!("{kind}."))
            || base.ends_with(&format!(".{kind}"))
    })
}

/// A plugin's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manifest {
    /// The plugin's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// What it does.
    #[serde(default)]
    pub description: Option<String>,
    /// The kind of step it implements.
    #[serde(default)]
    pub plugin_type: Option<String>,
    /// The build compute size.
    #[serde(default)]
    pub compute_type: Option<String>,
    /// Build commands.
    #[serde(default)]
    pub commands: Vec<String>,
    /// Install commands.
    #[serde(default)]
    pub install_commands: Vec<String>,
}

/// What an inspected archive holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspected {
    /// The manifest.
    pub manifest: Manifest,
    /// The Dockerfile beside it, if any.
    pub dockerfile: Option<String>,
}

fn token(field: &str, value: &str, max: usize, extra: &[char]) -> Result<(), ArchiveError> {
    let ok = !value.is_empty()
        && value.chars().count() <= max
        && value
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || extra.contains(&c));
    if ok {
        Ok(())
    } else {
        Err(ArchiveError::Manifest(format!(
            "{field}: must be 1 to {max} of letters, digits and {}, starting with a letter or digit",
            extra.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(" ")
        )))
    }
}

fn bounded(field: &str, value: Option<&str>, max: usize) -> Result<(), ArchiveError> {
    match value {
        Some(v) if v.chars().count() > max || v.chars().any(|c| c.is_control() && c != '\n') => {
            Err(ArchiveError::Manifest(format!(
                "{field}: must be at most {max} characters, without control characters"
            )))
        }
        _ => Ok(()),
    }
}

fn commands(field: &str, list: &[String]) -> Result<(), ArchiveError> {
    if list.iter().any(|c| c.contains('\0')) {
        return Err(ArchiveError::Nul(field.to_owned()));
    }
    if list.len() > 100
        || list
            .iter()
            .any(|c| c.is_empty() || c.chars().count() > 4096)
    {
        return Err(ArchiveError::Manifest(format!(
            "{field}: at most 100 non-empty commands of at most 4096 characters"
        )));
    }
    Ok(())
}

impl Manifest {
    /// Checks every field against the manifest's schema.
    pub fn check(&self) -> Result<(), ArchiveError> {
        token("name", &self.name, 100, &['.', '_', '-'])?;
        token("version", &self.version, 64, &['.', '_', '+', '-'])?;
        bounded("description", self.description.as_deref(), 2000)?;
        bounded("pluginType", self.plugin_type.as_deref(), 100)?;
        bounded("computeType", self.compute_type.as_deref(), 100)?;
        commands("commands", &self.commands)?;
        commands("installCommands", &self.install_commands)
    }

    /// Parses a manifest from `plugin.json` (JSON) or `plugin.yaml` (YAML) text.
    pub fn parse(text: &str, yaml: bool) -> Result<Manifest, ArchiveError> {
        let manifest: Manifest = if yaml {
            serde_yaml_ng::from_str(text).map_err(|e| ArchiveError::Manifest(e.to_string()))?
        } else {
            serde_json::from_str(text).map_err(|e| ArchiveError::Manifest(e.to_string()))?
        };
        manifest.check()?;
        Ok(manifest)
    }
}

const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;
const S_IFDIR: u32 = 0o040_000;

/// The archive's entries, each checked for its path and kind, and the limits of the
/// whole (declared sizes; [`read_limited`] holds the actual bytes to them too).
fn checked(bytes: &[u8]) -> Result<zip::ZipArchive<Cursor<&[u8]>>, ArchiveError> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| ArchiveError::NotZip(e.to_string()))?;
    if archive.len() > MAX_ENTRIES {
        return Err(ArchiveError::TooManyEntries(archive.len()));
    }
    let mut unpacked: u64 = 0;
    let mut packed: u64 = 0;
    for i in 0..archive.len() {
        let entry = archive
            .by_index_raw(i)
            .map_err(|e| ArchiveError::NotZip(e.to_string()))?;
        let name = entry.name().to_owned();
        // A name must end in a file or folder name: an empty one (or `.`) names the
        // unpacking directory itself, which no entry may be.
        let safe = entry
            .enclosed_name()
            .is_some_and(|path| path.file_name().is_some())
            && !name.starts_with('/')
            && !name.contains('\\')
            && !name.split('/').any(|part| part == "..");
        if !safe {
            return Err(ArchiveError::Traversal(name));
        }
        if let Some(mode) = entry.unix_mode() {
            let kind = mode & S_IFMT;
            if kind != 0 && kind != S_IFREG && kind != S_IFDIR {
                return Err(ArchiveError::Link(name));
            }
        }
        unpacked = unpacked.saturating_add(entry.size());
        packed = packed.saturating_add(entry.compressed_size());
    }
    if unpacked > MAX_UNPACKED_BYTES {
        return Err(ArchiveError::TooLarge);
    }
    within_ratio(unpacked, packed)?;
    Ok(archive)
}

/// Reads an entry whole, at most `max` bytes (whatever its header declares).
fn read_limited(entry: impl Read, name: &str, max: u64) -> Result<Vec<u8>, ArchiveError> {
    let mut out = Vec::new();
    entry
        .take(max.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|_| ArchiveError::Unreadable(name.to_owned()))?;
    if out.len() as u64 > max {
        return Err(ArchiveError::TooLarge);
    }
    Ok(out)
}

/// Decompresses every entry once, to nowhere, and holds it to its header: its real
/// size is the declared one, its CRC-32 matches, the total stays within
/// [`MAX_UNPACKED_BYTES`] (reading stops at the limit), the ratio within
/// [`MAX_RATIO`]; and no build definition but the root `Dockerfile` is carried.
fn verify_entries(archive: &mut zip::ZipArchive<Cursor<&[u8]>>) -> Result<(), ArchiveError> {
    let mut budget = MAX_UNPACKED_BYTES;
    let mut packed: u64 = 0;
    for i in 0..archive.len() {
        let entry = archive
            .by_index(i)
            .map_err(|e| ArchiveError::NotZip(e.to_string()))?;
        let name = entry.name().to_owned();
        if entry.is_dir() {
            if entry.size() > 0 {
                return Err(ArchiveError::Corrupt(
                    name,
                    "a folder entry that holds data".to_owned(),
                ));
            }
            continue;
        }
        if is_build_definition(&name) && name != "Dockerfile" {
            return Err(ArchiveError::ExtraBuildDefinition(name));
        }
        let declared = entry.size();
        packed = packed.saturating_add(entry.compressed_size());
        let mut limited = entry.take(budget.saturating_add(1));
        let real = std::io::copy(&mut limited, &mut std::io::sink())
            .map_err(|e| ArchiveError::Corrupt(name.clone(), e.to_string()))?;
        if real > budget {
            return Err(ArchiveError::TooLarge);
        }
        if real != declared {
            return Err(ArchiveError::Corrupt(
                name,
                format!("it declares {declared} bytes and holds {real}"),
            ));
        }
        budget -= real;
    }
    let unpacked = MAX_UNPACKED_BYTES - budget;
    within_ratio(unpacked, packed)
}

/// An archive of more than a mebibyte unpacked whose unpacked-to-packed ratio passes
/// [`MAX_RATIO`] looks like a bomb (judged on the declared sizes, then on the real
/// ones).
fn within_ratio(unpacked: u64, packed: u64) -> Result<(), ArchiveError> {
    let ratio = unpacked / packed.max(1);
    if unpacked > 1024 * 1024 && ratio > MAX_RATIO {
        return Err(ArchiveError::Bomb(ratio));
    }
    Ok(())
}

/// Checks an uploaded archive and reads its manifest and Dockerfile, in memory.
pub fn inspect(bytes: &[u8]) -> Result<Inspected, ArchiveError> {
    let mut archive = checked(bytes)?;
    verify_entries(&mut archive)?;
    let (name, yaml) = if archive.index_for_name("plugin.json").is_some() {
        ("plugin.json", false)
    } else if archive.index_for_name("plugin.yaml").is_some() {
        ("plugin.yaml", true)
    } else if archive.index_for_name("plugin.yml").is_some() {
        ("plugin.yml", true)
    } else {
        return Err(ArchiveError::NoManifest);
    };
    let entry = archive
        .by_name(name)
        .map_err(|_| ArchiveError::Unreadable(name.to_owned()))?;
    let text = String::from_utf8(read_limited(entry, name, MAX_DESCRIPTOR_BYTES)?)
        .map_err(|_| ArchiveError::Manifest("the manifest is not UTF-8".to_owned()))?;
    let manifest = Manifest::parse(&text, yaml)?;
    let dockerfile = match archive.by_name("Dockerfile") {
        Ok(entry) => Some(
            String::from_utf8(read_limited(entry, "Dockerfile", MAX_DESCRIPTOR_BYTES)?)
                .map_err(|_| ArchiveError::Unreadable("Dockerfile".to_owned()))?,
        ),
        Err(_) => None,
    };
    if dockerfile.as_deref().is_some_and(|d| d.contains('\0')) {
        return Err(ArchiveError::Nul("Dockerfile".to_owned()));
    }
    Ok(Inspected {
        manifest,
        dockerfile,
    })
}

/// Unpacks an archive into `dir` (which the caller made and owns), with the checks of
/// [`inspect`] and the unpacked total held to [`MAX_UNPACKED_BYTES`] as it is read.
pub fn unpack(bytes: &[u8], dir: &Path) -> Result<(), ArchiveError> {
    let mut archive = checked(bytes)?;
    let mut budget = MAX_UNPACKED_BYTES;
    for i in 0..archive.len() {
        let mut entry = archive
            .by_index(i)
            .map_err(|e| ArchiveError::NotZip(e.to_string()))?;
        let name = entry.name().to_owned();
        // Only the names of the path, in order: `a//./b/` is `a/b` (a `.` left in
        // would make `create_dir_all` fail on a folder that does not exist yet).
        let relative: std::path::PathBuf = entry
            .enclosed_name()
            .ok_or_else(|| ArchiveError::Traversal(name.clone()))?
            .components()
            .filter(|part| matches!(part, std::path::Component::Normal(_)))
            .collect();
        let target = dir.join(relative);
        if entry.is_dir() {
            std::fs::create_dir_all(&target).map_err(|_| ArchiveError::Unreadable(name))?;
            continue;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|_| ArchiveError::Unreadable(name.clone()))?;
        }
        let content = read_limited(&mut entry, &name, budget)?;
        budget = budget.saturating_sub(content.len() as u64);
        std::fs::write(&target, content).map_err(|_| ArchiveError::Unreadable(name))?;
    }
    Ok(())
}

/// An archive holding `manifest` as `plugin.json` and the Dockerfile (a generated
/// plugin is kept like an uploaded one).
pub fn pack(manifest: &Manifest, dockerfile: Option<&str>) -> Result<Vec<u8>, ArchiveError> {
    use std::io::Write;
    let mut out = Cursor::new(Vec::new());
    {
        let mut writer = zip::ZipWriter::new(&mut out);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(0o644);
        let text = serde_json::to_string_pretty(manifest)
            .map_err(|e| ArchiveError::Manifest(e.to_string()))?;
        let fail = |e: zip::result::ZipError| ArchiveError::NotZip(e.to_string());
        writer.start_file("plugin.json", options).map_err(fail)?;
        writer
            .write_all(text.as_bytes())
            .map_err(|_| ArchiveError::Unreadable("plugin.json".to_owned()))?;
        if let Some(dockerfile) = dockerfile {
            writer.start_file("Dockerfile", options).map_err(fail)?;
            writer
                .write_all(dockerfile.as_bytes())
                .map_err(|_| ArchiveError::Unreadable("Dockerfile".to_owned()))?;
        }
        writer.finish().map_err(fail)?;
    }
    Ok(out.into_inner())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        {
            let mut writer = zip::ZipWriter::new(&mut out);
            let options = zip::write::SimpleFileOptions::default();
            for (name, bytes) in entries {
                assert!(writer.start_file(*name, options).is_ok());
                assert!(writer.write_all(bytes).is_ok());
            }
            assert!(writer.finish().is_ok());
        }
        out.into_inner()
    }

    /// Found by the `plugin_archive` fuzz target: an entry without a name was
    /// inspected and then could not be unpacked. Whatever `inspect` accepts unpacks.
    #[test]
    fn an_entry_that_names_the_directory_itself_is_refused() {
        let manifest = br#"{"name":"a","version":"1"}"#;
        for name in ["", ".", "./"] {
            let archive = zip_of(&[("plugin.json", manifest), (name, b"x")]);
            assert!(
                matches!(inspect(&archive), Err(ArchiveError::Traversal(_))),
                "{name:?}"
            );
        }
        let archive = zip_of(&[("plugin.json", manifest), ("src/", b""), ("src/a", b"x")]);
        assert!(inspect(&archive).is_ok());
    }

    /// Found by the fuzz target too: a folder named `Con//./` unpacks (as `Con`), and
    /// a folder entry that carries data is refused at inspect.
    #[test]
    fn folder_names_are_normalized_and_folders_hold_no_data() {
        let manifest = br#"{"name":"a","version":"1"}"#;
        let folder = zip_of(&[("plugin.json", manifest), ("Con//./", b"")]);
        assert!(inspect(&folder).is_ok());
        let dir = std::env::temp_dir().join(format!("archive-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(std::fs::create_dir_all(&dir).is_ok());
        assert_eq!(unpack(&folder, &dir), Ok(()));
        assert!(dir.join("Con").is_dir());
        let _ = std::fs::remove_dir_all(&dir);
        let loaded = zip_of(&[("plugin.json", manifest), ("Con//./", b"payload")]);
        assert!(matches!(inspect(&loaded), Err(ArchiveError::Corrupt(..))));
    }
}
