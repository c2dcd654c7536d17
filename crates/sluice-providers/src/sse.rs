//! An incremental Server-Sent Events parser: feed it chunks as they arrive, take events out
//! as soon as their blank line is seen.
//!
//! Handles `\n`, `\r\n` and `\r` line ends, events split across chunks at any byte,
//! multi-line `data`, comments, and the optional space after the colon.

use bytes::{Buf, Bytes, BytesMut};

/// One complete event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: Bytes,
    /// The event framed for a client as `data: <data>\n\n`, when its data is one line: the
    /// same buffer `data` is a slice of, so passing the event on copies nothing.
    pub framed: Option<Bytes>,
}

/// What a framed event starts with.
const DATA_PREFIX: &[u8] = b"data: ";

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
    /// `data: ` and the data lines so far (joined with `\n`), ready to be framed.
    data: BytesMut,
    /// Data lines seen in the current event.
    lines: u32,
}

impl SseParser {
    /// A parser with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a chunk and appends every event it completes to `out`, without copying what
    /// it can: while nothing is left over from earlier chunks, each event that is one
    /// `data: ` line ended by `\n\n` (what OpenAI-compatible servers send) is a slice of
    /// `chunk` itself, framed as it came; the rest of the chunk goes through [`Self::push`].
    pub fn push_bytes(
        &mut self,
        chunk: &Bytes,
        out: &mut Vec<SseEvent>,
    ) -> Result<(), LineTooLong> {
        let mut pos = 0;
        let clean =
            self.buf.is_empty() && !self.pending_cr && self.lines == 0 && self.event.is_none();
        if clean {
            while let Some(rest) = chunk.get(pos..).filter(|r| r.starts_with(DATA_PREFIX)) {
                let Some(nl) = memchr::memchr2(b'\n', b'\r', rest) else {
                    break;
                };
                if rest.get(nl) != Some(&b'\n') || rest.get(nl + 1) != Some(&b'\n') {
                    break;
                }
                out.push(SseEvent {
                    event: None,
                    data: chunk.slice(pos + DATA_PREFIX.len()..pos + nl),
                    framed: Some(chunk.slice(pos..pos + nl + 2)),
                });
                pos += nl + 2;
            }
        }
        match chunk.get(pos..) {
            Some(rest) if !rest.is_empty() => self.push(rest, out),
            _ => Ok(()),
        }
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
        // Lines are read in place and the buffer advanced once: splitting each line off
        // the buffer cost more than the rest of the parse.
        let buf = std::mem::take(&mut self.buf);
        let mut pos = 0;
        while let Some(rel) = buf
            .get(pos..)
            .and_then(|rest| memchr::memchr2(b'\n', b'\r', rest))
        {
            let end = pos + rel;
            let mut next = end + 1;
            if buf.get(end) == Some(&b'\r') {
                match buf.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.pending_cr = true,
                }
            }
            self.line(buf.get(pos..end).unwrap_or_default(), out);
            pos = next;
        }
        let mut buf = buf;
        buf.advance(pos.min(buf.len()));
        self.buf = buf;
        if self.buf.len() > MAX_LINE {
            return Err(LineTooLong);
        }
        Ok(())
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if self.lines > 0 {
                self.data.extend_from_slice(b"\n\n");
                let all = std::mem::take(&mut self.data).freeze();
                let data = all.slice(DATA_PREFIX.len()..all.len() - 2);
                out.push(SseEvent {
                    event: self.event.take(),
                    data,
                    framed: (self.lines == 1).then_some(all),
                });
            }
            self.event = None;
            self.lines = 0;
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
                if self.lines == 0 {
                    self.data.reserve(DATA_PREFIX.len() + value.len() + 2);
                    self.data.extend_from_slice(DATA_PREFIX);
                } else {
                    self.data.extend_from_slice(b"\n");
                }
                self.data.extend_from_slice(value);
                self.lines += 1;
            }
            b"event" => self.event = Some(String::from_utf8_lossy(value).into_owned()),
            _ => {}
        }
    }
}

/// Frames `data` as one SSE event: `data: <data>\n\n`, each of its lines (an upstream's
/// event may have several) a `data:` line of its own, so a client joins them back as sent.
pub fn frame(data: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(data.len() + 8);
    put_data(&mut b, data);
    b.extend_from_slice(b"\n");
    b.freeze()
}

/// `data: <line>\n` for each line of `data`.
fn put_data(out: &mut BytesMut, data: &[u8]) {
    for line in data.split(|b| *b == b'\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line);
        out.extend_from_slice(b"\n");
    }
}

/// An event's data read as JSON; an upstream's protocol error when it is not.
pub(crate) fn json_of(ev: &SseEvent) -> Result<serde_json::Value, sluice_core::GatewayError> {
    if !sluice_core::budget::within(&ev.data) {
        return Err(sluice_core::GatewayError::new(
            sluice_core::ErrorKind::UpstreamProtocol,
            sluice_core::budget::refusal("a stream event"),
        ));
    }
    serde_json::from_slice(&ev.data).map_err(|e| {
        sluice_core::GatewayError::new(
            sluice_core::ErrorKind::UpstreamProtocol,
            format!("unreadable stream event: {e}"),
        )
    })
}

/// An upstream's event written out again as it came: its name (or `kind`, its data's
/// `type`) and its data, for a client of the upstream's own API.
pub(crate) fn again(ev: &SseEvent, kind: &str) -> Bytes {
    let name = ev.event.as_deref().unwrap_or(kind);
    let mut out = BytesMut::with_capacity(ev.data.len() + name.len() + 16);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\n");
    put_data(&mut out, &ev.data);
    out.extend_from_slice(b"\n");
    out.freeze()
}

/// The stream terminator OpenAI clients expect.
pub const DONE: &[u8] = b"[DONE]";

#[cfg(test)]
mod tests;
