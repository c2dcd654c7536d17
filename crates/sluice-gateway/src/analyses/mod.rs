//! `/v1/analyses`: document analysis served by the gateway. One uploaded document is
//! analysed while the caller waits, its reviews in the caller's lane; several are a job
//! that runs in the batch lane (so a flood of documents waits behind interactive calls) and
//! is followed by `GET /v1/analyses/{id}` ("queued 47/200"). Every review is a call through
//! the gateway's own walk ([`WalkReviewer`]): admitted, routed, cached, hedged, paced and
//! billed to the caller's tenant as any other.
//!
//! Jobs are kept in this gateway's memory while it runs (their reviews' bills are in the
//! ledger like any call's): a restart loses a job's report, not what it cost.

pub mod api;
mod reviewer;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use sluice_analysis::{Analyzer, Progress, Report, Summary};

pub use reviewer::WalkReviewer;

/// How analyses are served.
#[derive(Clone, Debug)]
pub struct AnalysisSettings {
    /// The lane a batch's reviews wait in (resolved at build).
    pub batch_lane: usize,
    /// Documents of a batch analysed at once.
    pub concurrency: usize,
    /// The most documents one upload may hold.
    pub max_documents: usize,
    /// The largest upload, in bytes.
    pub max_upload_bytes: u64,
}

/// A batch of documents being analysed, or analysed.
#[derive(Debug)]
pub(crate) struct Job {
    pub(crate) id: String,
    pub(crate) tenant: String,
    pub(crate) created_ms: i64,
    pub(crate) progress: Progress,
    pub(crate) result: OnceLock<(Vec<Report>, Summary)>,
}

/// The analyser and the jobs of a gateway.
#[derive(Debug)]
pub struct Analyses {
    pub(crate) analyzer: Analyzer,
    pub(crate) settings: AnalysisSettings,
    pub(crate) jobs: Mutex<HashMap<String, Arc<Job>>>,
}

impl Analyses {
    /// Analyses served with `analyzer` as `settings` say.
    pub fn new(analyzer: Analyzer, settings: AnalysisSettings) -> Self {
        Self {
            analyzer,
            settings,
            jobs: Mutex::new(HashMap::new()),
        }
    }

    /// The analyser.
    pub fn analyzer(&self) -> &Analyzer {
        &self.analyzer
    }

    /// How analyses are served.
    pub fn settings(&self) -> &AnalysisSettings {
        &self.settings
    }
}
