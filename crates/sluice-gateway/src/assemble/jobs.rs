//! Batch jobs on a gateway being built: where they are kept and how they run, their lane
//! resolved once the lanes are known.

use std::sync::Arc;

use sluice_batch::Jobs;
use sluice_tail::admission::LaneSpec;

use super::GatewayBuilder;
use crate::batches::{BatchSettings, Batches};

impl GatewayBuilder {
    /// Serves batch jobs kept in `jobs` (the ledger's database), run as `settings` says;
    /// `lane` names their lane (`None`: `batch`, else the last lane).
    pub fn batches(mut self, jobs: Jobs, settings: BatchSettings, lane: Option<&str>) -> Self {
        self.batch_lane = lane.map(str::to_string);
        self.batches = Some((jobs, settings));
        self
    }
}

/// The batch jobs of a gateway whose lanes are `lanes`, their lane resolved: the one named,
/// else `batch`, else the last.
pub(super) fn resolve(
    batches: Option<(Jobs, BatchSettings)>,
    named: Option<&str>,
    lanes: &[LaneSpec],
) -> Option<Arc<Batches>> {
    let (jobs, mut settings) = batches?;
    let by_name = |name: &str| lanes.iter().position(|l| &*l.name == name);
    settings.lane = named
        .and_then(by_name)
        .or_else(|| by_name("batch"))
        .unwrap_or(lanes.len().saturating_sub(1));
    Some(Batches::new(jobs, settings))
}
