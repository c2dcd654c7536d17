//! Embeddings at an OpenAI-compatible upstream: the client's body as it came (its model
//! swapped) to `/embeddings`, and the upstream's answer back as it came, its usage read for
//! billing.

use std::sync::Arc;

use serde::Deserialize;
use sluice_core::{ErrorKind, GatewayError, Usage};

use crate::http::{self, Endpoint, HttpSettings};
use crate::{Completion, UpstreamCall, UpstreamResponse};

/// The client's embeddings body with the upstream's model name.
pub(crate) fn body(raw: &[u8], model: &str) -> Result<Vec<u8>, GatewayError> {
    serde_json::to_vec(&crate::as_it_came(raw, model)?)
        .map_err(|e| GatewayError::new(ErrorKind::Internal, format!("encoding request: {e}")))
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    usage: Option<Counted>,
}

#[derive(Deserialize)]
struct Counted {
    #[serde(default)]
    prompt_tokens: u64,
}

/// Sends `body` for `call` with `extra` headers (a rotating credential's) and reads the
/// whole answer.
pub(crate) async fn send(
    name: Arc<str>,
    settings: HttpSettings,
    endpoint: Arc<Endpoint>,
    body: Result<Vec<u8>, GatewayError>,
    call: UpstreamCall,
    extra: Vec<(String, String)>,
) -> Result<UpstreamResponse, GatewayError> {
    let mut accepted =
        http::send(&name, &settings, &endpoint, body?, &call, |_| None, &extra).await?;
    let (raw, first_byte) = http::read_complete(&mut accepted).await?;
    let answer: Answer = serde_json::from_slice(&raw).map_err(|e| {
        GatewayError::new(
            ErrorKind::UpstreamProtocol,
            format!("upstream {name} answered embeddings that do not read: {e}"),
        )
    })?;
    let usage = answer.usage.map(|u| Usage {
        prompt_tokens: u.prompt_tokens,
        ..Usage::default()
    });
    Ok(UpstreamResponse::Complete(Completion {
        body: raw.clone(),
        usage,
        first_byte,
        native: Some(raw),
    }))
}
