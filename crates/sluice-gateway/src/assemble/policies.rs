//! Configuration sections turned into the policies of `sluice-tail`.

use sluice_config::gateway::ModelGroupConfig;
use sluice_tail::limit::LimitParams;

use crate::assemble::{GroupPolicies, Setting};

/// The price a `[prices.MODEL]` entry describes: cached input and cache writes at the input
/// price when it gives none.
pub fn price(p: &sluice_config::gateway::PriceConfig) -> sluice_economy::Price {
    use sluice_economy::Micros;
    sluice_economy::Price {
        input: Micros(p.input.0),
        cached_input: Micros(p.cached_input.unwrap_or(p.input).0),
        cache_write: Micros(p.cache_write.unwrap_or(p.input).0),
        output: Micros(p.output.0),
        published: None,
    }
}

/// The semantic cache's policy `[cache.semantic]` describes.
pub fn semantic(c: &sluice_config::gateway::SemanticCacheConfig) -> sluice_cache::semantic::Policy {
    sluice_cache::semantic::Policy {
        mode: semantic_mode(c, None),
        ttl: c.ttl,
        max_bytes: usize::try_from(c.max_bytes).unwrap_or(usize::MAX),
    }
}

/// The mode of `[cache.semantic]`, with a group's own threshold and error bound over it.
pub fn semantic_mode(
    c: &sluice_config::gateway::SemanticCacheConfig,
    group: Option<&sluice_config::gateway::SemanticGroupConfig>,
) -> sluice_cache::semantic::Mode {
    use sluice_cache::semantic::Mode;
    use sluice_config::gateway::SemanticMode;
    match c.mode {
        SemanticMode::Static => Mode::Static {
            threshold: group.and_then(|g| g.threshold).unwrap_or(c.threshold),
            audit: c.verify_share,
        },
        SemanticMode::Verified => Mode::Verified {
            delta: group.and_then(|g| g.max_error).unwrap_or(c.max_error),
            floor: c.min_similarity,
            budget: group
                .and_then(|g| g.verify_budget)
                .unwrap_or(c.verify_budget),
        },
    }
}

/// A protective policy as a group's file sets it: left out, the builder's default (on);
/// `false`, off; written, on this way.
fn setting<C, P>(t: &sluice_config::Toggle<C>, policy: impl Fn(&C) -> P) -> Setting<P> {
    use sluice_config::Toggle;
    match t {
        Toggle::Default => Setting::Inherit,
        Toggle::Off => Setting::Off,
        Toggle::On(c) => Setting::On(policy(c)),
    }
}

/// The policies of a `[models.GROUP]` entry.
pub fn of_group(m: &ModelGroupConfig) -> GroupPolicies {
    GroupPolicies {
        hedge: m.hedge,
        limit: setting(&m.limit, LimitParams::spec),
        retry: setting(&m.retry, |r| *r),
        breaker: setting(&m.breaker, |b| *b),
        timeout: m.timeout,
        affinity: m.affinity,
    }
}

/// The SLOs of a configuration, as the gateway judges calls by them and `sluice slo rules`
/// writes alerts for them.
pub fn slos(cfg: &sluice_config::gateway::GatewayConfig) -> Vec<sluice_telemetry::slo::Slo> {
    cfg.slos
        .iter()
        .filter_map(|(name, s)| s.slo(name))
        .collect()
}
