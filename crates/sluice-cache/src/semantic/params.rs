//! `[cache.semantic]` as it is written: the mode and its thresholds, what may be matched,
//! the embedder, and each model group's own settings, with their defaults and what makes
//! them wrong. [`SemanticParams::policy`] and [`SemanticParams::mode`] are what the cache
//! decides by. Whether its provider and groups exist is the configuration's to say.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Mode, Policy};

/// The embedding model's folder when `[cache.semantic] model` names none.
pub const DEFAULT_MODEL: &str = "models/minilm-onnx";

/// The verified mode's default verification budget: a quarter of would-be hits.
pub const DEFAULT_VERIFY_BUDGET: f64 = 0.25;

/// Default size of an answer cache: 64 MiB.
pub const DEFAULT_CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// How semantic hits are decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SemanticMode {
    /// One threshold for every entry.
    Static,
    /// Each entry learns its own, from verification: a sampled share of would-be hits is
    /// also asked upstream and the answers compared.
    Verified,
}

/// `[cache.semantic]`: the semantic cache (off by default). Only the newest user message is
/// matched by meaning; everything else of the request must be identical.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct SemanticParams {
    /// Whether answers are cached by meaning.
    pub enabled: bool,
    /// `static` (served from `threshold`) or `verified` (each entry and each group learn a
    /// threshold curve, and a hit is served only where it is right with a probability of at
    /// least `1 - max_error`).
    pub mode: SemanticMode,
    /// The cosine similarity from which a stored answer is served (static mode).
    pub threshold: f64,
    /// The share of would-be hits also asked upstream, to measure the error (static mode;
    /// the verified mode samples by its own rule).
    pub verify_share: f64,
    /// The largest share of served answers that may be wrong (verified mode).
    pub max_error: f64,
    /// Below this similarity a question is a miss without asking (verified mode).
    pub min_similarity: f64,
    /// The share of a group's would-be hits that verifications may spend, beyond a burst of
    /// 20 (verified mode; a would-be hit the budget cannot pay for goes upstream as a miss).
    pub verify_budget: f64,
    /// Requests with a hotter `temperature` are not served from it (unset counts as 1).
    pub temperature_ceiling: f64,
    /// A newest user message longer than this many characters is not matched (a document
    /// costs more to embed than it could save).
    pub max_question_chars: usize,
    /// How long an answer is served after it was stored.
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
    /// What its entries may weigh together (answers, vectors, bookkeeping).
    pub max_bytes: u64,
    /// The embedding model's folder (relative to the config file's), as
    /// `scripts/install-embedder` fills it: by default all-MiniLM-L6-v2 run by ONNX Runtime
    /// (`--onnx`), which serves the most of what is answerable under the verified mode's bound
    /// on the project's labelled questions.
    pub model: String,
    /// An OpenAI-compatible embeddings upstream to embed with instead of the model.
    pub embeddings: Option<EmbeddingsParams>,
    /// `[cache.semantic.groups.NAME]`: a model group's own settings.
    pub groups: BTreeMap<String, SemanticGroupParams>,
}

/// `[cache.semantic.embeddings]`: questions embedded by an OpenAI-compatible `/embeddings`
/// upstream (OpenAI, vLLM, TEI, Ollama) named in `[providers]`.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsParams {
    /// The `[providers.NAME]` entry (of kind `openai`) whose base URL and key it uses.
    pub provider: String,
    /// The embedding model asked for.
    pub model: String,
    /// Vector length asked for, for models that can shorten theirs.
    #[serde(default)]
    pub dimensions: Option<u32>,
    /// How long a lookup waits for the vector before the request goes on uncached.
    #[serde(with = "humantime_serde", default = "EmbeddingsParams::timeout")]
    pub timeout: Duration,
}

impl EmbeddingsParams {
    /// The default wait for a vector: 1 s.
    pub fn timeout() -> Duration {
        Duration::from_secs(1)
    }
}

/// `[cache.semantic.groups.NAME]`: one model group's semantic cache, where it differs.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SemanticGroupParams {
    /// `false`: the group's requests are never cached by meaning.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Its static threshold.
    #[serde(default)]
    pub threshold: Option<f64>,
    /// Its maximum error rate (verified mode).
    #[serde(default)]
    pub max_error: Option<f64>,
    /// Its verification budget (verified mode).
    #[serde(default)]
    pub verify_budget: Option<f64>,
}

impl Default for SemanticParams {
    fn default() -> Self {
        Self {
            enabled: false,
            mode: SemanticMode::Static,
            threshold: 0.9,
            verify_share: 0.0,
            max_error: 0.02,
            min_similarity: 0.6,
            verify_budget: DEFAULT_VERIFY_BUDGET,
            temperature_ceiling: 1.0,
            max_question_chars: 2000,
            ttl: Duration::from_secs(3600),
            max_bytes: DEFAULT_CACHE_BYTES,
            model: DEFAULT_MODEL.into(),
            embeddings: None,
            groups: BTreeMap::new(),
        }
    }
}

/// A problem: the path of keys under `[cache.semantic]` and why.
pub type Problem = (Vec<String>, String);

impl SemanticParams {
    /// The cache's policy.
    pub fn policy(&self) -> Policy {
        Policy {
            mode: self.mode(None),
            ttl: self.ttl,
            max_bytes: usize::try_from(self.max_bytes).unwrap_or(usize::MAX),
        }
    }

    /// The mode, with a group's own threshold, error bound and budget over it.
    pub fn mode(&self, group: Option<&SemanticGroupParams>) -> Mode {
        match self.mode {
            SemanticMode::Static => Mode::Static {
                threshold: group.and_then(|g| g.threshold).unwrap_or(self.threshold),
                audit: self.verify_share,
            },
            SemanticMode::Verified => Mode::Verified {
                delta: group.and_then(|g| g.max_error).unwrap_or(self.max_error),
                floor: self.min_similarity,
                budget: group
                    .and_then(|g| g.verify_budget)
                    .unwrap_or(self.verify_budget),
            },
        }
    }

    /// What is wrong with it, if anything: (path under `[cache.semantic]`, message).
    pub fn problems(&self) -> Vec<Problem> {
        let mut out: Vec<Problem> = Vec::new();
        let mut at = |path: &[&str], why: String| {
            out.push((path.iter().map(|p| (*p).to_string()).collect(), why));
        };
        let threshold = |t: f64| {
            (!(t > 0.0 && t <= 1.0)).then(|| format!("must be above 0 and at most 1 (is {t})"))
        };
        let max_error = |e: f64| {
            (!(e > 0.0 && e < 1.0)).then(|| format!("must be above 0 and below 1 (is {e})"))
        };
        let budget = |b: f64| {
            (!(b > 0.0 && b <= 1.0)).then(|| {
                format!("must be above 0 (nothing could be learnt) and at most 1 (is {b})")
            })
        };
        if let Some(w) = threshold(self.threshold) {
            at(&["threshold"], w);
        }
        if !(0.0..=1.0).contains(&self.verify_share) {
            at(&["verify_share"], "must be from 0 to 1".into());
        }
        if let Some(w) = max_error(self.max_error) {
            at(&["max_error"], w);
        }
        if let Some(w) = budget(self.verify_budget) {
            at(&["verify_budget"], w);
        }
        for (name, g) in &self.groups {
            let checks = [
                ("threshold", g.threshold.and_then(threshold)),
                ("max_error", g.max_error.and_then(max_error)),
                ("verify_budget", g.verify_budget.and_then(budget)),
            ];
            for (field, why) in checks {
                if let Some(w) = why {
                    at(&["groups", name, field], w);
                }
            }
        }
        if let Some(e) = &self.embeddings {
            if e.model.trim().is_empty() {
                at(
                    &["embeddings", "model"],
                    "must name the embedding model".into(),
                );
            }
            if e.timeout.is_zero() {
                at(
                    &["embeddings", "timeout"],
                    "must be longer than zero".into(),
                );
            }
            if e.dimensions == Some(0) {
                at(&["embeddings", "dimensions"], "must be at least 1".into());
            }
        }
        if !(0.0..1.0).contains(&self.min_similarity) {
            at(&["min_similarity"], "must be from 0 to below 1".into());
        }
        if !(self.temperature_ceiling >= 0.0 && self.temperature_ceiling.is_finite()) {
            at(&["temperature_ceiling"], "must be 0 or more".into());
        }
        if self.ttl.is_zero() {
            at(&["ttl"], "must be longer than zero".into());
        }
        if self.max_question_chars == 0 {
            at(&["max_question_chars"], "must be at least 1".into());
        }
        if self.max_bytes < 1024 {
            at(&["max_bytes"], "must be at least 1024".into());
        }
        if self.enabled && self.embeddings.is_none() && self.model.trim().is_empty() {
            at(&["model"], "must name the embedding model's folder".into());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_groups_own_settings_are_laid_over_the_caches() {
        let p = SemanticParams {
            mode: SemanticMode::Verified,
            ..SemanticParams::default()
        };
        let g = SemanticGroupParams {
            max_error: Some(0.05),
            ..SemanticGroupParams::default()
        };
        assert_eq!(
            p.mode(Some(&g)),
            Mode::Verified {
                delta: 0.05,
                floor: 0.6,
                budget: DEFAULT_VERIFY_BUDGET
            }
        );
        assert_eq!(
            SemanticParams::default().policy().mode,
            Mode::Static {
                threshold: 0.9,
                audit: 0.0
            }
        );
    }

    #[test]
    fn settings_out_of_range_are_named_by_their_path() {
        let mut p = SemanticParams {
            threshold: 1.5,
            ..SemanticParams::default()
        };
        p.groups.insert(
            "chat".into(),
            SemanticGroupParams {
                verify_budget: Some(0.0),
                ..SemanticGroupParams::default()
            },
        );
        let paths: Vec<Vec<String>> = p.problems().into_iter().map(|(at, _)| at).collect();
        assert_eq!(
            paths,
            vec![
                vec!["threshold".to_string()],
                vec!["groups".into(), "chat".into(), "verify_budget".into()]
            ]
        );
        assert!(SemanticParams::default().problems().is_empty());
    }
}
