//! The demo's caches: in the columns that cache (every one but the plain proxy), the exact
//! cache and the semantic cache a scenario's `[gateway.semantic]` asks for, its questions
//! embedded by the simulator's `/v1/embeddings`; and the bill's rows for what the semantic
//! cache saved, what verifying spent, and the net.

use std::net::SocketAddr;

use sluice_gateway::GatewayBuilder;
use sluice_ledger::UsageRow;
use sluice_sim::scenario::Scenario;
use sluice_sim::variants::Variant;

/// `b` with the caches `s` asks for, unless `v` is the plain proxy; the simulator serves
/// embeddings at `sim`.
pub fn caching(
    b: GatewayBuilder,
    s: &Scenario,
    v: &Variant,
    sim: SocketAddr,
) -> anyhow::Result<GatewayBuilder> {
    if v.name == "proxy" {
        return Ok(b);
    }
    Ok(s.with_caches(b, sim)?)
}

type Cell = fn(&UsageRow) -> String;

/// The bill's rows for the semantic cache, when some column used it.
pub fn semantic_rows(bills: &[&UsageRow]) -> Vec<(&'static str, Cell)> {
    if bills
        .iter()
        .all(|b| b.semantic_hits == 0 && b.verifications == 0)
    {
        return Vec::new();
    }
    vec![
        ("answered by meaning", |b| {
            crate::demo::thousands(b.semantic_hits)
        }),
        ("  saved", |b| {
            crate::demo::dollars(i128::from(b.semantic_saved_micros))
        }),
        ("verified upstream", |b| {
            crate::demo::thousands(b.verifications)
        }),
        ("  spent verifying", |b| {
            crate::demo::dollars(i128::from(b.verification_micros))
        }),
        ("semantic net saving", |b| {
            crate::demo::dollars(i128::from(b.semantic_net_micros()))
        }),
    ]
}
