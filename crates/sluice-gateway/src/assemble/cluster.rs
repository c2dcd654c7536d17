//! A gateway being built as one instance of several: its book of credits and quotas, its
//! rate-limited deployments' pacers, its answer and semantic caches, its groups' prefix
//! affinity and its breakers' hints are the cluster's.

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

/// The book of a gateway: the cluster's, else one in this process. The cluster's is backed
/// by the ledger's PostgreSQL database, when that is the ledger, for while Redis cannot
/// answer, and settles a dead instance's holds from the ledger's rows.
pub(super) fn books(
    cluster: Option<&sluice_cluster::Cluster>,
    store: Option<&Arc<sluice_ledger::AnyStore>>,
) -> Books {
    match cluster {
        Some(c) => {
            let book = c.book();
            if let Some(store) = store {
                // A dead instance's holds are settled from the rows that name them.
                book.settle_dead_from(store.clone());
                if let sluice_ledger::AnyStore::Postgres(pg) = &**store {
                    let s = c.settings();
                    book.back_with(pg.book(s.per_instance_share, s.hold_ttl, c.heartbeat()));
                }
            }
            book
        }
        None => sluice_economy::book::local(),
    }
}

/// The exact answer cache: the cluster's, else one in this process.
pub(super) fn answer_cache(
    cluster: Option<&sluice_cluster::Cluster>,
    ttl: std::time::Duration,
    max_bytes: u64,
) -> sluice_cache::AnswerCache {
    match cluster {
        Some(c) => sluice_cache::AnswerCache::in_store(c.answers(ttl, max_bytes), ttl, max_bytes),
        None => sluice_cache::AnswerCache::new(ttl, max_bytes),
    }
}

/// The limiter of deployment `name`, paced by `pace`: through the cluster when there is one
/// (whether its limit is configured, announced by its answers or learnt from its 429s, the
/// instances pace it as one).
pub(super) fn limiter(
    cluster: Option<&sluice_cluster::Cluster>,
    (spec, lanes, seed): (&LimitSpec, &[LaneSpec], u64),
    name: &str,
    pace: PaceSpec,
) -> Limiter {
    match cluster {
        Some(c) => Limiter::paced_by(spec, lanes, seed, c.pacer(name, pace)),
        None => Limiter::new(spec, lanes, seed, pace),
    }
}

/// The breakers' hints every deployment shares with the other instances, when there are any.
pub(super) fn hints(
    cluster: Option<&sluice_cluster::Cluster>,
) -> Option<Arc<dyn sluice_routing::BreakerHints>> {
    cluster.map(|c| c.breaker_hints() as Arc<dyn sluice_routing::BreakerHints>)
}

/// Group `group`'s prefix affinity by `policy`: its memory the cluster's, else this process's.
pub(super) fn affinity(
    cluster: Option<&sluice_cluster::Cluster>,
    group: &str,
    policy: Option<sluice_routing::affinity::AffinityPolicy>,
) -> Option<sluice_routing::affinity::Affinity> {
    let policy = policy?;
    Some(match cluster {
        Some(c) => {
            sluice_routing::affinity::Affinity::with_memory(Box::new(c.prefixes(group, policy)))
        }
        None => sluice_routing::affinity::Affinity::new(policy),
    })
}

/// The semantic cache `semantic` holds, its entries the cluster's when there is one.
pub(super) fn semantic(
    cluster: Option<&sluice_cluster::Cluster>,
    semantic: Option<crate::caches::Semantic>,
) -> Option<Arc<crate::caches::Semantic>> {
    let crate::caches::Semantic {
        cache,
        embedder,
        coins,
        served,
    } = semantic?;
    let cache = match cluster {
        Some(c) => cache.kept_by(|policy| Box::new(c.semantic_entries(policy))),
        None => cache,
    };
    Some(Arc::new(crate::caches::Semantic {
        cache,
        embedder,
        coins,
        served,
    }))
}

/// The cool-downs after a 429: the cluster's, else this process's.
pub(super) fn pacing(cluster: Option<&sluice_cluster::Cluster>) -> crate::pacing::Pacing {
    match cluster {
        Some(c) => crate::pacing::Pacing::with(Box::new(c.cooling())),
        None => crate::pacing::Pacing::default(),
    }
}
