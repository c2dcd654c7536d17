//! Reading a chat stream's SSE frames however its bytes are cut, and writing named events.

use serde_json::Value;

/// The data of complete SSE events, as bytes arrive.
#[derive(Debug, Default)]
pub struct Frames {
    /// Bytes of an event not yet complete.
    pending: Vec<u8>,
}

impl Frames {
    /// Reads `bytes`; returns the data of each event they complete (its `data:` lines
    /// joined), skipping events without data.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(end) = event_end(&self.pending) {
            let frame: Vec<u8> = self.pending.drain(..end).collect();
            let mut data = Vec::new();
            for line in frame.split(|b| *b == b'\n') {
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                if let Some(rest) = line.strip_prefix(b"data:") {
                    if !data.is_empty() {
                        data.push(b'\n');
                    }
                    data.extend_from_slice(rest.strip_prefix(b" ").unwrap_or(rest));
                }
            }
            if !data.is_empty() {
                out.push(data);
            }
        }
        out
    }
}

/// Where the first complete SSE event of `buf` ends (after its blank line).
fn event_end(buf: &[u8]) -> Option<usize> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Writes the event `name` with `data`.
pub fn event(out: &mut Vec<u8>, name: &str, data: &Value) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(data.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}
