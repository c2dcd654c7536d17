//! The columns of a comparison: the gateway as a plain proxy, then with each tail policy
//! switched on. The demo and `sluice scenario run` replay the same traffic through each.

use sluice_gateway::GatewayBuilder;
use sluice_tail::limit::LimitSpec;
use sluice_tail::{BreakerPolicy, HedgePolicy, RetryPolicy};

/// A gateway set up one way.
#[derive(Clone, Copy, Debug)]
pub struct Variant {
    /// Column title.
    pub name: &'static str,
    /// What the column shows, in one line.
    pub about: &'static str,
    /// Applies the variant's policies to a builder.
    pub apply: fn(GatewayBuilder) -> GatewayBuilder,
}

fn plain(b: GatewayBuilder) -> GatewayBuilder {
    b
}

fn hedged(b: GatewayBuilder) -> GatewayBuilder {
    b.hedging(HedgePolicy::default())
}

fn admitted(b: GatewayBuilder) -> GatewayBuilder {
    hedged(b)
        .limits(LimitSpec::Gradient2 {
            initial: 64,
            min: 1,
            max: 256,
        })
        .retries(RetryPolicy::default())
}

fn broken(b: GatewayBuilder) -> GatewayBuilder {
    admitted(b).breakers(BreakerPolicy::default())
}

/// A gateway builder with the policies of the column called `name` (`sluice`, `+hedging`,
/// `+admission`, `+breakers`), if there is one.
pub fn builder(name: &str) -> Option<GatewayBuilder> {
    all()
        .into_iter()
        .find(|v| v.name == name)
        .map(|v| (v.apply)(GatewayBuilder::new()))
}

/// Every column, in order, each adding a policy to the one before. Each policy adds one as
/// it lands.
pub fn all() -> Vec<Variant> {
    vec![
        Variant {
            name: "sluice",
            about: "a plain proxy: weighted routing, no tail policies",
            apply: plain,
        },
        Variant {
            name: "+hedging",
            about: "hedge after the upstream's P95 time to first byte, to another upstream, \
                    within a 5% budget (plus 0.1 a second); the first good first byte wins",
            apply: hedged,
        },
        Variant {
            name: "+admission",
            about: "and a Gradient2 concurrency limit per upstream, pacing under its rate \
                    limit, lane queues (interactive before batch, tenants in turn), and retries \
                    within a 20% budget",
            apply: admitted,
        },
        Variant {
            name: "+breakers",
            about: "and a circuit breaker per upstream: open at 50% failures over 30 s or 5 in a \
                    row, probe once a second after 15 s, close after 3 good probes",
            apply: broken,
        },
    ]
}
