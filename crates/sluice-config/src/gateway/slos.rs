//! `[slo.NAME]`: the service-level objectives every finished call is judged by, and what
//! `sluice slo rules` writes alerts for; `[diagnose]`: the calls the incident explainer keeps.

use std::time::Duration;

use serde::Deserialize;

use crate::diagnostic::Diagnostic;
use crate::document::{Document, Seg};

use super::{LaneConfig, ModelGroupConfig};

/// `[diagnose]`: the incident explainer's memory.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct DiagnoseConfig {
    /// The last calls kept (about 100 bytes each; 0: none, and `/admin/diagnose` is off).
    pub keep: usize,
}

impl Default for DiagnoseConfig {
    fn default() -> Self {
        Self { keep: 20_000 }
    }
}

/// What an SLO measures.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SloKind {
    /// A latency under a threshold.
    Latency,
    /// Requests answered without a server-side error.
    Availability,
    /// The share of prompt tokens the provider's cache served.
    PromptCacheShare,
    /// The share of batch jobs that finished within their window.
    BatchWindow,
}

/// Which latency a latency SLO bounds.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SloMeasure {
    /// Arrival to the first byte.
    #[default]
    Ttfb,
    /// Arrival to the last byte.
    Total,
}

/// `[slo.NAME]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SloConfig {
    /// What it measures.
    pub kind: SloKind,
    /// Latency: which one (default `ttfb`).
    #[serde(default)]
    pub measure: SloMeasure,
    /// Latency: the bound.
    #[serde(default, with = "crate::duration::option")]
    pub threshold: Option<Duration>,
    /// Latency and availability: the share of good events promised (0.99).
    #[serde(default)]
    pub objective: Option<f64>,
    /// Prompt-cache share: the least share.
    #[serde(default)]
    pub floor: Option<f64>,
    /// Lanes it covers (all when empty).
    #[serde(default)]
    pub lanes: Vec<String>,
    /// Model groups it covers (all when empty).
    #[serde(default)]
    pub groups: Vec<String>,
}

/// What types cannot check of the SLOs: each kind's fields, ranges, names that must exist.
pub(super) fn check(
    doc: &Document<'_>,
    slos: &[(String, SloConfig)],
    lanes: &[(String, LaneConfig)],
    models: &[(String, ModelGroupConfig)],
    diags: &mut Vec<Diagnostic>,
) {
    for (name, s) in slos {
        let at = |field: &str| -> Vec<Seg> {
            ["slo", name.as_str(), field]
                .iter()
                .map(|p| Seg::Key((*p).to_string()))
                .collect()
        };
        let mut need = |field: &str, set: bool, kind: &str| {
            if !set {
                diags.push(doc.diag(&at(field), format!("is required for kind = \"{kind}\"")));
            }
        };
        match s.kind {
            SloKind::Latency => {
                need("threshold", s.threshold.is_some(), "latency");
                need("objective", s.objective.is_some(), "latency");
            }
            SloKind::Availability => need("objective", s.objective.is_some(), "availability"),
            SloKind::PromptCacheShare => {
                need("floor", s.floor.is_some(), "prompt_cache_share");
            }
            SloKind::BatchWindow => need("objective", s.objective.is_some(), "batch_window"),
        }
        if let Some(o) = s.objective
            && !(o > 0.0 && o < 1.0)
        {
            diags.push(doc.diag(&at("objective"), "must be between 0 and 1 (exclusive)"));
        }
        if let Some(f) = s.floor
            && !(f > 0.0 && f <= 1.0)
        {
            diags.push(doc.diag(&at("floor"), "must be above 0 and at most 1"));
        }
        if s.threshold.is_some_and(|t| t.is_zero()) {
            diags.push(doc.diag(&at("threshold"), "must be longer than zero"));
        }
        for l in &s.lanes {
            if !lanes.iter().any(|(n, _)| n == l) {
                diags.push(doc.diag(&at("lanes"), format!("names no lane `{l}`")));
            }
        }
        for g in &s.groups {
            if !models.iter().any(|(n, _)| n == g) {
                diags.push(doc.diag(&at("groups"), format!("names no model group `{g}`")));
            }
        }
    }
}
