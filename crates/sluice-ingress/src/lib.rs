//! The client APIs sluice speaks besides chat completions, each met in one internal form.
//!
//! The internal form is a chat-completions request ([`sluice_core::ChatRequest`]) and a
//! chat-completions answer (JSON, or an SSE stream of chunks): the walk, the caches, billing
//! and every upstream adapter work on it alone and never learn which API a client spoke.
//! Each API here is translated once on the way in (its request to a chat request, checked by
//! its own rules, refused in its own error shape) and once on the way out (a chat answer or
//! stream to its own answer or events). Upstream adapters (`sluice-providers`) do the other
//! side: the internal form to each provider's API and back.

pub mod anthropic;
pub mod embeddings;
mod frames;
pub mod gemini;
mod json;
pub mod responses;

use bytes::Bytes;
use sluice_core::{GatewayError, Original};

/// The API a client spoke, which decides how its request is read and its answer and its
/// errors are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI chat completions: the internal form itself, written out as it is.
    #[default]
    Chat,
    /// Anthropic Messages (`/v1/messages`).
    Anthropic,
    /// OpenAI Responses (`/v1/responses`), stateless.
    Responses,
    /// OpenAI embeddings (`/v1/embeddings`): not a chat; its answer is the upstream's own.
    Embeddings,
    /// Google's Gemini API (`/v1beta/models/{model}:generateContent`, or
    /// `:streamGenerateContent` when `stream`): the model is in the URL.
    Gemini {
        /// Whether the URL asks for a stream.
        stream: bool,
    },
}

impl Dialect {
    /// Whether the prompt is a conversation the walk may shape (normalise, compress, watch
    /// for churn, look up by meaning): not for embeddings, whose inputs go as they came.
    pub fn converses(self) -> bool {
        self != Self::Embeddings
    }

    /// The client's request body as a chat-completions body; `model` is the model its URL
    /// names, for an API that names it there.
    pub fn request(self, raw: Bytes, model: Option<&str>) -> Result<Bytes, GatewayError> {
        match self {
            Self::Chat => Ok(raw),
            Self::Gemini { stream } => {
                let model = model.ok_or_else(|| {
                    json::bad("model", "a Gemini request names its model in its URL")
                })?;
                gemini::to_chat(&raw, model, stream).map(Bytes::from)
            }
            Self::Anthropic => anthropic::to_chat(&raw).map(Bytes::from),
            Self::Responses => responses::to_chat(&raw).map(Bytes::from),
            Self::Embeddings => embeddings::to_chat(&raw).map(Bytes::from),
        }
    }

    /// The client's request kept whole for an upstream that speaks its API (Messages for
    /// Anthropic upstreams, embeddings for OpenAI-compatible ones, Responses for those that
    /// serve it), with the headers of that API it sent (`header` reads one).
    pub fn original(
        self,
        raw: &Bytes,
        header: impl Fn(&str) -> Option<String>,
    ) -> Option<Original> {
        match self {
            Self::Chat | Self::Gemini { .. } => None,
            Self::Responses => Some(Original {
                api: Original::OPENAI_RESPONSES,
                body: raw.clone(),
                headers: Vec::new(),
            }),
            Self::Embeddings => Some(Original {
                api: Original::OPENAI_EMBEDDINGS,
                body: raw.clone(),
                headers: Vec::new(),
            }),
            Self::Anthropic => Some(Original {
                api: Original::ANTHROPIC_MESSAGES,
                body: raw.clone(),
                headers: anthropic::FORWARDED_HEADERS
                    .iter()
                    .filter_map(|name| header(name).map(|v| ((*name).to_string(), v)))
                    .collect(),
            }),
        }
    }

    /// A complete chat-completions answer in the client's API.
    pub fn answer(self, chat: Bytes) -> Result<Bytes, GatewayError> {
        match self {
            // An embeddings answer is the upstream's own, stored and served as it came.
            Self::Chat | Self::Embeddings => Ok(chat),
            Self::Anthropic => anthropic::from_chat(&chat).map(Bytes::from),
            Self::Responses => responses::from_chat(&chat).map(Bytes::from),
            Self::Gemini { .. } => gemini::from_chat(&chat).map(Bytes::from),
        }
    }

    /// What writes a chat stream in the client's API; `None` when it is chat itself.
    pub fn reframe(self) -> Option<Reframe> {
        match self {
            Self::Chat | Self::Embeddings => None,
            Self::Anthropic => Some(Reframe::Anthropic(anthropic::Reframer::new())),
            Self::Responses => Some(Reframe::Responses(Box::default())),
            Self::Gemini { .. } => Some(Reframe::Gemini(gemini::Reframer::new())),
        }
    }

    /// The status a refusal is answered with in the client's API.
    pub fn status(self, e: &GatewayError) -> u16 {
        match self {
            Self::Chat | Self::Responses | Self::Embeddings => e.status(),
            Self::Anthropic => anthropic::error::kind_and_status(e).1,
            Self::Gemini { .. } => gemini::error::status(e),
        }
    }

    /// A refusal's status and body in the client's API, when it has a shape of its own
    /// (`None`: OpenAI's shape, and an upstream's own refusal passed through as it came).
    pub fn refusal(self, e: &GatewayError) -> Option<(u16, Bytes)> {
        match self {
            Self::Chat | Self::Responses | Self::Embeddings => None,
            Self::Anthropic => Some((
                self.status(e),
                Bytes::from(anthropic::error::body(e).to_string()),
            )),
            Self::Gemini { .. } => Some((
                self.status(e),
                Bytes::from(gemini::error::body(e).to_string()),
            )),
        }
    }
}

/// Writes a chat stream in another API, frame by frame.
#[derive(Debug)]
pub enum Reframe {
    /// Messages' events.
    Anthropic(anthropic::Reframer),
    /// Responses' events.
    Responses(Box<responses::Restream>),
    /// Gemini's events.
    Gemini(gemini::Reframer),
}

impl Reframe {
    /// Reads `bytes` of the chat stream; returns the events they complete (maybe none).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        match self {
            Self::Anthropic(r) => r.feed(bytes),
            Self::Responses(r) => r.feed(bytes),
            Self::Gemini(r) => r.feed(bytes),
        }
    }

    /// The stream failed with `e`: the event that ends it.
    pub fn fail(&mut self, e: &GatewayError) -> Vec<u8> {
        match self {
            Self::Anthropic(r) => r.fail(e),
            Self::Responses(r) => r.fail(e),
            Self::Gemini(r) => r.fail(e),
        }
    }

    /// The chat stream ended: the events that close the answer (or say it was cut).
    pub fn finish(&mut self) -> Vec<u8> {
        match self {
            Self::Anthropic(r) => r.finish(),
            Self::Responses(r) => r.finish(),
            Self::Gemini(r) => r.finish(),
        }
    }

    /// A whole chat stream (a stored answer's replay) in the client's API.
    pub fn whole(mut self, chat: &[u8]) -> Vec<u8> {
        let mut out = self.feed(chat);
        out.extend(self.finish());
        out
    }
}
