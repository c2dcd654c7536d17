//! Work the gateway runs itself on a gateway being built (batch jobs, document analyses),
//! their lanes resolved once the lanes are known.

use std::sync::Arc;

use sluice_analysis::Analyzer;
use sluice_batch::Jobs;
use sluice_tail::admission::LaneSpec;

use super::GatewayBuilder;
use crate::analyses::{Analyses, AnalysisSettings};
use crate::batches::{BatchSettings, Batches, Documents};

/// What the builder was given, lanes still by name.
#[derive(Default)]
pub(crate) struct Pending {
    batches: Option<(Jobs, BatchSettings, Option<String>)>,
    analyses: Option<(Analyzer, AnalysisSettings, Option<String>)>,
}

impl GatewayBuilder {
    /// Serves batch jobs kept in `jobs` (the ledger's database), run as `settings` says;
    /// `lane` names their lane (`None`: `batch`, else the last lane).
    pub fn batches(mut self, jobs: Jobs, settings: BatchSettings, lane: Option<&str>) -> Self {
        self.jobs.batches = Some((jobs, settings, lane.map(str::to_string)));
        self
    }

    /// Serves `/v1/analyses` with `analyzer`; a batch of documents' reviews wait in lane
    /// `lane` (`None`: `batch`, else the last lane).
    pub fn analyses(
        mut self,
        analyzer: Analyzer,
        settings: AnalysisSettings,
        lane: Option<&str>,
    ) -> Self {
        self.jobs.analyses = Some((analyzer, settings, lane.map(str::to_string)));
        self
    }
}

impl Pending {
    /// Batch jobs and analyses with their lanes resolved among `lanes`: the one named, else
    /// `batch`, else the last.
    pub(super) fn resolve(
        self,
        lanes: &[LaneSpec],
    ) -> (Option<Arc<Batches>>, Option<Arc<Analyses>>) {
        let lane = |named: Option<String>| {
            let by_name = |name: &str| lanes.iter().position(|l| &*l.name == name);
            named
                .as_deref()
                .and_then(by_name)
                .or_else(|| by_name("batch"))
                .unwrap_or(lanes.len().saturating_sub(1))
        };
        let batches = self.batches.map(|(jobs, mut settings, named)| {
            settings.lane = lane(named);
            Batches::new(jobs, settings)
        });
        let analyses = self.analyses.map(|(analyzer, mut settings, named)| {
            settings.batch_lane = lane(named);
            Arc::new(Analyses::new(analyzer, settings))
        });
        if let (Some(b), Some(a)) = (&batches, &analyses) {
            // A batch of documents is a batch job whose items analysis runs.
            let documents: Arc<dyn Documents> = a.clone();
            let _ = b.documents.set(documents);
        }
        (batches, analyses)
    }
}
