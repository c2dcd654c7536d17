//! Circuit breakers in virtual time: scripted upstreams, the router in-process.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::time::Duration;

use sluice_core::ErrorKind;
use sluice_tail::{BreakerPolicy, BreakerState, RetryPolicy};
use tokio::time::{Instant, sleep};

use crate::scripted::{End, Rig, ask, get_json, rig, scrape};

fn policy() -> BreakerPolicy {
    BreakerPolicy {
        min_calls: 5,
        ..BreakerPolicy::default()
    }
}

fn state_of(r: &Rig, name: &str) -> BreakerState {
    let group = r.gw.routes().group("chat").unwrap();
    let d = group.deployments.iter().find(|d| &*d.name == name).unwrap();
    d.breaker.as_ref().unwrap().lock().state(Instant::now())
}

#[tokio::test(start_paused = true)]
async fn a_failing_upstream_is_cut_out_then_probed_back_in() {
    let r = rig(true, |b| b.breakers(policy()));
    // a (always the routed primary) fails five times in a row: its breaker opens.
    for _ in 0..5 {
        r.a.push_end(10, End::Fail);
    }
    for i in 0..5 {
        assert_eq!(ask(&r.router, None, &format!("f-{i}")).await.status, 502);
    }
    assert!(matches!(state_of(&r, "a"), BreakerState::Open { .. }));
    let page = scrape(&r.router).await;
    assert!(
        page.contains(r#"sluice_upstream_breaker_state{group="chat",upstream="a",state="open"} 1"#),
        "{page}"
    );
    assert!(
        page.contains(
            r#"sluice_upstream_breaker_state{group="chat",upstream="b",state="closed"} 1"#
        ),
        "{page}"
    );
    let status = get_json(&r.router, "/admin/upstreams").await;
    let a_status = &status["groups"][0]["deployments"][0];
    assert_eq!(a_status["name"], "a");
    assert_eq!(a_status["breaker"]["state"], "open");
    assert_eq!(a_status["breaker"]["opened"], 1);
    assert_eq!(a_status["breaker"]["failures_in_a_row"], 5);
    assert_eq!(a_status["breaker"]["next_call_in_ms"], 15_000);
    assert_eq!(
        status["groups"][0]["deployments"][1]["breaker"]["state"],
        "closed"
    );
    // While open, requests go to b without touching a.
    for i in 0..10 {
        assert_eq!(ask(&r.router, None, &format!("o-{i}")).await.status, 200);
    }
    assert_eq!((r.a.calls(), r.b.calls()), (5, 10));
    // After 15 s one probe a second goes to a; three good ones close the breaker.
    sleep(Duration::from_secs(15)).await;
    for i in 0..3 {
        assert_eq!(ask(&r.router, None, &format!("p-{i}")).await.status, 200);
        sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(r.a.calls(), 8);
    assert_eq!(state_of(&r, "a"), BreakerState::Closed);
    let page = scrape(&r.router).await;
    for to in ["open", "closed"] {
        let line = format!(
            r#"sluice_upstream_breaker_transitions_total{{group="chat",upstream="a",to="{to}"}} 1"#
        );
        assert!(page.contains(&line), "{page}");
    }
    assert!(
        page.contains(
            r#"sluice_upstream_breaker_state{group="chat",upstream="a",state="closed"} 1"#
        ),
        "{page}"
    );
}

#[tokio::test(start_paused = true)]
async fn with_every_breaker_open_the_call_fails_fast_with_retry_after() {
    let r = rig(false, |b| b.breakers(policy()));
    for _ in 0..5 {
        r.a.push_end(10, End::Fail);
    }
    for i in 0..5 {
        ask(&r.router, None, &format!("f-{i}")).await;
    }
    let got = ask(&r.router, None, "x").await;
    assert_eq!(got.status, 503);
    assert_eq!(got.body["error"]["code"], "upstream_unavailable");
    assert_eq!(got.retry_after.as_deref(), Some("15"));
    assert_eq!(r.a.calls(), 5, "nothing was sent");
    assert_eq!(r.record("x").error, Some(ErrorKind::UpstreamUnavailable));
}

#[tokio::test(start_paused = true)]
async fn rate_limits_and_client_errors_do_not_open_the_breaker() {
    let r = rig(false, |b| b.breakers(policy()));
    for _ in 0..10 {
        r.a.push_limited(10, 0);
    }
    for _ in 0..10 {
        r.a.push_end(10, End::Reject(422));
    }
    for i in 0..20 {
        ask(&r.router, None, &format!("q-{i}")).await;
    }
    assert_eq!(state_of(&r, "a"), BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn retries_go_around_an_open_breaker() {
    let r = rig(true, |b| {
        b.breakers(policy()).retries(RetryPolicy::default())
    });
    for _ in 0..5 {
        r.a.push_end(10, End::Fail);
    }
    // The first five requests each fail on a and are retried on b.
    for i in 0..5 {
        assert_eq!(ask(&r.router, None, &format!("r-{i}")).await.status, 200);
    }
    assert!(matches!(state_of(&r, "a"), BreakerState::Open { .. }));
    assert_eq!(r.b.calls(), 5);
    let rec = r.record("r-0");
    assert_eq!(rec.attempts.len(), 2);
    assert_eq!(rec.upstream.as_deref(), Some("b"));
}
