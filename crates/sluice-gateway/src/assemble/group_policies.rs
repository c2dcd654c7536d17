//! The policies one model group sets for itself, each falling back to the builder's default.
//!
//! Retries, breakers and admission (the concurrency limit with pacing and the 429 pause)
//! protect by default: a builder starts with them on ([`GroupPolicies::protective`]), a
//! group may turn each off, and [`GroupPolicies::bare`] is a plain proxy with all three off.

use std::time::Duration;

use sluice_routing::affinity::AffinityPolicy;
use sluice_tail::limit::{LimitParams, LimitSpec};
use sluice_tail::{BreakerPolicy, HedgePolicy, RetryPolicy};

/// A policy a group may inherit, turn off or set.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Setting<T> {
    /// The builder's default.
    #[default]
    Inherit,
    /// Off for this group.
    Off,
    /// On, set this way.
    On(T),
}

impl<T: Copy> Setting<T> {
    /// `self`, or `default` where `self` inherits.
    pub fn or(self, default: Setting<T>) -> Setting<T> {
        match self {
            Self::Inherit => default,
            own => own,
        }
    }

    /// The policy in force, if on.
    pub fn on(self) -> Option<T> {
        match self {
            Self::On(t) => Some(t),
            Self::Inherit | Self::Off => None,
        }
    }
}

impl<T> From<Option<T>> for Setting<T> {
    /// `Some`: on; `None`: inherit.
    fn from(o: Option<T>) -> Self {
        o.map_or(Self::Inherit, Self::On)
    }
}

/// The admission sluice applies to every deployment unless told otherwise: Gradient2 from 64
/// requests in flight (at most 256), the queue in lanes, pacing under the rate limits the
/// upstream's headers report, and a pause until a 429's `retry-after`.
pub const DEFAULT_LIMIT: LimitSpec = LimitParams::DEFAULT.spec();

/// The policies of one model group; `Inherit` (and `None`) takes the builder's default.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GroupPolicies {
    /// Hedging of slow requests.
    pub hedge: Setting<HedgePolicy>,
    /// Concurrency limit per deployment, with pacing and the 429 pause.
    pub limit: Setting<LimitSpec>,
    /// Retries of failed attempts.
    pub retry: Setting<RetryPolicy>,
    /// A circuit breaker per deployment.
    pub breaker: Setting<BreakerPolicy>,
    /// The deadline of a request that carries none of its own.
    pub timeout: Option<Duration>,
    /// Routing by prompt prefix.
    pub affinity: Option<AffinityPolicy>,
}

impl GroupPolicies {
    /// What every group gets unless it says otherwise: retries (elsewhere first, within a
    /// budget), a breaker per deployment, admission with pacing ([`DEFAULT_LIMIT`]), and
    /// hedging of the first lane's slow requests within 2% ([`HedgePolicy::interactive`]).
    pub fn protective() -> Self {
        Self {
            hedge: Setting::On(HedgePolicy::interactive()),
            limit: Setting::On(DEFAULT_LIMIT),
            retry: Setting::On(RetryPolicy::default()),
            breaker: Setting::On(BreakerPolicy::default()),
            ..Self::default()
        }
    }

    /// A plain proxy: no retries, breakers, admission or hedging.
    pub fn bare() -> Self {
        Self {
            hedge: Setting::Off,
            limit: Setting::Off,
            retry: Setting::Off,
            breaker: Setting::Off,
            ..Self::default()
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_inherits_turns_off_or_sets_each_protective_policy() {
        let defaults = GroupPolicies::protective();
        let inherited = GroupPolicies::default().or(defaults);
        assert_eq!(inherited.retry.on(), Some(RetryPolicy::default()));
        assert_eq!(inherited.breaker.on(), Some(BreakerPolicy::default()));
        assert_eq!(inherited.limit.on(), Some(DEFAULT_LIMIT));
        assert_eq!(inherited.hedge.on(), Some(HedgePolicy::interactive()));
        let off = GroupPolicies::bare().or(defaults);
        assert_eq!(
            (off.retry.on(), off.breaker.on(), off.limit.on()),
            (None, None, None)
        );
        assert_eq!(off.hedge.on(), None);
        let own = GroupPolicies {
            limit: Setting::On(LimitSpec::Fixed(3)),
            ..GroupPolicies::default()
        }
        .or(GroupPolicies::bare());
        assert_eq!(own.limit.on(), Some(LimitSpec::Fixed(3)));
        assert_eq!(own.retry.on(), None);
    }

    #[test]
    fn a_group_left_alone_hedges_only_its_first_lane_and_one_that_writes_hedge_every_lane() {
        use sluice_tail::hedge::HedgeLanes;
        let group = |text: &str| {
            let m: sluice_config::gateway::ModelGroupConfig = serde_json::from_str(&format!(
                r#"{{"deployments": [{{"provider": "p", "model": "m"}}]{text}}}"#
            ))
            .unwrap();
            crate::assemble::policies::of_group(&m).or(GroupPolicies::protective())
        };
        let default = group("").hedge.on().unwrap();
        assert_eq!((default.lanes, default.budget), (HedgeLanes::First, 0.02));
        let written = group(r#", "hedge": true"#).hedge.on().unwrap();
        assert_eq!((written.lanes, written.budget), (HedgeLanes::All, 0.05));
        let first = group(r#", "hedge": {"lanes": "first", "budget": 0.01}"#)
            .hedge
            .on()
            .unwrap();
        assert_eq!((first.lanes, first.budget), (HedgeLanes::First, 0.01));
        assert_eq!(group(r#", "hedge": false"#).hedge.on(), None);
    }
}
