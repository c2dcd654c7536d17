//! The columns of a comparison: a plain proxy with clients that retry as the official SDKs
//! do, sluice as it comes (its defaults), then sluice with hedging on for every lane. The demo and `sluice scenario run` replay the same traffic through each.

use sluice_gateway::GatewayBuilder;
use sluice_tail::HedgePolicy;

/// A gateway set up one way.
#[derive(Clone, Copy, Debug)]
pub struct Variant {
    /// Column title.
    pub name: &'static str,
    /// What the column shows, in one line.
    pub about: &'static str,
    /// The builder the column starts from, with its policies.
    pub make: fn() -> GatewayBuilder,
    /// How many times its clients retry a failed request, as the official SDKs do (2 for
    /// the plain proxy: what its clients really run; 0 in front of sluice, which retries).
    pub client_retries: u32,
}

impl Variant {
    /// A builder with the column's policies.
    pub fn builder(&self) -> GatewayBuilder {
        (self.make)()
    }
}

fn proxy() -> GatewayBuilder {
    GatewayBuilder::bare()
}

fn defaults() -> GatewayBuilder {
    GatewayBuilder::new()
}

fn hedged() -> GatewayBuilder {
    GatewayBuilder::new().hedging(HedgePolicy::default())
}

/// A gateway builder with the policies of the column called `name` (`proxy`, `sluice`,
/// `+hedging`), if there is one.
pub fn builder(name: &str) -> Option<GatewayBuilder> {
    all()
        .into_iter()
        .find(|v| v.name == name)
        .map(|v| v.builder())
}

/// Every column, in order.
pub fn all() -> Vec<Variant> {
    vec![
        Variant {
            name: "proxy",
            about: "a plain proxy (weighted routing, no retries, breakers, queues or pacing), \
                    its clients retrying as the official SDKs do: twice, after Retry-After or \
                    0.5 s doubling",
            make: proxy,
            client_retries: crate::load::SDK_RETRIES,
        },
        Variant {
            name: "sluice",
            about: "sluice's defaults: a Gradient2 concurrency limit per upstream with lane \
                    queues (interactive before batch, tenants in turn), pacing under the rate \
                    limits the upstream reports and a pause after a 429, retries elsewhere \
                    first within a 20% budget, a circuit breaker per upstream, and hedging of \
                    interactive calls after the upstream's P95 first byte within 2% (plus 0.1 \
                    a second)",
            make: defaults,
            client_retries: 0,
        },
        Variant {
            name: "+hedging",
            about: "and hedging of every lane after the upstream's P95 time to first byte, \
                    to another upstream, within a 5% budget (plus 0.1 a second); the first \
                    good first byte wins",
            make: hedged,
            client_retries: 0,
        },
    ]
}
