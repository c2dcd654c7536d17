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
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for c in chunks {
            p.push(c, &mut out).unwrap();
        }
        out
    }

    fn data(e: &SseEvent) -> &str {
        std::str::from_utf8(&e.data).unwrap()
    }

    #[test]
    fn parses_events_and_names() {
        let evs = parse_all(&[b"event: ping\ndata: {}\n\ndata: a\ndata: b\n\n"]);
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].event.as_deref(), Some("ping"));
        assert_eq!(data(&evs[1]), "a\nb");
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let text = b"data: {\"x\":1}\r\n\r\n: comment\n\ndata:no-space\r\rdata: last\n\n";
        let whole = parse_all(&[text]);
        assert_eq!(whole.len(), 3);
        assert_eq!(data(&whole[1]), "no-space");
        for i in 0..text.len() {
            for j in i..text.len() {
                let (a, rest) = text.split_at(i);
                let (b, c) = rest.split_at(j - i);
                assert_eq!(parse_all(&[a, b, c]), whole, "split at {i},{j}");
            }
        }
    }

    #[test]
    fn an_event_is_emitted_only_at_its_blank_line() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        p.push(b"data: partial", &mut out).unwrap();
        assert!(out.is_empty());
        p.push(b"\n", &mut out).unwrap();
        assert!(out.is_empty());
        p.push(b"\n", &mut out).unwrap();
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn comments_and_empty_events_emit_nothing() {
        assert!(parse_all(&[b": keep-alive\n\n\n\nevent: x\n\n"]).is_empty());
    }

    #[test]
    fn frames_round_trip() {
        let f = frame(b"{\"a\":1}");
        let evs = parse_all(&[&f]);
        assert_eq!(data(&evs[0]), "{\"a\":1}");
    }
}
