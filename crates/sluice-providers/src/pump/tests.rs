//! A stream read to its `[DONE]` gives its upstream connection back to the pool.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use crate::StreamEvent;
use crate::http::tests::call;
use crate::http::{Endpoint, HttpSettings, send};

/// One chunked SSE answer: a content event and `[DONE]`, then the body's end, sent with
/// the `[DONE]` or `late` after it.
async fn answer(conn: &mut TcpStream, late: Option<Duration>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if conn.read(&mut byte).await.unwrap() == 0 {
            return;
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let length: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut body = vec![0u8; length];
    conn.read_exact(&mut body).await.unwrap();
    let chunk = |data: &str| format!("{:x}\r\n{data}\r\n", data.len());
    let mut out = String::from(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    );
    out.push_str(&chunk(
        "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n",
    ));
    out.push_str(&chunk("data: [DONE]\n\n"));
    conn.write_all(out.as_bytes()).await.unwrap();
    if let Some(late) = late {
        tokio::time::sleep(late).await;
    }
    conn.write_all(b"0\r\n\r\n").await.unwrap();
}

/// Serves `late` answers (one per entry) on however many connections the client opens;
/// counts the connections.
async fn upstream(lates: Vec<Option<Duration>>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let opened = Arc::new(AtomicUsize::new(0));
    let count = opened.clone();
    let lates = Arc::new(tokio::sync::Mutex::new(lates.into_iter()));
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            let lates = lates.clone();
            tokio::spawn(async move {
                loop {
                    let next = lates.lock().await.next();
                    let Some(late) = next else { return };
                    answer(&mut conn, late).await;
                }
            });
        }
    });
    (base, opened)
}

/// Streams one answer through the pump to its end; the frames it gave.
async fn one_stream(settings: &HttpSettings, endpoint: &Endpoint) -> usize {
    let accepted = send(
        "u",
        settings,
        endpoint,
        b"{}".to_vec(),
        &call(),
        |_| None,
        &[],
    )
    .await
    .unwrap();
    let mut events = crate::openai::stream(accepted, Arc::from("u"), false);
    let mut frames = 0;
    while let Some(ev) = events.next().await {
        if let StreamEvent::Frame(_) = ev.unwrap() {
            frames += 1;
        }
    }
    frames
}

#[tokio::test]
async fn streams_that_end_at_done_give_their_connection_back() {
    // The body's end after the [DONE], with it or 50 ms later: read at once, or by a task.
    let lates = vec![
        None,
        Some(Duration::from_millis(50)),
        None,
        None,
        None,
        None,
    ];
    let (base, opened) = upstream(lates).await;
    let settings = HttpSettings::default();
    let endpoint = Endpoint::new(&settings, &base, "chat/completions", &[]).unwrap();
    for i in 0..6 {
        assert_eq!(one_stream(&settings, &endpoint).await, 2, "stream {i}");
        if i == 1 {
            // Time for the late end to arrive and its connection to go back.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // A body dropped before its end closes its connection: six streams would open six. The
    // next request can race the pool's taking back of the one before (hyper then connects
    // anew), so two, not one, is the bound.
    let opened = opened.load(Ordering::SeqCst);
    assert!(opened <= 2, "{opened} connections for six streams");
}

/// A body that sends `chunks` (each at once), then ends, or (unless `ends`) waits forever.
fn body_of(
    chunks: &[&'static str],
    ends: bool,
) -> http_body_util::StreamBody<
    futures::stream::BoxStream<'static, Result<hyper::body::Frame<bytes::Bytes>, std::io::Error>>,
> {
    let frames = futures::stream::iter(
        chunks
            .iter()
            .map(|c| {
                Ok(hyper::body::Frame::data(bytes::Bytes::from_static(
                    c.as_bytes(),
                )))
            })
            .collect::<Vec<_>>(),
    );
    let tail = if ends {
        futures::stream::empty().boxed()
    } else {
        futures::stream::pending().boxed()
    };
    http_body_util::StreamBody::new(frames.chain(tail).boxed())
}

fn frames() -> crate::openai::Frames {
    crate::openai::Frames::new(std::sync::Arc::from("up"), false)
}

#[tokio::test(start_paused = true)]
async fn a_body_that_never_ends_after_done_is_let_go_after_the_grace() {
    let start = Instant::now();
    let body = crate::http::TimedBody::new(
        body_of(&["data: {\"choices\":[]}\n\n", "data: [DONE]\n\n"], false),
        None,
        Duration::from_secs(30),
        "u".into(),
    );
    let mut events = super::pump(body, frames(), Arc::from("u"));
    let mut got = 0;
    while let Some(ev) = events.next().await {
        assert!(ev.is_ok(), "{ev:?}: the answer was complete, no error");
        got += 1;
    }
    assert_eq!(got, 2);
    assert_eq!(
        Instant::now() - start,
        super::RELEASE,
        "not the 30 s idle timeout"
    );
}

#[tokio::test(start_paused = true)]
async fn a_body_that_ends_after_done_ends_the_stream_at_once() {
    let start = Instant::now();
    let body = crate::http::TimedBody::new(
        body_of(&["data: {\"choices\":[]}\n\ndata: [DONE]\n\n"], true),
        None,
        Duration::from_secs(30),
        "u".into(),
    );
    let events: Vec<_> = super::pump(body, frames(), Arc::from("u")).collect().await;
    assert_eq!(events.len(), 2);
    assert_eq!(Instant::now(), start);
}

#[tokio::test(start_paused = true)]
async fn waiting_for_the_end_stops_short_of_the_clients_deadline() {
    let start = Instant::now();
    let deadline = start + Duration::from_millis(100);
    let body = crate::http::TimedBody::new(
        body_of(&["data: {\"choices\":[]}\n\n", "data: [DONE]\n\n"], false),
        None,
        Duration::from_secs(30),
        "u".into(),
    )
    .for_call(Some(deadline));
    let events: Vec<_> = super::pump(body, frames(), Arc::from("u")).collect().await;
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(Result::is_ok));
    assert_eq!(Instant::now(), deadline - Duration::from_millis(1));
}
