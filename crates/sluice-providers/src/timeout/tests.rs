use std::sync::Arc;

use bytes::Bytes;
use sluice_core::{ChatRequest, RequestId};

use super::*;

/// Yields frames after the given delays.
struct Delays(Vec<Duration>);

impl Provider for Delays {
    fn call(&self, _: UpstreamCall) -> BoxFuture<'static, Result<UpstreamResponse, GatewayError>> {
        let delays = self.0.clone();
        let s = futures::stream::iter(delays)
            .then(|d| async move {
                tokio::time::sleep(d).await;
                Ok(StreamEvent::Frame(Bytes::from_static(b"data: x\n\n")))
            })
            .boxed();
        futures::future::ready(Ok(UpstreamResponse::Stream(s))).boxed()
    }
}

fn call() -> UpstreamCall {
    let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": true});
    UpstreamCall {
        request: Arc::new(ChatRequest::parse(body.to_string().as_bytes()).unwrap()),
        model: Arc::from("m"),
        request_id: RequestId::generate(),
        deadline: None,
        rate_report: Default::default(),
        trace: None,
    }
}

async fn outcome(delays: &[u64]) -> Vec<Result<(), ErrorKind>> {
    let p = WithTimeouts::new(
        Delays(delays.iter().map(|ms| Duration::from_millis(*ms)).collect()),
        "u",
        Duration::from_secs(1),
        Duration::from_millis(200),
    );
    let Ok(UpstreamResponse::Stream(s)) = p.call(call()).await else {
        panic!("stream")
    };
    s.map(|r| r.map(|_| ()).map_err(|e| e.kind)).collect().await
}

#[tokio::test(start_paused = true)]
async fn a_prompt_stream_passes() {
    assert_eq!(
        outcome(&[900, 150, 150]).await,
        vec![Ok(()), Ok(()), Ok(())]
    );
}

#[tokio::test(start_paused = true)]
async fn a_late_first_byte_times_out() {
    assert_eq!(
        outcome(&[1100]).await,
        vec![Err(ErrorKind::UpstreamTimeout)]
    );
}

#[tokio::test(start_paused = true)]
async fn a_pause_mid_stream_times_out_once() {
    assert_eq!(
        outcome(&[10, 10, 250, 10]).await,
        vec![Ok(()), Ok(()), Err(ErrorKind::UpstreamTimeout)]
    );
}
