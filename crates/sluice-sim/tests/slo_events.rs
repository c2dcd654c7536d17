//! SLO events through the gateway, in virtual time: the same latency objective (first byte
//! within 2 s) over three model groups, each in front of its own simulated upstream, each
//! with its own trouble: a slow upstream, a queue in sluice (one request at a time), and a
//! provider's rate limit. Each group's bad events name its own culprit, and only it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "shared/mod.rs"]
mod shared;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt;
use serde_json::json;
use sluice_gateway::GatewayBuilder;
use sluice_gateway::assemble::GroupPolicies;
use sluice_sim::UpstreamSpec;
use sluice_sim::provider::SimProvider;
use sluice_sim::upstream::SimUpstream;
use sluice_tail::limit::LimitSpec;
use sluice_telemetry::slo::{Measure, Objective, Slo};
use tokio::time::Instant;
use tower::ServiceExt;

use crate::shared::deployment;

const REQUESTS: usize = 20;

fn spec(ttft_ms: u64, rpm: u64) -> UpstreamSpec {
    UpstreamSpec {
        ttft_median: Duration::from_millis(ttft_ms),
        ttft_sigma: 0.0,
        per_token: Duration::from_millis(1),
        output_tokens_median: 10,
        output_tokens_sigma: 0.0,
        rpm,
        ..UpstreamSpec::default()
    }
}

fn slo(group: &str) -> Slo {
    Slo {
        name: Arc::from(group),
        objective: Objective::Latency {
            measure: Measure::Ttfb,
            threshold: Duration::from_secs(2),
            target: 0.99,
        },
        lanes: Vec::new(),
        groups: vec![Arc::from(group)],
    }
}

/// Counts of `sluice_slo_events_total` for `slo`, by (outcome, culprit).
fn events(metrics: &str, slo: &str) -> Vec<(String, String, u64)> {
    let mut out = Vec::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("sluice_slo_events_total{") else {
            continue;
        };
        if !rest.contains(&format!("slo=\"{slo}\"")) {
            continue;
        }
        let label = |k: &str| {
            let at = rest.find(&format!("{k}=\"")).unwrap() + k.len() + 2;
            rest[at..at + rest[at..].find('"').unwrap()].to_string()
        };
        let n: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        out.push((label("outcome"), label("culprit"), n));
    }
    out.sort();
    out
}

#[tokio::test(start_paused = true)]
async fn each_kind_of_trouble_is_blamed_on_its_own_culprit() {
    let now = Instant::now();
    // A plain proxy, so each group shows one kind of trouble alone (sluice's default retries
    // and pacing would blur the upstream's 429s into queueing).
    let mut b = GatewayBuilder::bare().seed(9);
    // `paced`: sluice paces it at 60 a minute (its deployment's `rpm`), and the requests
    // carry a 5 s deadline: those still held for the pace when it runs out are the
    // provider's limit's, not sluice's queue's.
    for (group, s, limit) in [
        ("slow", spec(3_000, 0), None),
        ("queued", spec(600, 0), Some(LimitSpec::Fixed(1))),
        ("limited", spec(300, 5), None),
        ("paced", spec(300, 0), Some(LimitSpec::Fixed(64))),
    ] {
        let up = Arc::new(SimUpstream::new(group, s, 9, now));
        b = b.provider(group, Arc::new(SimProvider(up)));
        let mut d = deployment(group, "m");
        if group == "paced" {
            d.rpm = Some(60);
        }
        let p = GroupPolicies {
            limit: limit.into(),
            ..GroupPolicies::default()
        };
        b = b.model_with(group, vec![d], p).slo(slo(group));
    }
    let router = sluice_gateway::server::router(b.build().unwrap());
    for group in ["slow", "queued", "limited", "paced"] {
        let calls: Vec<_> = (0..REQUESTS)
            .map(|i| {
                let router = router.clone();
                let body = json!({"model": group, "messages": [{"role": "user", "content": format!("q{i}")}]});
                tokio::spawn(async move {
                    let mut req = http::Request::post("/v1/chat/completions")
                        .header("content-type", "application/json");
                    if group == "paced" {
                        req = req.header("x-sluice-timeout-ms", "5000");
                    }
                    let req = req
                        .body(Body::from(body.to_string()))
                        .unwrap();
                    let resp = router.oneshot(req).await.unwrap();
                    resp.into_body().collect().await.unwrap();
                })
            })
            .collect();
        for c in calls {
            c.await.unwrap();
        }
        tokio::time::sleep(Duration::from_secs(120)).await;
    }
    let req = http::Request::get("/metrics").body(Body::empty()).unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let metrics = String::from_utf8(bytes.to_vec()).unwrap();

    // Every request to the slow upstream is late, and the upstream's fault.
    assert_eq!(
        events(&metrics, "slow"),
        [("bad".into(), "upstream_slow".into(), REQUESTS as u64)]
    );
    // One at a time, 600 ms each: the first three are in time, the rest waited in sluice.
    let queued = events(&metrics, "queued");
    let bad: Vec<_> = queued.iter().filter(|(o, ..)| o == "bad").collect();
    assert_eq!(bad.len(), 1, "{queued:?}");
    assert_eq!(bad[0].1, "sluice_queueing", "{queued:?}");
    assert!(bad[0].2 >= 15, "{queued:?}");
    // Past its 5 a minute, the provider answers 429: the rate limit's fault.
    let limited = events(&metrics, "limited");
    assert!(
        limited
            .iter()
            .filter(|(o, ..)| o == "bad")
            .all(|(_, c, _)| c == "upstream_rate_limited"),
        "{limited:?}"
    );
    let rate_limited: u64 = limited
        .iter()
        .filter(|(o, ..)| o == "bad")
        .map(|x| x.2)
        .sum();
    assert_eq!(rate_limited, REQUESTS as u64 - 5, "{limited:?}");
    // Held for the pace until the deadline ran out: the provider's limit, every one.
    let paced = events(&metrics, "paced");
    let bad: Vec<_> = paced.iter().filter(|(o, ..)| o == "bad").collect();
    assert_eq!(bad.len(), 1, "{paced:?}");
    assert_eq!(bad[0].1, "upstream_rate_limited", "{paced:?}");
    assert!(bad[0].2 >= 10, "{paced:?}");
    let ran_out = metrics
        .lines()
        .find(|l| l.starts_with("sluice_deadline_exceeded_total{group=\"paced\",stage=\"queue\"}"))
        .unwrap_or_else(|| panic!("no deadline ran out in the queue: {metrics}"));
    let ran_out: u64 = ran_out.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(ran_out >= 10, "{ran_out} ran out in the queue");
    let held: u64 = metrics
        .lines()
        .filter(|l| l.starts_with("sluice_rate_limit_waits_total{group=\"paced\""))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(held >= bad[0].2, "{held} held for the pace, {paced:?}");
}
