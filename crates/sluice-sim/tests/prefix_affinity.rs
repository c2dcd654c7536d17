//! Prefix affinity against simulated upstreams with prompt caches, in virtual time: the
//! reference workload's shape (every document reviewed by several questions, each request a
//! shared system prompt, the document, then the question) over three deployments of one
//! model. With affinity each document's questions go where its first one went, so the
//! providers' prompt caches serve far more of the prompt than when requests are spread by
//! weight, while the documents still spread over every deployment.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt;
use parking_lot::Mutex;
use serde_json::json;
use sluice_config::gateway::DeploymentConfig;
use sluice_core::CallRecord;
use sluice_gateway::GatewayBuilder;
use sluice_routing::affinity::AffinityPolicy;
use sluice_sim::UpstreamSpec;
use sluice_sim::provider::SimProvider;
use sluice_sim::upstream::SimUpstream;
use tokio::time::Instant;
use tower::ServiceExt;

const DOCUMENTS: usize = 24;
const QUESTIONS: usize = 5;
const UPSTREAMS: [&str; 3] = ["east", "west", "north"];

/// What one run saw: the share of prompt tokens the upstreams' caches served, and which
/// upstreams each document's requests went to.
struct Outcome {
    cached_share: f64,
    by_document: BTreeMap<usize, BTreeSet<String>>,
    /// Requests a remembered prefix routed, from the records.
    by_prefix: usize,
    /// The `/metrics` page after the run.
    metrics: String,
}

fn spec() -> UpstreamSpec {
    UpstreamSpec {
        ttft_median: Duration::from_millis(300),
        ttft_sigma: 0.2,
        per_token: Duration::from_millis(2),
        output_tokens_median: 40,
        ..UpstreamSpec::default()
    }
}

async fn run(affinity: Option<AffinityPolicy>) -> Outcome {
    let now = Instant::now();
    let records = Arc::new(Mutex::new(Vec::<CallRecord>::new()));
    let sink = records.clone();
    let mut b = GatewayBuilder::new()
        .seed(7)
        .on_record(Arc::new(move |r: &CallRecord| sink.lock().push(r.clone())));
    for name in UPSTREAMS {
        let up = Arc::new(SimUpstream::new(name, spec(), 7, now));
        b = b.provider(name, Arc::new(SimProvider(up)));
    }
    let deployments = UPSTREAMS
        .iter()
        .map(|name| DeploymentConfig {
            provider: (*name).into(),
            model: "m".into(),
            weight: 1,
            name: Some((*name).into()),
            rpm: None,
            tpm: None,
        })
        .collect();
    b = b.model("review", deployments);
    if let Some(p) = affinity {
        b = b.affinity(p);
    }
    let affine = affinity.is_some();
    let router = sluice_gateway::server::router(b.build().unwrap());

    let system = "You review contracts against the rule book. ".repeat(50);
    // Each question round asks every document at once, as a batch job does.
    for q in 0..QUESTIONS {
        let calls: Vec<_> = (0..DOCUMENTS)
            .map(|d| {
                let document = format!("Document {d}: ") + &format!("clause {d} text. ").repeat(700);
                let body = json!({
                    "model": "review",
                    "messages": [
                        {"role": "system", "content": system},
                        {"role": "user", "content": format!("{document}\nQuestion {q}: is rule {q} met?")},
                    ],
                });
                let req = http::Request::post("/v1/chat/completions")
                    .header("content-type", "application/json")
                    .header("x-request-id", format!("doc{d}-q{q}"))
                    .body(Body::from(body.to_string()))
                    .unwrap();
                let router = router.clone();
                tokio::spawn(async move {
                    let resp = router.oneshot(req).await.unwrap();
                    assert_eq!(resp.status(), 200);
                    resp.into_body().collect().await.unwrap();
                })
            })
            .collect();
        for c in calls {
            c.await.unwrap();
        }
    }

    let metrics = {
        let req = http::Request::get("/metrics").body(Body::empty()).unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    };
    let records = records.lock();
    assert_eq!(records.len(), DOCUMENTS * QUESTIONS);
    assert!(records.iter().all(|r| r.by_prefix.is_some() == affine));
    let by_prefix = records.iter().filter(|r| r.by_prefix == Some(true)).count();
    let (mut cached, mut prompt) = (0, 0);
    let mut by_document: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    for r in records.iter() {
        let u = r.usage.unwrap();
        cached += u.cached_tokens;
        prompt += u.prompt_tokens;
        let id = r.request_id.as_str();
        let d: usize = id["doc".len()..id.find('-').unwrap()].parse().unwrap();
        by_document
            .entry(d)
            .or_default()
            .insert(r.upstream.as_deref().unwrap().to_string());
    }
    Outcome {
        cached_share: cached as f64 / prompt as f64,
        by_document,
        by_prefix,
        metrics,
    }
}

#[tokio::test(start_paused = true)]
async fn affinity_keeps_each_document_on_one_upstream_and_its_prompt_cached() {
    let spread = run(None).await;
    let affine = run(Some(AffinityPolicy::default())).await;

    // By weight, a document's five questions land on two or three upstreams, and each
    // upstream reads the document uncached once.
    let split = spread.by_document.values().filter(|u| u.len() > 1).count();
    assert!(split > DOCUMENTS / 2, "{split} documents split");
    // With affinity, every document stays on one upstream, and the documents still spread
    // over all three.
    assert!(affine.by_document.values().all(|u| u.len() == 1));
    let used: BTreeSet<&String> = affine.by_document.values().flatten().collect();
    assert_eq!(used.len(), UPSTREAMS.len());
    // Every question after a document's first was routed by its prefix, and the metrics say
    // so.
    let followed = DOCUMENTS * (QUESTIONS - 1);
    assert_eq!(affine.by_prefix, followed);
    for (routed, n) in [("prefix", followed), ("weight", DOCUMENTS)] {
        let line = format!(
            "sluice_prefix_affinity_requests_total{{group=\"review\",routed=\"{routed}\"}} {n}"
        );
        assert!(
            affine.metrics.contains(&line),
            "{line} in\n{}",
            affine.metrics
        );
    }
    assert!(
        !spread
            .metrics
            .contains("sluice_prefix_affinity_requests_total{")
    );

    // Four of five questions per document hit the cache with affinity (the first writes it);
    // by weight, well under that.
    assert!(
        affine.cached_share > 0.75,
        "affinity: {:.3} of prompt tokens cached",
        affine.cached_share
    );
    assert!(
        spread.cached_share < affine.cached_share - 0.15,
        "by weight {:.3}, affinity {:.3}",
        spread.cached_share,
        affine.cached_share
    );
    println!(
        "cached share of prompt tokens: by weight {:.3}, with prefix affinity {:.3}",
        spread.cached_share, affine.cached_share
    );
}
