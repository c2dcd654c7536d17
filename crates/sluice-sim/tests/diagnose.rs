//! The incident explainer through the gateway, in virtual time: ten quiet minutes against a
//! simulated provider, then five more that are quiet again, or where the upstream browns out
//! (its latency 3 times up), or where a batch flood meets the provider's rate limit (the
//! seed's incident), paced by sluice's defaults or, apart, met as 429s that a plain proxy
//! with retries waits out between attempts. `GET /admin/diagnose?window=300&baseline=600`
//! says nothing is wrong, names the upstream, or names the rate-limit contention and not a
//! slower LLM, and then never says the upstream's own first byte grew.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "shared/mod.rs"]
mod shared;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use sluice_gateway::GatewayBuilder;
use sluice_sim::UpstreamSpec;
use sluice_sim::provider::SimProvider;
use sluice_sim::spec::Degradation;
use sluice_sim::upstream::SimUpstream;
use sluice_tail::limit::LimitSpec;
use tokio::time::Instant;
use tower::ServiceExt;

use crate::shared::deployment;

const QUIET: Duration = Duration::from_secs(600);
const WINDOW: Duration = Duration::from_secs(300);

#[derive(Clone, Copy, PartialEq)]
enum Incident {
    None,
    Brownout,
    BatchFlood,
    /// The flood, in front of a plain proxy that retries: the 429s' waits fall between
    /// attempts, after dispatch.
    BatchFloodRetried,
}

/// Sends one request of `lane` every `every` from `from` to `until` (virtual time), with
/// request ids `name-N` (so the simulator's draws are the same every run).
fn traffic(
    router: &axum::Router,
    name: &'static str,
    lane: &'static str,
    every: Duration,
    from: Instant,
    until: Instant,
) -> tokio::task::JoinHandle<()> {
    let router = router.clone();
    tokio::spawn(async move {
        tokio::time::sleep_until(from).await;
        let mut calls = Vec::new();
        let mut i = 0u64;
        while Instant::now() < until {
            i += 1;
            let r = router.clone();
            let body = json!({"model": "chat", "max_tokens": 40, "messages": [{"role": "user", "content": format!("{lane} {i}")}]});
            calls.push(tokio::spawn(async move {
                let req = http::Request::post("/v1/chat/completions")
                    .header("content-type", "application/json")
                    .header("x-sluice-lane", lane)
                    .header("x-request-id", format!("{name}-{i}"))
                    .body(Body::from(body.to_string()))
                    .unwrap();
                let resp = r.oneshot(req).await.unwrap();
                resp.into_body().collect().await.unwrap();
            }));
            tokio::time::sleep(every).await;
        }
        for c in calls {
            c.await.unwrap();
        }
    })
}

async fn diagnose(incident: Incident) -> Value {
    let start = Instant::now();
    let spec = UpstreamSpec {
        ttft_median: Duration::from_millis(800),
        ttft_sigma: 0.3,
        per_token: Duration::from_millis(20),
        output_tokens_median: 40,
        rpm: 600,
        rpm_burst: Some(10),
        // Like many providers, it announces no limits: sluice meets them as 429s.
        rate_headers: false,
        degradations: if incident == Incident::Brownout {
            vec![Degradation {
                from: QUIET,
                to: QUIET + WINDOW,
                latency_factor: 3.0,
                ..Degradation::default()
            }]
        } else {
            Vec::new()
        },
        ..UpstreamSpec::default()
    };
    let up = Arc::new(SimUpstream::new("east", spec, 5, start));
    let builder = if incident == Incident::BatchFloodRetried {
        GatewayBuilder::bare().retries(sluice_tail::RetryPolicy::default())
    } else {
        GatewayBuilder::new().limits(LimitSpec::Fixed(32))
    };
    let gw = builder
        .seed(5)
        .provider("east", Arc::new(SimProvider(up)))
        .model("chat", vec![deployment("east", "m")])
        .build()
        .unwrap();
    let router = sluice_gateway::server::router(gw);
    let end = start + QUIET + WINDOW;
    let mut runs = vec![
        traffic(
            &router,
            "i",
            "interactive",
            Duration::from_millis(250),
            start,
            end,
        ),
        traffic(&router, "b", "batch", Duration::from_secs(2), start, end),
    ];
    if matches!(incident, Incident::BatchFlood | Incident::BatchFloodRetried) {
        runs.push(traffic(
            &router,
            "flood",
            "batch",
            Duration::from_millis(125),
            start + QUIET,
            end,
        ));
    }
    for r in runs {
        r.await.unwrap();
    }
    tokio::time::sleep_until(end).await;
    let req = http::Request::get(format!(
        "/admin/diagnose?window={}&baseline={}",
        WINDOW.as_secs(),
        QUIET.as_secs()
    ))
    .body(Body::empty())
    .unwrap();
    let resp = router.oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_quiet_period_is_said_to_be_quiet() {
    let v = diagnose(Incident::None).await;
    let d = &v["diagnosis"];
    println!("quiet: {}", d["summary"]);
    assert_eq!(d["verdict"], "quiet", "{d}");
    assert!(d["recent"]["calls"].as_u64().unwrap() > 1_000);
    assert!(d["baseline"]["calls"].as_u64().unwrap() > 2_000);
}

#[tokio::test(start_paused = true)]
async fn a_brownout_names_the_upstream() {
    let v = diagnose(Incident::Brownout).await;
    let d = &v["diagnosis"];
    println!("brownout: {}", d["summary"]);
    assert_eq!(d["verdict"], "upstream_slower", "{d}");
    assert!(d["summary"].as_str().unwrap().contains("(east)"), "{d}");
    never_contradicted(d);
}

#[tokio::test(start_paused = true)]
async fn a_batch_flood_on_the_rate_limit_is_contention_not_a_slower_llm() {
    let v = diagnose(Incident::BatchFlood).await;
    let d = &v["diagnosis"];
    println!("batch flood: {}", d["summary"]);
    assert_eq!(d["verdict"], "rate_limit_contention", "{d}");
    let s = d["summary"].as_str().unwrap();
    assert!(s.contains("batch share"), "{s}");
    assert!(s.contains("rate-limited share"), "{s}");
    assert!(
        s.starts_with("rate-limit contention, not a slower LLM"),
        "{s}"
    );
    never_contradicted(d);
}

/// The figures the verdict rests on, read from the diagnosis: the answering attempts' own first
/// byte did not grow when the verdict says the LLM is not slower.
fn never_contradicted(d: &Value) {
    let s = d["summary"].as_str().unwrap();
    let (before, after) = (
        d["baseline"]["attempt_ttfb_p99"].as_f64().unwrap(),
        d["recent"]["attempt_ttfb_p99"].as_f64().unwrap(),
    );
    if s.contains("not a slower LLM") {
        assert!(after <= before * 1.25 + 0.05, "{before} -> {after}: {s}");
        assert!(
            s.contains(&format!(
                "the upstream's attempts answered their first byte at P99 {before:.2} s -> {after:.2} s"
            )),
            "{s}"
        );
    }
    assert!(
        d["next"].as_str().unwrap().contains("/admin/diagnose"),
        "{d}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_flood_met_as_429s_between_retries_is_contention_with_the_upstream_unchanged() {
    let v = diagnose(Incident::BatchFloodRetried).await;
    let d = &v["diagnosis"];
    println!("batch flood, retried: {}", d["summary"]);
    assert_eq!(d["verdict"], "rate_limit_contention", "{d}");
    let s = d["summary"].as_str().unwrap();
    assert!(
        s.starts_with("rate-limit contention, not a slower LLM"),
        "{s}"
    );
    // The time went to retries and pauses, after dispatch.
    let waits = |w: &str| d[w]["slow_waits"].as_f64().unwrap();
    assert!(waits("recent") > waits("baseline") + 1.0, "{d}");
    never_contradicted(d);
}

#[tokio::test(start_paused = true)]
async fn bad_windows_are_refused_by_name() {
    let gw = GatewayBuilder::new()
        .provider(
            "east",
            Arc::new(SimProvider(Arc::new(SimUpstream::new(
                "east",
                UpstreamSpec::default(),
                1,
                Instant::now(),
            )))),
        )
        .model("chat", vec![deployment("east", "m")])
        .build()
        .unwrap();
    let router = sluice_gateway::server::router(gw);
    for (query, param) in [
        ("window=0", "window"),
        ("baseline=x", "baseline"),
        ("since=3", "since"),
    ] {
        let req = http::Request::get(format!("/admin/diagnose?{query}"))
            .body(Body::empty())
            .unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), 400, "{query}");
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["error"]["param"], param, "{v}");
    }
}
