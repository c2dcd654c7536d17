//! The semantic cache's other embedder and its measured error: questions embedded by an
//! OpenAI-compatible `/embeddings` upstream on a loopback port (its failure only skips the
//! cache); a model group with its own threshold, or none; the static mode's audit share sent
//! upstream, each route's error estimate exported, and verifications in the ledger beside
//! their cost.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use sluice_cache::semantic::{Mode, Policy};
use sluice_core::{SemanticLookup, Usage};
use sluice_embed::Embedder;
use sluice_providers::OpenAiSettings;
use sluice_providers::embeddings::Embeddings;

use crate::scripted::{PRICE, Rig, dep, embedder, get_json, ledgered, rig_over, scrape, send};

const ANSWER: &str = r#"{"id":"c-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Use the reset link."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}"#;

const USAGE: Usage = crate::scripted::PLAIN_USAGE;

fn policy(mode: Mode) -> Policy {
    Policy {
        mode,
        ttl: Duration::from_secs(600),
        max_bytes: 1 << 20,
    }
}

fn ask(model: &str, question: &str) -> String {
    json!({"model": model, "temperature": 0,
           "messages": [{"role": "system", "content": "Answer briefly."},
                        {"role": "user", "content": question}]})
    .to_string()
}

fn lookup(r: &Rig, id: &str) -> Option<SemanticLookup> {
    r.record(id).semantic
}

/// The default model served over HTTP on a loopback port, as an embeddings server (TEI,
/// vLLM) would serve it; its base URL, and what stops it.
async fn embeddings_server() -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, sluice_embed::serve::router(embedder()))
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    (format!("http://{at}/v1"), stop, server)
}

// On the real clock: the embeddings server is reached over a socket.
#[tokio::test]
async fn an_embeddings_upstream_serves_by_meaning_and_its_failure_only_skips_the_cache() {
    let (base, stop, server) = embeddings_server().await;
    let settings = OpenAiSettings {
        base_url: base,
        ..OpenAiSettings::default()
    };
    let upstream = Embeddings::new("tei", settings, "static-64", None).unwrap();
    let remote = Arc::new(Embedder::remote(upstream, Duration::from_secs(10)));
    let r = rig_over(vec![dep("a", 1)], |b| {
        b.semantic_cache(
            policy(Mode::Static {
                threshold: 0.9,
                audit: 0.0,
            }),
            1.0,
            remote,
        )
    });
    *r.a.answer.lock() = Some(Bytes::from_static(ANSWER.as_bytes()));
    for _ in 0..3 {
        r.a.push(0, true);
    }
    let first = send(
        &r.router,
        &[],
        "e-0",
        &ask("chat", "How do I reset my password?"),
    )
    .await;
    assert_eq!(first.status, 200);
    let got = send(
        &r.router,
        &[],
        "e-1",
        &ask("chat", "how do i reset my password"),
    )
    .await;
    assert_eq!(got.status, 200);
    assert!(
        matches!(
            lookup(&r, "e-1"),
            Some(SemanticLookup::Hit { entry: 1, .. })
        ),
        "{:?}",
        lookup(&r, "e-1")
    );
    assert_eq!(r.a.calls(), 1, "served by meaning");
    // The hit's saving is counted at what its answer cost (nothing here: no price is set).
    let metrics = scrape(&r.router).await;
    assert!(
        metrics.contains(
            r#"sluice_semantic_cache_micros_total{group="chat",result="saved",why=""} 0"#
        ),
        "{metrics}"
    );
    let page = get_json(&r.router, "/admin/cache").await;
    assert_eq!(page["semantic"]["embedder"], "openai:tei/static-64");

    // The embeddings server goes away: the request goes upstream, uncached, and it is
    // counted.
    stop.send(()).unwrap();
    server.await.unwrap();
    let got = send(
        &r.router,
        &[],
        "e-2",
        &ask("chat", "how do i reset my password"),
    )
    .await;
    assert_eq!(got.status, 200);
    assert_eq!(
        lookup(&r, "e-2"),
        Some(SemanticLookup::Ineligible("embedder_failed"))
    );
    assert_eq!(r.a.calls(), 2);
    let metrics = scrape(&r.router).await;
    assert!(
        metrics.contains(r#"sluice_semantic_cache_lookups_total{group="chat",result="ineligible",why="embedder_failed"} 1"#),
        "{metrics}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_model_group_has_its_own_threshold_or_no_semantic_cache() {
    let r = rig_over(vec![dep("a", 1)], |b| {
        b.model("strict", vec![dep("a", 1)])
            .model("exempt", vec![dep("a", 1)])
            .semantic_cache_with(
                policy(Mode::Static {
                    threshold: 0.9,
                    audit: 0.0,
                }),
                1.0,
                embedder(),
                vec![
                    (
                        "strict".into(),
                        Some(Mode::Static {
                            threshold: 0.9999,
                            audit: 0.0,
                        }),
                    ),
                    ("exempt".into(), None),
                ],
            )
    });
    *r.a.answer.lock() = Some(Bytes::from_static(ANSWER.as_bytes()));
    for group in ["chat", "strict", "exempt"] {
        let q = ask(group, "How do I reset my password?");
        send(&r.router, &[], &format!("{group}-0"), &q).await;
        let q = ask(group, "how do i reset my password");
        send(&r.router, &[], &format!("{group}-1"), &q).await;
    }
    assert!(matches!(
        lookup(&r, "chat-1"),
        Some(SemanticLookup::Hit { .. })
    ));
    match lookup(&r, "strict-1") {
        Some(SemanticLookup::Miss { best: Some(s), .. }) => assert!(s > 0.9 && s < 0.9999),
        other => panic!("{other:?}"),
    }
    assert_eq!(lookup(&r, "exempt-0"), None, "never looked up");
    assert_eq!(lookup(&r, "exempt-1"), None);
    assert_eq!(
        r.a.calls(),
        5,
        "only chat's paraphrase was served from the cache"
    );
    let page = get_json(&r.router, "/admin/cache").await;
    assert_eq!(
        page["semantic"]["entries"], 3,
        "chat's, strict's two; none of exempt's"
    );
}

// On the real clock: the SQLite pool's timeouts would fire at once in paused time.
#[tokio::test]
async fn audited_hits_are_verified_billed_and_give_the_route_an_error_estimate() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger, store) = ledgered(&dir.path().join("ledger.db")).await;
    let r = rig_over(vec![dep("a", 1)], |b| {
        b.price("m", PRICE)
            .ledger(ledger, store.clone())
            .semantic_cache(
                policy(Mode::Static {
                    threshold: 0.9,
                    audit: 1.0,
                }),
                1.0,
                embedder(),
            )
    });
    *r.a.answer.lock() = Some(Bytes::from_static(ANSWER.as_bytes()));
    *r.a.usage.lock() = Some(USAGE);
    for _ in 0..3 {
        r.a.push(0, true);
    }
    let acme = [("x-sluice-tenant", "acme")];
    send(
        &r.router,
        &acme,
        "a-0",
        &ask("chat", "How do I reset my password?"),
    )
    .await;
    // Every would-be hit is audited: asked upstream, its answer served and compared.
    send(
        &r.router,
        &acme,
        "a-1",
        &ask("chat", "how do i reset my password"),
    )
    .await;
    assert!(matches!(
        lookup(&r, "a-1"),
        Some(SemanticLookup::Verify { entry: 1, .. })
    ));
    assert_eq!(r.record("a-1").semantic_verified, Some(true));
    let metrics = scrape(&r.router).await;
    assert!(
        metrics.contains(r#"sluice_semantic_cache_error_estimate{group="chat"} 0.0"#),
        "{metrics}"
    );
    // The upstream now says something else: a measured error; the estimate moves to 1 in 2.
    let other = ANSWER.replace("Use the reset link.", "Bananas are rich in potassium.");
    *r.a.answer.lock() = Some(Bytes::from(other));
    send(
        &r.router,
        &acme,
        "a-2",
        &ask("chat", "how do I reset my password"),
    )
    .await;
    assert_eq!(r.record("a-2").semantic_verified, Some(false));
    let metrics = scrape(&r.router).await;
    let estimate: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix(r#"sluice_semantic_cache_error_estimate{group="chat"} "#))
        .unwrap()
        .parse()
        .unwrap();
    assert!((estimate - 0.5).abs() < 0.01, "{estimate}");
    let cache = get_json(&r.router, "/admin/cache").await;
    assert_eq!(cache["semantic"]["error_estimates"][0]["group"], "chat");
    let recent = cache["semantic"]["error_estimates"][0]["recent_verifications"]
        .as_f64()
        .unwrap();
    assert!(
        (recent - 2.0).abs() < 0.01,
        "two, decayed by recency: {recent}"
    );

    // Billed as the calls they are, and counted apart from hits.
    let v = get_json(&r.router, "/admin/usage?group_by=tenant").await;
    let row = &v["rows"][0];
    let cost = PRICE.cost(&USAGE).0;
    assert_eq!(row["requests"], 3, "{v}");
    assert_eq!(row["verifications"], 2);
    assert_eq!(row["verification_cost_micros"], 2 * cost);
    assert_eq!(row["cost_micros"], 3 * cost);
    assert_eq!(row["cache_hits"], 0);
    // Nothing served by meaning yet: the cache is two verifications in the red.
    let sem = &row["semantic"];
    assert_eq!(sem["hits"], 0, "{v}");
    assert_eq!(sem["saved_micros"], 0);
    assert_eq!(sem["verifications"], 2);
    assert_eq!(sem["net_saved_micros"], -2 * i64::try_from(cost).unwrap());
    let metrics = scrape(&r.router).await;
    assert!(
        metrics.contains(&format!(
            r#"sluice_semantic_cache_micros_total{{group="chat",result="verification",why=""}} {}"#,
            2 * cost
        )),
        "{metrics}"
    );
}
