#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn ttfb_slo() -> Slo {
    Slo {
        name: "ttfb".into(),
        objective: Objective::Latency {
            measure: Measure::Ttfb,
            threshold: ms(4_000),
            target: 0.99,
        },
        lanes: vec!["interactive".into()],
        groups: Vec::new(),
    }
}

fn availability() -> Slo {
    Slo {
        name: "availability".into(),
        objective: Objective::Availability { target: 0.999 },
        lanes: Vec::new(),
        groups: Vec::new(),
    }
}

/// A call of the interactive lane: `queue` then `upstream` to its first byte.
fn facts(queue: u64, upstream: u64) -> Facts<'static> {
    Facts {
        lane: Some("interactive"),
        group: Some("chat"),
        status: 200,
        error: None,
        queue: ms(queue),
        upstream: ms(upstream),
        attempt: ms(upstream),
        ttfb: ms(queue + upstream),
        total: ms(queue + upstream + 500),
        upstream_429s: 0,
        cooling: false,
        rate_waited: false,
        slow_held: false,
    }
}

#[test]
fn a_fast_call_is_good_and_a_slow_one_is_blamed_on_its_largest_part() {
    let s = ttfb_slo();
    assert_eq!(s.judge(&facts(10, 900)), Some(Verdict::Good));
    assert_eq!(
        s.judge(&facts(10, 5_000)),
        Some(Verdict::Bad(Culprit::UpstreamSlow))
    );
    assert_eq!(
        s.judge(&facts(4_500, 800)),
        Some(Verdict::Bad(Culprit::SluiceQueueing))
    );
    let mut overhead = facts(100, 200);
    overhead.ttfb = ms(4_500);
    assert_eq!(
        s.judge(&overhead),
        Some(Verdict::Bad(Culprit::SluiceOverhead))
    );
}

#[test]
fn a_rate_limit_met_or_in_force_is_the_culprit_whatever_took_the_time() {
    let s = ttfb_slo();
    let mut paced = facts(4_500, 800);
    paced.cooling = true;
    assert_eq!(
        s.judge(&paced),
        Some(Verdict::Bad(Culprit::UpstreamRateLimited))
    );
    // A 429, its pause and a retry whose own first byte took 800 ms.
    let mut hit = facts(10, 5_000);
    hit.attempt = ms(800);
    hit.upstream_429s = 1;
    assert_eq!(
        s.judge(&hit),
        Some(Verdict::Bad(Culprit::UpstreamRateLimited))
    );
    // Queued behind the provider's pace: the rate limit's time, not sluice's.
    let mut waited = facts(4_500, 800);
    waited.rate_waited = true;
    assert_eq!(
        s.judge(&waited),
        Some(Verdict::Bad(Culprit::UpstreamRateLimited))
    );
    // Good is good, 429 or not.
    let mut fine = facts(10, 900);
    fine.upstream_429s = 2;
    assert_eq!(s.judge(&fine), Some(Verdict::Good));
}

/// An upstream whose own attempt alone took longer than the objective is the culprit,
/// whatever else took time: the call would have been late had sluice spent nothing on it (a
/// queue that grew behind a six-fold slower upstream, or a short wait for the pacer).
#[test]
fn an_upstream_late_on_its_own_is_the_culprit_whatever_else_waited() {
    let s = ttfb_slo();
    let behind = facts(6_000, 5_000);
    assert_eq!(s.judge(&behind), Some(Verdict::Bad(Culprit::UpstreamSlow)));
    let mut paced = facts(50, 5_000);
    paced.rate_waited = true;
    assert_eq!(s.judge(&paced), Some(Verdict::Bad(Culprit::UpstreamSlow)));
    // Within the objective on its own: the queue made it late.
    assert_eq!(
        s.judge(&facts(6_000, 3_000)),
        Some(Verdict::Bad(Culprit::SluiceQueueing))
    );
    // Out of time waiting for a first byte that never came: the upstream's.
    let mut waiting = facts(10, 4_990);
    waiting.status = 504;
    waiting.error = Some(ErrorKind::DeadlineExceeded);
    waiting.ttfb = ms(5_000);
    waiting.total = ms(5_000);
    assert_eq!(s.judge(&waiting), Some(Verdict::Bad(Culprit::UpstreamSlow)));
    assert_eq!(
        availability().judge(&waiting),
        Some(Verdict::Bad(Culprit::UpstreamSlow))
    );
    // Out of time in a queue the provider's pace held: the rate limit's.
    let mut held = facts(4_990, 0);
    held.attempt = ms(0);
    held.status = 504;
    held.error = Some(ErrorKind::DeadlineExceeded);
    held.total = ms(5_000);
    held.rate_waited = true;
    assert_eq!(
        s.judge(&held),
        Some(Verdict::Bad(Culprit::UpstreamRateLimited))
    );
    assert_eq!(
        availability().judge(&held),
        Some(Verdict::Bad(Culprit::UpstreamRateLimited))
    );
    // Refused for a queue held while the upstream answered six times slower than usual:
    // the upstream's slowness carried, not sluice's own queue.
    let mut refused = facts(0, 0);
    refused.attempt = ms(0);
    refused.status = 503;
    refused.error = Some(ErrorKind::Overloaded);
    refused.slow_held = true;
    assert_eq!(
        availability().judge(&refused),
        Some(Verdict::Bad(Culprit::UpstreamSlow))
    );
    refused.slow_held = false;
    assert_eq!(
        availability().judge(&refused),
        Some(Verdict::Bad(Culprit::SluiceQueueing))
    );
}

#[test]
fn other_lanes_client_errors_and_failures_are_no_latency_event() {
    let s = ttfb_slo();
    let mut batch = facts(10, 5_000);
    batch.lane = Some("batch");
    assert_eq!(s.judge(&batch), None);
    let mut bad_request = facts(0, 0);
    bad_request.status = 400;
    bad_request.error = Some(ErrorKind::InvalidRequest);
    assert_eq!(s.judge(&bad_request), None);
    let mut failed = facts(10, 100);
    failed.status = 502;
    failed.error = Some(ErrorKind::UpstreamServerError);
    assert_eq!(s.judge(&failed), None);
    let mut late = facts(4_800, 0);
    late.status = 504;
    late.error = Some(ErrorKind::DeadlineExceeded);
    late.total = ms(5_000);
    assert_eq!(s.judge(&late), Some(Verdict::Bad(Culprit::SluiceQueueing)));
}

#[test]
fn availability_tells_upstream_failures_from_sluices() {
    let s = availability();
    let fail = |status, error| {
        let mut f = facts(10, 100);
        f.status = status;
        f.error = Some(error);
        s.judge(&f)
    };
    assert_eq!(s.judge(&facts(10, 100)), Some(Verdict::Good));
    assert_eq!(
        fail(502, ErrorKind::UpstreamServerError),
        Some(Verdict::Bad(Culprit::UpstreamErrors))
    );
    assert_eq!(
        fail(503, ErrorKind::UpstreamUnavailable),
        Some(Verdict::Bad(Culprit::UpstreamErrors))
    );
    assert_eq!(
        fail(503, ErrorKind::Overloaded),
        Some(Verdict::Bad(Culprit::SluiceQueueing))
    );
    assert_eq!(
        fail(500, ErrorKind::Internal),
        Some(Verdict::Bad(Culprit::SluiceOverhead))
    );
    assert_eq!(
        fail(429, ErrorKind::QuotaExceeded),
        None,
        "the tenant's quota"
    );
    let mut passed_on = facts(10, 100);
    passed_on.status = 429;
    passed_on.error = Some(ErrorKind::UpstreamRejected);
    passed_on.upstream_429s = 1;
    assert_eq!(
        s.judge(&passed_on),
        Some(Verdict::Bad(Culprit::UpstreamRateLimited)),
        "the provider's 429 passed on"
    );
    assert_eq!(
        ttfb_slo().judge(&passed_on),
        Some(Verdict::Bad(Culprit::UpstreamRateLimited))
    );
    let mut paced = facts(10, 100);
    paced.status = 503;
    paced.error = Some(ErrorKind::Overloaded);
    paced.cooling = true;
    assert_eq!(
        s.judge(&paced),
        Some(Verdict::Bad(Culprit::UpstreamRateLimited))
    );
}

#[test]
fn an_slo_covers_its_lanes_and_groups() {
    let mut s = availability();
    assert!(s.covers(None, None));
    s.groups = vec!["chat".into()];
    assert!(s.covers(Some("batch"), Some("chat")));
    assert!(!s.covers(Some("batch"), Some("docs")));
    assert!(!s.covers(Some("batch"), None));
}

#[test]
fn a_batch_window_slo_judges_jobs_not_calls() {
    let s = Slo {
        name: "jobs_in_window".into(),
        objective: Objective::BatchWindow { target: 0.99 },
        lanes: Vec::new(),
        groups: Vec::new(),
    };
    assert_eq!(s.judge_job(JobEnd::Completed), Some(Verdict::Good));
    assert_eq!(
        s.judge_job(JobEnd::Expired),
        Some(Verdict::Bad(Culprit::SluiceQueueing))
    );
    assert_eq!(s.judge_job(JobEnd::Cancelled), None, "the client's doing");
    assert_eq!(s.judge(&facts(10, 100)), None, "no call is an event");
    assert_eq!(availability().judge_job(JobEnd::Expired), None);
    // Its burn-rate alerts: a page at 14.4 times a 1% budget.
    let rules = super::rules::rules(&[s]);
    assert!(
        rules.contains(
            "sluice_slo:bad:ratio_rate1h{slo=\"jobs_in_window\", culprit=\"sluice_queueing\"} > 0.144"
        ),
        "{rules}"
    );
}
