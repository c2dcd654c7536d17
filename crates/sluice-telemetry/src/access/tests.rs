use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_core::{Attempt, AttemptKind, CacheLookup, ErrorKind, RequestId, Usage};
use tokio::time::Instant;

use super::*;

fn record() -> CallRecord {
    let now = Instant::now();
    let mut r = CallRecord::new(RequestId::from_client_or_generate(Some("req-1")), now);
    r.tenant = Some(Arc::from("acme"));
    r.api_key = Some(Arc::from("ci key"));
    r.model_group = Some(Arc::from("chat"));
    r.upstream = Some(Arc::from("openai/gpt-4o"));
    r.status = 200;
    r.timings.first_byte = Some(now + Duration::from_micros(12_345_678));
    r.timings.done = Some(now + Duration::from_nanos(6_455_294_999_999));
    r.usage = Some(Usage {
        prompt_tokens: 120,
        cached_tokens: 100,
        completion_tokens: 7,
        ..Usage::default()
    });
    r.cost_micros = Some(42);
    r.cache = Some(CacheLookup::Miss);
    r.attempts = vec![
        Attempt::start(Arc::from("a"), now),
        Attempt {
            kind: AttemptKind::Hedge,
            ..Attempt::start(Arc::from("b"), now)
        },
    ];
    r
}

#[test]
fn a_json_line_holds_every_field_rounded_to_the_microsecond() {
    let text = line(&record(), AccessFormat::Json);
    assert!(text.ends_with('\n'));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["request_id"], "req-1");
    assert_eq!(v["tenant"], "acme");
    assert_eq!(v["key"], "ci key");
    assert_eq!(v["group"], "chat");
    assert_eq!(v["upstream"], "openai/gpt-4o");
    assert_eq!(v["status"], 200);
    assert_eq!(v["error"], serde_json::Value::Null);
    assert_eq!(v["ttfb_ms"].to_string(), "12345.678");
    assert_eq!(v["total_ms"].to_string(), "6455295.0");
    assert_eq!(v["prompt_tokens"], 120);
    assert_eq!(v["cached_tokens"], 100);
    assert_eq!(v["completion_tokens"], 7);
    assert_eq!(v["cost_micros"], 42);
    assert_eq!(v["cache"], "miss");
    assert_eq!(
        (v["attempts"].as_u64(), v["hedges"].as_u64()),
        (Some(2), Some(1))
    );
    assert!(v["ts"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn a_logfmt_line_quotes_what_needs_quoting() {
    let mut r = record();
    r.status = 429;
    r.error = Some(ErrorKind::QuotaExceeded);
    r.usage = None;
    r.cost_micros = None;
    let text = line(&r, AccessFormat::Logfmt);
    assert!(text.starts_with("ts="), "{text}");
    assert!(
        text.contains(" request_id=req-1 tenant=acme key=\"ci key\" group=chat "),
        "{text}"
    );
    assert!(text.contains(" status=429 error=quota_exceeded "), "{text}");
    assert!(text.contains(" cost_micros= "), "{text}");
    assert!(text.contains(" prompt_tokens=0 "), "{text}");
    assert_eq!(text.matches('\n').count(), 1);
}

/// A writer the test can read back.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn lines_reach_the_output_in_order_by_the_time_sync_returns() {
    let out = Shared::default();
    let log = AccessLog::start(
        AccessFormat::Json,
        Box::new(out.clone()),
        Counter::default(),
    )
    .unwrap();
    let mut r = record();
    for i in 0..50 {
        r.request_id = RequestId::from_client_or_generate(Some(&format!("req-{i}")));
        log.log(&r);
    }
    log.sync();
    let text = String::from_utf8(out.0.lock().clone()).unwrap();
    let ids: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["request_id"].to_string())
        .collect();
    assert_eq!(ids.len(), 50);
    assert_eq!(ids[0], "\"req-0\"");
    assert_eq!(ids[49], "\"req-49\"");
    assert_eq!(log.dropped(), 0);
}
