//! The console's script and style sheet: compiled into the binary, served under a
//! name that carries their content's hash, cached for a year (a new build names
//! new content anew).

use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// An embedded file.
pub struct Asset {
    stem: &'static str,
    extension: &'static str,
    media: &'static str,
    content: &'static str,
    path: OnceLock<String>,
}

impl Asset {
    /// Where it is served: `/console/assets/<stem>.<first 16 hex of SHA-256>.<ext>`.
    pub fn path(&'static self) -> &'static str {
        self.path.get_or_init(|| {
            let hash = hex::encode(Sha256::digest(self.content.as_bytes()));
            let short = hash.get(..16).unwrap_or(&hash);
            format!("/console/assets/{}.{short}.{}", self.stem, self.extension)
        })
    }
}

/// The script: partial updates, the audit chain checked in the browser.
pub static SCRIPT: Asset = Asset {
    stem: "console",
    extension: "js",
    media: "text/javascript; charset=utf-8",
    content: include_str!("../../assets/console.js"),
    path: OnceLock::new(),
};

/// The style sheet.
pub static STYLE: Asset = Asset {
    stem: "console",
    extension: "css",
    media: "text/css; charset=utf-8",
    content: include_str!("../../assets/console.css"),
    path: OnceLock::new(),
};

/// `GET /console/assets/{file}`: only the current names answer.
pub async fn serve(Path(file): Path<String>) -> Response {
    for asset in [&SCRIPT, &STYLE] {
        if asset.path().rsplit('/').next() == Some(file.as_str()) {
            return (
                [
                    (header::CONTENT_TYPE, HeaderValue::from_static(asset.media)),
                    (
                        header::CACHE_CONTROL,
                        HeaderValue::from_static("public, max-age=31536000, immutable"),
                    ),
                ],
                asset.content,
            )
                .into_response();
        }
    }
    (StatusCode::NOT_FOUND, "no such asset").into_response()
}
