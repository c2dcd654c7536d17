//! What to do about each verdict of the explainer, with the settings, pages and metrics to
//! look at.

use super::Verdict;

/// What to do about `verdict`, with the settings, pages and metrics (with labels they have)
/// to look at.
pub(super) fn next_steps(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Quiet => "nothing",
        Verdict::NoTraffic => {
            "check that clients still reach the gateway (their errors, the load balancer, \
             DNS) before reading its latency; look at sluice_requests_total by code and \
             sluice_http_connections; ask again over a longer window \
             (`sluice diagnose --window 15m`)"
        }
        Verdict::TrafficFell => {
            "the calls that came look as before; find why fewer came (clients failing before \
             they reach sluice, a stopped batch or a load balancer sending elsewhere); look at \
             sluice_requests_total by lane and code"
        }
        Verdict::NoBaseline => {
            "ask again once the gateway has served through a whole baseline window, or with a \
             shorter one (`sluice diagnose --baseline 10m`, `/admin/diagnose?baseline=600`)"
        }
        Verdict::RateLimitContention => {
            "keep batch from taking the provider's limit from interactive calls (the batch \
             lane's `share` in [lanes.batch]; batch clients sending x-sluice-lane: batch), pace \
             under the limit (the deployments' `rpm`/`tpm`; the group's `limit`, on by default, \
             reads the provider's rate-limit headers and pauses after a 429), or spread the \
             load over more deployments; look at /admin/diagnose, /admin/latency (clients per \
             lane against upstreams), /admin/upstreams (pacing and pauses), \
             sluice_rate_limit_waits_total by lane (calls held for the provider's pace), \
             sluice_upstream_attempts_total by upstream and outcome (its 429s are \
             upstream_rejected), sluice_requests_total by lane, sluice_request_ttfb_seconds by lane and \
             sluice_admission_requests{lane=\"batch\"}"
        }
        Verdict::Queueing => {
            "raise the deployments' concurrency (`limit` = { max = ... } of the group) or the \
             interactive lane's `share`, and check that the deployments' `rpm`/`tpm` are not \
             set below the provider's limits; look at /admin/diagnose, \
             sluice_upstream_concurrency_limit, sluice_admission_requests{state=\"queued\"} \
             by lane and sluice_queue_duration_seconds by lane"
        }
        Verdict::UpstreamSlower => {
            "nothing in sluice will make the provider faster: hedge slow calls to another \
             deployment (`hedge` on the group), route around it (a breaker's `slow_call`, or \
             `fallbacks`), or shorten prompts; look at /admin/diagnose, /admin/latency \
             (upstreams) and sluice_upstream_ttfb_seconds by upstream"
        }
        Verdict::Errors => {
            "find which upstream fails in sluice_upstream_attempts_total by outcome and in \
             /admin/upstreams (breaker states); retries elsewhere and `fallbacks` carry requests \
             past a failing deployment, a breaker takes it out of rotation; look at \
             /admin/diagnose and sluice_requests_total by code"
        }
        Verdict::Unexplained => {
            "read the changes above against the traces of the slowest calls (`[traces]`, kept \
             when over an SLO), /admin/diagnose, sluice_queue_duration_seconds and \
             sluice_upstream_ttfb_seconds"
        }
    }
}
