//! The grammar and manifests against the specification's examples and hostile input.

use oci::{
    Digest, Manifest, ManifestError, MediaType, Reference, ReferenceError, Repository, Target,
};
use proptest::prelude::*;

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

#[test]
fn references_take_tags_and_digests_and_refuse_hosts_and_bad_parts() {
    let r = Reference::parse("system/a.b__c/d---e:v1.0_rc-1").unwrap();
    assert_eq!(r.repository.as_str(), "system/a.b__c/d---e");
    assert_eq!(r.to_string(), "system/a.b__c/d---e:v1.0_rc-1");
    let by_digest = Reference::parse(&format!("org-a/plugin@{}", digest('a'))).unwrap();
    assert_eq!(
        by_digest.to_string(),
        format!("org-a/plugin:{}", digest('a'))
    );
    for (text, why) in [
        ("Org-A/plugin:1", "upper-case repository"),
        ("org-a/plugin", "no reference"),
        ("org-a/plugin:", "empty tag"),
        ("org-a/plugin:-x", "tag starting with a dash"),
        ("org-a/plugin:sha256:abc", "short digest"),
        ("org-a/plugin@sha256:ABC", "upper-case digest"),
        ("127.0.0.1:5000/plugin:1", "a host in the name"),
        ("org-a/plugin:1\u{0}", "NUL"),
        ("/plugin:1", "empty component"),
    ] {
        assert!(Reference::parse(text).is_err(), "{why}: {text}");
    }
    assert_eq!(
        Reference::parse(&format!("{}:1", "a".repeat(256))),
        Err(ReferenceError::Repository("a".repeat(256)))
    );
    assert!(Reference::parse(&format!("{}:1", "a".repeat(255))).is_ok());
}

#[test]
fn an_index_lists_its_children_and_a_docker_manifest_its_blobs_once() {
    let list = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json","manifests":[
        {{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","digest":"{}","size":1,"platform":{{"os":"linux","architecture":"amd64"}}}},
        {{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","digest":"{}","size":1}}]}}"#,
        digest('1'),
        digest('2')
    );
    let parsed = Manifest::parse(list.as_bytes(), Some(MediaType::DockerList.as_str())).unwrap();
    let Manifest::Index {
        media_type,
        children,
    } = parsed
    else {
        panic!("{parsed:?}")
    };
    assert_eq!(media_type, MediaType::DockerList);
    assert_eq!(children.len(), 2);
    assert_eq!(children[1].digest.as_str(), digest('2'));

    // A layer listed twice counts once; a foreign layer (with urls) is not the registry's.
    let image = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
        "config":{{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"{}","size":1}},
        "layers":[{{"digest":"{}","size":1}},{{"digest":"{}","size":1}},
                  {{"mediaType":"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip","digest":"{}","size":1,"urls":["https://example.com/l"]}}]}}"#,
        digest('c'),
        digest('1'),
        digest('1'),
        digest('f')
    );
    let Manifest::Image { media_type, blobs } = Manifest::parse(image.as_bytes(), None).unwrap()
    else {
        panic!()
    };
    assert_eq!(media_type, MediaType::DockerManifest);
    assert_eq!(
        blobs.iter().map(Digest::as_str).collect::<Vec<_>>(),
        [digest('c'), digest('1')]
    );
}

#[test]
fn schema_one_artifacts_bad_digests_and_huge_manifests_are_refused() {
    let schema1 = br#"{"schemaVersion":1,"name":"x","tag":"1","fsLayers":[]}"#;
    assert!(matches!(
        Manifest::parse(schema1, None),
        Err(ManifestError::Unsupported(_))
    ));
    let unknown = br#"{"schemaVersion":2,"mediaType":"application/vnd.example+json","config":{"digest":"x"}}"#;
    assert!(matches!(
        Manifest::parse(unknown, None),
        Err(ManifestError::Unsupported(_))
    ));
    let bad_digest = br#"{"schemaVersion":2,"config":{"digest":"sha256:zz"},"layers":[]}"#;
    assert!(matches!(
        Manifest::parse(bad_digest, None),
        Err(ManifestError::Digest(_))
    ));
    let child_unknown = format!(
        r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"text/plain","digest":"{}"}}]}}"#,
        digest('1')
    );
    assert!(matches!(
        Manifest::parse(child_unknown.as_bytes(), Some(MediaType::OciIndex.as_str())),
        Err(ManifestError::Unsupported(_))
    ));
    let huge = vec![b' '; oci::MAX_MANIFEST_BYTES + 1];
    assert_eq!(Manifest::parse(&huge, None), Err(ManifestError::TooLarge));
    assert!(matches!(
        Manifest::parse(b"[1,2]", None),
        Err(ManifestError::Malformed(_))
    ));
}

#[test]
fn a_digest_verifies_only_its_own_bytes() {
    let d = Digest::sha256_of(b"{}");
    assert!(d.verifies(b"{}"));
    assert!(!d.verifies(b"{} "));
    let sha512 = Digest::parse(&format!("sha512:{}", "0".repeat(128))).unwrap();
    assert!(!sha512.verifies(b"{}"));
}

proptest! {
    #[test]
    fn parsing_never_panics_and_what_parses_prints_back(text in "\\PC{0,80}") {
        if let Ok(reference) = Reference::parse(&text) {
            let printed = reference.to_string();
            prop_assert_eq!(Reference::parse(&printed), Ok(reference));
        }
        let _ = Manifest::parse(text.as_bytes(), Some(&text));
    }

    #[test]
    fn generated_names_parse(name in "[a-z0-9]{1,8}((\\.|_|__|-{1,3})[a-z0-9]{1,8}){0,2}(/[a-z0-9]{1,8}){0,3}", tag in "[A-Za-z0-9_][A-Za-z0-9._-]{0,20}") {
        let reference = Reference::parse(&format!("{name}:{tag}")).unwrap();
        prop_assert_eq!(reference.repository, Repository::parse(&name).unwrap());
        prop_assert!(matches!(reference.target, Target::Tag(_)));
    }
}
