//! Anthropic Messages (`POST /v1/messages`, `POST /v1/messages/count_tokens`): requests to
//! the internal form, answers and streams back, refusals in Messages' error shape.

pub mod answer;
pub mod error;
pub mod request;
pub mod stream;

pub use answer::from_chat;
pub use request::to_chat;
pub use stream::Reframer;

use sluice_core::GatewayError;

/// The client's headers of Messages that go upstream with its request, to an Anthropic
/// upstream: the API version it wrote against and the betas it asked for.
pub const FORWARDED_HEADERS: &[&str] = &["anthropic-version", "anthropic-beta"];

/// A `count_tokens` body (a Messages request without `max_tokens`) in the internal form.
pub fn count_request(raw: &[u8]) -> Result<Vec<u8>, GatewayError> {
    let mut body = crate::json::read(raw)?;
    if let Some(obj) = body.as_object_mut() {
        obj.remove("stream");
        obj.entry("max_tokens")
            .or_insert(serde_json::Value::from(1));
    }
    to_chat(&crate::json::write(&body)?)
}

#[cfg(test)]
mod tests;
