//! The prefix watch's step in a request's walk: one request in every `1 / share` hands its
//! stable section (tools, system prompt) to `sluice-context`'s watch, which says whether it
//! shares a prefix with its tenant and group's recent ones, and why not; churn is counted.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use sluice_context::churn::{Sample, Verdict, Watch};
use sluice_core::ChatRequest;

use crate::Gateway;

/// The watch, and which requests it samples.
#[derive(Debug)]
pub struct PrefixWatch {
    /// One request in this many is sampled.
    every: u64,
    /// Requests seen.
    seen: AtomicU64,
    /// The share sampled, as configured.
    pub share: f64,
    /// What the samples showed.
    pub watch: Mutex<Watch>,
}

impl PrefixWatch {
    /// Samples `share` of requests.
    pub fn new(share: f64) -> Self {
        let every = if share > 0.0 {
            (1.0 / share.min(1.0)).round().max(1.0) as u64
        } else {
            u64::MAX
        };
        Self {
            every,
            seen: AtomicU64::new(0),
            share,
            watch: Mutex::new(Watch::new()),
        }
    }
}

/// Hands `request` of `tenant` in `group` to the watch when it is its turn.
pub fn observe(
    gw: &Gateway,
    w: &PrefixWatch,
    tenant: Option<&str>,
    group: &str,
    request: &ChatRequest,
) {
    if !w
        .seen
        .fetch_add(1, Ordering::Relaxed)
        .is_multiple_of(w.every)
    {
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
