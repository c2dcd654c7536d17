//! Every failure answers in OpenAI's error shape with the right status.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use crate::support::{body, serve_toml, sse_data, start, start_with};

/// Serves a gateway from `text` and asks its model group `m` once: the error it answers.
async fn error_from_toml(text: &str) -> (u16, Value) {
    let url = serve_toml(text).await;
    let resp = reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .json(&body("m", false))
        .send()
        .await
        .unwrap();
    error_of(resp).await
}

async fn error_of(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.unwrap();
    (status, v)
}

async fn post_raw(url: &str, body: impl Into<reqwest::Body>) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn malformed_json_is_400_naming_the_position() {
    let gw = start().await;
    let (status, v) =
        error_of(post_raw(&gw.url, "{\"model\": \"ok\",\n \"messages\": [}").await).await;
    assert_eq!(status, 400);
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert_eq!(v["error"]["code"], "invalid_json");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("line 2 column"),
        "{v}"
    );
}

#[tokio::test]
async fn a_missing_field_is_400_naming_it() {
    let gw = start().await;
    let (status, v) = error_of(post_raw(&gw.url, r#"{"model":"ok"}"#).await).await;
    assert_eq!(status, 400);
    assert_eq!(v["error"]["param"], "messages");
}

#[tokio::test]
async fn unknown_model_is_404() {
    let gw = start().await;
    let (status, v) = error_of(gw.chat(body("gpt-17", false)).await).await;
    assert_eq!(status, 404);
    assert_eq!(v["error"]["code"], "model_not_found");
    assert_eq!(v["error"]["param"], "model");
    assert!(
        gw.upstream.fake.bodies.lock().is_empty(),
        "nothing was sent upstream"
    );
}

#[tokio::test]
async fn oversized_bodies_are_413_with_or_without_content_length() {
    let gw = start_with("max_body_bytes = 1000").await;
    let big = format!(
        r#"{{"model":"ok","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(2000)
    );
    let (status, v) = error_of(post_raw(&gw.url, big.clone()).await).await;
    assert_eq!(status, 413);
    assert_eq!(v["error"]["code"], "payload_too_large");
    // Chunked, so the limit is found while reading rather than from the header.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        big.as_bytes().chunks(100).map(|c| Ok(c.to_vec())).collect();
    let streamed = reqwest::Body::wrap_stream(futures::stream::iter(chunks));
    let (status, _) = error_of(post_raw(&gw.url, streamed).await).await;
    assert_eq!(status, 413);
    // Just under the limit passes.
    let (status, _) = error_of(gw.chat(body("ok", false)).await).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn an_upstream_4xx_passes_through_with_its_body() {
    let gw = start().await;
    let resp = gw.chat(body("reject", false)).await;
    assert_eq!(resp.status(), 422);
    assert_eq!(resp.headers()["x-sluice-upstream"], "fake-reject");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["message"], "temperature too high");
    assert_eq!(v["error"]["param"], "temperature");
}

#[tokio::test]
async fn an_upstream_429_passes_through_with_retry_after() {
    let gw = start().await;
    let resp = gw.chat(body("limited", false)).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "7");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["code"], "rate_limit_exceeded");
}

#[tokio::test]
async fn an_upstream_5xx_is_502() {
    let gw = start().await;
    let (status, v) = error_of(gw.chat(body("broken", false)).await).await;
    assert_eq!(status, 502);
    assert_eq!(v["error"]["code"], "upstream_server_error");
    assert!(v["error"]["message"].as_str().unwrap().contains("500"));
}

#[tokio::test]
async fn a_refused_connection_is_502() {
    // Bind then drop a listener: its port now refuses connections.
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let text = format!(
        "[providers.dead]\nkind = \"openai\"\nbase_url = \"http://{dead}/v1\"\n[models.m]\ndeployments = [{{ provider = \"dead\", model = \"x\" }}]\n"
    );
    let (status, v) = error_from_toml(&text).await;
    assert_eq!(status, 502);
    assert_eq!(v["error"]["code"], "upstream_connect_error");
}

#[tokio::test]
async fn first_byte_timeout_is_504() {
    let gw = start().await;
    let (status, v) = error_of(gw.chat(body("hang", false)).await).await;
    assert_eq!(status, 504);
    assert_eq!(v["error"]["code"], "upstream_timeout");
    let (status, _) = error_of(gw.chat(body("hang", true)).await).await;
    assert_eq!(status, 504, "a stream that never starts is a plain 504");
}

#[tokio::test]
async fn idle_timeout_in_a_complete_answer_is_504() {
    let gw = start().await;
    let (status, v) = error_of(gw.chat(body("hang-body", false)).await).await;
    assert_eq!(status, 504);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("next chunk"),
        "{v}"
    );
}

#[tokio::test]
async fn idle_timeout_mid_stream_ends_with_an_error_event() {
    let gw = start().await;
    let resp = gw.chat(body("stall", true)).await;
    assert_eq!(resp.status(), 200, "the stream had started");
    let text = resp.text().await.unwrap();
    let data = sse_data(&text);
    assert!(data[0].contains("\"Hel\""));
    let last: Value = serde_json::from_str(data.last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "upstream_timeout", "{text}");
    assert!(
        !text.contains("[DONE]"),
        "a failed stream must not look finished"
    );
}

#[tokio::test]
async fn a_truncated_stream_ends_with_an_error_event() {
    let gw = start().await;
    let text = gw.chat(body("truncate", true)).await.text().await.unwrap();
    let last: Value = serde_json::from_str(sse_data(&text).last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "upstream_connect_error", "{text}");
}

#[tokio::test]
async fn connect_timeout_is_504() {
    // A listener that never accepts, with its accept queue filled: further SYNs are dropped,
    // so connecting hangs until the connect timeout.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut held = Vec::new();
    loop {
        match tokio::time::timeout(
            Duration::from_millis(200),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        {
            Ok(Ok(s)) => held.push(s),
            _ => break,
        }
        assert!(held.len() < 64, "the accept queue never filled");
    }
    let text = format!(
        "[providers.slow]\nkind = \"openai\"\nbase_url = \"http://{addr}/v1\"\nconnect_timeout = \"300ms\"\n[models.m]\ndeployments = [{{ provider = \"slow\", model = \"x\" }}]\n"
    );
    let (status, v) = error_from_toml(&text).await;
    assert_eq!(status, 504, "{v}");
    assert_eq!(v["error"]["code"], "upstream_timeout");
    drop(listener);
}

#[tokio::test]
async fn no_input_makes_the_gateway_panic() {
    let gw = start().await;
    let nasty: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"null".to_vec(),
        b"[]".to_vec(),
        b"\"model\"".to_vec(),
        vec![0xff, 0xfe, 0x00, 0x7b],
        b"{\"model\":{\"$ref\":1},\"messages\":[]}".to_vec(),
        b"{\"model\":\"ok\",\"messages\":[{\"role\":\"user\",\"content\":\"\\ud800\"}]}".to_vec(),
        format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes(),
        b"{\"model\":\"ok\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true,\"stream_options\":[]}".to_vec(),
        b"{\"model\":\"ok\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1e999}".to_vec(),
    ];
    for b in nasty {
        let resp = post_raw(&gw.url, b.clone()).await;
        let status = resp.status().as_u16();
        assert!(
            (400..500).contains(&status),
            "{status} for {:?}",
            String::from_utf8_lossy(&b[..b.len().min(60)])
        );
        let v: Value = resp.json().await.unwrap();
        assert!(v["error"]["message"].is_string());
    }
    // The server is still serving.
    assert_eq!(gw.chat(body("ok", false)).await.status(), 200);
}

#[tokio::test]
async fn the_client_leaving_mid_stream_is_recorded_as_499() {
    let gw = start().await;
    let resp = gw.chat(body("gated", true)).await;
    let mut chunks = resp.bytes_stream();
    let _ = chunks.next().await.unwrap().unwrap();
    drop(chunks);
    let rec = gw.next_record().await;
    assert_eq!(rec.status, 499);
    // The stream was read on for its usage after the client left; the upstream paused past
    // its idle timeout, so the call is billed by an estimate of what it produced.
    assert_eq!(
        rec.attempts[0].outcome,
        sluice_core::AttemptOutcome::Failed(sluice_core::ErrorKind::UpstreamTimeout)
    );
    assert!(rec.usage_estimated);
    // And the upstream's stream was let go: its reader closed while it paused.
    tokio::time::timeout(
        Duration::from_secs(10),
        gw.upstream.fake.gated_left.notified(),
    )
    .await
    .expect("the upstream never saw the gateway go");
}

#[tokio::test]
async fn failures_are_recorded_with_their_kind() {
    let gw = start().await;
    let _ = gw.chat(body("broken", false)).await.text().await;
    let rec = gw.next_record().await;
    assert_eq!(rec.status, 502);
    assert_eq!(rec.error, Some(sluice_core::ErrorKind::UpstreamServerError));
    assert_eq!(
        rec.attempts[0].outcome,
        sluice_core::AttemptOutcome::Failed(sluice_core::ErrorKind::UpstreamServerError)
    );
}
