//! The prefix watch's step in a request's walk: a sampled share of requests hand their
//! stable section (tools, system prompt) to `sluice-context`'s watch, which says whether it
//! shares a prefix with its tenant and group's recent ones, and why not; churn is counted.

use parking_lot::Mutex;
use sluice_context::churn::{Sample, Verdict, Watch};
use sluice_core::ChatRequest;

use crate::Gateway;

/// The watch, and which requests it samples.
#[derive(Debug)]
pub struct PrefixWatch {
    /// A request whose id hashes below this is sampled.
    below: u64,
    /// The share sampled, as configured.
    pub share: f64,
    /// What the samples showed.
    pub watch: Mutex<Watch>,
}

impl PrefixWatch {
    /// Samples `share` of requests.
    pub fn new(share: f64) -> Self {
        Self {
            below: (share.clamp(0.0, 1.0) * u64::MAX as f64) as u64,
            share,
            watch: Mutex::new(Watch::new()),
        }
    }
}

/// Hands `request` of `tenant` in `group` to the watch when its id is sampled.
pub fn observe(
    gw: &Gateway,
    w: &PrefixWatch,
    request_id: &str,
    tenant: Option<&str>,
    group: &str,
    request: &ChatRequest,
) {
    if sluice_routing::ticket_hash(0x7072_6566, 0, request_id) >= w.below {
        return;
    }
    let Some(sample) = Sample::of(request) else {
        return;
    };
    let tenant = tenant.unwrap_or("-");
    let verdict = w.watch.lock().observe(tenant, group, sample);
    if let Verdict::Churn { cause, .. } = verdict {
        gw.telemetry.prefix_churn(tenant, group, cause.label());
    }
}
