//! Manifests as a registry serves them: the four media types, what each references,
//! and the `Accept` header that asks for every one of them (a registry answers a
//! request without one with whatever it converts to, or 404).

use serde::Deserialize;

use crate::reference::{Digest, ReferenceError};

/// The largest manifest read (distribution and most registries refuse to store a
/// manifest over 4 MiB).
pub const MAX_MANIFEST_BYTES: usize = 4 * 1024 * 1024;

/// A manifest media type this server copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MediaType {
    /// `application/vnd.oci.image.index.v1+json`
    OciIndex,
    /// `application/vnd.oci.image.manifest.v1+json`
    OciManifest,
    /// `application/vnd.docker.distribution.manifest.list.v2+json`
    DockerList,
    /// `application/vnd.docker.distribution.manifest.v2+json`
    DockerManifest,
}

impl MediaType {
    /// Every manifest media type, indexes first.
    pub const ALL: [MediaType; 4] = [
        MediaType::OciIndex,
        MediaType::DockerList,
        MediaType::OciManifest,
        MediaType::DockerManifest,
    ];

    /// The media type's name.
    pub const fn as_str(self) -> &'static str {
        match self {
            MediaType::OciIndex => "application/vnd.oci.image.index.v1+json",
            MediaType::OciManifest => "application/vnd.oci.image.manifest.v1+json",
            MediaType::DockerList => "application/vnd.docker.distribution.manifest.list.v2+json",
            MediaType::DockerManifest => "application/vnd.docker.distribution.manifest.v2+json",
        }
    }

    /// The media type named by `text` (a `Content-Type` value: parameters ignored).
    ///
    /// ```
    /// use oci::MediaType;
    /// assert_eq!(
    ///     MediaType::from_name("application/vnd.oci.image.index.v1+json; charset=utf-8"),
    ///     Some(MediaType::OciIndex)
    /// );
    /// assert_eq!(MediaType::from_name("application/json"), None);
    /// ```
    pub fn from_name(text: &str) -> Option<MediaType> {
        let name = text.split(';').next().unwrap_or_default().trim();
        MediaType::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(name))
    }

    /// Whether it lists other manifests (an index or a manifest list).
    pub const fn is_index(self) -> bool {
        matches!(self, MediaType::OciIndex | MediaType::DockerList)
    }
}

/// The `Accept` header of a manifest request: every media type this server copies.
pub const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

/// Why manifest bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// Larger than [`MAX_MANIFEST_BYTES`].
    #[error("the manifest is larger than {MAX_MANIFEST_BYTES} bytes")]
    TooLarge,
    /// Not JSON of a manifest's shape.
    #[error("the manifest does not parse: {0}")]
    Malformed(String),
    /// A media type this server does not copy (Docker schema 1, an artifact type).
    #[error("manifests of media type `{0}` are not copied (OCI index and image manifests, Docker manifest lists and v2 manifests are)")]
    Unsupported(String),
    /// A referenced digest that is not one.
    #[error(transparent)]
    Digest(#[from] ReferenceError),
}

/// A child manifest of an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    /// Its digest.
    pub digest: Digest,
    /// Its media type, as the index names it.
    pub media_type: MediaType,
}

/// A parsed manifest: what it is and what it references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Manifest {
    /// An index or manifest list: its child manifests, in order.
    Index {
        /// Its media type.
        media_type: MediaType,
        /// The child manifests.
        children: Vec<Child>,
    },
    /// An image manifest: its blobs (the config, then the layers), without the
    /// non-distributable layers a registry does not hold (those with `urls`).
    Image {
        /// Its media type.
        media_type: MediaType,
        /// The blobs, in order, each once.
        blobs: Vec<Digest>,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    schema_version: Option<u32>,
    media_type: Option<String>,
    manifests: Option<Vec<Descriptor>>,
    config: Option<Descriptor>,
    layers: Option<Vec<Descriptor>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: Option<String>,
    digest: String,
    #[serde(default)]
    urls: Vec<String>,
}

impl Manifest {
    /// Parses a manifest's bytes as served with `content_type` (the header wins;
    /// then the document's own `mediaType`; then its shape).
    ///
    /// ```
    /// use oci::{Manifest, MediaType};
    /// let config = format!("sha256:{}", "c".repeat(64));
    /// let layer = format!("sha256:{}", "1".repeat(64));
    /// let bytes = format!(r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
    ///   "config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{config}","size":2}},
    ///   "layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{layer}","size":3}}]}}"#);
    /// let Manifest::Image { media_type, blobs } = Manifest::parse(bytes.as_bytes(), None).unwrap() else { panic!() };
    /// assert_eq!(media_type, MediaType::OciManifest);
    /// assert_eq!(blobs.len(), 2);
    /// ```
    pub fn parse(bytes: &[u8], content_type: Option<&str>) -> Result<Manifest, ManifestError> {
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(ManifestError::TooLarge);
        }
        let raw: Raw =
            serde_json::from_slice(bytes).map_err(|e| ManifestError::Malformed(e.to_string()))?;
        if raw.schema_version != Some(2) {
            return Err(ManifestError::Unsupported(match raw.schema_version {
                Some(version) => format!("schemaVersion {version}"),
                None => "without schemaVersion".to_owned(),
            }));
        }
        let declared = content_type
            .and_then(MediaType::from_name)
            .or_else(|| raw.media_type.as_deref().and_then(MediaType::from_name));
        let media_type = match (declared, &raw.media_type, content_type) {
            (Some(media_type), _, _) => media_type,
            // Neither names a known type, but one names some type: not ours.
            (None, Some(other), _) => return Err(ManifestError::Unsupported(other.clone())),
            (None, None, _) if raw.manifests.is_some() => MediaType::OciIndex,
            (None, None, _) if raw.config.is_some() => MediaType::OciManifest,
            (None, None, Some(other)) => return Err(ManifestError::Unsupported(other.to_owned())),
            (None, None, None) => {
                return Err(ManifestError::Malformed(
                    "neither an index nor an image manifest".to_owned(),
                ))
            }
        };
        if media_type.is_index() {
            let children = raw
                .manifests
                .ok_or_else(|| ManifestError::Malformed("an index without `manifests`".to_owned()))?
                .into_iter()
                .map(|d| {
                    let child_type = d.media_type.as_deref().unwrap_or_default();
                    let media_type = MediaType::from_name(child_type)
                        .ok_or_else(|| ManifestError::Unsupported(child_type.to_owned()))?;
                    Ok(Child {
                        digest: Digest::parse(&d.digest)?,
                        media_type,
                    })
                })
                .collect::<Result<Vec<_>, ManifestError>>()?;
            return Ok(Manifest::Index {
                media_type,
                children,
            });
        }
        let config = raw.config.ok_or_else(|| {
            ManifestError::Malformed("an image manifest without `config`".to_owned())
        })?;
        let mut blobs: Vec<Digest> = Vec::new();
        let layers = raw.layers.unwrap_or_default();
        for descriptor in std::iter::once(&config).chain(layers.iter()) {
            if !descriptor.urls.is_empty() {
                continue;
            }
            let digest = Digest::parse(&descriptor.digest)?;
            if !blobs.contains(&digest) {
                blobs.push(digest);
            }
        }
        Ok(Manifest::Image { media_type, blobs })
    }

    /// Its media type.
    pub fn media_type(&self) -> MediaType {
        match self {
            Manifest::Index { media_type, .. } | Manifest::Image { media_type, .. } => *media_type,
        }
    }
}
