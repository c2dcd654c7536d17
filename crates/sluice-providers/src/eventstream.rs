//! AWS's binary event stream (`application/vnd.amazon.eventstream`, Bedrock's
//! ConverseStream) cut into events for the pump: each message, its CRCs checked by
//! `aws-smithy-eventstream`, becomes an event named by its `:event-type` (`messageStart`,
//! `contentBlockDelta`, ...), or `exception:<type>` / `error:<code>` for the stream's own
//! failures, its payload the event's data.

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder, write_message_to};
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use bytes::{Bytes, BytesMut};

use crate::pump::Decode;
use crate::sse::SseEvent;

/// The largest event-stream message kept while it arrives (the format's own limit is 16 MiB).
const LONGEST: usize = 16 * 1024 * 1024;

/// Cuts an event stream into events.
#[derive(Debug, Default)]
pub struct EventStreamDecoder {
    buf: BytesMut,
    frames: MessageFrameDecoder,
}

/// A string header's value.
fn header<'a>(m: &'a Message, name: &str) -> Option<&'a str> {
    m.headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| h.value().as_string().ok())
        .map(|s| s.as_str())
}

/// A message as the event the translator reads.
pub(crate) fn event_of(m: &Message) -> SseEvent {
    let name = match header(m, ":message-type") {
        Some("exception") => format!(
            "exception:{}",
            header(m, ":exception-type").unwrap_or("unknown")
        ),
        Some("error") => format!("error:{}", header(m, ":error-code").unwrap_or("unknown")),
        _ => header(m, ":event-type").unwrap_or("unknown").to_string(),
    };
    let data = match header(m, ":message-type") {
        // An `error` message carries its text in a header, not the payload.
        Some("error") => Bytes::from(
            serde_json::json!({"message": header(m, ":error-message").unwrap_or("")}).to_string(),
        ),
        _ => m.payload().clone(),
    };
    SseEvent {
        event: Some(name),
        data,
        framed: None,
    }
}

/// One event-stream message of `kind` (`event` or `exception`) named `name`, carrying
/// `payload` (JSON): what Bedrock sends, for the simulator and tests to send. An error past
/// the format's limits (a payload over 16 MiB).
pub fn encode(kind: &str, name: &str, payload: &[u8]) -> Result<Bytes, String> {
    let type_header = if kind == "exception" {
        ":exception-type"
    } else {
        ":event-type"
    };
    let m = Message::new(payload.to_vec())
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String(kind.to_string().into()),
        ))
        .add_header(Header::new(
            type_header,
            HeaderValue::String(name.to_string().into()),
        ))
        .add_header(Header::new(
            ":content-type",
            HeaderValue::String("application/json".to_string().into()),
        ));
    let mut out = Vec::with_capacity(payload.len() + 96);
    write_message_to(&m, &mut out).map_err(|e| e.to_string())?;
    Ok(Bytes::from(out))
}

impl Decode for EventStreamDecoder {
    fn push(&mut self, chunk: &Bytes, out: &mut Vec<SseEvent>) -> Result<(), String> {
        self.buf.extend_from_slice(chunk);
        if self.buf.len() > LONGEST {
            return Err(format!(
                "an event-stream message longer than {LONGEST} bytes"
            ));
        }
        loop {
            match self.frames.decode_frame(&mut self.buf) {
                Ok(DecodedFrame::Complete(m)) => out.push(event_of(&m)),
                Ok(DecodedFrame::Incomplete) => return Ok(()),
                Err(e) => return Err(format!("a malformed event-stream message: {e}")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_eventstream::frame::write_message_to;
    use aws_smithy_types::event_stream::{Header, HeaderValue};

    fn message(kind: &str, name: &str, payload: &str) -> Vec<u8> {
        let m = Message::new(payload.as_bytes().to_vec())
            .add_header(Header::new(
                ":message-type",
                HeaderValue::String(kind.to_string().into()),
            ))
            .add_header(Header::new(
                if kind == "event" {
                    ":event-type"
                } else {
                    ":exception-type"
                },
                HeaderValue::String(name.to_string().into()),
            ));
        let mut out = Vec::new();
        write_message_to(&m, &mut out).unwrap();
        out
    }

    #[test]
    fn messages_cut_anywhere_come_out_whole_and_named() {
        let mut wire = message("event", "messageStart", r#"{"role":"assistant"}"#);
        wire.extend(message(
            "event",
            "contentBlockDelta",
            r#"{"delta":{"text":"hi"}}"#,
        ));
        wire.extend(message(
            "exception",
            "throttlingException",
            r#"{"message":"slow down"}"#,
        ));
        for cut in [1, 3, 7, wire.len()] {
            let mut d = EventStreamDecoder::default();
            let mut out = Vec::new();
            for piece in wire.chunks(cut) {
                d.push(&Bytes::copy_from_slice(piece), &mut out).unwrap();
            }
            let names: Vec<_> = out.iter().map(|e| e.event.clone().unwrap()).collect();
            assert_eq!(
                names,
                [
                    "messageStart",
                    "contentBlockDelta",
                    "exception:throttlingException"
                ],
                "cut every {cut}"
            );
            assert_eq!(&out[1].data[..], br#"{"delta":{"text":"hi"}}"#);
        }
    }

    #[test]
    fn a_corrupt_message_is_an_error() {
        let mut wire = message("event", "messageStop", r#"{"stopReason":"end_turn"}"#);
        let last = wire.len() - 1;
        wire[last] ^= 0xff;
        let mut d = EventStreamDecoder::default();
        assert!(d.push(&Bytes::from(wire), &mut Vec::new()).is_err());
    }
}
