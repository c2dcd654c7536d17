//! A BERT sentence encoder in process (all-MiniLM-L6-v2 and its kin, as sentence-transformers
//! lays them out: `config.json`, `tokenizer.json`, `model.safetensors`): the question's
//! tokens through the encoder, their last hidden states averaged over the real tokens (mean
//! pooling), then scaled to unit length. Run on the CPU with candle; questions are cut at
//! [`MAX_TOKENS`].

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::Tokenizer;

/// Tokens a question is cut to (the model was trained on sequences up to 256).
pub const MAX_TOKENS: usize = 256;

/// A loaded encoder.
pub struct Bert {
    model: BertModel,
    tokenizer: Tokenizer,
    dim: usize,
}

/// Whether the model folder `dir` holds a BERT encoder (its `config.json` says
/// `"model_type": "bert"`).
pub fn is_bert(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("config.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("model_type")?.as_str().map(|m| m == "bert"))
        .unwrap_or(false)
}

/// The encoder's `tokenizer.json` in `dir`, one question at a time: cut at [`MAX_TOKENS`],
/// never padded (so every token is real and the mean is over all of them).
pub fn tokenizer(dir: &Path) -> Result<Tokenizer, String> {
    let mut tokenizer =
        Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| e.to_string())?;
    tokenizer
        .with_truncation(Some(tokenizers::TruncationParams {
            max_length: MAX_TOKENS,
            ..Default::default()
        }))
        .map_err(|e| e.to_string())?;
    tokenizer.with_padding(None);
    Ok(tokenizer)
}

impl Bert {
    /// Loads the encoder in `dir`; the error says what failed.
    pub fn load(dir: &Path) -> Result<Self, String> {
        let config: Config = serde_json::from_str(
            &std::fs::read_to_string(dir.join("config.json")).map_err(|e| e.to_string())?,
        )
        .map_err(|e| format!("config.json: {e}"))?;
        let tokenizer = tokenizer(dir)?;
        let weights = std::fs::read(dir.join("model.safetensors")).map_err(|e| e.to_string())?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|e| e.to_string())?;
        let model = BertModel::load(vb, &config).map_err(|e| e.to_string())?;
        Ok(Self {
            model,
            tokenizer,
            dim: config.hidden_size,
        })
    }

    /// The vectors' dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// `text`'s mean-pooled vector (not yet scaled).
    pub fn encode(&self, text: &str) -> Result<Vec<f32>, String> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| e.to_string())?;
        let ids = enc.get_ids();
        let n = ids.len();
        let dev = &Device::Cpu;
        let run = || -> candle_core::Result<Vec<f32>> {
            let input = Tensor::new(ids, dev)?.unsqueeze(0)?;
            let types = input.zeros_like()?;
            let hidden = self.model.forward(&input, &types, None)?;
            // One sequence, no padding: every token is real, the mean is over all of them.
            let pooled = (hidden.sum(1)? / n as f64)?;
            pooled.squeeze(0)?.to_vec1::<f32>()
        };
        run().map_err(|e| e.to_string())
    }
}
