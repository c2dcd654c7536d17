//! Client connections held to their limits on a real socket: a client too slow to send its
//! headers, one that sends nothing, or one idle too long between requests, is closed at the
//! header timeout; a head past
//! its size gets 431; a connection past the count is closed as it arrives, and the count
//! frees as connections end.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::net::SocketAddr;
use std::time::Duration;

use sluice_gateway::Server;
use sluice_gateway::server::ConnLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::scripted::rig;

const HEALTH: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: sluice\r\n\r\n";

async fn serve(limits: ConnLimits) -> SocketAddr {
    let r = rig(false, |b| b);
    let server = Server::bind(
        r.app.clone(),
        "127.0.0.1:0".parse().unwrap(),
        Duration::from_secs(1),
    )
    .await
    .unwrap()
    .limits(limits);
    let addr = server.local_addr().unwrap();
    tokio::spawn(async move {
        let _keep = r;
        server.run(std::future::pending()).await
    });
    addr
}

fn limits(max_connections: usize, header_timeout_ms: u64) -> ConnLimits {
    ConnLimits {
        max_connections,
        header_timeout: Duration::from_millis(header_timeout_ms),
        stall_timeout: Duration::from_secs(60),
        max_header_bytes: 16 * 1024,
    }
}

/// Reads until the server closes the connection (within `within`); what it sent.
async fn until_closed(conn: &mut TcpStream, within: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    });
    read.await.expect("the server kept the connection open");
    got
}

#[tokio::test]
async fn a_client_slow_silent_or_idle_is_closed_at_the_header_timeout() {
    let addr = serve(limits(100, 400)).await;
    // Half a request line, then nothing.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nhost: sl")
        .await
        .unwrap();
    let start = Instant::now();
    until_closed(&mut slow, Duration::from_secs(10)).await;
    assert!(
        start.elapsed() >= Duration::from_millis(350),
        "{:?}",
        start.elapsed()
    );

    // A connection that sends nothing at all.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let start = Instant::now();
    until_closed(&mut silent, Duration::from_secs(10)).await;
    assert!(
        start.elapsed() >= Duration::from_millis(350),
        "{:?}",
        start.elapsed()
    );

    // A keep-alive connection answered, then idle.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(HEALTH).await.unwrap();
    let mut buf = [0u8; 1024];
    let n = idle.read(&mut buf).await.unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
    let start = Instant::now();
    until_closed(&mut idle, Duration::from_secs(10)).await;
    assert!(start.elapsed() >= Duration::from_millis(350));
}

#[tokio::test]
async fn a_head_past_its_size_gets_431() {
    let addr = serve(limits(100, 5_000)).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let big = format!(
        "GET /healthz HTTP/1.1\r\nhost: sluice\r\nx-filler: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    // The server may close before the whole head is written.
    let _ = conn.write_all(big.as_bytes()).await;
    let got = until_closed(&mut conn, Duration::from_secs(10)).await;
    assert!(
        got.starts_with(b"HTTP/1.1 431"),
        "{}",
        String::from_utf8_lossy(&got)
    );
}

#[tokio::test]
async fn a_connection_past_the_count_is_closed_and_the_count_frees() {
    let addr = serve(limits(3, 30_000)).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut c = TcpStream::connect(addr).await.unwrap();
        // Answered: the server has accepted it and counts it.
        c.write_all(HEALTH).await.unwrap();
        let mut buf = [0u8; 1024];
        assert!(c.read(&mut buf).await.unwrap() > 0);
        held.push(c);
    }
    let mut extra = TcpStream::connect(addr).await.unwrap();
    let _ = extra.write_all(HEALTH).await;
    let got = until_closed(&mut extra, Duration::from_secs(10)).await;
    assert!(
        got.is_empty(),
        "closed without an answer: {}",
        String::from_utf8_lossy(&got)
    );
    // The held ones still serve.
    held[0].write_all(HEALTH).await.unwrap();
    let mut buf = [0u8; 1024];
    assert!(held[0].read(&mut buf).await.unwrap() > 0);
    // One ends: a new connection is served once the server has seen it go.
    drop(held.pop());
    let mut served = false;
    for _ in 0..100 {
        let mut c = TcpStream::connect(addr).await.unwrap();
        let _ = c.write_all(HEALTH).await;
        let got = until_closed_or_answered(&mut c).await;
        if got.starts_with(b"HTTP/1.1 200") {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(served, "the count never freed");
}

/// The first bytes the server sends, or none when it closes first.
async fn until_closed_or_answered(conn: &mut TcpStream) -> Vec<u8> {
    let mut buf = [0u8; 1024];
    match tokio::time::timeout(Duration::from_secs(10), conn.read(&mut buf)).await {
        Ok(Ok(n)) => buf[..n].to_vec(),
        _ => Vec::new(),
    }
}
