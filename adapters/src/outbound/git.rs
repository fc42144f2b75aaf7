//! A bounded, shallow view of a Git repository for a prompt: the URL checked by the
//! address rule of webhooks (its host resolved once, every address globally routable
//! unless private ones are allowed, and the clone pinned to the address checked so a
//! second resolution cannot move it), then `git clone --bare --depth 1` over
//! http(s) only, with no credentials, no prompt, no redirect, within a time limit,
//! killed past a size limit; then the listing (at most a number of files) and the
//! contents of the few files worth reading, never a checkout. The temporary copy is
//! removed whatever happens.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use generation::repository::{self, Entry, Survey};
use tokio::process::Command;

/// Why a repository could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GitError {
    /// The URL is not one the server fetches (scheme, credentials, address).
    #[error("{0}")]
    Refused(String),
    /// The repository cannot be read: private, absent, unreachable, or the ref is
    /// unknown.
    #[error("{0}")]
    Unavailable(String),
    /// The repository is larger than the bound.
    #[error("the repository is larger than {0} bytes")]
    TooLarge(u64),
    /// The fetch took longer than the bound.
    #[error("the repository could not be fetched within {0} seconds")]
    Timeout(u64),
}

/// The limits of a fetch.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The longest it may take.
    pub timeout: Duration,
    /// The most bytes the copy may hold.
    pub max_bytes: u64,
    /// The most files listed.
    pub max_files: usize,
}

/// A URL checked and its host resolved, ready to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    url: String,
    host: String,
    port: u16,
    address: IpAddr,
}

/// Checks `url`: `http` or `https`, a host, no credentials, and every address the
/// host resolves to globally routable (any, when `allow_private`).
pub async fn check(url: &str, allow_private: bool) -> Result<Checked, GitError> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| GitError::Refused(format!("`url` is not a URL: {e}")))?;
    if !["http", "https"].contains(&parsed.scheme()) {
        return Err(GitError::Refused(
            "`url` must be an http or https address of a Git repository".to_owned(),
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(GitError::Refused(
            "`url` must not carry credentials: only public repositories are read".to_owned(),
        ));
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| GitError::Refused("`url` has no host".to_owned()))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = parsed.port_or_known_default().unwrap_or(443);
    let addresses: Vec<SocketAddr> = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::lookup_host((host.as_str(), port)),
    )
    .await
    .map_err(|_| GitError::Unavailable(format!("the host `{host}` did not resolve in time")))?
    .map_err(|_| GitError::Unavailable(format!("the host `{host}` does not resolve")))?
    .collect();
    let Some(first) = addresses.first() else {
        return Err(GitError::Unavailable(format!(
            "the host `{host}` does not resolve"
        )));
    };
    if !allow_private && addresses.iter().any(|a| !crate::notify::is_public(a.ip())) {
        return Err(GitError::Refused(format!(
            "`url` resolves to an address that is not globally routable ({}); only public repositories are read",
            first.ip()
        )));
    }
    Ok(Checked {
        url: url.to_owned(),
        host,
        port,
        address: first.ip(),
    })
}

/// The temporary copy, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Fetches the repository `checked` points at (`reference`: a branch or tag, else
/// its default branch) within `limits`; answers its survey and the description a
/// model is given.
pub async fn view(
    checked: &Checked,
    reference: Option<&str>,
    limits: Limits,
) -> Result<(Survey, String), GitError> {
    let scratch = Scratch(std::env::temp_dir().join(format!("compliance-git-{}", crate::new_id())));
    std::fs::create_dir_all(&scratch.0)
        .map_err(|e| GitError::Unavailable(format!("no room for the copy: {e}")))?;
    let copy = scratch.0.join("repo.git");
    let address = match checked.address {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    };
    let mut clone = git(&scratch.0);
    clone
        .args(["-c", "protocol.allow=never"])
        .args(["-c", "protocol.http.allow=always"])
        .args(["-c", "protocol.https.allow=always"])
        .args(["-c", "http.followRedirects=false"])
        .args(["-c", "credential.helper="])
        .arg("-c")
        .arg(format!(
            "http.curloptResolve={}:{}:{address}",
            checked.host, checked.port
        ))
        .args([
            "clone",
            "--bare",
            // No template: no sample hooks in the copy, only what was fetched.
            "--template=",
            "--depth",
            "1",
            "--single-branch",
            "--no-tags",
            "-q",
        ]);
    if let Some(reference) = reference {
        clone.args(["--branch", reference]);
    }
    clone.arg("--").arg(&checked.url).arg(&copy);
    let mut child = clone
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| GitError::Unavailable(format!("git cannot be started: {e}")))?;
    let mut stderr = child.stderr.take();
    let deadline = tokio::time::Instant::now() + limits.timeout;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {
                if tokio::time::Instant::now() >= deadline {
                    let _ = child.kill().await;
                    return Err(GitError::Timeout(limits.timeout.as_secs()));
                }
                if size_of(&scratch.0) > limits.max_bytes {
                    let _ = child.kill().await;
                    return Err(GitError::TooLarge(limits.max_bytes));
                }
            }
        }
    }
    .map_err(|e| GitError::Unavailable(format!("git failed: {e}")))?;
    if !status.success() {
        let mut said = String::new();
        if let Some(stderr) = stderr.as_mut() {
            use tokio::io::AsyncReadExt;
            let mut bytes = Vec::new();
            let _ = stderr.take(4096).read_to_end(&mut bytes).await;
            said = String::from_utf8_lossy(&bytes).into_owned();
        }
        return Err(GitError::Unavailable(unavailable(&said, reference)));
    }
    if size_of(&scratch.0) > limits.max_bytes {
        return Err(GitError::TooLarge(limits.max_bytes));
    }
    let listing = git(&copy)
        .args(["ls-tree", "-r", "-l", "--full-tree", "HEAD"])
        .output()
        .await
        .map_err(|e| GitError::Unavailable(format!("git cannot list the files: {e}")))?;
    if !listing.status.success() {
        return Err(GitError::Unavailable(
            "the repository's files cannot be listed (an empty repository?)".to_owned(),
        ));
    }
    let (entries, truncated) = entries(&String::from_utf8_lossy(&listing.stdout), limits.max_files);
    let survey = repository::survey(&entries, truncated);
    let mut contents = Vec::new();
    for path in repository::to_read(&survey, &entries) {
        let blob = git(&copy)
            .arg("cat-file")
            .arg("blob")
            .arg(format!("HEAD:{path}"))
            .output()
            .await;
        if let Some(blob) = blob.ok().filter(|b| b.status.success()) {
            contents.push((path, String::from_utf8_lossy(&blob.stdout).into_owned()));
        }
    }
    let described = repository::describe(&checked.url, reference, &survey, &contents);
    Ok((survey, described))
}

/// `git` with no system or user configuration, no prompt, in `dir`.
fn git(dir: &Path) -> Command {
    let mut command = Command::new("git");
    command
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "")
        .env("SSH_ASKPASS", "")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// The blobs of `ls-tree -r -l` output (`<mode> blob <id> <size>\t<path>`), at most
/// `max`; and whether there were more.
fn entries(listing: &str, max: usize) -> (Vec<Entry>, bool) {
    let mut entries = Vec::new();
    for line in listing.lines() {
        let Some((meta, path)) = line.split_once('\t') else {
            continue;
        };
        let mut fields = meta.split_whitespace();
        let (_, kind, _, size) = (fields.next(), fields.next(), fields.next(), fields.next());
        if kind != Some("blob") {
            continue;
        }
        if entries.len() == max {
            return (entries, true);
        }
        entries.push(Entry {
            path: path.to_owned(),
            size: size.and_then(|s| s.parse().ok()).unwrap_or(0),
        });
    }
    (entries, false)
}

/// The bytes under `dir`.
fn size_of(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        let Ok(read) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in read.flatten() {
            match entry.metadata() {
                Ok(meta) if meta.is_dir() => stack.push(entry.path()),
                Ok(meta) => total += meta.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// What a failed clone means, in words the caller can act on. Only git's own phrases
/// are matched, never bare numbers (a URL's port may hold `401`).
fn unavailable(said: &str, reference: Option<&str>) -> String {
    let lower = said.to_ascii_lowercase();
    let has = |phrases: &[&str]| phrases.iter().any(|p| lower.contains(p));
    if has(&[
        "terminal prompts disabled",
        "could not read username",
        "could not read password",
        "authentication failed",
        "returned error: 401",
        "returned error: 403",
    ]) {
        "the repository cannot be read without credentials: it is private, or does not exist"
            .to_owned()
    } else if has(&["remote branch"]) && has(&["not found"]) {
        format!(
            "the ref `{}` is not a branch or tag of the repository",
            reference.unwrap_or_default()
        )
    } else if has(&[
        "returned error: 404",
        "does not appear to be a git repository",
    ]) || (has(&["repository '"]) && has(&["' not found"]))
    {
        "no Git repository at this URL".to_owned()
    } else if has(&["redirect"]) {
        "the URL redirects elsewhere; give the repository's own URL".to_owned()
    } else {
        let last = said
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        format!("the repository cannot be fetched: {}", last.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn urls_are_checked_before_any_fetch() {
        for (url, words) in [
            ("ftp://example.com/r.git", "http or https"),
            ("file:///etc", "http or https"),
            ("https://u:p@example.com/r.git", "credentials"),
            ("http://127.0.0.1:9/r.git", "not globally routable"),
            ("http://[::1]:9/r.git", "not globally routable"),
            ("http://10.1.2.3/r.git", "not globally routable"),
            ("not a url", "not a URL"),
        ] {
            match check(url, false).await {
                Err(GitError::Refused(message)) => {
                    assert!(message.contains(words), "{url}: {message}")
                }
                other => panic!("{url}: {other:?}"),
            }
        }
        assert!(check("http://127.0.0.1:9/r.git", true).await.is_ok());
    }

    #[test]
    fn listings_are_bounded() {
        let listing = "100644 blob aa 12\tCargo.toml\n040000 tree bb -\tsrc\n100644 blob cc 7\tsrc/main.rs\n160000 commit dd -\tsub\n";
        let (all, cut) = entries(listing, 10);
        assert_eq!(all.len(), 2);
        assert!(!cut);
        assert_eq!(
            all[0],
            Entry {
                path: "Cargo.toml".to_owned(),
                size: 12
            }
        );
        let (one, cut) = entries(listing, 1);
        assert_eq!(one.len(), 1);
        assert!(cut);
    }

    #[test]
    fn failures_say_what_to_do() {
        assert!(unavailable(
            "fatal: could not read Username for 'http://x': terminal prompts disabled",
            None
        )
        .contains("private"));
        assert!(unavailable("warning: Could not find remote branch nope to clone.\nfatal: Remote branch nope not found in upstream origin", Some("nope")).contains("`nope`"));
        assert!(unavailable(
            "fatal: unable to access 'http://x/': Failed to connect",
            None
        )
        .contains("Failed to connect"));
        assert_eq!(
            unavailable(
                "fatal: repository 'http://127.0.0.1:40127/absent.git/' not found",
                None
            ),
            "no Git repository at this URL",
            "a port holding 401 is not a refusal"
        );
        assert!(unavailable(
            "fatal: unable to access 'http://h:4403/r/': The requested URL returned error: 403",
            None
        )
        .contains("private"));
    }
}
