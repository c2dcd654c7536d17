use std::sync::Arc;

use sluice_core::{ChatRequest, RequestId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use futures::StreamExt;
use futures::stream::BoxStream;
use hyper::body::Frame;

use super::*;
use crate::RateReport;

/// `{}` sent for `call` as an OpenAI adapter sends it.
async fn post(
    settings: &HttpSettings,
    endpoint: &Endpoint,
    call: &UpstreamCall,
) -> Result<Accepted, GatewayError> {
    send("p", settings, endpoint, b"{}".to_vec(), call, |_| None, &[]).await
}

/// Reads one request head (up to the blank line) from the next connection to `listener`,
/// answers it with `reply`, and returns the head.
async fn one_head(listener: TcpListener, reply: &'static str) -> String {
    let (mut conn, _) = listener.accept().await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            conn.read(&mut byte).await.unwrap(),
            1,
            "connection closed early"
        );
        head.push(byte[0]);
    }
    conn.write_all(reply.as_bytes()).await.unwrap();
    conn.shutdown().await.unwrap();
    String::from_utf8(head).unwrap().to_ascii_lowercase()
}

/// A call of one user message, with 9 s of its deadline left.
pub(crate) fn call() -> UpstreamCall {
    let request =
        ChatRequest::parse(br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#)
            .unwrap();
    UpstreamCall {
        request: Arc::new(request),
        model: Arc::from("m"),
        request_id: RequestId::from_client_or_generate(Some("req-7")),
        deadline: Some(Instant::now() + Duration::from_secs(9)),
        rate_report: RateReport::default(),
        trace: None,
    }
}

fn proxies_at(port: u16) -> Matcher {
    let proxy = format!("http://user:pw@127.0.0.1:{port}");
    Matcher::builder().http(proxy.clone()).https(proxy).build()
}

#[tokio::test]
async fn https_endpoints_tunnel_through_the_proxy() {
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxies = proxies_at(proxy.local_addr().unwrap().port());
    let settings = HttpSettings::default();
    let endpoint = Endpoint::with_proxies(
        &settings,
        "https://api.example.com/v1",
        "chat/completions",
        &[],
        &proxies,
    )
    .unwrap();
    let head = tokio::spawn(one_head(proxy, "HTTP/1.1 403 Forbidden\r\n\r\n"));
    let err = post(&settings, &endpoint, &call()).await.err().unwrap();
    // Bounded, so that a client that never reached the proxy fails here rather than hangs.
    let head = tokio::time::timeout(Duration::from_secs(10), head)
        .await
        .expect("the proxy was never reached")
        .unwrap();
    assert!(
        head.starts_with("connect api.example.com:443 http/1.1\r\n"),
        "{head}"
    );
    // user:pw, as Basic credentials.
    assert!(
        head.contains("proxy-authorization: basic dxnlcjpwdw==\r\n"),
        "{head}"
    );
    assert_eq!(err.kind, ErrorKind::UpstreamConnect, "{err:?}");
}

#[tokio::test]
async fn plain_http_endpoints_are_reached_directly_with_their_headers() {
    // A proxy that refuses every connection: using it would fail the call.
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxies = proxies_at(proxy.local_addr().unwrap().port());
    drop(proxy);
    let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1/", upstream.local_addr().unwrap());
    let settings = HttpSettings::default();
    let headers = [("x-api-key", "secret", true), ("x-team", "docs", false)];
    let endpoint =
        Endpoint::with_proxies(&settings, &base, "messages", &headers, &proxies).unwrap();
    let head = tokio::spawn(one_head(
        upstream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
    ));
    let mut accepted = post(&settings, &endpoint, &call()).await.unwrap();
    let (body, _) = read_complete(&mut accepted).await.unwrap();
    assert_eq!(&body[..], b"{}");
    let head = head.await.unwrap();
    assert!(head.starts_with("post /v1/messages http/1.1\r\n"), "{head}");
    for line in [
        "x-api-key: secret",
        "x-team: docs",
        "content-type: application/json",
        "content-length: 2",
        "x-request-id: req-7",
    ] {
        assert!(head.contains(&format!("{line}\r\n")), "{line} in {head}");
    }
    // The remaining deadline travels along (9 s at most, a little less by now).
    let budget = head
        .lines()
        .find_map(|l| l.strip_prefix("x-sluice-timeout-ms: "))
        .unwrap();
    assert!(
        (8_000..=9_000).contains(&budget.parse::<u64>().unwrap()),
        "{budget}"
    );
    assert!(
        !head.contains("traceparent"),
        "an untraced call sends no trace context"
    );
}

#[tokio::test]
async fn a_traced_call_sends_its_trace_context() {
    let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1/", upstream.local_addr().unwrap());
    let settings = HttpSettings::default();
    let endpoint =
        Endpoint::with_proxies(&settings, &base, "x", &[], &Matcher::builder().build()).unwrap();
    let head = tokio::spawn(one_head(
        upstream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
    ));
    let mut traced = call();
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    traced.trace = Some(crate::TraceHeaders {
        traceparent: http::HeaderValue::from_static(parent),
        tracestate: Some(http::HeaderValue::from_static("congo=t61rcWkgMzE")),
    });
    let mut accepted = post(&settings, &endpoint, &traced).await.unwrap();
    read_complete(&mut accepted).await.unwrap();
    let head = head.await.unwrap();
    assert!(
        head.contains(&format!("traceparent: {parent}\r\n")),
        "{head}"
    );
    assert!(head.contains("tracestate: congo=t61rcwkgmze\r\n"), "{head}");
}

#[test]
fn bad_fixed_headers_are_refused_when_the_endpoint_is_built() {
    let settings = HttpSettings::default();
    let err = Endpoint::new(&settings, "http://h/v1", "x", &[("bad name", "v", false)])
        .err()
        .unwrap();
    assert!(err.message.contains("bad name"), "{err:?}");
    let err = Endpoint::new(
        &settings,
        "http://h/v1",
        "x",
        &[("x-ok", "line\nbreak", false)],
    )
    .err()
    .unwrap();
    assert!(err.message.contains("x-ok"), "{err:?}");
}

/// A body whose chunks come after these gaps, in milliseconds.
/// A body sending one chunk after each gap, in milliseconds.
type Paced = http_body_util::StreamBody<BoxStream<'static, Result<Frame<Bytes>, std::io::Error>>>;

fn paced(gaps: &'static [u64]) -> Paced {
    http_body_util::StreamBody::new(
        futures::stream::iter(gaps)
            .then(|ms| async move {
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                Ok(Frame::data(Bytes::from_static(b"x")))
            })
            .boxed(),
    )
}

#[tokio::test(start_paused = true)]
async fn the_idle_timeout_counts_from_the_latest_chunk() {
    // Chunks 300 ms apart never leave the body idle for 400 ms; the 500 ms gap does.
    let start = Instant::now();
    let ms = Duration::from_millis;
    let mut body = TimedBody::new(
        paced(&[100, 300, 300, 300, 500]),
        Some(start + ms(1000)),
        ms(400),
        "u".into(),
    );
    for _ in 0..4 {
        assert!(body.next().await.unwrap().is_some());
    }
    assert_eq!(body.first_byte, Some(start + ms(100)));
    let err = body.next().await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::UpstreamTimeout);
    assert!(err.message.contains("next chunk"), "{}", err.message);
    assert_eq!(
        Instant::now() - start,
        ms(1000 + 400),
        "cut 400 ms after the last chunk"
    );
}

#[tokio::test(start_paused = true)]
async fn the_first_byte_deadline_bounds_the_first_chunk() {
    let start = Instant::now();
    let ms = Duration::from_millis;
    let mut body = TimedBody::new(paced(&[2000]), Some(start + ms(700)), ms(400), "u".into());
    let err = body.next().await.unwrap_err();
    assert!(err.message.contains("first byte"), "{}", err.message);
    assert_eq!(Instant::now() - start, ms(700));
}
