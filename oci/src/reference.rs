//! Repository names, tags, digests and references, with the grammar of the OCI
//! distribution specification 1.1 ("Pulling manifests"). Parsing is validating: a
//! value of these types is one a registry accepts.

use std::fmt;

use sha2::{Digest as _, Sha256, Sha512};

/// The longest repository name accepted (the specification lets registries refuse
/// longer names; distribution refuses past 255 with the host).
pub const MAX_REPOSITORY: usize = 255;
/// The longest tag (the specification: 128 characters).
pub const MAX_TAG: usize = 128;

/// Why a name, tag, digest or reference was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// Not a repository name.
    #[error("`{0}` is not a repository name (lower-case letters and digits in path components separated by `/`, with `.`, `_`, `__` or dashes between them; at most 255 characters)")]
    Repository(String),
    /// Not a tag.
    #[error("`{0}` is not a tag (a letter, digit or `_`, then up to 127 letters, digits, `.`, `_` or `-`)")]
    Tag(String),
    /// Not a digest this server verifies.
    #[error(
        "`{0}` is not a digest (`sha256:` and 64 lower-case hex digits, or `sha512:` and 128)"
    )]
    Digest(String),
    /// No `:<tag>` or `@<digest>`.
    #[error(
        "`{0}` names no tag or digest (write `<repository>:<tag>` or `<repository>@<digest>`)"
    )]
    NoReference(String),
}

/// A repository name: path components of lower-case letters and digits, joined
/// inside a component by `.`, `_`, `__` or one or more `-`, separated by `/`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Repository(String);

impl Repository {
    /// Parses a repository name.
    ///
    /// ```
    /// use oci::Repository;
    /// assert!(Repository::parse("org-a/plugin").is_ok());
    /// assert!(Repository::parse("system/a__b.c/d--e").is_ok());
    /// for bad in ["", "Org/app", "a//b", "a/", "-a", "a_-b", "a___b", "a:b"] {
    ///     assert!(Repository::parse(bad).is_err(), "{bad}");
    /// }
    /// ```
    pub fn parse(name: &str) -> Result<Repository, ReferenceError> {
        let ok = !name.is_empty()
            && name.len() <= MAX_REPOSITORY
            && name.split('/').all(is_path_component);
        if ok {
            Ok(Repository(name.to_owned()))
        } else {
            Err(ReferenceError::Repository(name.to_owned()))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path components, first to last.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }
}

impl fmt::Display for Repository {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn is_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut i = 0;
    loop {
        // A run of letters and digits.
        let start = i;
        while bytes.get(i).copied().is_some_and(alnum) {
            i += 1;
        }
        if i == start {
            return false;
        }
        // The end, or a separator followed by another run.
        match bytes.get(i) {
            None => return true,
            Some(b'.') => i += 1,
            Some(b'_') => {
                i += 1;
                if bytes.get(i) == Some(&b'_') {
                    i += 1;
                }
            }
            Some(b'-') => {
                while bytes.get(i) == Some(&b'-') {
                    i += 1;
                }
            }
            Some(_) => return false,
        }
    }
}

/// A tag: `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tag(String);

impl Tag {
    /// Parses a tag.
    ///
    /// ```
    /// use oci::Tag;
    /// assert!(Tag::parse("1.0.0").is_ok() && Tag::parse("_latest-Z").is_ok());
    /// assert!(Tag::parse(".hidden").is_err() && Tag::parse("a/b").is_err());
    /// assert!(Tag::parse(&"x".repeat(129)).is_err());
    /// ```
    pub fn parse(tag: &str) -> Result<Tag, ReferenceError> {
        let mut chars = tag.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if first_ok && rest_ok && tag.len() <= MAX_TAG {
            Ok(Tag(tag.to_owned()))
        } else {
            Err(ReferenceError::Tag(tag.to_owned()))
        }
    }

    /// The tag.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A content digest this server can verify: `sha256:<64 hex>` or `sha512:<128 hex>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(String);

impl Digest {
    /// Parses a digest.
    ///
    /// ```
    /// use oci::Digest;
    /// let d = format!("sha256:{}", "a".repeat(64));
    /// assert!(Digest::parse(&d).is_ok());
    /// assert!(Digest::parse(&d.to_uppercase()).is_err());
    /// assert!(Digest::parse("md5:abc").is_err());
    /// ```
    pub fn parse(digest: &str) -> Result<Digest, ReferenceError> {
        let refused = || ReferenceError::Digest(digest.to_owned());
        let (algorithm, encoded) = digest.split_once(':').ok_or_else(refused)?;
        let length = match algorithm {
            "sha256" => 64,
            "sha512" => 128,
            _ => return Err(refused()),
        };
        let hex_ok = encoded.len() == length
            && encoded
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if hex_ok {
            Ok(Digest(digest.to_owned()))
        } else {
            Err(refused())
        }
    }

    /// The SHA-256 digest of `bytes`.
    ///
    /// ```
    /// use oci::Digest;
    /// assert_eq!(
    ///     Digest::sha256_of(b"").as_str(),
    ///     "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    /// );
    /// ```
    pub fn sha256_of(bytes: &[u8]) -> Digest {
        Digest(format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
    }

    /// Whether `bytes` hash to this digest, with its own algorithm.
    ///
    /// ```
    /// use oci::Digest;
    /// let d = Digest::sha256_of(b"layer");
    /// assert!(d.verifies(b"layer") && !d.verifies(b"layer!"));
    /// ```
    pub fn verifies(&self, bytes: &[u8]) -> bool {
        let encoded = match self.0.split_once(':') {
            Some(("sha256", _)) => hex::encode(Sha256::digest(bytes)),
            Some(("sha512", _)) => hex::encode(Sha512::digest(bytes)),
            _ => return false,
        };
        self.0.split_once(':').map(|(_, e)| e) == Some(encoded.as_str())
    }

    /// The digest.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a reference points at within its repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A tag.
    Tag(Tag),
    /// A manifest digest.
    Digest(Digest),
}

impl Target {
    /// A tag or a digest (a digest has a colon, a tag never does).
    pub fn parse(reference: &str) -> Result<Target, ReferenceError> {
        if reference.contains(':') {
            Digest::parse(reference).map(Target::Digest)
        } else {
            Tag::parse(reference).map(Target::Tag)
        }
    }

    /// The text as a registry's URL takes it.
    pub fn as_str(&self) -> &str {
        match self {
            Target::Tag(tag) => tag.as_str(),
            Target::Digest(digest) => digest.as_str(),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A manifest in a repository: `<repo>:<tag>`, `<repo>:<digest>` or `<repo>@<digest>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The repository.
    pub repository: Repository,
    /// The tag or digest.
    pub target: Target,
}

impl Reference {
    /// Parses `<repo>:<ref>` (the ref a tag or a digest) or `<repo>@<digest>`. The
    /// repository names no registry host: the registry is the server's.
    ///
    /// ```
    /// use oci::{Reference, Target};
    /// let r = Reference::parse("org-a/plugin:1.0.0").unwrap();
    /// assert_eq!((r.repository.as_str(), r.target.as_str()), ("org-a/plugin", "1.0.0"));
    /// let digest = format!("sha256:{}", "0".repeat(64));
    /// let by_colon = Reference::parse(&format!("org-a/plugin:{digest}")).unwrap();
    /// let by_at = Reference::parse(&format!("org-a/plugin@{digest}")).unwrap();
    /// assert_eq!(by_colon, by_at);
    /// assert!(matches!(by_at.target, Target::Digest(_)));
    /// assert!(Reference::parse("org-a/plugin").is_err());
    /// assert!(Reference::parse("localhost:5000/plugin:1").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Reference, ReferenceError> {
        let (repository, target) = match text.split_once('@') {
            Some((repository, digest)) => (repository, Target::Digest(Digest::parse(digest)?)),
            None => {
                let (repository, reference) = text
                    .split_once(':')
                    .ok_or_else(|| ReferenceError::NoReference(text.to_owned()))?;
                (repository, Target::parse(reference)?)
            }
        };
        Ok(Reference {
            repository: Repository::parse(repository)?,
            target,
        })
    }
}

impl fmt::Display for Reference {
    /// `<repo>:<ref>`, as document 3's registry events write `source` and `target`
    /// (a digest too: `org-a/plugin:sha256:...`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.repository, self.target)
    }
}
