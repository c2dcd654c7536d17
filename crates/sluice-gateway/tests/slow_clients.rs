//! Clients too slow for the gateway, on a real socket: one that stops reading a streamed
//! answer is cut at the stall timeout (the connection closed, the upstream's answer read on
//! to its byte bound and billed as estimated, the call recorded as the client's leaving);
//! one that stops sending its body gets 408 in its API's shape at the stall timeout.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::net::SocketAddr;
use std::time::Duration;

use sluice_core::CallRecord;
use sluice_gateway::Server;
use sluice_gateway::server::ConnLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;

use crate::scripted::{End, PLAIN_USAGE, PRICE, Rig, rig};

const STALL: Duration = Duration::from_secs(1);

/// Serves `r`'s gateway on a socket, writes to its clients waiting at most `STALL`.
async fn serve(r: &Rig) -> SocketAddr {
    let server = Server::bind(
        r.app.clone(),
        "127.0.0.1:0".parse().unwrap(),
        Duration::from_secs(1),
    )
    .await
    .unwrap()
    .limits(ConnLimits {
        stall_timeout: STALL,
        ..ConnLimits::default()
    });
    let addr = server.local_addr().unwrap();
    tokio::spawn(server.run(std::future::pending()));
    addr
}

/// The call record of `id`, once written (within `within`).
async fn record_of(r: &Rig, id: &str, within: Duration) -> CallRecord {
    let until = Instant::now() + within;
    loop {
        if let Some(rec) = r
            .records
            .lock()
            .iter()
            .find(|c| c.request_id.as_str() == id)
        {
            return rec.clone();
        }
        assert!(Instant::now() < until, "no call record for {id}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn post(path: &str, id: &str, body: &str, declared: usize) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nhost: sluice\r\ncontent-type: application/json\r\n\
         x-request-id: {id}\r\ncontent-length: {declared}\r\n\r\n{body}"
    )
    .into_bytes()
}

#[tokio::test]
async fn a_client_that_stops_reading_a_stream_is_cut_and_the_upstream_let_go() {
    let r = rig(false, |b| b.price("m", PRICE));
    *r.a.usage.lock() = Some(PLAIN_USAGE);
    // Far more than the socket buffers and the read-on bound together: some 100 MB.
    r.a.push_end(0, End::Flood(5_000_000));
    let addr = serve(&r).await;
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut conn = socket.connect(addr).await.unwrap();
    let body = r#"{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    conn.write_all(&post(
        "/v1/chat/completions",
        "stops-reading",
        body,
        body.len(),
    ))
    .await
    .unwrap();
    let mut head = [0u8; 1024];
    let n = conn.read(&mut head).await.unwrap();
    assert!(head[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &head[..n]);
    // Then nothing is read: the gateway's writes wait, and at the stall timeout it closes.
    let stopped = Instant::now();
    let rec = record_of(&r, "stops-reading", Duration::from_secs(60)).await;
    assert_eq!(rec.status, 499, "recorded as the client's leaving");
    assert!(
        rec.usage_estimated,
        "the upstream was read on only to the byte bound, then let go: {:?}",
        rec.usage
    );
    assert!(rec.cost_micros.unwrap() > 0, "billed for what it produced");
    assert!(stopped.elapsed() >= STALL);
    // What was in flight drains, then the connection is found closed.
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    });
    closed.await.expect("the connection was closed");
}

/// Sends a head declaring a 200-byte body and 10 bytes of it, then waits for the answer.
async fn stalled_body(addr: SocketAddr, path: &str, id: &str) -> (String, Duration) {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(&post(path, id, r#"{"model":"#, 200))
        .await
        .unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut got))
        .await
        .expect("the gateway answered and closed")
        .unwrap();
    (String::from_utf8(got).unwrap(), started.elapsed())
}

#[tokio::test]
async fn a_client_that_stops_sending_its_body_gets_408_in_its_apis_shape() {
    let r = rig(false, |b| b.body_stall(STALL));
    let addr = serve(&r).await;
    let (chat, waited) = stalled_body(addr, "/v1/chat/completions", "stops-sending").await;
    assert!(chat.starts_with("HTTP/1.1 408"), "{chat}");
    assert!(chat.contains(r#""code":"request_timeout""#), "{chat}");
    assert!(chat.contains("stall_timeout"), "{chat}");
    assert!(waited >= STALL, "{waited:?}");
    let (messages, _) = stalled_body(addr, "/v1/messages", "stops-sending-2").await;
    assert!(messages.starts_with("HTTP/1.1 408"), "{messages}");
    assert!(
        messages.contains(r#""type":"error""#) && messages.contains("timeout_error"),
        "{messages}"
    );
    assert_eq!(r.a.calls(), 0, "nothing went upstream");
}
