//! Server-sent events as the WHATWG HTML standard frames them (`text/event-stream`),
//! read from bytes as they arrive, with a bound on what one line or one event may
//! hold, so that a peer that never ends a line or an event cannot grow memory.
//!
//! Lines end with `\n`, `\r\n` or `\r`; a blank line dispatches the event; `event:`
//! names it, `data:` lines are joined with `\n`, `id:` and `retry:` are read and
//! ignored (the client never reconnects), a line starting with `:` is a comment, and
//! one space after the colon is dropped. An event with no data is not dispatched.

/// What the stream sent past its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an event of the stream is longer than {0} bytes")]
pub struct EventTooLong(pub usize);

/// One dispatched event: its name (empty when it had none) and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field, or empty.
    pub name: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// Bytes in, events out.
#[derive(Debug, Clone)]
pub struct EventReader {
    /// The line being read (bytes, since a chunk may end inside a character).
    line: Vec<u8>,
    /// The last byte seen was a `\r` (a `\n` right after it ends nothing more).
    after_cr: bool,
    name: String,
    data: String,
    has_data: bool,
    max: usize,
}

impl EventReader {
    /// A reader whose lines and events may be at most `max` bytes each.
    pub fn new(max: usize) -> EventReader {
        EventReader {
            line: Vec::new(),
            after_cr: false,
            name: String::new(),
            data: String::new(),
            has_data: false,
            max,
        }
    }

    /// Takes `chunk`; answers the events it completed, or an error as soon as a line
    /// or an event being read is longer than the bound (nothing more is buffered).
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<Event>, EventTooLong> {
        let mut events = Vec::new();
        let mut rest = chunk;
        while let Some((&byte, tail)) = rest.split_first() {
            rest = tail;
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            match byte {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.line_ended(&line)? {
                        events.push(event);
                    }
                }
                _ => {
                    // Whole runs of ordinary bytes at once.
                    let run = rest
                        .iter()
                        .position(|b| *b == b'\n' || *b == b'\r')
                        .unwrap_or(rest.len());
                    let (ordinary, after) = rest.split_at(run);
                    self.line.push(byte);
                    self.line.extend_from_slice(ordinary);
                    rest = after;
                    if self.line.len().saturating_add(self.data.len()) > self.max {
                        return Err(EventTooLong(self.max));
                    }
                }
            }
        }
        Ok(events)
    }

    /// One line, read: a field, a comment, or the blank line that dispatches.
    fn line_ended(&mut self, line: &[u8]) -> Result<Option<Event>, EventTooLong> {
        if line.is_empty() {
            let name = std::mem::take(&mut self.name);
            let data = std::mem::take(&mut self.data);
            let has_data = std::mem::replace(&mut self.has_data, false);
            return Ok(has_data.then_some(Event { name, data }));
        }
        let line = String::from_utf8_lossy(line);
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => value.clone_into(&mut self.name),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
                if self.data.len() > self.max {
                    return Err(EventTooLong(self.max));
                }
            }
            _ => {}
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, data: &str) -> Event {
        Event {
            name: name.to_owned(),
            data: data.to_owned(),
        }
    }

    #[test]
    fn events_split_anywhere_come_out_whole() {
        let stream = b"event: a\r\ndata: {\"x\":\r\ndata:1}\r\n\r\n: comment\n\ndata: [DONE]\r\rid: 7\nretry: 5\nevent: b\n\n";
        for split in 0..stream.len() {
            let mut reader = EventReader::new(1024);
            let (first, second) = stream.split_at(split);
            let mut events = reader.push(first).unwrap();
            events.extend(reader.push(second).unwrap());
            assert_eq!(
                events,
                [event("a", "{\"x\":\n1}"), event("", "[DONE]")],
                "split at {split}"
            );
        }
    }

    #[test]
    fn a_line_or_an_event_past_the_bound_is_refused_as_it_arrives() {
        let mut reader = EventReader::new(16);
        assert_eq!(reader.push(b"data: 0123456789"), Ok(vec![]));
        assert_eq!(reader.push(b"0123456789"), Err(EventTooLong(16)));
        // Many short data lines of one event count together.
        let mut reader = EventReader::new(16);
        assert_eq!(reader.push(b"data: 01234\ndata: 56789\n"), Ok(vec![]));
        assert_eq!(reader.push(b"data: abcdef\n"), Err(EventTooLong(16)));
        // One chunk of megabytes with no line end is refused without a line kept.
        let mut reader = EventReader::new(1024);
        assert_eq!(
            reader.push(&vec![b'x'; 4 * 1024 * 1024]),
            Err(EventTooLong(1024))
        );
    }

    #[test]
    fn fields_follow_the_standard() {
        let mut reader = EventReader::new(1024);
        let events = reader
            .push(b"data\n\ndata:  two spaces\nfoo: bar\n\nevent: only a name\n\n")
            .unwrap();
        assert_eq!(events, [event("", ""), event("", " two spaces")]);
    }
}
