//! Manifests and tags: a reference's digest, a manifest read (bounded) and put, a
//! manifest deleted by its digest, and a repository's tags read page by page.

use super::*;

impl RegistryClient {
    /// The digest a manifest reference resolves to (`HEAD`), or `None` when absent.
    pub async fn manifest_digest(
        &self,
        repository: &Repository,
        target: &Target,
    ) -> Result<Option<Digest>, RegistryError> {
        let call = Call::new(
            format!("HEAD {repository}:{target}"),
            Method::HEAD,
            self.manifest_url(repository, target.as_str())?,
        )
        .header(ACCEPT, oci::ACCEPT);
        let response = self.send(&call, &Scope::pull(repository)).await?;
        match response.status() {
            StatusCode::OK => {}
            StatusCode::NOT_FOUND => return Ok(None),
            _ => return Err(refusal(&call.name, response).await),
        }
        match (digest_header(response.headers()), target) {
            (Some(digest), Target::Digest(asked)) if &digest != asked => {
                Err(RegistryError::DigestMismatch {
                    what: call.name,
                    expected: asked.to_string(),
                    actual: digest.to_string(),
                })
            }
            (Some(digest), _) => Ok(Some(digest)),
            (None, Target::Digest(asked)) => Ok(Some(asked.clone())),
            // A registry that announces no digest: read the manifest to know it.
            (None, Target::Tag(_)) => Ok(Some(self.manifest(repository, target).await?.digest)),
        }
    }

    /// Reads a manifest with every media type accepted, verifying its bytes against
    /// the digest asked for (or announced) and parsing it.
    pub async fn manifest(
        &self,
        repository: &Repository,
        target: &Target,
    ) -> Result<Fetched, RegistryError> {
        let call = Call::new(
            format!("GET {repository}:{target}"),
            Method::GET,
            self.manifest_url(repository, target.as_str())?,
        )
        .header(ACCEPT, oci::ACCEPT);
        let response = self.send(&call, &Scope::pull(repository)).await?;
        match response.status() {
            StatusCode::OK => {}
            StatusCode::NOT_FOUND => {
                return Err(RegistryError::NotFound(format!(
                    "the manifest {repository}:{target}"
                )))
            }
            _ => return Err(refusal(&call.name, response).await),
        }
        let announced = digest_header(response.headers());
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let bytes = read_bounded(response, MAX_MANIFEST_BYTES).await?;
        let expected = match target {
            Target::Digest(digest) => Some(digest.clone()),
            Target::Tag(_) => announced.clone(),
        };
        let digest = match expected {
            Some(expected) if !expected.verifies(&bytes) => {
                return Err(RegistryError::DigestMismatch {
                    what: call.name,
                    expected: expected.to_string(),
                    actual: Digest::sha256_of(&bytes).to_string(),
                })
            }
            Some(expected) => expected,
            None => Digest::sha256_of(&bytes),
        };
        let manifest = Manifest::parse(&bytes, content_type.as_deref())
            .map_err(|e| RegistryError::Unsupported(format!("{repository}:{target}: {e}")))?;
        Ok(Fetched {
            digest,
            bytes,
            manifest,
        })
    }

    /// Puts a manifest's exact bytes under a tag or its digest; the digest the
    /// registry announces must be the bytes'.
    pub async fn put_manifest(
        &self,
        repository: &Repository,
        target: &Target,
        media_type: MediaType,
        bytes: &[u8],
    ) -> Result<Digest, RegistryError> {
        let call = Call::new(
            format!("PUT {repository}:{target}"),
            Method::PUT,
            self.manifest_url(repository, target.as_str())?,
        )
        .header(CONTENT_TYPE, media_type.as_str())
        .body(bytes.to_vec());
        let response = self.send(&call, &Scope::push(repository)).await?;
        if response.status() != StatusCode::CREATED {
            return Err(refusal(&call.name, response).await);
        }
        let digest = Digest::sha256_of(bytes);
        match digest_header(response.headers()) {
            Some(announced) if announced != digest => Err(RegistryError::DigestMismatch {
                what: call.name,
                expected: digest.to_string(),
                actual: announced.to_string(),
            }),
            _ => Ok(digest),
        }
    }

    /// Deletes a manifest by digest.
    pub async fn delete_manifest(
        &self,
        repository: &Repository,
        digest: &Digest,
    ) -> Result<(), RegistryError> {
        let call = Call::new(
            format!("DELETE {repository}@{digest}"),
            Method::DELETE,
            self.manifest_url(repository, digest.as_str())?,
        );
        let response = self.send(&call, &Scope::delete(repository)).await?;
        match response.status() {
            StatusCode::ACCEPTED | StatusCode::OK | StatusCode::NO_CONTENT => Ok(()),
            StatusCode::NOT_FOUND => Err(RegistryError::NotFound(format!(
                "the manifest {repository}@{digest}"
            ))),
            StatusCode::METHOD_NOT_ALLOWED => Err(RegistryError::DeletesDisabled),
            _ => Err(refusal(&call.name, response).await),
        }
    }

    /// The repository's tags, following the `Link` header, at most
    /// `MAX_TAG_PAGES` pages of 100; `None` past that.
    pub async fn tags(&self, repository: &Repository) -> Result<Option<Vec<Tag>>, RegistryError> {
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default)]
            tags: Option<Vec<String>>,
        }
        let mut url = self.url(&format!("v2/{repository}/tags/list"))?;
        url.query_pairs_mut().append_pair("n", "100");
        let mut tags = Vec::new();
        for _ in 0..MAX_TAG_PAGES {
            let call = Call::new(
                format!("GET the tags of {repository}"),
                Method::GET,
                url.clone(),
            );
            let response = self.send(&call, &Scope::pull(repository)).await?;
            match response.status() {
                StatusCode::OK => {}
                StatusCode::NOT_FOUND => return Ok(Some(tags)),
                _ => return Err(refusal(&call.name, response).await),
            }
            let next = response
                .headers()
                .get(reqwest::header::LINK)
                .and_then(|v| v.to_str().ok())
                .and_then(oci::next_link)
                .and_then(|link| url.join(&link).ok())
                .map(|next| self.own(&call.name, next))
                .transpose()?;
            let bytes = read_bounded(response, MAX_MANIFEST_BYTES).await?;
            let page: Page =
                serde_json::from_slice(&bytes).map_err(|e| RegistryError::Refused {
                    call: call.name.clone(),
                    status: 200,
                    code: "MALFORMED".to_owned(),
                    message: e.to_string(),
                })?;
            tags.extend(
                page.tags
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|t| Tag::parse(t).ok()),
            );
            match next {
                Some(next) => url = next,
                None => return Ok(Some(tags)),
            }
        }
        Ok(None)
    }
}
