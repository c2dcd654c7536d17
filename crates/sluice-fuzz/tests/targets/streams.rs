//! Streams: upstreams' SSE (OpenAI chat, Responses, Anthropic) read as sluice reads a live
//! one, and chat streams re-framed for Messages and Responses clients.

use bytes::Bytes;
use futures::StreamExt;
use sluice_fuzz::{Bound, Target};
use sluice_providers::StreamEvent;
use sluice_providers::replay::{Api, stream};
use sluice_providers::sse::SseParser;

use crate::{fuzz, well_formed_sse};

const WORDS: &[&[u8]] = &[
    b"data: ",
    b"data:",
    b"event: ",
    b"id: ",
    b"retry: ",
    b": ping",
    b"\n\n",
    b"\r\n\r\n",
    b"\r",
    b"[DONE]",
    b"\"choices\"",
    b"\"delta\"",
    b"\"content\"",
    b"\"usage\"",
    b"\"finish_reason\":\"stop\"",
    b"\"tool_calls\"",
    b"\"index\":",
    b"\"prompt_tokens\":",
    b"\"cached_tokens\":",
    b"message_start",
    b"content_block_start",
    b"content_block_delta",
    b"content_block_stop",
    b"message_delta",
    b"message_stop",
    b"\"type\":\"error\"",
    b"input_json_delta",
    b"text_delta",
    b"thinking_delta",
    b"\"partial_json\":",
    b"response.created",
    b"response.output_text.delta",
    b"response.completed",
    b"response.output_item.added",
    b"response.function_call_arguments.delta",
    b"response.failed",
    b"\"output_tokens\":",
    b"\"input_tokens\":",
    b"18446744073709551616",
];

fn target(name: &'static str) -> Target {
    Target {
        name,
        words: WORDS,
        json: false,
        memory: Bound::PARSER,
    }
}

/// `input` cut into chunks of a size it decides itself (1 to 16 bytes), so that the same
/// input is always cut the same way.
fn chunks(input: &[u8]) -> Vec<Bytes> {
    let size = 1 + input.len() % 16;
    input.chunks(size).map(Bytes::copy_from_slice).collect()
}

/// What a stream gave, as text for comparing, or the error it ended with.
fn read(api: Api, parts: Vec<Bytes>) -> Result<Vec<String>, String> {
    let events: Vec<_> = futures::executor::block_on(stream(api, parts, true).collect());
    let mut out = Vec::new();
    for ev in events {
        match ev {
            Ok(StreamEvent::Frame(f)) => {
                framed(api, &f)?;
                out.push(format!("frame {}", String::from_utf8_lossy(&f)));
            }
            Ok(StreamEvent::Native(n)) => {
                out.push(format!("native {}", String::from_utf8_lossy(&n)))
            }
            Ok(StreamEvent::Usage(u)) => out.push(format!("usage {u:?}")),
            Err(e) if !e.kind.is_upstream() => return Err(format!("not an upstream fault: {e}")),
            Err(e) if e.message.trim().is_empty() => return Err("an error with no message".into()),
            Err(e) => out.push(format!("error {}", e.kind)),
        }
    }
    Ok(out)
}

/// A frame sluice writes is one SSE event. Frames it made itself (from Messages or
/// Responses events) hold JSON; a chat stream's events are relayed as the upstream sent
/// them, their JSON unread (reading it would cost a parse a chunk), their framing whole.
fn framed(api: Api, frame: &[u8]) -> Result<(), String> {
    let mut events = Vec::new();
    SseParser::new()
        .push(frame, &mut events)
        .map_err(|e| e.to_string())?;
    if events.len() != 1 {
        return Err(format!(
            "a frame holds {} events: {}",
            events.len(),
            String::from_utf8_lossy(frame)
        ));
    }
    match api {
        Api::Chat => Ok(()),
        Api::Responses | Api::Messages | Api::Gemini | Api::Bedrock => well_formed_sse(frame),
    }
}

/// The SSE parser gives the same events whatever the chunks, and the chat stream reader
/// the same frames and usage.
#[test]
fn chat_stream() {
    fuzz(target("chat-stream"), |input| {
        let mut whole = Vec::new();
        let mut cut = Vec::new();
        let _ = SseParser::new().push(input, &mut whole);
        let mut parser = SseParser::new();
        for c in chunks(input) {
            let _ = parser.push_bytes(&c, &mut cut);
        }
        let data = |evs: &[sluice_providers::sse::SseEvent]| {
            evs.iter()
                .map(|e| (e.event.clone(), e.data.clone()))
                .collect::<Vec<_>>()
        };
        if data(&whole) != data(&cut) {
            return Err("the SSE parser's events depend on how the bytes were cut".into());
        }
        let one = read(Api::Chat, vec![Bytes::copy_from_slice(input)])?;
        let many = read(Api::Chat, chunks(input))?;
        if one != many {
            return Err(format!(
                "the chat stream depends on the cut:\n{one:?}\n{many:?}"
            ));
        }
        reframed(input)
    })
}

/// A chat stream re-framed for Messages, Responses and Gemini clients is well-formed SSE.
fn reframed(input: &[u8]) -> Result<(), String> {
    let mut messages = sluice_ingress::anthropic::Reframer::new();
    let mut responses = sluice_ingress::responses::Restream::default();
    let mut gemini = sluice_ingress::gemini::Reframer::new();
    for c in chunks(input) {
        well_formed_sse(&messages.feed(&c))?;
        well_formed_sse(&responses.feed(&c))?;
        well_formed_sse(&gemini.feed(&c))?;
    }
    well_formed_sse(&messages.finish())?;
    well_formed_sse(&gemini.finish())?;
    well_formed_sse(&responses.finish())
}

/// Anthropic's, Responses', Gemini's and Bedrock's event streams read as chat frames.
#[test]
fn upstream_streams() {
    for (name, api) in [
        ("messages-stream", Api::Messages),
        ("responses-stream", Api::Responses),
        ("gemini-stream", Api::Gemini),
        ("bedrock-stream", Api::Bedrock),
    ] {
        fuzz(target(name), |input| read(api, chunks(input)).map(drop));
    }
}
