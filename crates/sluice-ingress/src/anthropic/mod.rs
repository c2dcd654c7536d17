//! Anthropic Messages (`POST /v1/messages`, `POST /v1/messages/count_tokens`): requests to
//! the internal form, answers and streams back, refusals in Messages' error shape.

pub mod answer;
pub mod error;
pub mod request;
pub mod stream;

pub use answer::from_chat;
pub use request::to_chat;
pub use stream::Reframer;

use sluice_core::{ErrorKind, GatewayError};

/// A `count_tokens` body (a Messages request without `max_tokens`) in the internal form.
pub fn count_request(raw: &[u8]) -> Result<Vec<u8>, GatewayError> {
    let mut body: serde_json::Value = serde_json::from_slice(raw).map_err(|e| {
        GatewayError::new(
            ErrorKind::InvalidJson,
            format!(
                "request body is not valid JSON: line {} column {}",
                e.line(),
                e.column()
            ),
        )
    })?;
    if let Some(obj) = body.as_object_mut() {
        obj.remove("stream");
        obj.entry("max_tokens")
            .or_insert(serde_json::Value::from(1));
    }
    let text = serde_json::to_vec(&body)
        .map_err(|e| GatewayError::new(ErrorKind::Internal, format!("writing the body: {e}")))?;
    to_chat(&text)
}

#[cfg(test)]
mod tests;
