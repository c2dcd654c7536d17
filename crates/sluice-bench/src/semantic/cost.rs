//! The cost side of `sluice bench semantic`: what a miss costs through the gateway with the
//! semantic cache on, beside off, in one run.

use std::sync::Arc;

use bytes::Bytes;
use sluice_cache::semantic::{Mode, Question, SemanticCache};
use sluice_config::gateway::DeploymentConfig;
use sluice_core::ChatRequest;
use sluice_embed::Embedder;
use sluice_gateway::GatewayBuilder;
use sluice_sim::{SimProvider, SimUpstream, UpstreamSpec};
use tokio::time::{Duration, Instant};

use super::{SemanticArgs, local, policy};

/// The question body the cost run asks (one partition: everything but its text the same).
fn question_body(text: &str) -> Bytes {
    let v = serde_json::json!({
        "model": "bench",
        "messages": [
            {"role": "system", "content": "You answer customers' questions about their orders."},
            {"role": "user", "content": text},
        ],
    });
    Bytes::from(v.to_string())
}

/// A gateway in front of an in-process upstream that answers at once; with the semantic
/// cache (`cache`) or without.
fn gateway(cache: Option<(SemanticCache, Arc<Embedder>)>) -> anyhow::Result<axum::Router> {
    let spec = UpstreamSpec {
        ttft_median: Duration::ZERO,
        ttft_sigma: 0.0,
        per_token: Duration::ZERO,
        output_tokens_median: 16,
        output_tokens_sigma: 0.0,
        ..UpstreamSpec::default()
    };
    let up = SimProvider(Arc::new(SimUpstream::new("up", spec, 1, Instant::now())));
    let dep = DeploymentConfig {
        provider: "up".into(),
        model: "fixed".into(),
        weight: 1,
        name: Some("up".into()),
        rpm: None,
        tpm: None,
    };
    let mut b = GatewayBuilder::new()
        .provider("up", Arc::new(up))
        .model("bench", vec![dep]);
    if let Some((cache, embedder)) = cache {
        b = b.semantic_cache_from(cache, embedder);
    }
    Ok(sluice_gateway::server::router(b.build()?))
}

async fn ask(router: &axum::Router, body: Bytes) -> anyhow::Result<Duration> {
    use tower::ServiceExt;
    let req = http::Request::post("/v1/chat/completions")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body))?;
    let t = Instant::now();
    let resp = router.clone().oneshot(req).await?;
    let status = resp.status();
    axum::body::to_bytes(resp.into_body(), usize::MAX).await?;
    let took = t.elapsed();
    anyhow::ensure!(status.is_success(), "the gateway answered {status}");
    Ok(took)
}

/// What a miss costs with the semantic cache on, side by side with it off: two gateways in
/// front of the same instant upstream, asked the same new questions in turn (so neither is
/// warmer), one holding `n` entries in the questions' partition (the worst case: every
/// entry scanned). Each miss stores its answer and the oldest entry leaves, so the count
/// holds.
pub fn cost(
    rt: &tokio::runtime::Runtime,
    a: &SemanticArgs,
    e: &Embedder,
    lookups: Arc<Embedder>,
) -> anyhow::Result<()> {
    println!(
        "\nCost of a miss through the gateway, the semantic cache on ({}) beside off, in one run:",
        lookups.name()
    );
    let answer = Bytes::from(vec![b'x'; a.answer_bytes]);
    let topics = [
        "shipping",
        "refunds",
        "invoices",
        "warranty",
        "returns",
        "passwords",
        "discounts",
        "delivery",
        "payments",
        "accounts",
    ];
    for &n in &a.entries {
        let mut cache = SemanticCache::new(
            policy(Mode::Static {
                threshold: 0.9,
                audit: 0.0,
            }),
            1.0,
        );
        let now = Instant::now();
        for i in 0..n {
            let text = format!(
                "What is the rule about {} for customer group {i}?",
                topics[i % topics.len()]
            );
            let req = ChatRequest::from_bytes(question_body(&text))?;
            let q = Question::of(None, "bench", &req, cache.limits())
                .map_err(|w| anyhow::anyhow!("not a question: {}", w.label()))?;
            let v = local(e, &q.text)?;
            cache.insert(&q, v, answer.clone(), 0, now);
        }
        let (entries, bytes) = cache.size();
        cache = cache.bounded(usize::try_from(bytes)?);
        let on = gateway(Some((cache, lookups.clone())))?;
        let off = gateway(None)?;
        let rounds = a.rounds;
        let (mut h_on, mut h_off) = (
            hdrhistogram::Histogram::<u64>::new(3)?,
            hdrhistogram::Histogram::<u64>::new(3)?,
        );
        rt.block_on(async {
            for i in 0..rounds {
                let body = question_body(&format!(
                    "Please tell me how {} work when I order {i} items?",
                    topics[(i * 7) % topics.len()]
                ));
                // Alternate which goes first, so neither always finds the caches warm.
                let (first, second) = if i % 2 == 0 { (&on, &off) } else { (&off, &on) };
                let t1 = ask(first, body.clone()).await?;
                let t2 = ask(second, body).await?;
                let (t_on, t_off) = if i % 2 == 0 { (t1, t2) } else { (t2, t1) };
                h_on.record(t_on.as_nanos() as u64)?;
                h_off.record(t_off.as_nanos() as u64)?;
            }
            anyhow::Ok(())
        })?;
        let us = |h: &hdrhistogram::Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        println!(
            "  {entries:>7} entries ({:.1} MiB, {} bytes each with {}-byte answers), {rounds} misses:",
            bytes as f64 / (1 << 20) as f64,
            bytes / entries.max(1),
            a.answer_bytes
        );
        for (label, q) in [("P50", 0.5), ("P99", 0.99), ("P999", 0.999)] {
            println!(
                "    {label:>4}  off {:>8.0} us   on {:>8.0} us   added {:>8.0} us",
                us(&h_off, q),
                us(&h_on, q),
                us(&h_on, q) - us(&h_off, q)
            );
        }
    }
    Ok(())
}
