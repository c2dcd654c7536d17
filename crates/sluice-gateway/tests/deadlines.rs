//! Deadlines in virtual time: `x-sluice-timeout-ms` and a group's default bound queueing,
//! attempts, retries, hedges and streams; the 504 says which stage used the budget.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::time::Duration;

use sluice_core::{AttemptOutcome, ErrorKind, Stage};
use sluice_tail::limit::LimitSpec;
use sluice_tail::{HedgePolicy, RetryPolicy};
use tokio::time::{Instant, sleep};

use crate::scripted::{End, ask_with, rig};

const BUDGET_2S: [(&str, &str); 1] = [("x-sluice-timeout-ms", "2000")];

#[tokio::test(start_paused = true)]
async fn a_slow_upstream_gets_a_504_at_the_deadline_naming_the_stage() {
    let r = rig(false, |b| b);
    r.a.push(5_000, true);
    let t0 = Instant::now();
    let got = ask_with(&r.router, &BUDGET_2S, "slow", false).await;
    assert_eq!(Instant::now() - t0, Duration::from_secs(2));
    assert_eq!(got.status, 504);
    assert_eq!(got.body["error"]["code"], "deadline_exceeded");
    let msg = got.body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("2000 ms"), "{msg}");
    assert!(msg.contains("first byte from a"), "{msg}");
    let rec = r.record("slow");
    assert_eq!(rec.deadline_stage, Some(Stage::Upstream));
    assert_eq!(
        rec.attempts[0].outcome,
        AttemptOutcome::Failed(ErrorKind::DeadlineExceeded)
    );
    // The upstream was told how long it had.
    assert_eq!(r.a.deadlines.lock()[0], Some(t0 + Duration::from_secs(2)));
    let page = crate::scripted::scrape(&r.router).await;
    assert!(
        page.contains(r#"sluice_deadline_exceeded_total{group="chat",stage="upstream"} 1"#),
        "{page}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_queued_request_never_waits_past_its_deadline() {
    let r = rig(false, |b| b.limits(LimitSpec::Fixed(1)));
    r.a.push(5_000, true);
    let router = r.router.clone();
    let first = tokio::spawn(async move { ask_with(&router, &[], "holder", false).await });
    sleep(Duration::from_millis(10)).await;
    let t0 = Instant::now();
    let got = ask_with(&r.router, &BUDGET_2S, "queued", false).await;
    assert_eq!(Instant::now() - t0, Duration::from_secs(2));
    assert_eq!(got.status, 504);
    let msg = got.body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("stage `queue`"), "{msg}");
    assert_eq!(r.record("queued").deadline_stage, Some(Stage::Queue));
    assert_eq!(
        r.a.calls(),
        1,
        "the queued request never reached the upstream"
    );
    assert_eq!(
        first.await.unwrap().status,
        200,
        "the slot holder is unharmed"
    );
}

#[tokio::test(start_paused = true)]
async fn the_groups_default_applies_without_the_header_and_the_header_overrides_it() {
    let r = rig(false, |b| b.timeout(Duration::from_secs(1)));
    r.a.push(1_500, true);
    r.a.push(1_500, true);
    assert_eq!(ask_with(&r.router, &[], "default", false).await.status, 504);
    let got = ask_with(&r.router, &BUDGET_2S, "header", false).await;
    assert_eq!(got.status, 200);
    assert!(
        got.timing().contains("deadline;desc=\"left\";dur=500.000"),
        "{}",
        got.timing()
    );
}

#[tokio::test(start_paused = true)]
async fn a_bad_timeout_header_is_a_400_naming_it() {
    let r = rig(false, |b| b);
    for bad in ["0", "-5", "soon", "1.5", "99999999999"] {
        let got = ask_with(&r.router, &[("x-sluice-timeout-ms", bad)], "bad", false).await;
        assert_eq!(got.status, 400, "{bad}");
        assert_eq!(got.body["error"]["param"], "x-sluice-timeout-ms", "{bad}");
    }
    assert_eq!(r.a.calls(), 0, "bad input costs nothing upstream");
}

#[tokio::test(start_paused = true)]
async fn a_stream_still_going_at_the_deadline_is_cut_with_an_error_event() {
    let r = rig(false, |b| b);
    r.a.push_end(
        100,
        End::Stream {
            frames: 10,
            gap: 500,
        },
    );
    let t0 = Instant::now();
    let got = ask_with(&r.router, &BUDGET_2S, "stream", true).await;
    assert_eq!(Instant::now() - t0, Duration::from_secs(2));
    assert_eq!(got.status, 200);
    // Frames at 0.1, 0.6, 1.1, 1.6 s went out; then the error event, and no [DONE].
    assert_eq!(got.text.matches("\"n\":").count(), 4, "{}", got.text);
    assert!(got.text.contains("deadline_exceeded"), "{}", got.text);
    assert!(got.text.contains("stage `stream`"), "{}", got.text);
    assert!(!got.text.contains("[DONE]"));
    let rec = r.record("stream");
    assert_eq!(rec.deadline_stage, Some(Stage::Stream));
    assert_eq!(rec.error, Some(ErrorKind::DeadlineExceeded));
}

/// Fills `b`'s latency window with 20 first bytes of 1 s (retries from a failing `a`), then
/// `a`'s with 5 of 100 ms.
async fn warm(r: &scripted::Rig) {
    for i in 0..20 {
        r.a.push(10, false);
        r.b.push(1_000, true);
        let got = ask_with(&r.router, &[], &format!("warm-b-{i}"), false).await;
        assert_eq!(got.status, 200);
    }
    for i in 0..5 {
        r.a.push(100, true);
        ask_with(&r.router, &[], &format!("warm-a-{i}"), false).await;
    }
}

fn generous_retries() -> RetryPolicy {
    RetryPolicy {
        budget: 1.0,
        burst: 100.0,
        ..RetryPolicy::default()
    }
}

#[tokio::test(start_paused = true)]
async fn no_retry_when_what_is_left_is_below_the_targets_median() {
    let r = rig(true, |b| b.retries(generous_retries()));
    warm(&r).await;
    let b_before = r.b.calls();
    // a fails at 0.5 s: 0.7 s are left, b's median first byte is 1 s. No retry.
    r.a.push(500, false);
    let got = ask_with(
        &r.router,
        &[("x-sluice-timeout-ms", "1200")],
        "short",
        false,
    )
    .await;
    assert_eq!(got.status, 502);
    assert_eq!(r.b.calls(), b_before);
    assert_eq!(r.record("short").attempts.len(), 1);
    // With 2.5 s left it retries on b, and the answer says so.
    r.a.push(500, false);
    r.b.push(1_000, true);
    let got = ask_with(&r.router, &[("x-sluice-timeout-ms", "3000")], "long", false).await;
    assert_eq!(got.status, 200);
    assert_eq!(r.b.calls(), b_before + 1);
    let timing = got.timing();
    assert!(
        timing.contains("attempt;desc=\"primary a upstream_server_error\";dur=500.000"),
        "{timing}"
    );
    assert!(
        timing.contains("attempt;desc=\"retry b ok\";dur=1000.000"),
        "{timing}"
    );
}

#[tokio::test(start_paused = true)]
async fn no_hedge_when_what_is_left_is_below_the_upstreams_median() {
    let hedge = HedgePolicy {
        min_samples: 5,
        ..HedgePolicy::default()
    };
    // One deployment: a hedge goes to it again (another replica behind the same API).
    let r = rig(false, |b| b.hedging(hedge));
    for i in 0..20 {
        r.a.push(1_000, true);
        ask_with(&r.router, &[], &format!("warm-{i}"), false).await;
    }
    let before = r.a.calls();
    // At a's P95 (1 s) 0.5 s are left, below its median of 1 s: no hedge.
    r.a.push(3_000, true);
    let got = ask_with(
        &r.router,
        &[("x-sluice-timeout-ms", "1500")],
        "tight",
        false,
    )
    .await;
    assert_eq!(got.status, 504, "{}", got.timing());
    assert_eq!(r.a.calls(), before + 1);
    assert!(r.record("tight").hedge_denied);
    assert!(
        got.timing().contains("hedge;desc=\"denied\""),
        "{}",
        got.timing()
    );
    // With time to spare the hedge goes, and wins.
    r.a.push(3_000, true);
    r.a.push(1_000, true);
    let t0 = Instant::now();
    let got = ask_with(
        &r.router,
        &[("x-sluice-timeout-ms", "5000")],
        "roomy",
        false,
    )
    .await;
    assert_eq!(got.status, 200);
    assert_eq!(r.a.calls(), before + 3);
    assert!(Instant::now() - t0 < Duration::from_millis(2_100));
    let timing = got.timing();
    assert!(timing.contains("attempt;desc=\"hedge a ok\""), "{timing}");
    assert!(
        timing.contains("attempt;desc=\"primary a lost\""),
        "{timing}"
    );
}
