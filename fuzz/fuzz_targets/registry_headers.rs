//! The registry's headers as a hostile registry may send them: a `WWW-Authenticate`
//! challenge and a `Link` header of any bytes. Nothing panics; a challenge parses
//! to what it says; a next link is the inside of one `<...>` of the header.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oci::auth::Challenge;

fuzz_target!(|header: &str| {
    if let Some(Challenge::Bearer { realm, scopes, .. }) = Challenge::parse(header) {
        assert!(!realm.is_empty() || header.contains("realm"));
        assert!(scopes.iter().all(|s| !s.is_empty() || header.contains("scope")));
    }
    if let Some(next) = oci::next_link(header) {
        assert!(!next.is_empty());
        assert!(header.contains(&format!("<{next}>")));
    }
});
