//! What a 429 leaves behind beyond the deployment's own admission: the deployments that
//! answered one lately, which optional work (hedges) keeps away from, and whose SLO misses
//! are the rate limit's.

use std::sync::Arc;

use parking_lot::Mutex;
use sluice_core::GatewayError;
use sluice_routing::Deployment;
use sluice_tail::pace::{Cooldowns, Cooling, after_429};
use tokio::time::Instant;

/// The deployments cooling down after a 429.
#[derive(Debug)]
pub struct Pacing {
    cooling: Box<dyn Cooling>,
}

impl Default for Pacing {
    /// Cool-downs kept in this process.
    fn default() -> Self {
        Self::with(Box::new(Mutex::new(Cooldowns::<Arc<str>>::new())))
    }
}

impl Pacing {
    /// Cool-downs kept in `cooling`.
    pub fn with(cooling: Box<dyn Cooling>) -> Self {
        Self { cooling }
    }

    /// Notes an attempt's failure. A 429 empties the deployment's pacer and pauses its
    /// admission until its `retry-after` (queued work waits in sluice rather than meet the
    /// same wall; with none, the pacer's wait when it paces requests, else a second: see
    /// [`after_429`]), and keeps hedges away from it a while longer.
    pub(crate) fn attempt_failed(&self, deployment: &Deployment, e: &GatewayError, now: Instant) {
        if !e.is_rate_limited() {
            return;
        }
        let paced = deployment.limiter.as_ref().is_some_and(|l| l.refused());
        let asked = e.upstream.as_deref().and_then(|r| r.retry_after());
        let pushback = after_429(now, asked, paced);
        if let (Some(limiter), Some(until)) = (&deployment.limiter, pushback.pause_until) {
            limiter.pause_until(until);
        }
        self.cooling
            .start(&deployment.name, now, pushback.quiet_for);
    }

    /// Whether `deployment` answered 429 recently enough that no hedge should go there.
    pub fn is_cooling(&self, deployment: &Arc<str>, now: Instant) -> bool {
        self.cooling.active(deployment, now)
    }
}
