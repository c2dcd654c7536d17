//! A system prompt with a per-request timestamp at its top, in virtual time against simulated
//! upstreams with prompt caches: multi-turn chats and document questions, sent once to a
//! group that normalises (the timestamp line moves to the end, so everything before it is
//! the same bytes each time) and once to one that does not. With normalisation the providers'
//! caches serve at least 90% of the prompt tokens; without, the prefix watch names the
//! timestamp as what breaks the prefix.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "shared/mod.rs"]
mod shared;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt;
use parking_lot::Mutex;
use serde_json::{Value, json};
use sluice_core::CallRecord;
use sluice_gateway::GatewayBuilder;
use sluice_sim::UpstreamSpec;
use sluice_sim::provider::SimProvider;
use sluice_sim::upstream::SimUpstream;
use tokio::time::Instant;
use tower::ServiceExt;

use crate::shared::deployment;

const CONVERSATIONS: usize = 20;
const TURNS: usize = 5;
const DOCUMENTS: usize = 8;
const QUESTIONS: usize = 6;

fn rules() -> String {
    (0..120)
        .map(|i| format!("Rule {i}: flag clauses on automatic renewal, unlimited liability, unilateral price changes and missing exit terms; cite the clause number and quote it.\n"))
        .collect()
}

async fn post(router: &axum::Router, body: Value) -> Value {
    let req = http::Request::post("/v1/chat/completions")
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

/// Sends the whole workload to `group`; each request's system prompt opens with the time
/// it was sent.
async fn workload(router: &axum::Router, group: &str) {
    let rules = rules();
    let start = tokio::time::Instant::now();
    let system = || {
        let t = start.elapsed().as_secs();
        format!(
            "Current time: 2026-12-01T{:02}:{:02}:{:02}Z\n{rules}",
            10 + t / 3600,
            (t / 60) % 60,
            t % 60
        )
    };
    let mut chats: Vec<Vec<Value>> = vec![Vec::new(); CONVERSATIONS];
    for turn in 0..TURNS {
        for (c, history) in chats.iter_mut().enumerate() {
            history.push(json!({"role": "user", "content": format!("Conversation {c}, turn {turn}: does clause {turn} breach a rule?")}));
            let mut messages = vec![json!({"role": "system", "content": system()})];
            messages.extend(history.iter().cloned());
            let v = post(router, json!({"model": group, "messages": messages})).await;
            let answer = v["choices"][0]["message"]["content"].clone();
            history.push(json!({"role": "assistant", "content": answer}));
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
    for d in 0..DOCUMENTS {
        let document =
            format!("Contract {d}.\n\n") + &format!("Clause text of contract {d}. ").repeat(550);
        for q in 0..QUESTIONS {
            let messages = json!([
                {"role": "system", "content": system()},
                {"role": "user", "content": format!("{document}\n\nQuestion {q}: which rules does it breach?")},
            ]);
            post(router, json!({"model": group, "messages": messages})).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn normalised_timestamped_prompts_are_served_from_the_provider_cache() {
    let now = Instant::now();
    let records = Arc::new(Mutex::new(Vec::<CallRecord>::new()));
    let sink = records.clone();
    let mut b = GatewayBuilder::new()
        .seed(5)
        .watch_prefixes(1.0)
        .on_record(Arc::new(move |r: &CallRecord| sink.lock().push(r.clone())));
    for group in ["plain", "normalised"] {
        let spec = UpstreamSpec {
            output_tokens_median: 40,
            ..UpstreamSpec::default()
        };
        let up = Arc::new(SimUpstream::new(group, spec, 5, now));
        b = b.provider(group, Arc::new(SimProvider(up)));
        let d = deployment(group, "m");
        b = b.model(group, vec![d]);
    }
    b = b.normalise(
        "normalised",
        sluice_context::normalise::Normalise {
            tools: true,
            volatile: true,
        },
    );
    let router = sluice_gateway::server::router(b.build().unwrap());
    workload(&router, "plain").await;
    workload(&router, "normalised").await;

    let share = |group: &str| {
        let records = records.lock();
        let (mut cached, mut prompt) = (0, 0);
        for r in records
            .iter()
            .filter(|r| r.model_group.as_deref() == Some(group))
        {
            let u = r.usage.unwrap();
            cached += u.cached_tokens;
            prompt += u.prompt_tokens;
        }
        cached as f64 / prompt as f64
    };
    let (plain, normalised) = (share("plain"), share("normalised"));
    println!("provider-cached share: plain {plain:.3}, normalised {normalised:.3}");
    assert!(normalised >= 0.90, "normalised {normalised:.3}");
    assert!(plain < 0.10, "plain {plain:.3}");
    {
        let records = records.lock();
        let moved = records
            .iter()
            .filter(|r| r.model_group.as_deref() == Some("normalised"))
            .all(|r| r.normalised == Some((false, 1)));
        assert!(
            moved,
            "every normalised request had its timestamp line moved"
        );
    }

    // The report names the timestamp as what parts the plain group's prefixes.
    let req = http::Request::get("/admin/prefixes")
        .body(Body::empty())
        .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    let rows = v["watched"].as_array().unwrap();
    let plain_row = rows.iter().find(|r| r["group"] == "plain").unwrap();
    let churn = plain_row["churn"].as_object().unwrap();
    assert!(churn.contains_key("timestamp"), "{v}");
    let ts = churn["timestamp"]["count"].as_u64().unwrap();
    let total: u64 = churn.values().filter_map(|c| c["count"].as_u64()).sum();
    assert!(ts * 10 >= total * 9, "the timestamp is the cause: {v}");
    let normalised_row = rows.iter().find(|r| r["group"] == "normalised").unwrap();
    assert!(
        normalised_row["churn"]
            .as_object()
            .is_none_or(|c| !c.contains_key("timestamp")),
        "{v}"
    );
}
