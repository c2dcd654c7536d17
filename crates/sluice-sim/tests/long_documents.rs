//! Compression and progressive loading against a simulated model that reads, in virtual
//! time: 200 contract-like documents of 50,000 tokens and more, each with a question whose
//! answer sits in one clause, sent whole, compressed to a budget, and loaded progressively,
//! each way to its own upstream (prefill time grows with the uncached prompt). The reader
//! answers only when the clause that holds the answer reached it, so a right answer is the
//! proof that the clause was sent. Also: a request under its budget goes byte for byte.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "shared/mod.rs"]
mod shared;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt;
use parking_lot::Mutex;
use serde_json::{Value, json};
use sluice_core::{CallRecord, ChatRequest, Usage};
use sluice_economy::{Micros, Price};
use sluice_gateway::GatewayBuilder;
use sluice_sim::UpstreamSpec;
use sluice_sim::contract::{Contract, contract};
use sluice_sim::provider::SimProvider;
use sluice_sim::upstream::SimUpstream;
use tokio::time::Instant;
use tower::ServiceExt;

use crate::shared::{Recording, deployment};

const DOCUMENTS: u64 = 200;
const BUDGET: u64 = 6_000;
const ROUND: u64 = 4_000;
/// What the reader's tokens cost, per million: 1.00 in, 0.10 cached, 2.00 out.
const PRICE: Price = Price {
    input: Micros(1_000_000),
    cached_input: Micros(100_000),
    cache_write: Micros(1_000_000),
    output: Micros(2_000_000),
    published: None,
};

fn spec() -> UpstreamSpec {
    UpstreamSpec {
        ttft_median: Duration::from_millis(400),
        ttft_sigma: 0.3,
        per_token: Duration::from_millis(10),
        prefill_per_token: Duration::from_micros(50),
        reader: true,
        ..UpstreamSpec::default()
    }
}

struct Rig {
    router: axum::Router,
    records: Arc<Mutex<Vec<CallRecord>>>,
    seen: Arc<Mutex<Vec<ChatRequest>>>,
}

fn rig() -> Rig {
    let now = Instant::now();
    let records = Arc::new(Mutex::new(Vec::<CallRecord>::new()));
    let sink = records.clone();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut b = GatewayBuilder::new()
        .seed(11)
        .on_record(Arc::new(move |r: &CallRecord| sink.lock().push(r.clone())));
    for group in ["whole", "compressed", "progressive"] {
        let up = Arc::new(SimUpstream::new(group, spec(), 11, now));
        let p = Recording {
            inner: SimProvider(up),
            seen: seen.clone(),
        };
        b = b.provider(group, Arc::new(p));
        let d = deployment(group, "reader");
        b = b.model(group, vec![d]);
    }
    b = b
        .price("reader", PRICE)
        .compress(
            "compressed",
            sluice_context::compress::Compress {
                budget: Some(BUDGET),
            },
        )
        .progressive(
            "progressive",
            sluice_context::progressive::Progressive {
                round_tokens: ROUND,
                rounds: 3,
                sentinel: "INSUFFICIENT_CONTEXT".into(),
            },
        );
    Rig {
        router: sluice_gateway::server::router(b.build().unwrap()),
        records,
        seen,
    }
}

fn body(group: &str, c: &Contract) -> String {
    json!({"model": group, "max_tokens": 64, "messages": [
        {"role": "system", "content": "You review supplier contracts. Answer from the contract only."},
        {"role": "user", "content": format!("{}\n\n{}", c.text, c.question)}
    ]})
    .to_string()
}

/// One request's outcome: status, the answer's text, headers of interest, and its latency.
struct Seen {
    status: u16,
    answer: String,
    compression: Option<String>,
    progressive: Option<String>,
    /// The answer's `usage`: (prompt, completion) tokens.
    usage: Option<(u64, u64)>,
    latency: Duration,
}

async fn ask(router: &axum::Router, id: String, body: String) -> Seen {
    let req = http::Request::post("/v1/chat/completions")
        .header("content-type", "application/json")
        .header("x-request-id", id)
        .body(Body::from(body))
        .unwrap();
    let start = Instant::now();
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let (compression, progressive) = {
        let header = |n: &str| {
            resp.headers()
                .get(n)
                .map(|v| v.to_str().unwrap().to_string())
        };
        (
            header("x-sluice-compression"),
            header("x-sluice-progressive"),
        )
    };
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Seen {
        status,
        answer: v
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        compression,
        progressive,
        usage: v.get("usage").map(|u| {
            let n = |k: &str| u[k].as_u64().unwrap();
            (n("prompt_tokens"), n("completion_tokens"))
        }),
        latency: start.elapsed(),
    }
}

/// A progressive call's usage is its rounds' sum, and its cost that usage's price.
fn assert_billed(r: &CallRecord) {
    assert!(!r.rounds.is_empty());
    let sum = r
        .rounds
        .iter()
        .fold(Usage::default(), |acc, x| acc.plus(&x.usage.unwrap()));
    assert_eq!(r.usage, Some(sum));
    assert_eq!(r.cost_micros, Some(PRICE.cost(&sum).0));
}

fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[(v.len() * 99).div_ceil(100) - 1]
}

/// What one way of sending the documents came to.
#[derive(Debug)]
struct Way {
    answered: u64,
    prompt_tokens: u64,
    p99: Duration,
}

#[tokio::test(start_paused = true)]
async fn two_hundred_long_contracts_compressed_and_loaded_progressively() {
    let rig = rig();
    let docs: Vec<Contract> = (0..DOCUMENTS)
        .map(|i| contract(1_000 + i, 85 + (i as usize * 7) % 116))
        .collect();
    let smallest = docs.iter().map(|c| c.text.len() / 4).min().unwrap();
    assert!(smallest >= 50_000, "smallest document {smallest} tokens");

    let mut ways = Vec::new();
    for group in ["whole", "compressed", "progressive"] {
        // The documents arrive one every 2 s (virtual), all in flight together.
        let calls: Vec<_> = docs
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let router = rig.router.clone();
                let b = body(group, c);
                let id = format!("{group}-{i}");
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs(2 * i as u64)).await;
                    ask(&router, id, b).await
                })
            })
            .collect();
        let mut seen = Vec::new();
        for c in calls {
            seen.push(c.await.unwrap());
        }
        let answered = seen
            .iter()
            .zip(&docs)
            .filter(|(s, c)| s.status == 200 && s.answer == c.answer)
            .count() as u64;
        match group {
            "compressed" => {
                for s in &seen {
                    let h = s.compression.as_deref().unwrap();
                    assert!(h.starts_with("before=") && h.contains("; after="), "{h}");
                }
            }
            "progressive" => assert!(seen.iter().all(|s| s.progressive.is_some())),
            _ => assert!(
                seen.iter()
                    .all(|s| s.compression.is_none() && s.progressive.is_none())
            ),
        }
        let records = rig.records.lock();
        let prompt_tokens: u64 = records
            .iter()
            .filter(|r| r.model_group.as_deref() == Some(group))
            .map(|r| r.usage.unwrap().prompt_tokens)
            .sum();
        ways.push(Way {
            answered,
            prompt_tokens,
            p99: p99(seen.iter().map(|s| s.latency).collect()),
        });
    }
    let [whole, compressed, progressive] = &ways[..] else {
        panic!()
    };
    let report = format!(
        "whole {whole:?}\ncompressed {compressed:?} ({:.3} of the tokens)\nprogressive {progressive:?} ({:.3} of the tokens)",
        compressed.prompt_tokens as f64 / whole.prompt_tokens as f64,
        progressive.prompt_tokens as f64 / whole.prompt_tokens as f64,
    );
    println!("{report}");
    // Sent whole, every document is answered.
    assert_eq!(whole.answered, DOCUMENTS, "{report}");
    // Compression: at most a quarter of the tokens, the clause there (answered) in 99%.
    assert!(
        compressed.prompt_tokens * 4 <= whole.prompt_tokens,
        "{report}"
    );
    assert!(compressed.answered * 100 >= DOCUMENTS * 99, "{report}");
    // Progressive: 99% answered, at most half the tokens.
    assert!(progressive.answered * 100 >= DOCUMENTS * 99, "{report}");
    assert!(
        progressive.prompt_tokens * 2 <= whole.prompt_tokens,
        "{report}"
    );
    // Fewer tokens to read: the tail is shorter, not longer.
    assert!(compressed.p99 < whole.p99, "{report}");
    assert!(progressive.p99 < whole.p99, "{report}");
    // Every progressive round is in the record and billed: usage is the rounds' sum.
    let records = rig.records.lock();
    for r in records
        .iter()
        .filter(|r| r.model_group.as_deref() == Some("progressive"))
    {
        assert_billed(r);
    }
}

#[tokio::test(start_paused = true)]
async fn a_document_the_first_round_misses_is_answered_in_a_later_round() {
    let rig = rig();
    // The question's words are everywhere but in the clause that answers it: the first round
    // sends the decoys, the reader says the context did not suffice, the next round the rest.
    let mut text = String::new();
    for i in 0..300 {
        text.push_str(&format!(
            "{}.1 Renewal fee {i}: renewal fee schedule, renewal fee table.\n\n",
            i + 1
        ));
    }
    text.push_str(
        "301.1 For this contract, and notwithstanding anything to the contrary in any schedule, order form or statement of work agreed between the parties from time to time, the renewal fee is EUR 40,000.\n\n",
    );
    for i in 0..1_000 {
        text.push_str(&format!(
            "{}.1 The parties shall meet in quarter {i} to review progress.\n\n",
            i + 302
        ));
    }
    let c = Contract {
        text,
        question: "Under this agreement, what is the renewal fee?".into(),
        answer: "The renewal fee is EUR 40,000.".into(),
        clause: "301.1".into(),
        pages: 1,
    };
    let seen = ask(&rig.router, "late".into(), body("progressive", &c)).await;
    assert_eq!(seen.status, 200);
    assert_eq!(seen.answer, c.answer);
    let h = seen.progressive.unwrap();
    assert!(
        h.starts_with("rounds=") && !h.starts_with("rounds=1;"),
        "{h}"
    );
    let records = rig.records.lock();
    let r = records.last().unwrap();
    assert!(r.rounds.len() >= 2);
    assert!(r.rounds[0].insufficient);
    assert!(!r.rounds.last().unwrap().insufficient);
    assert_billed(r);
    // The later round's prompt starts with the earlier one's: the provider's cache read it.
    assert!(r.rounds[1].usage.unwrap().cached_tokens > 0);
    // The client's usage adds up every round, as the ledger's record and the header do.
    let billed = r.usage.unwrap();
    assert_eq!(
        seen.usage,
        Some((billed.prompt_tokens, billed.completion_tokens)),
        "the answer's usage is every round's"
    );
    assert!(
        h.contains(&format!("prompt_tokens={};", billed.prompt_tokens))
            || h.ends_with(&format!("prompt_tokens={}", billed.prompt_tokens)),
        "{h}"
    );
    // Each round went to the upstream; the client saw one answer.
    let seen = rig.seen.lock();
    assert_eq!(seen.len(), r.rounds.len());
}

#[tokio::test(start_paused = true)]
async fn a_request_under_its_budget_goes_byte_for_byte() {
    let rig = rig();
    let c = contract(5, 20);
    let short = Contract {
        text: c.text[..8_000].to_string(),
        ..c
    };
    let sent = body("compressed", &short);
    let seen = ask(&rig.router, "short".into(), sent.clone()).await;
    assert_eq!(seen.status, 200);
    assert!(seen.compression.is_none());
    {
        let upstream = rig.seen.lock();
        assert_eq!(upstream.len(), 1);
        assert_eq!(upstream[0], ChatRequest::parse(sent.as_bytes()).unwrap());
        assert_eq!(rig.records.lock()[0].compressed, None);
    }
    // The same long request compressed twice is the same bytes (a provider cache can hit).
    let long = body("compressed", &contract(6, 90));
    ask(&rig.router, "long-a".into(), long.clone()).await;
    ask(&rig.router, "long-b".into(), long).await;
    let upstream = rig.seen.lock();
    assert_eq!(upstream[1], upstream[2]);
    // The budget is in the tokens the gateway's tokenizer counts.
    let tokenizer = sluice_economy::estimate::Tokenizer::load().unwrap();
    assert!(tokenizer.prompt_tokens(&upstream[1]) <= BUDGET);
}
