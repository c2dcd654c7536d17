//! A deployment's limiter: the admission queue of `sluice-tail` with its pacer, and the
//! adaptive algorithm that moves its concurrency limit, fed by what each attempt's answer
//! says (its time to first byte, its failure, its rate-limit headers).

use parking_lot::Mutex;
use sluice_core::RateLimits;
use sluice_tail::admission::{Admission, AdmissionStats, Ask, LaneSpec, Permit, Rejected};
use sluice_tail::limit::{Algorithm, LimitSpec, Sample};
use sluice_tail::pace::{Dimension, Pace, PaceSpec, Pacer};
use tokio::time::Instant;

/// The limiter of one deployment.
#[derive(Debug)]
pub struct Limiter {
    admission: Admission,
    algorithm: Mutex<Box<dyn Algorithm>>,
}

impl Limiter {
    /// A limiter by `spec` over `lanes`, paced by `pace` (and by what answers report);
    /// `seed` feeds the algorithm's jitter, if any.
    pub fn new(spec: &LimitSpec, lanes: &[LaneSpec], seed: u64, pace: PaceSpec) -> Self {
        Self::paced_by(
            spec,
            lanes,
            seed,
            Box::new(Pacer::new(pace, Instant::now())),
        )
    }

    /// A limiter by `spec` over `lanes` paced by `pacer` (one shared with other instances,
    /// say); `seed` feeds the algorithm's jitter, if any.
    pub fn paced_by(
        spec: &LimitSpec,
        lanes: &[LaneSpec],
        seed: u64,
        mut pacer: Box<dyn Pace>,
    ) -> Self {
        let algorithm = spec.build(seed);
        // A configured rate limit paces from the first call, and a concurrency limit written
        // by hand is the operator's: no slow start then.
        let slow = pacer.state(Instant::now()).0.is_none() && !matches!(spec, LimitSpec::Fixed(_));
        let mut admission = Admission::paced_by(algorithm.limit(), lanes.to_vec(), pacer);
        if slow {
            admission = admission.slow_start();
        }
        Self {
            admission,
            algorithm: Mutex::new(algorithm),
        }
    }

    /// Waits for a slot.
    pub async fn acquire(&self, ask: Ask) -> Result<Permit, Rejected> {
        self.admission.acquire(ask).await
    }

    /// A slot now, or none (for optional work such as hedges).
    pub fn try_acquire(&self, ask: Ask) -> Option<Permit> {
        self.admission.try_acquire(ask)
    }

    /// Whether `ask` would wait for a slot if it asked now.
    pub fn would_wait(&self, ask: &Ask) -> bool {
        self.admission.would_wait(ask)
    }

    /// Paces by what an answer reported of the upstream's rate limits.
    pub fn observe(&self, limits: &RateLimits) {
        for (dim, quota) in [
            (Dimension::Requests, limits.requests),
            (Dimension::Tokens, limits.tokens),
        ] {
            if let Some(q) = quota {
                self.admission.observe(dim, q.limit, q.remaining, q.reset);
            }
        }
        // Once the pacer knows the limit, the slow start ends.
        if limits.requests.is_some() || limits.tokens.is_some() {
            self.admission.known();
        }
    }

    /// Feeds one attempt's outcome to the algorithm and applies the new limit.
    pub fn sample(&self, now: Instant, sample: Sample) {
        let limit = self.algorithm.lock().update(now, sample);
        self.admission.set_limit(limit);
    }

    /// A 429: the pacer hears that nothing is left. Whether it paces requests from now on.
    pub fn refused(&self) -> bool {
        self.admission.refused()
    }

    /// Whether the pacer paces requests now.
    pub fn paces_requests(&self) -> bool {
        self.admission.paces_requests()
    }

    /// Grants no slot before `until`.
    pub fn pause_until(&self, until: Instant) {
        self.admission.pause_until(until);
    }

    /// Whether the upstream answers well above its usual latency now, as the limit reads it.
    pub fn upstream_slower(&self) -> bool {
        self.algorithm.lock().upstream_slower()
    }

    /// Whether the upstream's rate limit held the queue back at any instant from `since` on.
    pub fn rate_held_since(&self, since: Instant) -> bool {
        self.admission.rate_held_since(since)
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
