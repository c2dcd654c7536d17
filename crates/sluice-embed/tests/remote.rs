//! The embeddings-upstream backend against a real HTTP server on a loopback port.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use axum::Json;
use axum::routing::post;
use serde_json::{Value, json};
use sluice_embed::{EmbedError, Embedder};
use sluice_providers::OpenAiSettings;
use sluice_providers::embeddings::Embeddings;

/// Serves `router` on a loopback port; its base URL.
async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{at}/v1")
}

fn upstream(base: String) -> Embeddings {
    let settings = OpenAiSettings {
        base_url: base,
        api_key: Some("sk-test".into()),
        ..OpenAiSettings::default()
    };
    Embeddings::new("tei", settings, "bge-small", Some(3)).unwrap()
}

/// The server answers each input's vector as (its length, its number of spaces, 1), listed
/// in reverse order with their indexes.
#[tokio::test]
async fn texts_come_back_as_unit_vectors_in_their_order() {
    let router = axum::Router::new().route(
        "/v1/embeddings",
        post(
            |headers: axum::http::HeaderMap, Json(body): Json<Value>| async move {
                assert_eq!(headers["authorization"], "Bearer sk-test");
                assert_eq!(
                    (&body["model"], &body["dimensions"]),
                    (&json!("bge-small"), &json!(3))
                );
                let inputs = body["input"].as_array().unwrap().clone();
                let data: Vec<Value> = inputs
                    .iter()
                    .enumerate()
                    .rev()
                    .map(|(i, t)| {
                        let t = t.as_str().unwrap();
                        let spaces = t.matches(' ').count();
                        json!({"index": i, "embedding": [t.len() as f32, spaces as f32, 1.0]})
                    })
                    .collect();
                Json(json!({"object": "list", "data": data}))
            },
        ),
    );
    let e = Embedder::remote(upstream(serve(router).await), Duration::from_secs(10));
    assert!(!e.is_local() && e.dim().is_none() && e.embed_local("x").is_none());
    assert_eq!(e.name(), "openai:tei/bge-small");
    let v = e.embed(&["abc", "a b"], "req-1").await.unwrap();
    assert_eq!(v.len(), 2);
    let n = (9.0f32 + 1.0).sqrt();
    assert!((v[0][0] - 3.0 / n).abs() < 1e-6 && v[0][1] == 0.0, "{v:?}");
    let n = (9.0f32 + 1.0 + 1.0).sqrt();
    assert!((v[1][1] - 1.0 / n).abs() < 1e-6, "{v:?}");
}

#[tokio::test]
async fn a_failing_upstream_is_an_upstream_error() {
    let router = axum::Router::new().route(
        "/v1/embeddings",
        post(|| async { (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "down") }),
    );
    let e = Embedder::remote(upstream(serve(router).await), Duration::from_secs(10));
    let err = e.embed(&["abc"], "req-2").await.unwrap_err();
    assert!(
        matches!(err, EmbedError::Upstream(ref m) if m.contains("500")),
        "{err}"
    );
    assert_eq!(err.label(), "embedder_failed");
}

#[tokio::test(start_paused = true)]
async fn an_upstream_that_does_not_answer_is_given_up_on_after_the_timeout() {
    let router =
        axum::Router::new().route("/v1/embeddings", post(std::future::pending::<&'static str>));
    let e = Embedder::remote(upstream(serve(router).await), Duration::from_millis(300));
    let started = tokio::time::Instant::now();
    let err = e.embed(&["abc"], "req-3").await.unwrap_err();
    assert!(matches!(err, EmbedError::Timeout(d) if d == Duration::from_millis(300)));
    assert_eq!(started.elapsed(), Duration::from_millis(300));
}
