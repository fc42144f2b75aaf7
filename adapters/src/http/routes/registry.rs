//! The routes of one area: the image registry's copy and delete.

use super::*;

/// The area's routes.
pub(super) fn routes() -> Vec<Route> {
    vec![
        post("/api/images/copy", "copyImage", Access::Platform(RegistryWrite), images::copy)
            .doc("Cross-repository tag copy in the image registry (REGISTRY_URL): `source` and `target` as `<repo>:<ref>` (a tag or a digest). Copies bottom-up: every blob the target lacks mounted from the source repository (uploaded when the registry cannot mount), every child manifest of an index put by digest before the index, the top manifest put with its exact bytes; every digest verified. Emits registry.tag.copy (a structured log line and an audit event in the chain of each repository's organization: its first path component names the root organization, `system/` the system organization) after success. 503 REGISTRY_NOT_CONFIGURED without a registry, 503 REGISTRY_UNAVAILABLE when it cannot be reached, 404 for a missing source, 502 REGISTRY_DIGEST_MISMATCH or REGISTRY_REFUSED when the registry's answer cannot be used, 422 MANIFEST_UNSUPPORTED for a manifest type not copied")
            .body_of::<images::CopyBody>()
            .answers::<images::ImageCopy>(200),
        delete("/api/images/{name}/manifests/{reference}", "deleteImageManifest", Access::Platform(RegistryWrite), images::delete)
            .matched_as("/api/images/{*image}")
            .doc("Deletes the manifest a tag or digest names, by its digest (`name` may contain slashes). A tag whose manifest other tags also name, or a digest two or more tags name, is refused with 409 TAG_SHARED (details: the tags) unless `force=true`: deleting by digest removes every tag of it. Emits registry.tag.delete after success. 409 REGISTRY_DELETE_DISABLED when the registry does not allow deletes; the registry's other failures as for the copy")
            .query_of::<images::DeleteParams>()
            .answers::<images::ImageDelete>(200),
    ]
}
