//! An OpenAI-compatible `/embeddings` upstream (OpenAI, vLLM, TEI, Ollama): texts in, one
//! vector each out, in the order given.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;
use sluice_core::{ErrorKind, GatewayError};

use crate::OpenAiSettings;
use crate::http::{self, Endpoint};

/// Largest embeddings answer read (a few vectors of a few thousand floats each).
const MAX_ANSWER: usize = 16 * 1024 * 1024;

/// An embeddings endpoint and the model it is asked for.
pub struct Embeddings {
    name: Arc<str>,
    endpoint: Endpoint,
    settings: OpenAiSettings,
    model: String,
    dimensions: Option<u32>,
}

impl std::fmt::Debug for Embeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embeddings")
            .field("upstream", &self.name)
            .field("model", &self.model)
            .finish()
    }
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Datum>,
}

#[derive(Deserialize)]
struct Datum {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

impl Embeddings {
    /// The `embeddings` endpoint under `settings.base_url` of upstream `name`, asked for
    /// `model` (with `dimensions`, for models that can shorten their vectors).
    pub fn new(
        name: &str,
        settings: OpenAiSettings,
        model: &str,
        dimensions: Option<u32>,
    ) -> Result<Self, GatewayError> {
        let endpoint = settings.endpoint("embeddings")?;
        Ok(Self {
            name: Arc::from(name),
            endpoint,
            settings,
            model: model.to_string(),
            dimensions,
        })
    }

    /// The upstream's name.
    pub fn upstream(&self) -> &str {
        &self.name
    }

    /// The model asked for.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// One vector per text of `texts`, in their order (sent as `request_id`).
    pub async fn embed(
        &self,
        texts: &[&str],
        request_id: &str,
    ) -> Result<Vec<Vec<f32>>, GatewayError> {
        let mut body = json!({"model": self.model, "input": texts, "encoding_format": "float"});
        if let Some(d) = self.dimensions {
            body["dimensions"] = json!(d);
        }
        let body = serde_json::to_vec(&body)
            .map_err(|e| GatewayError::new(ErrorKind::Internal, format!("encoding: {e}")))?;
        let mut accepted = http::send_plain(
            &self.name,
            &self.settings.http,
            &self.endpoint,
            body,
            request_id,
        )
        .await?;
        let raw = accepted.body.collect(MAX_ANSWER).await?;
        vectors(&self.name, &raw, texts.len())
    }
}

/// The vectors of an embeddings answer, checked: one per input, in input order, of one
/// dimension, finite.
fn vectors(upstream: &str, raw: &[u8], expected: usize) -> Result<Vec<Vec<f32>>, GatewayError> {
    let bad = |what: String| {
        GatewayError::new(
            ErrorKind::UpstreamProtocol,
            format!("upstream {upstream} embeddings: {what}"),
        )
    };
    let answer: Answer = serde_json::from_slice(raw).map_err(|e| bad(format!("{e}")))?;
    if answer.data.len() != expected {
        return Err(bad(format!(
            "{} vectors for {expected} inputs",
            answer.data.len()
        )));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (i, d) in answer.data.into_iter().enumerate() {
        let at = d.index.unwrap_or(i);
        let slot = out
            .get_mut(at)
            .ok_or_else(|| bad(format!("index {at} out of range")))?;
        if slot.is_some() {
            return Err(bad(format!("index {at} twice")));
        }
        if d.embedding.is_empty() || d.embedding.iter().any(|x| !x.is_finite()) {
            return Err(bad(format!("vector {at} is empty or not finite")));
        }
        *slot = Some(d.embedding);
    }
    let out: Vec<Vec<f32>> = out.into_iter().flatten().collect();
    if out.windows(2).any(|w| w[0].len() != w[1].len()) {
        return Err(bad("vectors of different dimensions".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_come_back_in_input_order_and_bad_answers_are_protocol_errors() {
        let raw =
            br#"{"data":[{"index":1,"embedding":[0.0,1.0]},{"index":0,"embedding":[1.0,0.0]}]}"#;
        let v = vectors("u", raw, 2).unwrap();
        assert_eq!(v, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        for (raw, n) in [
            (&br#"{"data":[{"embedding":[1.0]}]}"#[..], 2),
            (
                br#"{"data":[{"index":0,"embedding":[1.0]},{"index":0,"embedding":[1.0]}]}"#,
                2,
            ),
            (br#"{"data":[{"index":0,"embedding":[]}]}"#, 1),
            (
                br#"{"data":[{"embedding":[1.0]},{"embedding":[1.0,2.0]}]}"#,
                2,
            ),
            (br#"{"data":[{"index":5,"embedding":[1.0]}]}"#, 1),
            (br#"{"error":{"message":"no"}}"#, 1),
        ] {
            let e = vectors("u", raw, n).unwrap_err();
            assert_eq!(e.kind, ErrorKind::UpstreamProtocol, "{e}");
        }
    }
}
