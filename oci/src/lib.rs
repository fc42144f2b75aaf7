//! The OCI distribution contract (specification 1.1), pure: no I/O.
//!
//! - `reference`: repository names, tags and digests with the specification's
//!   grammar, and `<repo>:<ref>` / `<repo>@<digest>` references.
//! - `manifest`: the four manifest media types a registry serves (OCI index and
//!   image manifest, Docker manifest list and v2 manifest), what each references
//!   (child manifests, blobs), and the `Accept` header that asks for all of them.
//! - `auth`: a registry's `WWW-Authenticate` challenge and its token answer.
//! - `link`: the `Link` header of a paged listing, and its next page.
//! - `ownership`: which organization a repository belongs to, and the
//!   `pluginName` label of a repository.

pub mod auth;
pub mod link;
pub mod manifest;
pub mod ownership;
pub mod reference;

pub use link::next_link;
pub use manifest::{Child, Manifest, ManifestError, MediaType, ACCEPT, MAX_MANIFEST_BYTES};
pub use ownership::{owner_of, plugin_name, Owner};
pub use reference::{Digest, Reference, ReferenceError, Repository, Tag, Target};
