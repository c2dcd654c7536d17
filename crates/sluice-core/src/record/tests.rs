//! Tests of `record`.

use super::*;

#[test]
fn timings_derive_the_phases() {
    let t0 = Instant::now();
    let mut t = Timings::start(t0);
    assert_eq!(t.queue(), None);
    t.dispatched = Some(t0 + Duration::from_millis(2));
    t.first_byte = Some(t0 + Duration::from_millis(302));
    t.done = Some(t0 + Duration::from_millis(1002));
    assert_eq!(t.queue(), Some(Duration::from_millis(2)));
    assert_eq!(t.upstream_ttfb(), Some(Duration::from_millis(300)));
    assert_eq!(t.upstream(Phase::Total), Some(Duration::from_millis(1000)));
    assert_eq!(t.total(), Some(Duration::from_millis(1002)));
}

#[test]
fn the_stage_follows_the_attempts() {
    let now = Instant::now();
    let mut r = CallRecord::new(RequestId::from_client_or_generate(Some("s")), now);
    assert_eq!(r.stage(), Stage::Queue);
    r.attempts.push(Attempt::start(Arc::from("a"), now));
    assert_eq!(r.stage(), Stage::Upstream);
    r.attempts[0].outcome = AttemptOutcome::Failed(ErrorKind::UpstreamServerError);
    assert_eq!(r.stage(), Stage::Retry);
    r.attempts.push(Attempt::start(Arc::from("b"), now));
    r.timings.first_byte = Some(now);
    assert_eq!(r.stage(), Stage::Stream);
}

#[test]
fn the_upstreams_own_time_is_its_answering_attempts_or_at_least_its_longest_wait() {
    let t0 = Instant::now();
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let mut r = CallRecord::new(RequestId::from_client_or_generate(Some("o")), t0);
    assert_eq!(r.attempt_own(Phase::Ttfb), None, "no attempt went");
    // A 429 after 100 ms, then a retry at 1,100 ms whose first byte came 300 ms later.
    let mut refused = Attempt::start(Arc::from("a"), ms(0));
    refused.ended = Some(ms(100));
    refused.outcome = AttemptOutcome::Failed(ErrorKind::UpstreamRejected);
    let mut answered = Attempt::start(Arc::from("a"), ms(1_100));
    answered.first_byte = Some(ms(1_400));
    answered.ended = Some(ms(2_000));
    answered.outcome = AttemptOutcome::Ok;
    r.attempts = vec![refused, answered];
    r.upstream = Some(Arc::from("a"));
    assert_eq!(r.attempt_own(Phase::Ttfb), Some(Duration::from_millis(300)));
    assert_eq!(
        r.attempt_own(Phase::Total),
        Some(Duration::from_millis(900))
    );
    // None answered: the attempt still out when the call ended waited 5 s at least.
    let mut r = CallRecord::new(RequestId::from_client_or_generate(Some("p")), t0);
    r.attempts.push(Attempt::start(Arc::from("a"), ms(1_000)));
    r.timings.done = Some(ms(6_000));
    assert_eq!(r.attempt_own(Phase::Ttfb), Some(Duration::from_secs(5)));
}
