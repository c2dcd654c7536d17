//! Hostile upstreams: each gets the right error for the client, a record of the call, and
//! no connection or task left behind.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::support::{body, sse_data, start};

#[tokio::test]
async fn a_200_with_an_error_body_is_the_upstreams_failure() {
    let gw = start().await;
    let resp = gw.chat(body("error-200", false)).await;
    assert_eq!(resp.status(), 502);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["code"], "upstream_server_error", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("while processing"),
        "{v}"
    );
    let rec = gw.next_record().await;
    assert_eq!(rec.error, Some(sluice_core::ErrorKind::UpstreamServerError));
}

#[tokio::test]
async fn a_head_past_what_sluice_reads_is_a_502() {
    let gw = start().await;
    let resp = gw.chat(body("huge-headers", false)).await;
    assert_eq!(resp.status(), 502);
    let v: Value = resp.json().await.unwrap();
    assert!(
        v["error"]["code"].as_str().unwrap().starts_with("upstream"),
        "{v}"
    );
    assert!(gw.next_record().await.error.is_some());
}

#[tokio::test]
async fn a_gzip_bomb_is_never_inflated() {
    let gw = start().await;
    let resp = gw.chat(body("gzip", false)).await;
    // sluice asks for no encoding and inflates none: the bytes are not JSON.
    assert_eq!(resp.status(), 502);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["code"], "upstream_protocol_error", "{v}");
}

#[tokio::test]
async fn a_trickling_stream_is_cut_at_the_deadline_and_its_upstream_let_go() {
    let gw = start().await;
    let start = Instant::now();
    let resp = gw
        .client
        .post(format!("{}/v1/chat/completions", gw.url))
        .header("x-sluice-timeout-ms", "1500")
        .json(&body("trickle", true))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(5), "{took:?}");
    let last: Value = serde_json::from_str(sse_data(&text).last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "deadline_exceeded", "{text}");
    // The upstream sees its reader go.
    tokio::time::timeout(
        Duration::from_secs(5),
        gw.upstream.fake.gated_left.notified(),
    )
    .await
    .expect("the upstream's stream was dropped");
    let rec = gw.next_record().await;
    assert_eq!(rec.error, Some(sluice_core::ErrorKind::DeadlineExceeded));
}

#[tokio::test]
async fn an_sse_line_that_never_ends_is_a_protocol_error() {
    let gw = start().await;
    let text = gw
        .chat(body("endless-line", true))
        .await
        .text()
        .await
        .unwrap();
    let last: Value = serde_json::from_str(sse_data(&text).last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "upstream_protocol_error", "{text}");
    assert!(
        last["error"]["message"]
            .as_str()
            .unwrap()
            .contains("SSE line"),
        "{last}"
    );
}
