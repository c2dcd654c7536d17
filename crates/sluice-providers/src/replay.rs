//! An upstream's answer read from bytes already in hand, by the code a live answer goes
//! through (the same readers, SSE parser, translators and pump): what a recorded answer would
//! give the client. The fuzz targets drive it with hostile bytes.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::StreamBody;
use hyper::body::Frame;
use sluice_core::GatewayError;

use crate::http::TimedBody;
use crate::{Completion, EventStream, anthropic, bedrock, gemini, openai, pump};

/// The API an upstream answered in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// OpenAI chat completions (and every compatible server).
    Chat,
    /// OpenAI Responses.
    Responses,
    /// Anthropic Messages.
    Messages,
    /// Google's `generateContent`.
    Gemini,
    /// Bedrock's Converse (its stream AWS's binary event stream).
    Bedrock,
}

impl Api {
    /// Every API.
    pub const ALL: [Self; 5] = [
        Self::Chat,
        Self::Responses,
        Self::Messages,
        Self::Gemini,
        Self::Bedrock,
    ];
}

const NAME: &str = "replay";

/// A complete answer's `body` read as upstream `api`'s answer.
pub fn answer(api: Api, body: Bytes) -> Result<Completion, GatewayError> {
    let now = tokio::time::Instant::now();
    match api {
        Api::Chat => openai::completion(body, now, NAME),
        Api::Responses => openai::responses::completion(body, now, NAME),
        Api::Messages => anthropic::completion(body, now, NAME, true),
        Api::Gemini => gemini::completion(&body, now, NAME),
        Api::Bedrock => bedrock::completion(&body, now, NAME, NAME),
    }
}

/// A streamed answer that arrived as `chunks`, read as upstream `api`'s stream; a client
/// that asked for usage `include_usage`. Its events are polled as a live stream's are.
pub fn stream(api: Api, chunks: Vec<Bytes>, include_usage: bool) -> EventStream {
    let frames = chunks
        .into_iter()
        .map(|c| Ok::<_, Infallible>(Frame::data(c)));
    let body = StreamBody::new(futures::stream::iter(frames));
    let timed = TimedBody::new(body, None, Duration::from_secs(60), NAME.to_string());
    let name: Arc<str> = Arc::from(NAME);
    match api {
        Api::Chat => pump::pump(
            timed,
            openai::Frames::new(name.clone(), include_usage),
            name,
        ),
        Api::Responses => pump::pump(timed, openai::responses::Events::new(include_usage), name),
        Api::Messages => pump::pump(
            timed,
            anthropic::StreamTranslator::new(include_usage).native(true),
            name,
        ),
        Api::Gemini => pump::pump(
            timed,
            gemini::StreamTranslator::new(name.clone(), include_usage),
            name,
        ),
        Api::Bedrock => pump::pump_with::<_, _, crate::eventstream::EventStreamDecoder>(
            timed,
            bedrock::StreamTranslator::new(name.clone(), name.clone(), include_usage),
            name,
        ),
    }
}
