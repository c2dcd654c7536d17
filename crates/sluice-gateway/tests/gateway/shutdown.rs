//! Graceful shutdown: keep the port open answering 503 while in-flight requests finish
//! within the grace period, then close.

use futures::StreamExt;
use serde_json::Value;
use sluice_gateway::server::Stopped;

use crate::support::{body, sse_data, start, start_with};

#[tokio::test]
async fn while_draining_new_requests_get_503_and_in_flight_streams_finish() {
    let gw = start().await;
    let resp = gw.chat(body("gated", true)).await;
    let mut chunks = resp.bytes_stream();
    let first = chunks.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("Hel"));

    gw.shutdown.trigger();
    // Wait for the drain to begin (event-driven: the flag flips in the shutdown task).
    while !gw.gw.is_draining() {
        tokio::task::yield_now().await;
    }
    // The port stays open while the stream runs: a new connection is answered, readiness
    // says draining, and new work is refused with a 503 a client can act on.
    let fresh = reqwest::Client::new();
    let ready = fresh
        .get(format!("{}/readyz", gw.url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    assert_eq!(ready.json::<Value>().await.unwrap()["status"], "draining");
    let refused = fresh
        .post(format!("{}/v1/chat/completions", gw.url))
        .json(&body("fast", false))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    let v: Value = refused.json().await.unwrap();
    assert_eq!(v["error"]["code"], "shutting_down");
    assert_eq!(gw.next_record().await.status, 503);

    // The in-flight stream still completes; then the server stops and the port closes.
    gw.upstream.fake.gate.add_permits(1);
    let mut rest = String::new();
    while let Some(c) = chunks.next().await {
        rest.push_str(&String::from_utf8_lossy(&c.unwrap()));
    }
    assert_eq!(sse_data(&rest).last().map(String::as_str), Some("[DONE]"));
    assert_eq!(gw.task.await.unwrap().unwrap(), Stopped::Drained);
    assert!(tokio::net::TcpStream::connect(gw.addr).await.is_err());
}

// Real time: with the clock paused, waiting on the socket would let the notice run out at once.
#[tokio::test]
async fn with_a_notice_an_idle_gateway_answers_503_until_the_notice_ends() {
    let gw = start_with("shutdown_notice = \"2s\"").await;
    let began = tokio::time::Instant::now();
    gw.shutdown.trigger();
    while !gw.gw.is_draining() {
        tokio::task::yield_now().await;
    }
    let ready = reqwest::get(format!("{}/readyz", gw.url)).await.unwrap();
    assert_eq!(ready.status(), 503);
    assert_eq!(gw.task.await.unwrap().unwrap(), Stopped::Drained);
    assert!(began.elapsed() >= std::time::Duration::from_secs(2));
}

#[tokio::test]
async fn requests_still_running_after_the_grace_period_are_cut() {
    let gw = start_with("shutdown_grace = \"200ms\"").await;
    let resp = gw.chat(body("gated", true)).await;
    let mut chunks = resp.bytes_stream();
    let _ = chunks.next().await.unwrap().unwrap();
    gw.shutdown.trigger();
    assert_eq!(gw.task.await.unwrap().unwrap(), Stopped::GraceExpired);
}
