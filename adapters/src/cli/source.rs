//! The files the offline verbs read: JSON or YAML, from a path, a glob or standard
//! input (`-`).

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use super::{bad_input, Failure};

/// How a file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// JSON.
    Json,
    /// YAML (1.2; JSON is read as JSON).
    Yaml,
}

/// One file read whole: what it is called in reports, where it is, and its text.
#[derive(Debug, Clone)]
pub struct Source {
    /// The name reports use: the path as given, `-` for standard input.
    pub name: String,
    /// The path, absent for standard input.
    pub path: Option<PathBuf>,
    /// The text.
    pub text: String,
}

/// The name standard input goes by.
pub const STDIN: &str = "-";

impl Source {
    /// Reads `path`, or standard input when it is `-` (once per run: `stdin_taken`
    /// remembers whether it already was).
    pub fn read(path: &str, stdin_taken: &mut bool) -> Result<Source, Failure> {
        if path == STDIN {
            if std::mem::replace(stdin_taken, true) {
                return Err(bad_input("`-` (standard input) can be given only once"));
            }
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| bad_input(format!("standard input: {e}")))?;
            return Ok(Source {
                name: STDIN.to_owned(),
                path: None,
                text,
            });
        }
        let text = std::fs::read_to_string(path).map_err(|e| bad_input(format!("{path}: {e}")))?;
        Ok(Source {
            name: path.to_owned(),
            path: Some(PathBuf::from(path)),
            text,
        })
    }

    /// JSON or YAML: by the extension (`.yaml`, `.yml`), and for standard input by
    /// the first character (`{` or `[` is JSON).
    pub fn syntax(&self) -> Syntax {
        match &self.path {
            Some(path) => syntax_of(path),
            None => match self.text.trim_start().chars().next() {
                Some('{' | '[') => Syntax::Json,
                _ => Syntax::Yaml,
            },
        }
    }

    /// The file as `T`; the error names the file.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, Failure> {
        let parsed = match self.syntax() {
            Syntax::Json => serde_json::from_str(&self.text).map_err(|e| e.to_string()),
            Syntax::Yaml => serde_yaml_ng::from_str(&self.text).map_err(|e| e.to_string()),
        };
        parsed.map_err(|e| bad_input(format!("{}: {e}", self.name)))
    }
}

/// The syntax a path's extension names; JSON unless it says YAML.
pub fn syntax_of(path: &Path) -> Syntax {
    match path.extension().and_then(|e| e.to_str()) {
        Some(ext) if ext.eq_ignore_ascii_case("yaml") || ext.eq_ignore_ascii_case("yml") => {
            Syntax::Yaml
        }
        _ => Syntax::Json,
    }
}

/// The files the arguments name, in order: a path as it is, a glob (`*`, `?`, `[`)
/// that is not itself a file expanded in sorted order, `-` as it is. A glob that
/// matches nothing is an error, so that a typo never passes for "no violations".
pub fn expand(arguments: &[String]) -> Result<Vec<String>, Failure> {
    let mut files = Vec::new();
    for argument in arguments {
        let is_glob = argument.contains(['*', '?', '[']);
        if argument == STDIN || !is_glob || Path::new(argument).exists() {
            files.push(argument.clone());
            continue;
        }
        let paths = glob::glob(argument).map_err(|e| bad_input(format!("`{argument}`: {e}")))?;
        let mut matched: Vec<String> = Vec::new();
        for path in paths {
            let path = path.map_err(|e| bad_input(format!("`{argument}`: {e}")))?;
            if path.is_file() {
                matched.push(path.display().to_string());
            }
        }
        if matched.is_empty() {
            return Err(bad_input(format!("`{argument}` matches no file")));
        }
        matched.sort();
        files.extend(matched);
    }
    if files.is_empty() {
        return Err(bad_input("no attribute files given"));
    }
    Ok(files)
}
