//! Graceful shutdown: stop accepting, let in-flight requests finish within the grace period.

use futures::StreamExt;
use sluice_gateway::server::Stopped;

use crate::support::{body, sse_data, start, start_with};

#[tokio::test]
async fn in_flight_streams_finish_and_new_connections_are_refused() {
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
    // New connections are refused once the listener is closed.
    let mut refused = false;
    for _ in 0..1000 {
        if tokio::net::TcpStream::connect(gw.addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(refused, "the listener kept accepting after shutdown began");

    // The in-flight stream still completes.
    gw.upstream.fake.gate.add_permits(1);
    let mut rest = String::new();
    while let Some(c) = chunks.next().await {
        rest.push_str(&String::from_utf8_lossy(&c.unwrap()));
    }
    assert_eq!(sse_data(&rest).last().map(String::as_str), Some("[DONE]"));
    assert_eq!(gw.task.await.unwrap().unwrap(), Stopped::Drained);
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
