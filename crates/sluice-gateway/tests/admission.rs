//! Admission, lanes and retries in virtual time: scripted upstreams, the router in-process.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::time::Duration;

use sluice_config::gateway::DeploymentConfig;
use sluice_core::{AttemptKind, AttemptOutcome, ErrorKind};
use sluice_tail::RetryPolicy;
use sluice_tail::limit::LimitSpec;
use tokio::time::{Instant, sleep};

use crate::scripted::{End, ask, ask_with, dep, get_json, lanes, rig, rig_over, scrape};

#[tokio::test(start_paused = true)]
async fn a_limit_caps_requests_in_flight_and_the_rest_wait_rather_than_fail() {
    let r = rig(false, |b| b.limits(LimitSpec::Fixed(2)));
    for _ in 0..6 {
        r.a.push(1_000, true);
    }
    let start = Instant::now();
    let statuses = r.burst(6, "batch", "q").await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(r.a.peak(), 2, "never more than the limit in flight");
    let page = scrape(&r.router).await;
    assert!(
        page.contains(r#"sluice_upstream_concurrency_limit{group="chat",upstream="a"} 2"#),
        "{page}"
    );
    assert!(
        page.contains(
            r#"sluice_admission_requests{group="chat",upstream="a",lane="batch",state="queued"} 0"#
        ),
        "{page}"
    );
    assert_eq!(
        Instant::now() - start,
        Duration::from_secs(3),
        "three rounds of two"
    );
    // Time spent waiting shows as queue time in the record.
    let last = r.record("q-5");
    assert_eq!(last.timings.queue(), Some(Duration::from_secs(2)));
}

/// A request whose predicted wait passes its lane's `max_wait` is refused at arrival: 503 in
/// the API's shape, `Retry-After` from the prediction, and a counted refusal on `/metrics`;
/// every request accepted is served, none waits out its lane.
#[tokio::test(start_paused = true)]
async fn a_predicted_wait_past_the_lane_is_refused_at_arrival_and_counted() {
    let r = rig(false, |b| b.limits(LimitSpec::Fixed(1)));
    for _ in 0..60 {
        r.a.push(1_000, true);
    }
    // One a second drains; ten arrive a second, for six seconds.
    let mut calls = Vec::new();
    for i in 0..60 {
        let router = r.router.clone();
        calls.push(tokio::spawn(async move {
            ask(&router, None, &format!("w-{i}")).await
        }));
        sleep(Duration::from_millis(100)).await;
    }
    let mut served = 0;
    let mut refused = 0;
    for c in calls {
        let got = c.await.unwrap();
        if got.status == 200 {
            served += 1;
            continue;
        }
        assert_eq!(got.status, 503, "{}", got.text);
        assert_eq!(got.body["error"]["code"], "overloaded");
        assert!(
            got.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("longer than the lane allows"),
            "{}",
            got.text
        );
        let secs: u64 = got.retry_after.unwrap().parse().unwrap();
        assert!(secs >= 27, "past 90% of the lane's 30 s: {secs}");
        refused += 1;
    }
    assert!(refused > 0 && served + refused == 60, "{served} {refused}");
    let page = scrape(&r.router).await;
    let at_arrival = format!(
        r#"sluice_admission_refused_total{{group="chat",upstream="a",reason="at_arrival"}} {refused}"#
    );
    assert!(page.contains(&at_arrival), "{at_arrival} in {page}");
    assert!(
        page.contains(
            r#"sluice_admission_refused_total{group="chat",upstream="a",reason="waited_out"} 0"#
        ),
        "{page}"
    );
}

#[tokio::test(start_paused = true)]
async fn interactive_requests_overtake_queued_batch_requests() {
    let r = rig(false, |b| b.limits(LimitSpec::Fixed(1)));
    for _ in 0..5 {
        r.a.push(1_000, true);
    }
    let batch = {
        let router = r.router.clone();
        tokio::spawn(async move {
            let tasks: Vec<_> = (0..4)
                .map(|i| {
                    let router = router.clone();
                    tokio::spawn(
                        async move { ask(&router, Some("batch"), &format!("b-{i}")).await },
                    )
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        })
    };
    sleep(Duration::from_millis(10)).await;
    let start = Instant::now();
    let got = ask(&r.router, Some("interactive"), "i-0").await;
    assert_eq!(got.status, 200);
    // It waited for the batch request in flight only, not for the three queued before it.
    assert_eq!(Instant::now() - start, Duration::from_millis(1_990));
    batch.await.unwrap();
    assert_eq!(r.record("i-0").lane.as_deref(), Some("interactive"));
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_answers_503_with_retry_after_in_openai_shape() {
    let r = rig(false, |b| b.limits(LimitSpec::Fixed(1)).lanes(lanes(1)));
    r.a.push(5_000, true);
    r.a.push(5_000, true);
    let busy = {
        let router = r.router.clone();
        tokio::spawn(async move { ask(&router, None, "x-0").await.status })
    };
    sleep(Duration::from_millis(1)).await;
    let queued = {
        let router = r.router.clone();
        tokio::spawn(async move { ask(&router, None, "x-1").await.status })
    };
    sleep(Duration::from_millis(1)).await;
    let refused = ask(&r.router, None, "x-2").await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.headers["x-sluice-upstream"], "none");
    assert_eq!(refused.body["error"]["code"], "overloaded");
    assert_eq!(refused.body["error"]["type"], "overloaded_error");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("interactive queue")
    );
    let secs: u64 = refused.retry_after.unwrap().parse().unwrap();
    assert!(secs >= 1);
    // Nothing that was accepted is lost.
    assert_eq!((busy.await.unwrap(), queued.await.unwrap()), (200, 200));
    assert_eq!(r.record("x-2").error, Some(ErrorKind::Overloaded));
}

#[tokio::test(start_paused = true)]
async fn an_unknown_lane_is_a_400_naming_the_header() {
    let r = rig(false, |b| b);
    let got = ask(&r.router, Some("vip"), "l-0").await;
    assert_eq!(got.status, 400);
    assert_eq!(got.body["error"]["param"], "x-sluice-lane");
    assert!(
        got.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("interactive, batch")
    );
    assert_eq!(r.a.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_429_is_retried_after_its_retry_after() {
    let r = rig(false, |b| b.retries(RetryPolicy::default()));
    r.a.push_limited(10, 2);
    r.a.push(100, true);
    let start = Instant::now();
    let got = ask(&r.router, Some("batch"), "r-0").await;
    assert_eq!(got.status, 200);
    assert_eq!(Instant::now() - start, Duration::from_millis(2_110));
    let rec = r.record("r-0");
    let page = r.gw.telemetry().render(Instant::now());
    assert!(
        page.contains(r#"sluice_retries_total{group="chat",outcome="ok"} 1"#),
        "{page}"
    );
    assert_eq!(rec.attempts.len(), 2);
    assert_eq!(
        rec.attempts[0].outcome,
        AttemptOutcome::Failed(ErrorKind::UpstreamRejected)
    );
    assert_eq!(rec.attempts[1].kind, AttemptKind::Retry);
    assert!(rec.is_success());
}

#[tokio::test(start_paused = true)]
async fn a_429_moves_the_retry_to_another_deployment_at_once() {
    let r = rig(true, |b| b.retries(RetryPolicy::default()));
    r.a.push_limited(10, 30);
    r.b.push(100, true);
    let start = Instant::now();
    let got = ask(&r.router, None, "m-0").await;
    assert_eq!(got.status, 200);
    assert_eq!(Instant::now() - start, Duration::from_millis(110));
    assert_eq!(r.record("m-0").upstream.as_deref(), Some("b"));
}

#[tokio::test(start_paused = true)]
async fn a_429_pauses_the_deployment_and_its_queue_waits_it_out() {
    let r = rig(false, |b| {
        b.limits(LimitSpec::Fixed(8))
            .retries(RetryPolicy::default())
    });
    r.a.push_limited(10, 5);
    r.a.push(100, true);
    r.a.push(100, true);
    let first = {
        let router = r.router.clone();
        tokio::spawn(async move { ask(&router, Some("batch"), "p-0").await.status })
    };
    sleep(Duration::from_millis(20)).await;
    // The upstream asked for 5 s: a new request waits in sluice instead of meeting the wall.
    let start = Instant::now();
    let second = ask(&r.router, Some("batch"), "p-1").await;
    assert_eq!(second.status, 200);
    assert!(Instant::now() - start >= Duration::from_millis(4_990));
    assert_eq!(first.await.unwrap(), 200);
    assert_eq!(r.a.calls(), 3, "one 429, then each request once");
}

#[tokio::test(start_paused = true)]
async fn failures_are_retried_within_max_attempts() {
    let r = rig(false, |b| {
        b.retries(RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        })
    });
    for _ in 0..2 {
        r.a.push_end(10, End::Fail);
    }
    r.a.push(10, true);
    assert_eq!(ask(&r.router, None, "f-0").await.status, 200);
    for _ in 0..3 {
        r.a.push_end(10, End::Fail);
    }
    let got = ask(&r.router, None, "f-1").await;
    assert_eq!(got.status, 502);
    assert_eq!(r.record("f-1").attempts.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn the_upstreams_own_4xx_is_never_retried() {
    let r = rig(false, |b| b.retries(RetryPolicy::default()));
    r.a.push_end(10, End::Reject(422));
    let got = ask(&r.router, None, "c-0").await;
    assert_eq!(got.status, 422);
    assert_eq!(r.a.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_retry_budget_stops_a_storm() {
    let r = rig(false, |b| {
        b.retries(RetryPolicy {
            max_attempts: 10,
            budget: 0.1,
            burst: 2.0,
            ..RetryPolicy::default()
        })
    });
    // Everything fails: the budget (one token to start, 0.1 a request, at most 2) allows few
    // retries in all, whatever max_attempts says.
    for _ in 0..200 {
        r.a.push_end(10, End::Fail);
    }
    for i in 0..20 {
        assert_eq!(ask(&r.router, None, &format!("s-{i}")).await.status, 502);
    }
    let attempts: usize = r.records.lock().iter().map(|rec| rec.attempts.len()).sum();
    assert!(
        (21..=25).contains(&attempts),
        "{attempts} attempts for 20 requests"
    );
}

#[tokio::test(start_paused = true)]
async fn aimd_cuts_the_limit_when_the_upstream_refuses() {
    let r = rig(false, |b| {
        b.limits(LimitSpec::Aimd {
            initial: 20,
            min: 1,
            max: 100,
        })
    });
    for _ in 0..10 {
        r.a.push_limited(10, 0);
    }
    let statuses = r.burst(10, "batch", "g").await;
    assert!(statuses.iter().all(|s| *s == 429), "{statuses:?}");
    let group = r.gw.routes().group("chat").unwrap();
    let limit = group.deployments[0].limiter.as_ref().unwrap().stats().limit;
    // Ten drops: 20 × 0.9, rounded down, ten times.
    assert_eq!(limit, 5);
}

#[tokio::test(start_paused = true)]
async fn an_upstream_overloaded_cuts_the_limit_and_its_own_faults_do_not() {
    let limit_after = |status: u16| async move {
        let r = rig(false, |b| {
            b.limits(LimitSpec::Aimd {
                initial: 20,
                min: 1,
                max: 100,
            })
        });
        for _ in 0..10 {
            r.a.push_end(10, End::ServerError(status));
        }
        let statuses = r.burst(10, "batch", "s").await;
        assert!(statuses.iter().all(|s| *s == 502), "{statuses:?}");
        let group = r.gw.routes().group("chat").unwrap();
        group.deployments[0].limiter.as_ref().unwrap().stats().limit
    };
    // A 500 is the upstream's own fault: the breaker's business, not congestion.
    assert_eq!(limit_after(500).await, 20);
    // 503, 504 and 529 say it is overloaded: ten of them, 20 × 0.9 ten times.
    for status in [503, 504, 529] {
        assert_eq!(limit_after(status).await, 5, "{status}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_tenant_is_recorded_and_its_default_lane_applies_unless_the_request_names_one() {
    let r = rig(false, |b| b.tenant_lane("bulkco", "batch"));
    let got = ask_with(&r.router, &[("x-sluice-tenant", "bulkco")], "t-0", false).await;
    assert_eq!(got.status, 200);
    let rec = r.record("t-0");
    assert_eq!(rec.tenant.as_deref(), Some("bulkco"));
    assert_eq!(rec.lane.as_deref(), Some("batch"));
    let headers = [
        ("x-sluice-tenant", "bulkco"),
        ("x-sluice-lane", "interactive"),
    ];
    ask_with(&r.router, &headers, "t-1", false).await;
    assert_eq!(r.record("t-1").lane.as_deref(), Some("interactive"));
    ask_with(&r.router, &[("x-sluice-tenant", "acme")], "t-2", false).await;
    assert_eq!(r.record("t-2").lane.as_deref(), Some("interactive"));
}

#[tokio::test(start_paused = true)]
async fn a_bad_tenant_header_is_a_400_naming_it() {
    let r = rig(false, |b| b);
    for bad in ["", "a b", "ü", &"x".repeat(65)] {
        let got = ask_with(&r.router, &[("x-sluice-tenant", bad)], "bad", false).await;
        assert_eq!(got.status, 400, "{bad}");
        assert_eq!(got.body["error"]["param"], "x-sluice-tenant");
    }
    assert_eq!(r.a.calls(), 0);
}

#[test]
fn a_tenants_lane_must_exist() {
    let err = sluice_gateway::GatewayBuilder::new()
        .tenant_lane("bulkco", "bulk")
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("no lane named `bulk`"), "{err}");
}

fn paced(provider: &str, weight: u32, rpm: u64) -> DeploymentConfig {
    DeploymentConfig {
        rpm: Some(rpm),
        ..dep(provider, weight)
    }
}

#[tokio::test(start_paused = true)]
async fn a_configured_rpm_paces_calls_and_nothing_is_refused() {
    // 60 a minute, a burst of one: ten requests at once leave a second apart, all succeed;
    // the group sets no concurrency limit, pacing alone holds them.
    let r = rig_over(vec![paced("a", 1, 60)], |b| b);
    for _ in 0..10 {
        r.a.push(10, true);
    }
    let start = Instant::now();
    let statuses = r.burst(10, "batch", "p").await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(r.a.calls(), 10);
    // The last left after nine seconds (and took 10 ms).
    assert_eq!(
        Instant::now() - start,
        Duration::from_secs(9) + Duration::from_millis(10)
    );
    assert_eq!(
        r.record("p-9").timings.queue().map(|q| q.as_secs()),
        Some(9)
    );
}

#[tokio::test(start_paused = true)]
async fn while_one_deployment_is_paced_new_requests_go_to_one_that_is_free() {
    // a takes almost all traffic by weight, but only 60 a minute; b is unlimited.
    let r = rig_over(vec![paced("a", 1_000_000, 60), dep("b", 1)], |b| b);
    let statuses = r.burst(10, "interactive", "s").await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    // a took its one-second burst; the rest went to b at once instead of queueing.
    assert_eq!((r.a.calls(), r.b.calls()), (1, 9));
    assert!(
        r.records
            .lock()
            .iter()
            .all(|c| c.timings.queue() < Some(Duration::from_millis(1)))
    );
}

#[tokio::test(start_paused = true)]
async fn admin_upstreams_shows_what_the_pacer_holds() {
    let r = rig_over(vec![paced("a", 1, 120)], |b| b);
    ask(&r.router, None, "u-0").await;
    let v = get_json(&r.router, "/admin/upstreams").await;
    let a = &v["groups"][0]["deployments"][0]["admission"];
    assert_eq!(a["pace_requests"]["per_minute"], 120);
    assert_eq!(a["pace_requests"]["burst"], 2);
    assert_eq!(a["pace_tokens"], serde_json::Value::Null);
    assert_eq!(a["lanes"][1]["tenants_queued"], 0);
}
