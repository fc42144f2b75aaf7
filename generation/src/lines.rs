//! Newline-delimited framing (Ollama's stream is one JSON object a line), with a
//! bound on a line so that a peer that never sends a newline cannot grow memory.

/// A line longer than the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a line of the stream is longer than {0} bytes")]
pub struct LineTooLong(pub usize);

/// Bytes in, complete lines out.
#[derive(Debug, Clone)]
pub struct LineBuffer {
    pending: Vec<u8>,
    max: usize,
}

impl LineBuffer {
    /// A buffer whose lines may be at most `max` bytes.
    pub fn new(max: usize) -> LineBuffer {
        LineBuffer {
            pending: Vec::new(),
            max,
        }
    }

    /// Takes `chunk`; answers the lines it completed (without their newline, a
    /// carriage return before it dropped, blank lines skipped, invalid UTF-8
    /// replaced).
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<String>, LineTooLong> {
        let mut lines = Vec::new();
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            self.pending.extend_from_slice(piece);
            if self.pending.last() == Some(&b'\n') {
                let line = std::mem::take(&mut self.pending);
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end_matches(['\n', '\r']);
                if !text.trim().is_empty() {
                    lines.push(text.to_owned());
                }
            } else if self.pending.len() > self.max {
                return Err(LineTooLong(self.max));
            }
        }
        Ok(lines)
    }

    /// What is left after the stream's end: a last line without its newline.
    pub fn finish(self) -> Option<String> {
        let text = String::from_utf8_lossy(&self.pending).trim().to_owned();
        (!text.is_empty()).then_some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_chunks_come_out_whole() {
        let mut buffer = LineBuffer::new(64);
        assert_eq!(buffer.push(b"{\"a\":").unwrap(), Vec::<String>::new());
        assert_eq!(
            buffer.push(b"1}\r\n\n{\"b\":2}\n{\"c\"").unwrap(),
            vec!["{\"a\":1}".to_owned(), "{\"b\":2}".to_owned()]
        );
        assert_eq!(buffer.finish(), Some("{\"c\"".to_owned()));
    }

    #[test]
    fn a_line_past_the_bound_is_refused() {
        let mut buffer = LineBuffer::new(8);
        assert_eq!(buffer.push(b"0123456789"), Err(LineTooLong(8)));
    }
}
