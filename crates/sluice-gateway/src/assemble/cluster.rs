//! A gateway being built as one instance of several: its book of credits and quotas, its
//! rate-limited deployments' pacers and its exact answer cache are the cluster's.

use std::sync::Arc;

use sluice_economy::Books;
use sluice_routing::limiter::Limiter;
use sluice_tail::admission::LaneSpec;
use sluice_tail::limit::LimitSpec;
use sluice_tail::pace::PaceSpec;

use super::GatewayBuilder;

impl GatewayBuilder {
    /// Shares credits, quotas, pacing, 429 pauses and the keys and tenants made through the
    /// admin API with the other instances of `cluster`. Must be set before `build`.
    pub fn cluster(mut self, cluster: sluice_cluster::Cluster) -> Self {
        self.cluster = Some(cluster);
        self
    }
}

/// The book of a gateway: the cluster's, else one in this process.
pub(super) fn books(cluster: Option<&sluice_cluster::Cluster>) -> Books {
    match cluster {
        Some(c) => Books::Shared(c.book() as Arc<dyn sluice_economy::SharedBook>),
        None => Books::default(),
    }
}

/// The exact answer cache: the cluster's, else one in this process.
pub(super) fn answer_cache(
    cluster: Option<&sluice_cluster::Cluster>,
    ttl: std::time::Duration,
    max_bytes: u64,
) -> sluice_cache::AnswerCache {
    match cluster {
        Some(c) => sluice_cache::AnswerCache::in_store(
            sluice_cache::Answers::Shared(c.answers(ttl, max_bytes)),
            ttl,
            max_bytes,
        ),
        None => sluice_cache::AnswerCache::new(ttl, max_bytes),
    }
}

/// The limiter of deployment `name`, paced by `pace`: through the cluster when there is one
/// and the deployment has a configured limit (a limit only its answers report, or one learnt
/// from 429s, is paced by each instance on its own).
pub(super) fn limiter(
    cluster: Option<&sluice_cluster::Cluster>,
    (spec, lanes, seed): (&LimitSpec, &[LaneSpec], u64),
    name: &str,
    pace: PaceSpec,
) -> Limiter {
    match cluster {
        Some(c) if pace != PaceSpec::default() => {
            Limiter::paced_by(spec, lanes, seed, c.pacer(name, pace))
        }
        _ => Limiter::new(spec, lanes, seed, pace),
    }
}
