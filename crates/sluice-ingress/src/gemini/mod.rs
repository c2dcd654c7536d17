//! Google's Gemini API (`POST /v1beta/models/{model}:generateContent`,
//! `:streamGenerateContent`, `:countTokens`): requests to the internal form, answers and
//! streams back as Gemini's, refusals in Google's error shape. The model and whether it
//! streams are in the URL, not the body: [`Method::of`] reads them.

pub mod answer;
pub mod error;
pub mod request;
pub mod stream;

pub use answer::from_chat;
pub use stream::Reframer;

use serde_json::Value;
use sluice_core::GatewayError;

use crate::json::bad;

/// What a Gemini URL asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `:generateContent`.
    Generate,
    /// `:streamGenerateContent`.
    Stream,
    /// `:countTokens`.
    CountTokens,
}

impl Method {
    /// The model and method of the last segment of a Gemini URL, `{model}:{method}`.
    pub fn of(segment: &str) -> Result<(&str, Self), GatewayError> {
        let (model, method) = segment.rsplit_once(':').ok_or_else(|| {
            bad(
                "model",
                format!("`{segment}` is not `{{model}}:generateContent` or another method"),
            )
        })?;
        let method = match method {
            "generateContent" => Self::Generate,
            "streamGenerateContent" => Self::Stream,
            "countTokens" => Self::CountTokens,
            other => {
                return Err(bad(
                    "model",
                    format!(
                        "`{other}` is not a method sluice serves (generateContent, \
                         streamGenerateContent, countTokens)"
                    ),
                ));
            }
        };
        if model.is_empty() {
            return Err(bad("model", "the URL names no model"));
        }
        Ok((model, method))
    }
}

/// A `generateContent` body for `model` as a chat-completions body.
pub fn to_chat(raw: &[u8], model: &str, stream: bool) -> Result<Vec<u8>, GatewayError> {
    let body = crate::json::read_object(raw)?;
    let chat = request::translate(body, model, stream)?;
    crate::json::write(&Value::Object(chat))
}

/// A `countTokens` body (its `contents`, or a whole `generateContentRequest`) for `model` as
/// a chat-completions body.
pub fn count_request(raw: &[u8], model: &str) -> Result<Vec<u8>, GatewayError> {
    let mut body = crate::json::read_object(raw)?;
    let body = match body.remove("generateContentRequest") {
        Some(Value::Object(inner)) => inner,
        Some(_) => return Err(bad("generateContentRequest", "must be an object")),
        None => body,
    };
    to_chat(&crate::json::write(&Value::Object(body))?, model, false)
}

#[cfg(test)]
mod tests;
