//! An incremental Server-Sent Events parser: feed it chunks as they arrive, take events out
//! as soon as their blank line is seen.
//!
//! Handles `\n`, `\r\n` and `\r` line ends, events split across chunks at any byte,
//! multi-line `data`, comments, and the optional space after the colon.

use bytes::{Bytes, BytesMut};

/// One complete event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: Bytes,
}

/// Longest incomplete line kept while waiting for its end (guards memory against a peer that
/// never sends a newline).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// Error when a single line grows past the limit.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("an SSE line exceeded {MAX_LINE} bytes")]
pub struct LineTooLong;

/// The parser state between chunks.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: BytesMut,
    /// A `\r` ended the previous chunk; a `\n` starting the next one belongs to it.
    pending_cr: bool,
    event: Option<String>,
    data: BytesMut,
    has_data: bool,
}

impl SseParser {
    /// A parser with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a chunk and appends every event it completes to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), LineTooLong> {
        let mut chunk = chunk;
        if self.pending_cr {
            self.pending_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        self.buf.extend_from_slice(chunk);
        while let Some(end) = memchr::memchr2(b'\n', b'\r', &self.buf) {
            let line = self.buf.split_to(end);
            let terminator = self.buf.split_to(1);
            if terminator.as_ref() == b"\r" {
                match self.buf.first() {
                    Some(b'\n') => {
                        let _ = self.buf.split_to(1);
                    }
                    Some(_) => {}
                    None => self.pending_cr = true,
                }
            }
            self.line(&line, out);
        }
        if self.buf.len() > MAX_LINE {
            return Err(LineTooLong);
        }
        Ok(())
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if self.has_data {
                out.push(SseEvent {
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data).freeze(),
                });
            }
            self.event = None;
            self.has_data = false;
            return;
        }
        if line.first() == Some(&b':') {
            return;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let (f, v) = line.split_at(i);
                let v = v.get(1..).unwrap_or_default();
                (f, v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.extend_from_slice(b"\n");
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => self.event = Some(String::from_utf8_lossy(value).into_owned()),
            _ => {}
        }
    }
}

/// Frames `data` as one SSE event: `data: <data>\n\n`.
pub fn frame(data: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(data.len() + 8);
    b.extend_from_slice(b"data: ");
    b.extend_from_slice(data);
    b.extend_from_slice(b"\n\n");
    b.freeze()
}

/// The stream terminator OpenAI clients expect.
pub const DONE: &[u8] = b"[DONE]";

#[cfg(test)]
mod tests;
