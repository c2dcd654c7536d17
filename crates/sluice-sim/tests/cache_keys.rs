//! Provider prompt-cache keys through the gateway, in virtual time: requests of one tenant
//! sharing a system prompt reach the upstream with one `prompt_cache_key`, spread over more
//! keys once they pass the per-key rate, each key under it; another tenant or prompt gets its
//! own key; a key the client sent is never replaced.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "shared/mod.rs"]
mod shared;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt;
use parking_lot::Mutex;
use serde_json::json;
use sluice_core::ChatRequest;
use sluice_gateway::GatewayBuilder;
use sluice_sim::UpstreamSpec;
use sluice_sim::provider::SimProvider;
use sluice_sim::upstream::SimUpstream;
use tokio::time::Instant;
use tower::ServiceExt;

use crate::shared::{Recording, deployment};

async fn send(router: &axum::Router, tenant: &str, body: serde_json::Value) {
    let req = http::Request::post("/v1/chat/completions")
        .header("content-type", "application/json")
        .header("x-sluice-tenant", tenant)
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.into_body().collect().await.unwrap();
}

fn key_of(r: &ChatRequest) -> Option<String> {
    r.value("prompt_cache_key")
        .and_then(|v| v.as_str().map(str::to_string))
}

#[tokio::test(start_paused = true)]
async fn keys_follow_tenant_and_prefix_and_spread_past_the_rate() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let up = Arc::new(SimUpstream::new(
        "openai",
        UpstreamSpec::default(),
        3,
        Instant::now(),
    ));
    // Hedges would add calls of their own: this counts what each request sent.
    let b = GatewayBuilder::new()
        .without_hedging()
        .seed(3)
        .provider(
            "openai",
            Arc::new(Recording {
                inner: SimProvider(up),
                seen: seen.clone(),
            }),
        )
        .model("chat", vec![deployment("openai", "m")])
        .prompt_cache_key("chat", sluice_context::cache_key::Spread::default());
    let router = sluice_gateway::server::router(b.build().unwrap());
    let body = |system: &str, q: usize| {
        json!({"model": "chat", "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": format!("question {q}")}
        ]})
    };
    // 50 requests of one tenant and prompt, one a second: more than 15 a minute.
    let calls: Vec<_> = (0..50)
        .map(|q| {
            let router = router.clone();
            let b = body("You review contracts.", q);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(q as u64)).await;
                send(&router, "acme", b).await;
            })
        })
        .collect();
    for c in calls {
        c.await.unwrap();
    }
    send(&router, "globex", body("You review contracts.", 0)).await;
    send(&router, "acme", body("You write poems.", 0)).await;
    let mut own = body("You review contracts.", 1);
    own["prompt_cache_key"] = json!("client-key");
    send(&router, "acme", own).await;

    let seen = seen.lock();
    assert_eq!(seen.len(), 53);
    let mut per_key: BTreeMap<String, u32> = BTreeMap::new();
    for r in &seen[..50] {
        *per_key.entry(key_of(r).unwrap()).or_default() += 1;
    }
    let mut counts: Vec<u32> = per_key.values().copied().collect();
    counts.sort_unstable();
    assert_eq!(counts, [5, 15, 15, 15], "{per_key:?}");
    // The keys of one prefix share their stem; another tenant or prompt has its own.
    let stem = |k: &str| k[..k.rfind('-').unwrap()].to_string();
    let first = key_of(&seen[0]).unwrap();
    assert!(per_key.keys().all(|k| stem(k) == stem(&first)));
    assert_ne!(stem(&key_of(&seen[50]).unwrap()), stem(&first));
    assert_ne!(stem(&key_of(&seen[51]).unwrap()), stem(&first));
    assert_eq!(key_of(&seen[52]).as_deref(), Some("client-key"));
    // Nothing else in the body changed: the client's fields come first, in order.
    let fields: Vec<&str> = seen[0].fields().map(|(k, _)| k).collect();
    assert_eq!(fields, ["model", "messages", "prompt_cache_key"]);
}
