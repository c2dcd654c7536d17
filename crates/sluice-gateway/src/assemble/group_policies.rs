//! The policies one model group sets for itself, each falling back to the builder's default.

use std::time::Duration;

use sluice_routing::affinity::AffinityPolicy;
use sluice_tail::limit::LimitSpec;
use sluice_tail::{BreakerPolicy, HedgePolicy, RetryPolicy};

/// The policies of one model group; `None` takes the builder's default.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GroupPolicies {
    /// Hedging of slow requests.
    pub hedge: Option<HedgePolicy>,
    /// Concurrency limit per deployment.
    pub limit: Option<LimitSpec>,
    /// Retries of failed attempts.
    pub retry: Option<RetryPolicy>,
    /// A circuit breaker per deployment.
    pub breaker: Option<BreakerPolicy>,
    /// The deadline of a request that carries none of its own.
    pub timeout: Option<Duration>,
    /// Routing by prompt prefix.
    pub affinity: Option<AffinityPolicy>,
}

impl GroupPolicies {
    /// Each policy of `self`, or of `defaults` where `self` has none.
    pub(super) fn or(self, defaults: GroupPolicies) -> Self {
        Self {
            hedge: self.hedge.or(defaults.hedge),
            limit: self.limit.or(defaults.limit),
            retry: self.retry.or(defaults.retry),
            breaker: self.breaker.or(defaults.breaker),
            timeout: self.timeout.or(defaults.timeout),
            affinity: self.affinity.or(defaults.affinity),
        }
    }
}
