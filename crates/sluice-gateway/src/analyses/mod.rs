//! `/v1/analyses`: document analysis served by the gateway. One uploaded document is
//! analysed while the caller waits, its reviews in the caller's lane; several are a batch
//! job of documents, kept in the batch store like any job (so it survives a restart and any
//! gateway sharing the store may run it), run in the batch lane (so a flood of documents
//! waits behind interactive calls) and followed by `GET /v1/analyses/{id}` ("queued
//! 47/200"). Every review is a call through the gateway's own walk ([`WalkReviewer`]):
//! admitted, routed, cached, hedged, paced and billed to the caller's tenant as any other.

pub mod api;
mod documents;
mod reviewer;

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use sluice_analysis::{Analyzer, Merger};

pub use reviewer::WalkReviewer;

use crate::Gateway;
use crate::batches::{self, Batches};

/// What the analyses API's handlers are served with: the gateway (whose keys say who asks),
/// its analyses when served, and its batch jobs (a batch of documents is one).
#[derive(Clone, Debug)]
pub struct Served {
    /// The gateway.
    pub gw: Arc<Gateway>,
    /// Its analyses, when served.
    pub analyses: Option<Arc<Analyses>>,
    /// Its batch jobs, when served.
    pub batches: Option<Arc<Batches>>,
}

impl Served {
    /// The same gateway as the batch API sees it.
    pub(crate) fn jobs(&self) -> batches::Served {
        batches::Served {
            gw: self.gw.clone(),
            batches: self.batches.clone(),
            analyses: self.analyses.is_some(),
        }
    }
}

/// The batches whose merger (the reviews asked so far, for near-identical clauses to share)
/// a gateway keeps, the most recently used.
const KEPT_MERGERS: usize = 16;

/// How analyses are served.
#[derive(Clone, Debug)]
pub struct AnalysisSettings {
    /// The lane a batch's reviews wait in (resolved at build).
    pub batch_lane: usize,
    /// Documents of batches analysed at once on this gateway.
    pub concurrency: usize,
    /// The most documents one upload may hold.
    pub max_documents: usize,
    /// The largest upload, in bytes.
    pub max_upload_bytes: u64,
}

/// The analyser of a gateway, and the mergers of the batches it runs.
#[derive(Debug)]
pub struct Analyses {
    pub(crate) analyzer: Analyzer,
    pub(crate) settings: AnalysisSettings,
    mergers: Mutex<VecDeque<(String, Arc<Merger>)>>,
}

impl Analyses {
    /// Analyses served with `analyzer` as `settings` say.
    pub fn new(analyzer: Analyzer, settings: AnalysisSettings) -> Self {
        Self {
            analyzer,
            settings,
            mergers: Mutex::new(VecDeque::new()),
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

    /// The merger of batch `id`'s documents on this gateway: near-identical clauses across
    /// its documents share a review.
    pub(crate) fn merger(&self, id: &str) -> Arc<Merger> {
        let mut kept = self.mergers.lock();
        let found = kept.iter().position(|(b, _)| b == id);
        let entry = match found.and_then(|i| kept.remove(i)) {
            Some(entry) => entry,
            None => (id.to_string(), Merger::new()),
        };
        let merger = entry.1.clone();
        kept.push_front(entry);
        kept.truncate(KEPT_MERGERS);
        merger
    }
}
