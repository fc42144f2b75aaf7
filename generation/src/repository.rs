//! What a repository's file listing says, for a model asked to write its pipeline or
//! plugin: the languages (by file extension), the build files and the CI definitions
//! found, and a bounded description with the contents of the files worth reading.

use std::collections::BTreeMap;

use serde::Serialize;

/// One file of the listing: its path from the root and its size in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The path, `/`-separated.
    pub path: String,
    /// The size in bytes.
    pub size: u64,
}

/// A language and how many files are written in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Language {
    /// Its name.
    pub name: String,
    /// Its files.
    pub files: u64,
}

/// What the listing says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Survey {
    /// Files listed.
    pub files: u64,
    /// Whether the listing stopped at its bound (the repository has more files).
    pub truncated: bool,
    /// Languages, most files first.
    pub languages: Vec<Language>,
    /// Build files (manifests, Makefiles, Dockerfiles), shallowest first.
    pub build_files: Vec<String>,
    /// Existing CI definitions.
    pub ci_files: Vec<String>,
}

/// The most files whose contents a description carries.
pub const FILES_READ: usize = 12;
/// The most bytes of one file a description carries.
pub const FILE_BYTES: usize = 8 * 1024;
/// The most bytes of a description.
pub const DESCRIPTION_BYTES: usize = 48 * 1024;
/// A file larger than this is not read at all.
pub const READ_AT_MOST: u64 = 256 * 1024;

const LANGUAGES: [(&str, &str); 30] = [
    ("rs", "Rust"),
    ("go", "Go"),
    ("py", "Python"),
    ("js", "JavaScript"),
    ("mjs", "JavaScript"),
    ("cjs", "JavaScript"),
    ("jsx", "JavaScript"),
    ("ts", "TypeScript"),
    ("tsx", "TypeScript"),
    ("java", "Java"),
    ("kt", "Kotlin"),
    ("kts", "Kotlin"),
    ("scala", "Scala"),
    ("rb", "Ruby"),
    ("php", "PHP"),
    ("cs", "C#"),
    ("c", "C"),
    ("h", "C"),
    ("cc", "C++"),
    ("cpp", "C++"),
    ("hpp", "C++"),
    ("swift", "Swift"),
    ("sh", "Shell"),
    ("tf", "Terraform"),
    ("ex", "Elixir"),
    ("exs", "Elixir"),
    ("erl", "Erlang"),
    ("hs", "Haskell"),
    ("dart", "Dart"),
    ("lua", "Lua"),
];

const BUILD_FILES: [&str; 24] = [
    "Cargo.toml",
    "package.json",
    "go.mod",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "settings.gradle",
    "requirements.txt",
    "pyproject.toml",
    "setup.py",
    "Pipfile",
    "Gemfile",
    "composer.json",
    "Makefile",
    "CMakeLists.txt",
    "Dockerfile",
    "docker-compose.yml",
    "compose.yaml",
    "mix.exs",
    "build.sbt",
    "cdk.json",
    "tsconfig.json",
    "deno.json",
    "pubspec.yaml",
];

const CI_FILES: [&str; 9] = [
    ".gitlab-ci.yml",
    "Jenkinsfile",
    ".circleci/config.yml",
    "buildspec.yml",
    "azure-pipelines.yml",
    "bitbucket-pipelines.yml",
    ".travis.yml",
    ".drone.yml",
    "cloudbuild.yaml",
];

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn depth(path: &str) -> usize {
    path.matches('/').count()
}

/// Whether `path` is a CI definition.
pub fn is_ci(path: &str) -> bool {
    CI_FILES.contains(&path)
        || (path.starts_with(".github/workflows/")
            && depth(path) == 2
            && (path.ends_with(".yml") || path.ends_with(".yaml")))
}

/// Whether `path` is a build file (at most two directories deep, so that vendored
/// dependencies' manifests do not crowd the root's).
pub fn is_build(path: &str) -> bool {
    let name = file_name(path);
    depth(path) <= 2
        && !path.contains("node_modules/")
        && !path.starts_with("vendor/")
        && (BUILD_FILES.contains(&name) || name.ends_with(".csproj") || name.ends_with(".sln"))
}

/// The survey of `entries` (the listing stopped at its bound when `truncated`).
pub fn survey(entries: &[Entry], truncated: bool) -> Survey {
    let mut languages: BTreeMap<&str, u64> = BTreeMap::new();
    let mut build_files = Vec::new();
    let mut ci_files = Vec::new();
    for entry in entries {
        let name = file_name(&entry.path);
        if let Some((_, extension)) = name.rsplit_once('.') {
            if let Some((_, language)) = LANGUAGES
                .iter()
                .find(|(e, _)| e.eq_ignore_ascii_case(extension))
            {
                *languages.entry(language).or_default() += 1;
            }
        }
        if is_ci(&entry.path) {
            ci_files.push(entry.path.clone());
        } else if is_build(&entry.path) {
            build_files.push(entry.path.clone());
        }
    }
    let mut languages: Vec<Language> = languages
        .into_iter()
        .map(|(name, files)| Language {
            name: name.to_owned(),
            files,
        })
        .collect();
    languages.sort_by(|a, b| b.files.cmp(&a.files).then_with(|| a.name.cmp(&b.name)));
    build_files.sort_by(|a, b| depth(a).cmp(&depth(b)).then_with(|| a.cmp(b)));
    ci_files.sort();
    Survey {
        files: entries.len() as u64,
        truncated,
        languages,
        build_files,
        ci_files,
    }
}

/// The files whose contents are worth giving the model: CI definitions first, then
/// build files, none larger than [`READ_AT_MOST`], at most [`FILES_READ`].
pub fn to_read(survey: &Survey, entries: &[Entry]) -> Vec<String> {
    let small = |path: &String| {
        entries
            .iter()
            .any(|e| &e.path == path && e.size <= READ_AT_MOST)
    };
    survey
        .ci_files
        .iter()
        .chain(&survey.build_files)
        .filter(|path| small(path))
        .take(FILES_READ)
        .cloned()
        .collect()
}

/// The description a model is given: the URL, the survey and the files read (each
/// cut at [`FILE_BYTES`]), at most [`DESCRIPTION_BYTES`] in all.
pub fn describe(
    url: &str,
    reference: Option<&str>,
    survey: &Survey,
    contents: &[(String, String)],
) -> String {
    let mut text = format!("Repository: {url}");
    if let Some(reference) = reference {
        text.push_str(&format!(" (ref {reference})"));
    }
    text.push_str(&format!(
        "\nFiles: {}{}\n",
        survey.files,
        if survey.truncated {
            " (listing cut; there are more)"
        } else {
            ""
        }
    ));
    let languages: Vec<String> = survey
        .languages
        .iter()
        .map(|l| format!("{} ({} files)", l.name, l.files))
        .collect();
    text.push_str(&format!(
        "Languages: {}\nBuild files: {}\nCI definitions: {}\n",
        none_if_empty(&languages.join(", ")),
        none_if_empty(&survey.build_files.join(", ")),
        none_if_empty(&survey.ci_files.join(", "))
    ));
    for (path, content) in contents {
        let piece = format!("\n--- {path} ---\n{}\n", cut(content, FILE_BYTES));
        if text.len() + piece.len() > DESCRIPTION_BYTES {
            text.push_str("\n(further files left out)\n");
            break;
        }
        text.push_str(&piece);
    }
    text
}

fn none_if_empty(text: &str) -> &str {
    if text.is_empty() {
        "none found"
    } else {
        text
    }
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, size: u64) -> Entry {
        Entry {
            path: path.to_owned(),
            size,
        }
    }

    #[test]
    fn a_rust_service_with_workflows() {
        let entries = [
            entry("Cargo.toml", 300),
            entry("src/main.rs", 1000),
            entry("src/lib.rs", 1000),
            entry("web/app.ts", 10),
            entry(".github/workflows/ci.yml", 400),
            entry(".github/workflows/nested/x.yml", 400),
            entry("web/node_modules/left-pad/package.json", 10),
            entry("Dockerfile", 900_000),
        ];
        let survey = survey(&entries, false);
        assert_eq!(survey.files, 8);
        assert_eq!(
            survey.languages,
            [
                Language {
                    name: "Rust".to_owned(),
                    files: 2
                },
                Language {
                    name: "TypeScript".to_owned(),
                    files: 1
                }
            ]
        );
        assert_eq!(survey.build_files, ["Cargo.toml", "Dockerfile"]);
        assert_eq!(survey.ci_files, [".github/workflows/ci.yml"]);
        assert_eq!(
            to_read(&survey, &entries),
            [".github/workflows/ci.yml", "Cargo.toml"],
            "the large Dockerfile is not read"
        );
    }

    #[test]
    fn a_description_is_bounded() {
        let survey = survey(&[entry("Makefile", 10)], true);
        let big = "é".repeat(DESCRIPTION_BYTES);
        let contents: Vec<(String, String)> =
            (0..20).map(|i| (format!("f{i}"), big.clone())).collect();
        let text = describe(
            "https://git.example/a.git",
            Some("main"),
            &survey,
            &contents,
        );
        assert!(text.len() <= DESCRIPTION_BYTES + 64, "{}", text.len());
        assert!(text.contains("(listing cut; there are more)"));
        assert!(text.contains("Languages: none found"));
        assert!(text.contains("--- f0 ---"));
        assert!(text.contains("(further files left out)"));
    }
}
