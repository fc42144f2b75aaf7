//! Arbitrary bytes as an uploaded plugin archive: `inspect` never panics, never reads
//! past its limits, and what it accepts has a manifest that passes its own checks,
//! no build definition but the root `Dockerfile`, and unpacks (into a scratch
//! directory) to what was inspected.
#![no_main]

use adapters::archive::{inspect, unpack};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(inspected) = inspect(data) else { return };
    assert!(inspected.manifest.check().is_ok());
    let dir = std::env::temp_dir().join(format!("fuzz-archive-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let unpacked = unpack(data, &dir);
    assert!(unpacked.is_ok(), "inspected but does not unpack: {unpacked:?}");
    if let Some(dockerfile) = &inspected.dockerfile {
        assert_eq!(&std::fs::read_to_string(dir.join("Dockerfile")).unwrap(), dockerfile);
    }
    let _ = std::fs::remove_dir_all(&dir);
});
