//! Blobs: whether a repository holds one, mounting it from another repository, and
//! carrying its bytes over when the registry answers a mount with an upload session
//! (in chunks, hashed on the way, the session cancelled whenever it does not
//! complete); a monolithic upload for what the server pushes itself.

use oci::{Digest, Repository};
use reqwest::header::CONTENT_TYPE;
use reqwest::{Method, StatusCode, Url};
use sha2::{Digest as _, Sha256};

use super::{
    refusal, unreachable, Call, Mount, RegistryClient, RegistryError, Scope, CHUNK_BYTES,
    TRANSFER_TIMEOUT,
};

impl RegistryClient {
    /// Whether the repository holds the blob (`HEAD`).
    pub async fn has_blob(
        &self,
        repository: &Repository,
        digest: &Digest,
    ) -> Result<bool, RegistryError> {
        let call = Call::new(
            format!("HEAD {repository}@{digest}"),
            Method::HEAD,
            self.blob_url(repository, digest)?,
        );
        let response = self.send(&call, &Scope::pull(repository)).await?;
        match response.status() {
            StatusCode::OK => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            _ => Err(refusal(&call.name, response).await),
        }
    }

    /// Asks the registry to mount a blob of `source` into `target`.
    pub async fn mount_blob(
        &self,
        target: &Repository,
        digest: &Digest,
        source: &Repository,
    ) -> Result<Mount, RegistryError> {
        let mut url = self.url(&format!("v2/{target}/blobs/uploads/"))?;
        url.query_pairs_mut()
            .append_pair("mount", digest.as_str())
            .append_pair("from", source.as_str());
        let call =
            Call::new(format!("mount {digest} into {target}"), Method::POST, url).body(Vec::new());
        let response = self.send(&call, &Scope::mount(target, source)).await?;
        match response.status() {
            StatusCode::CREATED => Ok(Mount::Mounted),
            StatusCode::ACCEPTED => Ok(Mount::Session(self.location(&call.name, &response)?)),
            _ => Err(refusal(&call.name, response).await),
        }
    }

    /// Carries a blob's bytes from `source` into the upload session of `target`,
    /// in chunks, hashing them on the way; the session is cancelled when the upload
    /// does not complete.
    pub async fn carry_blob(
        &self,
        source: &Repository,
        target: &Repository,
        digest: &Digest,
        session: Url,
    ) -> Result<(), RegistryError> {
        match self.carry(source, target, digest, session.clone()).await {
            Ok(()) => Ok(()),
            Err((error, last)) => {
                self.cancel_upload(target, last.unwrap_or(session)).await;
                Err(error)
            }
        }
    }

    async fn carry(
        &self,
        source: &Repository,
        target: &Repository,
        digest: &Digest,
        session: Url,
    ) -> Result<(), (RegistryError, Option<Url>)> {
        let read = Call::new(
            format!("GET {source}@{digest}"),
            Method::GET,
            self.blob_url(source, digest).map_err(|e| (e, None))?,
        )
        .timeout(TRANSFER_TIMEOUT);
        let mut response = self
            .send(&read, &Scope::pull(source))
            .await
            .map_err(|e| (e, None))?;
        match response.status() {
            StatusCode::OK => {}
            StatusCode::NOT_FOUND => {
                return Err((
                    RegistryError::NotFound(format!("the blob {source}@{digest}")),
                    None,
                ))
            }
            _ => return Err((refusal(&read.name, response).await, None)),
        }
        let mut location = session;
        let mut hasher = Sha256::new();
        let mut offset: u64 = 0;
        let mut chunk: Vec<u8> = Vec::with_capacity(CHUNK_BYTES.min(1024 * 1024));
        loop {
            let next = response
                .chunk()
                .await
                .map_err(|e| (unreachable(&e), Some(location.clone())))?;
            let done = next.is_none();
            if let Some(bytes) = next {
                hasher.update(&bytes);
                chunk.extend_from_slice(&bytes);
            }
            if chunk.len() >= CHUNK_BYTES || (done && !chunk.is_empty()) {
                let end = offset + chunk.len() as u64 - 1;
                let call = Call::new(
                    format!("upload {digest} into {target}"),
                    Method::PATCH,
                    location.clone(),
                )
                .header(CONTENT_TYPE, "application/octet-stream")
                .header(reqwest::header::CONTENT_RANGE, format!("{offset}-{end}"))
                .body(std::mem::take(&mut chunk))
                .timeout(TRANSFER_TIMEOUT);
                let answer = self
                    .send(&call, &Scope::push(target))
                    .await
                    .map_err(|e| (e, Some(location.clone())))?;
                if answer.status() != StatusCode::ACCEPTED {
                    return Err((refusal(&call.name, answer).await, Some(location)));
                }
                location = self
                    .location(&call.name, &answer)
                    .map_err(|e| (e, Some(location.clone())))?;
                offset = end + 1;
            }
            if done {
                break;
            }
        }
        let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
        if digest.as_str().starts_with("sha256:") && actual != digest.as_str() {
            return Err((
                RegistryError::DigestMismatch {
                    what: format!("the blob {source}@{digest}"),
                    expected: digest.to_string(),
                    actual,
                },
                Some(location),
            ));
        }
        let mut close = location.clone();
        close
            .query_pairs_mut()
            .append_pair("digest", digest.as_str());
        let call = Call::new(format!("complete {digest} in {target}"), Method::PUT, close)
            .body(Vec::new());
        let answer = self
            .send(&call, &Scope::push(target))
            .await
            .map_err(|e| (e, Some(location.clone())))?;
        if answer.status() != StatusCode::CREATED {
            return Err((refusal(&call.name, answer).await, Some(location)));
        }
        Ok(())
    }

    /// Uploads a blob's bytes in one request (a monolithic upload), verified by the
    /// registry against `digest`.
    pub async fn push_blob(
        &self,
        repository: &Repository,
        bytes: &[u8],
    ) -> Result<Digest, RegistryError> {
        let digest = Digest::sha256_of(bytes);
        let start = Call::new(
            format!("start an upload into {repository}"),
            Method::POST,
            self.url(&format!("v2/{repository}/blobs/uploads/"))?,
        )
        .body(Vec::new());
        let response = self.send(&start, &Scope::push(repository)).await?;
        if response.status() != StatusCode::ACCEPTED {
            return Err(refusal(&start.name, response).await);
        }
        let location = self.location(&start.name, &response)?;
        let mut close = location.clone();
        close
            .query_pairs_mut()
            .append_pair("digest", digest.as_str());
        let call = Call::new(
            format!("upload {digest} into {repository}"),
            Method::PUT,
            close,
        )
        .header(CONTENT_TYPE, "application/octet-stream")
        .body(bytes.to_vec())
        .timeout(TRANSFER_TIMEOUT);
        match self.send(&call, &Scope::push(repository)).await {
            Ok(answer) if answer.status() == StatusCode::CREATED => Ok(digest),
            Ok(answer) => {
                let error = refusal(&call.name, answer).await;
                self.cancel_upload(repository, location).await;
                Err(error)
            }
            Err(error) => {
                self.cancel_upload(repository, location).await;
                Err(error)
            }
        }
    }

    /// Cancels an upload session (best effort: a registry also expires them).
    pub async fn cancel_upload(&self, repository: &Repository, session: Url) {
        let call = Call::new(
            format!("cancel an upload into {repository}"),
            Method::DELETE,
            session,
        );
        if let Err(error) = self.send(&call, &Scope::push(repository)).await {
            tracing::warn!(%error, "an upload session could not be cancelled; the registry expires it");
        }
    }
}
