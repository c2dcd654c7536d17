//! A deployment's concurrency limiter: the admission queue of `sluice-tail` and the adaptive
//! algorithm that moves its limit, fed by what each attempt's answer says.

use parking_lot::Mutex;
use sluice_tail::admission::{Admission, AdmissionStats, LaneSpec, Permit, Rejected};
use sluice_tail::limit::{Algorithm, LimitSpec, Sample};
use tokio::time::Instant;

/// The limiter of one deployment.
#[derive(Debug)]
pub struct Limiter {
    admission: Admission,
    algorithm: Mutex<Box<dyn Algorithm>>,
}

impl Limiter {
    /// A limiter by `spec` over `lanes`; `seed` feeds the algorithm's jitter, if any.
    pub fn new(spec: &LimitSpec, lanes: &[LaneSpec], seed: u64) -> Self {
        let algorithm = spec.build(seed);
        Self {
            admission: Admission::new(algorithm.limit(), lanes.to_vec()),
            algorithm: Mutex::new(algorithm),
        }
    }

    /// Waits for a slot in `lane`.
    pub async fn acquire(&self, lane: usize) -> Result<Permit, Rejected> {
        self.admission.acquire(lane).await
    }

    /// A slot now, or none (for optional work such as hedges).
    pub fn try_acquire(&self, lane: usize) -> Option<Permit> {
        self.admission.try_acquire(lane)
    }

    /// Feeds one attempt's outcome to the algorithm and applies the new limit.
    pub fn sample(&self, now: Instant, sample: Sample) {
        let limit = self.algorithm.lock().update(now, sample);
        self.admission.set_limit(limit);
    }

    /// Grants no slot before `until`.
    pub fn pause_until(&self, until: Instant) {
        self.admission.pause_until(until);
    }

    /// Whether the upstream asked us to wait and its time is not up.
    pub fn is_paused(&self, now: Instant) -> bool {
        self.admission.is_paused(now)
    }

    /// Limit, in flight and waiting, per lane.
    pub fn stats(&self) -> AdmissionStats {
        self.admission.stats()
    }
}
