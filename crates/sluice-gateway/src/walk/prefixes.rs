//! The prefix watch's step in a request's walk: one request in every `1 / share` hands its
//! stable section (tools, system prompt) to `sluice-context`'s watch, which says whether it
//! shares a prefix with its tenant and group's recent ones, and why not; churn is counted.

use std::sync::atomic::Ordering;

use sluice_context::churn::{Sample, Verdict};
use sluice_core::ChatRequest;

use crate::Gateway;
use crate::shaping::PrefixWatch;

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
        gw.observers
            .telemetry
            .prefix_churn(tenant, group, cause.label());
    }
}
