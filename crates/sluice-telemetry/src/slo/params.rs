//! `[slo.NAME]` as it is written: a kind and the fields that kind needs, with what makes
//! them wrong; [`SloParams::slo`] is the objective it promises. Whether its lanes and groups
//! exist is the configuration's to say.

use std::sync::Arc;
use std::time::Duration;

use super::{Measure, Objective, Slo};

/// What an SLO measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
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

impl SloKind {
    /// Its name as written in `kind`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Latency => "latency",
            Self::Availability => "availability",
            Self::PromptCacheShare => "prompt_cache_share",
            Self::BatchWindow => "batch_window",
        }
    }
}

/// `[slo.NAME]` (unknown fields refused).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SloParams {
    /// What it measures.
    pub kind: SloKind,
    /// Latency: which one (default `ttfb`).
    #[serde(default)]
    pub measure: Measure,
    /// Latency: the bound.
    #[serde(default, with = "humantime_serde")]
    pub threshold: Option<Duration>,
    /// Latency, availability and batch windows: the share of good events promised (0.99).
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

impl SloParams {
    /// The SLO named `name`; `None` while a field its kind needs is missing.
    pub fn slo(&self, name: &str) -> Option<Slo> {
        let objective = match self.kind {
            SloKind::Latency => Objective::Latency {
                measure: self.measure,
                threshold: self.threshold?,
                target: self.objective?,
            },
            SloKind::Availability => Objective::Availability {
                target: self.objective?,
            },
            SloKind::PromptCacheShare => Objective::CacheShare { floor: self.floor? },
            SloKind::BatchWindow => Objective::BatchWindow {
                target: self.objective?,
            },
        };
        let names = |v: &[String]| v.iter().map(|s| Arc::from(s.as_str())).collect();
        Some(Slo {
            name: Arc::from(name),
            objective,
            lanes: names(&self.lanes),
            groups: names(&self.groups),
        })
    }

    /// What is wrong with it, if anything: (field, message).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        let kind = self.kind.name();
        let needs: &[(&'static str, bool)] = match self.kind {
            SloKind::Latency => &[
                ("threshold", self.threshold.is_some()),
                ("objective", self.objective.is_some()),
            ],
            SloKind::Availability | SloKind::BatchWindow => {
                &[("objective", self.objective.is_some())]
            }
            SloKind::PromptCacheShare => &[("floor", self.floor.is_some())],
        };
        for (field, set) in needs {
            if !set {
                out.push((*field, format!("is required for kind = \"{kind}\"")));
            }
        }
        if self.objective.is_some_and(|o| !(o > 0.0 && o < 1.0)) {
            out.push(("objective", "must be between 0 and 1 (exclusive)".into()));
        }
        if self.floor.is_some_and(|f| !(f > 0.0 && f <= 1.0)) {
            out.push(("floor", "must be above 0 and at most 1".into()));
        }
        if self.threshold.is_some_and(|t| t.is_zero()) {
            out.push(("threshold", "must be longer than zero".into()));
        }
        out
    }
}
