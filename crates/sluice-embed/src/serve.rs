//! An OpenAI-compatible `POST /v1/embeddings` endpoint over an in-process embedder: one
//! gateway's model served to others, and the stand-in for an embeddings server (TEI, vLLM)
//! in tests and benchmarks of the upstream embedder.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::Embedder;

/// The router: `POST /v1/embeddings` with `input` a string or a list of strings.
pub fn router(embedder: Arc<Embedder>) -> axum::Router {
    axum::Router::new()
        .route("/v1/embeddings", axum::routing::post(embeddings))
        .with_state(embedder)
}

fn bad(message: String, param: &str) -> Response {
    let body = json!({"error": {"message": message, "type": "invalid_request_error", "param": param, "code": null}});
    (StatusCode::BAD_REQUEST, Json(body)).into_response()
}

async fn embeddings(State(e): State<Arc<Embedder>>, Json(body): Json<Value>) -> Response {
    let texts: Vec<&str> = match &body["input"] {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => match items.iter().map(Value::as_str).collect::<Option<_>>() {
            Some(t) => t,
            None => return bad("input: every item must be a string".into(), "input"),
        },
        _ => return bad("input: a string or a list of strings".into(), "input"),
    };
    let mut data = Vec::with_capacity(texts.len());
    for (i, t) in texts.iter().enumerate() {
        let vector = match e.embed_local(t) {
            Some(Ok(v)) => v,
            Some(Err(err)) => return bad(format!("input[{i}]: {err}"), "input"),
            None => return bad(format!("{} does not embed in process", e.name()), "model"),
        };
        data.push(json!({"object": "embedding", "index": i, "embedding": vector}));
    }
    Json(json!({"object": "list", "data": data, "model": body["model"]})).into_response()
}
