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
