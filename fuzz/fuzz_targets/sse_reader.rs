//! The AI providers' server-sent events read from arbitrary bytes, cut at an
//! arbitrary point: nothing panics, the same events come out whole however the
//! bytes are cut, and nothing held ever passes the bound (past it, an error).
#![no_main]

use generation::{EventReader, EventTooLong};
use libfuzzer_sys::fuzz_target;

const BOUND: usize = 256;

fn read(chunks: &[&[u8]]) -> Result<Vec<generation::Event>, EventTooLong> {
    let mut reader = EventReader::new(BOUND);
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(reader.push(chunk)?);
    }
    Ok(events)
}

fuzz_target!(|input: (u16, &[u8])| {
    let (cut, bytes) = input;
    let cut = usize::from(cut) % (bytes.len() + 1);
    let (a, b) = bytes.split_at(cut);
    let whole = read(&[bytes]);
    let split = read(&[a, b]);
    match (&whole, &split) {
        (Ok(x), Ok(y)) => assert_eq!(x, y),
        // Past the bound, both refuse (maybe after different events).
        (Err(_), Err(_)) => {}
        other => panic!("one cut refused, the other did not: {other:?}"),
    }
    for event in whole.iter().flatten() {
        assert!(event.data.len() <= BOUND);
    }
});
