//! Hedging in virtual time: scripted upstreams, the gateway's router called in-process.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::time::Duration;

use sluice_core::{AttemptKind, AttemptOutcome, CallRecord, ErrorKind};
use sluice_tail::{HedgePolicy, WindowConfig};
use tokio::time::{Instant, sleep};

use crate::scripted::Rig;

/// A group over `a` (weight so high it is always the primary) and `b`, hedging by `policy`.
fn rig(policy: HedgePolicy) -> Rig {
    scripted::rig(true, |b| {
        b.hedging(policy)
            // A long window, so a long warm-up stays in it.
            .window(WindowConfig {
                length: Duration::from_secs(3600),
                slices: 6,
            })
    })
}

/// Asks once; the status and the call's record.
async fn ask(rig: &Rig) -> (u16, CallRecord) {
    let got = scripted::ask(&rig.router, None, "h").await;
    (got.status, rig.records.lock().last().cloned().unwrap())
}

/// Fills a's latency window with `n` answers of 100 ms.
async fn warm(rig: &Rig, n: u32) {
    for _ in 0..n {
        rig.a.push(100, true);
        let (status, rec) = ask(rig).await;
        assert_eq!(status, 200);
        assert_eq!(rec.attempts.len(), 1);
    }
}

fn policy() -> HedgePolicy {
    HedgePolicy {
        min_samples: 20,
        ..HedgePolicy::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_stalled_request_is_hedged_to_the_other_upstream_and_the_hedge_wins() {
    let r = rig(policy());
    warm(&r, 20).await;
    r.a.push(8_000, true);
    r.b.push(100, true);
    let start = Instant::now();
    let (status, rec) = ask(&r).await;
    assert_eq!(status, 200);
    // P95 of a's window is ~100 ms: the hedge leaves then and answers 100 ms later.
    let took = Instant::now() - start;
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_millis(210),
        "{took:?}"
    );
    assert_eq!(rec.attempts.len(), 2);
    assert_eq!(rec.attempts[0].outcome, AttemptOutcome::Lost);
    assert_eq!(rec.attempts[0].kind, AttemptKind::Primary);
    assert_eq!(rec.attempts[1].outcome, AttemptOutcome::Ok);
    assert_eq!(rec.attempts[1].kind, AttemptKind::Hedge);
    assert_eq!(rec.upstream.as_deref(), Some("b"));
    assert_eq!((r.a.calls(), r.b.calls()), (21, 1));
    let page = r.gw.telemetry().render(Instant::now());
    assert!(
        page.contains(r#"sluice_hedges_total{group="chat",result="won"} 1"#),
        "{page}"
    );
    assert!(
        page.contains(r#"sluice_upstream_attempts_total{upstream="a",outcome="lost"} 1"#),
        "{page}"
    );
}

#[tokio::test(start_paused = true)]
async fn nothing_is_hedged_before_the_window_has_enough_samples() {
    let r = rig(policy());
    warm(&r, 19).await;
    r.a.push(8_000, true);
    let (status, rec) = ask(&r).await;
    assert_eq!(status, 200);
    assert_eq!(rec.attempts.len(), 1);
    assert_eq!(r.b.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_fast_answer_sends_no_hedge() {
    let r = rig(policy());
    warm(&r, 20).await;
    r.a.push(90, true);
    let (_, rec) = ask(&r).await;
    assert_eq!(rec.attempts.len(), 1);
    assert_eq!(r.b.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_first_good_answer_wins_even_after_a_failure() {
    let r = rig(policy());
    warm(&r, 20).await;
    // The primary fails after the hedge left; the hedge's later answer is used.
    r.a.push(150, false);
    r.b.push(300, true);
    let (status, rec) = ask(&r).await;
    assert_eq!(status, 200);
    assert_eq!(
        rec.attempts[0].outcome,
        AttemptOutcome::Failed(ErrorKind::UpstreamServerError)
    );
    assert_eq!(rec.attempts[1].outcome, AttemptOutcome::Ok);
    assert!(rec.is_success());
}

#[tokio::test(start_paused = true)]
async fn when_both_fail_the_first_attempts_error_is_answered() {
    let r = rig(policy());
    warm(&r, 20).await;
    r.a.push(400, false);
    r.b.push(10, false);
    let (status, rec) = ask(&r).await;
    assert_eq!(status, 502);
    assert_eq!(rec.error, Some(ErrorKind::UpstreamServerError));
    assert!(
        rec.attempts
            .iter()
            .all(|a| matches!(a.outcome, AttemptOutcome::Failed(_)))
    );
}

/// 2,000 fast answers, then 100 requests in a row that stall for 5 s on both upstreams: the
/// window's P95 stays fast, so each of them is a hedge candidate and only the budget holds
/// them back. Returns (hedged, denied, elapsed).
async fn slow_storm(min_per_second: f64) -> (u32, u32, Duration) {
    let r = rig(HedgePolicy {
        min_samples: 20,
        budget: 0.1,
        burst: 2.0,
        min_per_second,
        ..HedgePolicy::default()
    });
    warm(&r, 2_000).await;
    let started = Instant::now();
    let (mut hedged, mut denied) = (0, 0);
    for _ in 0..100 {
        r.a.push(5_000, true);
        r.b.push(5_000, true);
        let (_, rec) = ask(&r).await;
        if rec.attempts.len() == 2 {
            hedged += 1;
        }
        if rec.hedge_denied {
            denied += 1;
        }
    }
    let page = r.gw.telemetry().render(Instant::now());
    assert!(
        page.contains(&format!(
            r#"sluice_hedges_total{{group="chat",result="denied"}} {denied}"#
        )),
        "{page}"
    );
    (hedged, denied, started.elapsed())
}

#[tokio::test(start_paused = true)]
async fn the_budget_caps_hedges_when_everything_turns_slow_at_once() {
    // No time-based floor: the warm-up filled the budget to its burst of 2, and 100 slow
    // requests deposit 10 more.
    let (hedged, denied, _) = slow_storm(0.0).await;
    assert!((11..=13).contains(&hedged), "{hedged} hedged");
    assert_eq!(hedged + denied, 100);
}

#[tokio::test(start_paused = true)]
async fn the_time_floor_adds_hedges_at_its_rate_and_no_faster() {
    // 0.1 hedges per second on top of the ratio: over ~500 s of stalls that is ~50 more, and
    // the requests that found no token waited in line for one instead of being refused at once.
    let (hedged, denied, took) = slow_storm(0.1).await;
    let floor = took.as_secs_f64() * 0.1;
    let most = 2.0 + 10.0 + floor;
    assert!(
        f64::from(hedged) > 12.0 + floor * 0.8 && f64::from(hedged) <= most + 1.0,
        "{hedged} hedged in {took:?}"
    );
    assert_eq!(hedged + denied, 100);
}

#[tokio::test(start_paused = true)]
async fn no_hedge_goes_to_an_upstream_that_asked_to_back_off() {
    let r = rig(policy());
    // Enough fast history that a handful of slow answers leaves the P95 fast.
    warm(&r, 200).await;
    // A stalled primary is hedged to b, which answers 429 "retry after 30 s"; the primary's
    // own answer still wins the call.
    r.a.push(2_000, true);
    r.b.push_limited(10, 30);
    let (status, rec) = ask(&r).await;
    assert_eq!(status, 200);
    assert_eq!(
        rec.attempts[1].outcome,
        AttemptOutcome::Failed(ErrorKind::UpstreamRejected)
    );
    // For the next 30 s, slow requests are not hedged to b; with nowhere else to go, the
    // hedge is a second request to a.
    let b_calls = r.b.calls();
    for _ in 0..5 {
        r.a.push(2_000, true);
        r.a.push(100, true);
        let (_, rec) = ask(&r).await;
        assert_eq!(rec.attempts.len(), 2);
        assert_eq!(&*rec.attempts[1].upstream, "a");
        assert_eq!(rec.attempts[1].outcome, AttemptOutcome::Ok);
    }
    assert_eq!(r.b.calls(), b_calls);
    // Once the 30 s are up, hedging to b resumes.
    sleep(Duration::from_secs(30)).await;
    r.a.push(8_000, true);
    r.b.push(100, true);
    let (_, rec) = ask(&r).await;
    assert_eq!(rec.attempts.len(), 2);
    assert_eq!(rec.upstream.as_deref(), Some("b"));
}

#[tokio::test(start_paused = true)]
async fn the_default_policy_hedges_the_interactive_lane_and_never_batch() {
    let r = rig(HedgePolicy::interactive());
    warm(&r, 20).await;
    // A stalled batch call waits out its stall: no hedge, whatever the budget holds.
    r.a.push(8_000, true);
    let start = Instant::now();
    let got = scripted::ask(&r.router, Some("batch"), "b1").await;
    assert_eq!(got.status, 200);
    assert!(Instant::now() - start >= Duration::from_secs(8));
    let rec = r.records.lock().last().cloned().unwrap();
    assert_eq!(rec.attempts.len(), 1, "{:?}", rec.attempts);
    assert_eq!(r.b.calls(), 0);
    // The same stall on the interactive lane is hedged after a's P95.
    r.a.push(8_000, true);
    r.b.push(100, true);
    let start = Instant::now();
    let got = scripted::ask(&r.router, Some("interactive"), "i1").await;
    assert_eq!(got.status, 200);
    assert!(Instant::now() - start < Duration::from_secs(1));
    let rec = r.records.lock().last().cloned().unwrap();
    assert_eq!(rec.attempts.len(), 2);
    assert_eq!(rec.attempts[1].kind, AttemptKind::Hedge);
    assert_eq!(r.b.calls(), 1);
}
