//! Each group's protective policies as it inherits, turns off or sets them.

use sluice_config::gateway::ModelGroupConfig;
use sluice_tail::limit::LimitParams;

use crate::assemble::{GroupPolicies, Setting};

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
        hedge: setting(&m.hedge, |h| *h),
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
