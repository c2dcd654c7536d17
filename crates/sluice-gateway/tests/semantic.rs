//! The semantic cache through the gateway, in virtual time, with the default embedding model
//! (`./scripts/test` installs it and names its folder in `SLUICE_EMBEDDER_DIR`): a question
//! that means the same is served without an upstream call, as JSON or replayed as a stream;
//! the guards, tenants, system prompts, sampling settings and `Cache-Control` keep the
//! answers apart that must be; entries expire; `/admin/cache` shows and empties it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use sluice_cache::semantic::{Mode, Policy};
use sluice_core::{CacheLookup, SemanticLookup};

use crate::scripted::{Rig, admin, dep, embedder, post, rig_over, scrape, send};

const ANSWER: &str = r#"{"id":"c-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Use the reset link."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}"#;

fn cached_rig() -> Rig {
    let r = rig_over(vec![dep("a", 1)], |b| {
        b.admin_token("t0k").semantic_cache(
            Policy {
                mode: Mode::Static {
                    threshold: 0.9,
                    audit: 0.0,
                },
                ttl: Duration::from_secs(600),
                max_bytes: 1 << 20,
            },
            1.0,
            embedder(),
        )
    });
    *r.a.answer.lock() = Some(Bytes::from_static(ANSWER.as_bytes()));
    r
}

fn ask(question: &str, extra: &str) -> String {
    json!({"model": "chat", "temperature": 0,
           "messages": [{"role": "system", "content": "Answer briefly."},
                        {"role": "user", "content": question}]})
    .to_string()
    .replacen('{', &format!("{{{extra}"), 1)
}

fn semantic(r: &Rig, id: &str) -> SemanticLookup {
    r.record(id).semantic.unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_question_meaning_the_same_is_served_without_an_upstream_call() {
    let r = cached_rig();
    let first = send(
        &r.router,
        &[],
        "s-0",
        &ask("How do I reset my password?", ""),
    )
    .await;
    assert_eq!((first.status, r.a.calls()), (200, 1));
    assert!(matches!(
        semantic(&r, "s-0"),
        SemanticLookup::Miss { refused: None, .. }
    ));
    let got = send(
        &r.router,
        &[],
        "s-1",
        &ask("how do i reset my password", ""),
    )
    .await;
    assert_eq!(got.status, 200, "{}", got.text);
    assert_eq!(r.a.calls(), 1, "served from the semantic cache");
    let header = got.headers["x-sluice-cache"].to_str().unwrap();
    assert!(
        header.starts_with("semantic; entry=1; similarity=0.9"),
        "{header}"
    );
    assert_eq!(
        got.body["choices"][0]["message"]["content"],
        "Use the reset link."
    );
    let rec = r.record("s-1");
    assert_eq!(rec.cache, Some(CacheLookup::Semantic));
    match rec.semantic {
        Some(SemanticLookup::Hit { entry, similarity }) => {
            assert_eq!(entry, 1);
            assert!(similarity >= 0.9, "{similarity}");
        }
        other => panic!("{other:?}"),
    }
    // Streamed: the same answer replayed as SSE.
    let stream = send(
        &r.router,
        &[],
        "s-2",
        &ask("How do I reset my password", r#""stream":true,"#),
    )
    .await;
    assert_eq!(stream.status, 200);
    assert_eq!(r.a.calls(), 1);
    assert!(
        stream.text.contains("Use the reset link.") && stream.text.contains("data: [DONE]"),
        "{}",
        stream.text
    );
    let page = scrape(&r.router).await;
    assert!(
        page.contains(r#"sluice_semantic_cache_lookups_total{group="chat",result="hit",why=""} 2"#),
        "{page}"
    );
}

#[tokio::test(start_paused = true)]
async fn close_questions_about_other_things_go_upstream() {
    let r = cached_rig();
    send(
        &r.router,
        &[],
        "g-0",
        &ask("What is the capital of France?", ""),
    )
    .await;
    // Nearly the same vector (0.97 with this model), another entity.
    send(
        &r.router,
        &[],
        "g-1",
        &ask("What is the capital of Germany?", ""),
    )
    .await;
    assert_eq!(r.a.calls(), 2);
    assert_eq!(
        semantic(&r, "g-1"),
        SemanticLookup::Miss {
            refused: Some("entity"),
            best: None
        }
    );
    send(&r.router, &[], "n-0", &ask("Where is order 48213?", "")).await;
    send(&r.router, &[], "n-1", &ask("Where is order 48231?", "")).await;
    assert_eq!(r.a.calls(), 4);
    assert!(matches!(
        semantic(&r, "n-1"),
        SemanticLookup::Miss {
            refused: Some("number"),
            ..
        }
    ));
    let page = scrape(&r.router).await;
    assert!(
        page.contains(
            r#"sluice_semantic_cache_lookups_total{group="chat",result="refused",why="entity"} 1"#
        ),
        "{page}"
    );
}

#[tokio::test(start_paused = true)]
async fn tenants_prompts_sampling_and_cache_control_keep_answers_apart() {
    let r = cached_rig();
    let q = "How do I reset my password?";
    send(
        &r.router,
        &[("x-sluice-tenant", "acme")],
        "i-0",
        &ask(q, ""),
    )
    .await;
    assert_eq!(r.a.calls(), 1);
    // Another tenant never sees it.
    send(
        &r.router,
        &[("x-sluice-tenant", "rival")],
        "i-1",
        &ask(q, ""),
    )
    .await;
    assert_eq!(r.a.calls(), 2);
    // Another system prompt or tool list is another partition.
    let other_prompt = ask(q, "").replace("Answer briefly.", "Answer at length.");
    send(
        &r.router,
        &[("x-sluice-tenant", "acme")],
        "i-2",
        &other_prompt,
    )
    .await;
    assert_eq!(r.a.calls(), 3);
    let tools = ask(
        q,
        r#""tools":[{"type":"function","function":{"name":"lookup","parameters":{}}}],"#,
    );
    send(&r.router, &[("x-sluice-tenant", "acme")], "i-2t", &tools).await;
    assert_eq!(r.a.calls(), 4, "another tool list");
    // Other sampling settings, even below the ceiling, are another partition.
    let warmer = ask(q, "").replace(r#""temperature":0"#, r#""temperature":0.3"#);
    send(&r.router, &[("x-sluice-tenant", "acme")], "i-2s", &warmer).await;
    let top_p = ask(q, r#""top_p":0.5,"#);
    send(&r.router, &[("x-sluice-tenant", "acme")], "i-2p", &top_p).await;
    assert_eq!(r.a.calls(), 6, "other sampling settings");
    for id in ["i-2t", "i-2s", "i-2p"] {
        assert!(
            matches!(semantic(&r, id), SemanticLookup::Miss { best: None, .. }),
            "{id}: nothing in its partition"
        );
    }
    // Too hot a temperature is not served by meaning.
    let hot = ask(q, "").replace(r#""temperature":0"#, r#""temperature":1.5"#);
    send(&r.router, &[("x-sluice-tenant", "acme")], "i-3", &hot).await;
    assert_eq!(r.a.calls(), 7);
    assert_eq!(
        semantic(&r, "i-3"),
        SemanticLookup::Ineligible("temperature")
    );
    // no-store: neither read nor written; no-cache: asked upstream, and stored.
    let acme = ("x-sluice-tenant", "acme");
    send(
        &r.router,
        &[acme, ("cache-control", "no-store")],
        "i-4",
        &ask(q, ""),
    )
    .await;
    assert_eq!(semantic(&r, "i-4"), SemanticLookup::Ineligible("no-store"));
    send(
        &r.router,
        &[acme, ("cache-control", "no-cache")],
        "i-5",
        &ask(q, ""),
    )
    .await;
    assert_eq!(r.a.calls(), 9);
    // The same tenant, prompt and settings: served.
    send(
        &r.router,
        &[acme],
        "i-6",
        &ask("how do i reset my password", ""),
    )
    .await;
    assert_eq!(r.a.calls(), 9);
}

#[tokio::test(start_paused = true)]
async fn entries_expire_and_the_admin_api_shows_and_empties_them() {
    let r = cached_rig();
    send(
        &r.router,
        &[],
        "e-0",
        &ask("How do I reset my password?", ""),
    )
    .await;
    let (status, v) = admin(&r.router, "GET", "/admin/cache", Some("t0k"), Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(v["semantic"]["entries"], 1);
    assert!(
        v["semantic"]["embedder"]
            .as_str()
            .unwrap()
            .starts_with("static:")
    );
    tokio::time::advance(Duration::from_secs(601)).await;
    send(
        &r.router,
        &[],
        "e-1",
        &ask("how do i reset my password", ""),
    )
    .await;
    assert_eq!(r.a.calls(), 2, "expired");
    let (status, v) = admin(
        &r.router,
        "DELETE",
        "/admin/cache",
        Some("t0k"),
        Value::Null,
    )
    .await;
    // The expired one was swept out when the fresh answer was stored.
    assert_eq!((status, &v["purged_semantic"]), (200, &json!(1)));
    send(
        &r.router,
        &[],
        "e-2",
        &ask("how do i reset my password", ""),
    )
    .await;
    assert_eq!(r.a.calls(), 3, "emptied");
}

/// A configuration with `semantic` as its `[cache.semantic]` section.
fn config(semantic: &str) -> sluice_config::gateway::GatewayConfig {
    let text = format!(
        "[cache.semantic]\n{semantic}\n[providers.up]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n[models.chat]\ndeployments = [{{ provider = \"up\", model = \"m\" }}]\n"
    );
    sluice_config::gateway::load(&text, &std::collections::BTreeMap::new(), &[]).unwrap()
}

#[test]
fn a_missing_model_stops_the_gateway_naming_the_folder_and_the_install_command() {
    let c = config("enabled = true\nmodel = \"no/such/model\"");
    let env = std::collections::BTreeMap::new();
    let base = std::path::Path::new("/etc/sluice");
    let err = sluice_gateway::GatewayBuilder::new()
        .semantic_from_config(&c, &env, base)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("/etc/sluice/no/such/model holds no model")
            && err.contains("scripts/install-embedder --onnx /etc/sluice/no/such/model"),
        "{err}"
    );
    // Off, nothing is loaded.
    let off = config("enabled = false\nmodel = \"no/such/model\"");
    assert!(
        sluice_gateway::GatewayBuilder::new()
            .semantic_from_config(&off, &env, base)
            .is_ok()
    );
    // An embeddings upstream needs no model folder.
    let remote = config(
        "enabled = true\nmodel = \"no/such/model\"\nembeddings = { provider = \"up\", model = \"bge\" }",
    );
    assert!(
        sluice_gateway::GatewayBuilder::new()
            .semantic_from_config(&remote, &env, base)
            .is_ok()
    );
}

fn verified_rig() -> Rig {
    let r = rig_over(vec![dep("a", 1)], |b| {
        b.admin_token("t0k").semantic_cache(
            Policy {
                mode: Mode::Verified {
                    delta: 0.05,
                    floor: 0.5,
                    budget: 1.0,
                },
                ttl: Duration::from_secs(600),
                max_bytes: 1 << 20,
            },
            1.0,
            embedder(),
        )
    });
    *r.a.answer.lock() = Some(Bytes::from_static(ANSWER.as_bytes()));
    r
}

#[tokio::test(start_paused = true)]
async fn the_verified_mode_checks_would_be_hits_until_the_entry_has_learnt() {
    let r = verified_rig();
    send(
        &r.router,
        &[],
        "v-0",
        &ask("How do I reset my password?", ""),
    )
    .await;
    let mut hits = 0;
    for i in 1..=30 {
        let id = format!("v-{i}");
        let got = send(&r.router, &[], &id, &ask("how do i reset my password", "")).await;
        assert_eq!(got.status, 200);
        match semantic(&r, &id) {
            SemanticLookup::Verify { entry, .. } => {
                assert_eq!(entry, 1);
                assert_eq!(
                    r.record(&id).semantic_verified,
                    Some(true),
                    "the answers agree"
                );
            }
            SemanticLookup::Hit { .. } => hits += 1,
            other => panic!("{other:?}"),
        }
    }
    let verified = r.a.calls() - 1;
    assert!(
        verified >= 4,
        "an entry is checked before it is trusted: {verified}"
    );
    assert!(hits >= 20, "then it serves: {hits} hits, {verified} checks");
    let page = scrape(&r.router).await;
    assert!(
        page.contains(&format!(
            r#"sluice_semantic_cache_verifications_total{{group="chat",result="agreed",why=""}} {verified}"#
        )),
        "{page}"
    );
    // Every answer agreed: far from giving up on certifying, and both places say so.
    assert!(
        page.contains(r#"sluice_semantic_cache_verification_stopped{group="chat"} 0"#),
        "{page}"
    );
    let (status, cache) = admin(&r.router, "GET", "/admin/cache", Some("t0k"), Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(
        cache["semantic"]["verification"],
        json!([{"group": "chat", "stopped": false}])
    );
}

#[tokio::test(start_paused = true)]
async fn an_answer_that_differs_on_verification_is_a_measured_error_and_is_stored_beside() {
    let r = verified_rig();
    send(
        &r.router,
        &[],
        "d-0",
        &ask("How do I reset my password?", ""),
    )
    .await;
    let other = ANSWER.replace("Use the reset link.", "Bananas are rich in potassium.");
    *r.a.answer.lock() = Some(Bytes::from(other));
    send(
        &r.router,
        &[],
        "d-1",
        &ask("how do i reset my password", ""),
    )
    .await;
    assert_eq!(r.record("d-1").semantic_verified, Some(false));
    let page = scrape(&r.router).await;
    assert!(
        page.contains(
            r#"sluice_semantic_cache_verifications_total{group="chat",result="differed",why=""} 1"#
        ),
        "{page}"
    );
    let (_, v) = admin(&r.router, "GET", "/admin/cache", Some("t0k"), Value::Null).await;
    assert_eq!(
        v["semantic"]["entries"], 2,
        "the fresh answer is stored too"
    );
}

#[tokio::test(start_paused = true)]
async fn feedback_on_a_semantic_hit_teaches_its_entry() {
    let r = cached_rig();
    let acme = ("x-sluice-tenant", "acme");
    send(
        &r.router,
        &[acme],
        "f-0",
        &ask("How do I reset my password?", ""),
    )
    .await;
    send(
        &r.router,
        &[acme],
        "f-1",
        &ask("how do i reset my password", ""),
    )
    .await;
    assert_eq!(r.record("f-1").cache, Some(CacheLookup::Semantic));
    let feedback = |tenant: &'static str, score: f64| {
        let router = r.router.clone();
        async move {
            let body = json!({"request_id": "f-1", "score": score});
            post(
                &router,
                "/v1/feedback",
                &[("x-sluice-tenant", tenant)],
                body,
            )
            .await
        }
    };
    let (status, v) = feedback("rival", 0.0).await;
    assert_eq!(status, 403, "{v}");
    let (status, v) = feedback("acme", 0.0).await;
    assert_eq!((status, &v["semantic_entry"]), (200, &json!(1)));
    let page = scrape(&r.router).await;
    assert!(
        page.contains(r#"sluice_semantic_cache_verifications_total{group="chat",result="reported_wrong",why=""} 1"#),
        "{page}"
    );
    // Once per answer.
    let (status, _) = feedback("acme", 0.0).await;
    assert_eq!(status, 404);
}
