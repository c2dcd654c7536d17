use std::time::Duration;

use opentelemetry::Value;
use sluice_core::{ErrorKind, FallbackTaken, RequestId};

use sluice_core::Usage;

use super::*;

const CLIENT_SPAN: u64 = 0xAAAA;

fn ids() -> Arc<TraceIds> {
    Arc::new(TraceIds {
        trace_id: 0x4bf92f3577b34da6a3ce929d0e0e4736,
        span_id: 0x1234,
        parent: Some(CLIENT_SPAN),
        sampled: true,
        state: Some(Arc::from("vendor=x")),
    })
}

fn upstreams() -> Upstreams {
    let mut u = Upstreams::new();
    for (name, provider, system) in [("east", "ds", "deepseek"), ("west", "oai", "openai")] {
        u.insert(
            Arc::from(name),
            Upstream {
                provider: Arc::from(provider),
                system,
                model: Arc::from(format!("{name}-model").as_str()),
                server: Some((Arc::from("127.0.0.1"), 8080)),
            },
        );
    }
    u
}

/// A streamed call: parsed at 1 ms, identified at 2, routed at 3, caches at 4, queued at 5;
/// the primary at `east` fails at 300 ms, a retry at `west` leaves at 350, answers at 700 and
/// streams to 1,500; settled at 1,501.
fn retried_stream() -> (CallRecord, Instant) {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut r = CallRecord::new(RequestId::from_client_or_generate(Some("req-1")), t0);
    r.trace = Some(ids());
    r.stream = true;
    r.model_group = Some(Arc::from("chat"));
    r.lane = Some(Arc::from("interactive"));
    r.tenant = Some(Arc::from("acme"));
    r.status = 200;
    r.upstream = Some(Arc::from("west"));
    let m = &mut r.timings.marks;
    (m.parsed, m.identified, m.routed, m.looked_up, m.queued) = (
        Some(at(1)),
        Some(at(2)),
        Some(at(3)),
        Some(at(4)),
        Some(at(5)),
    );
    r.timings.dispatched = Some(at(10));
    r.timings.first_byte = Some(at(700));
    r.timings.done = Some(at(1500));
    r.timings.deadline = Some(at(2000));
    let mut first = Attempt::start(Arc::from("east"), at(10));
    first.ended = Some(at(300));
    first.outcome = AttemptOutcome::Failed(ErrorKind::UpstreamServerError);
    let mut second = Attempt::start(Arc::from("west"), at(350));
    second.kind = AttemptKind::Retry;
    second.first_byte = Some(at(700));
    second.ended = Some(at(1500));
    second.outcome = AttemptOutcome::Ok;
    r.attempts = vec![first, second];
    r.usage = Some(Usage {
        prompt_tokens: 120,
        completion_tokens: 30,
        cached_tokens: 100,
        ..Usage::default()
    });
    r.response = Some(sluice_core::ResponseMeta {
        id: Some(Arc::from("chatcmpl-9")),
        model: Some(Arc::from("west-model-0601")),
        finish_reasons: vec![Arc::from("length")],
    });
    r.cost_micros = Some(1500);
    (r, at(1501))
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
        panic!(
            "no span {name}: {:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        )
    })
}

fn attr<'a>(s: &'a SpanData, key: &str) -> Option<&'a Value> {
    s.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

#[test]
fn a_retried_stream_makes_a_span_per_step_under_the_calls_server_span() {
    let (r, settled) = retried_stream();
    let spans = of(&r, &upstreams(), Kept::Head, settled);
    let names: Vec<&str> = spans.iter().map(|s| &*s.name).collect();
    assert_eq!(
        names,
        [
            "POST /v1/chat/completions chat",
            "ingress",
            "auth",
            "route",
            "cache",
            "queue interactive",
            "chat east-model",
            "retry wait",
            "chat west-model",
            "stream",
            "settle"
        ]
    );
    let root = &spans[0];
    assert_eq!(root.span_kind, SpanKind::Server);
    assert_eq!(
        root.parent_span_id,
        SpanId::from_bytes(CLIENT_SPAN.to_be_bytes())
    );
    assert!(root.parent_span_is_remote);
    let trace = TraceId::from_bytes(0x4bf92f3577b34da6a3ce929d0e0e4736u128.to_be_bytes());
    for s in &spans {
        assert_eq!(s.span_context.trace_id(), trace);
        assert!(s.start_time <= s.end_time, "{}", s.name);
        if s.name != root.name {
            assert_eq!(s.parent_span_id, root.span_context.span_id(), "{}", s.name);
            assert!(!s.parent_span_is_remote);
            assert!(
                s.start_time >= root.start_time && s.end_time <= named(&spans, "settle").end_time
            );
        }
    }
    let ids: std::collections::HashSet<_> =
        spans.iter().map(|s| s.span_context.span_id()).collect();
    assert_eq!(ids.len(), spans.len(), "span ids are unique");
    // The attempt spans carry the ids sent upstream in `traceparent`.
    let t = r.trace.as_deref().unwrap();
    assert_eq!(
        named(&spans, "chat east-model").span_context.span_id(),
        SpanId::from_bytes(t.attempt(0).to_be_bytes())
    );
    assert_eq!(
        named(&spans, "chat west-model").span_context.span_id(),
        SpanId::from_bytes(t.attempt(1).to_be_bytes())
    );
    let wall = |ms: u64| r.timings.received_wall + Duration::from_millis(ms);
    let wait = named(&spans, "retry wait");
    assert_eq!((wait.start_time, wait.end_time), (wall(300), wall(350)));
    let queue = named(&spans, "queue interactive");
    assert_eq!((queue.start_time, queue.end_time), (wall(5), wall(10)));
    let stream = named(&spans, "stream");
    assert_eq!(
        (stream.start_time, stream.end_time),
        (wall(700), wall(1500))
    );
    assert_eq!(named(&spans, "settle").end_time, wall(1501));
}

#[test]
fn attempts_are_genai_client_spans_with_their_kind_outcome_and_usage() {
    let (r, settled) = retried_stream();
    let spans = of(&r, &upstreams(), Kept::Error, settled);
    let failed = named(&spans, "chat east-model");
    assert_eq!(failed.span_kind, SpanKind::Client);
    assert_eq!(
        attr(failed, "gen_ai.provider.name"),
        Some(&Value::from("deepseek"))
    );
    assert_eq!(attr(failed, "sluice.provider"), Some(&Value::from("ds")));
    assert_eq!(
        attr(failed, "gen_ai.response.id"),
        None,
        "it did not answer"
    );
    assert_eq!(
        attr(failed, "gen_ai.request.model"),
        Some(&Value::from("east-model"))
    );
    assert_eq!(
        attr(failed, "sluice.attempt.kind"),
        Some(&Value::from("primary"))
    );
    assert_eq!(
        attr(failed, "error.type"),
        Some(&Value::from("upstream_server_error"))
    );
    assert!(matches!(failed.status, Status::Error { .. }));
    assert_eq!(
        attr(failed, "gen_ai.usage.input_tokens"),
        None,
        "only the answer's attempt has usage"
    );
    let won = named(&spans, "chat west-model");
    assert_eq!(
        attr(won, "sluice.attempt.kind"),
        Some(&Value::from("retry"))
    );
    assert_eq!(
        attr(won, "sluice.attempt.outcome"),
        Some(&Value::from("ok"))
    );
    assert_eq!(
        attr(won, "gen_ai.usage.input_tokens"),
        Some(&Value::I64(120))
    );
    assert_eq!(
        attr(won, "gen_ai.usage.output_tokens"),
        Some(&Value::I64(30))
    );
    assert_eq!(
        attr(won, "gen_ai.usage.cache_read.input_tokens"),
        Some(&Value::I64(100))
    );
    assert_eq!(
        attr(won, "gen_ai.response.time_to_first_chunk"),
        Some(&Value::F64(0.35))
    );
    assert_eq!(
        attr(won, "gen_ai.response.id"),
        Some(&Value::from("chatcmpl-9"))
    );
    assert_eq!(
        attr(won, "gen_ai.response.model"),
        Some(&Value::from("west-model-0601"))
    );
    assert_eq!(
        attr(won, "gen_ai.response.finish_reasons"),
        Some(&Value::Array(
            vec![opentelemetry::StringValue::from("length")].into()
        ))
    );
    assert_eq!(attr(won, "server.address"), Some(&Value::from("127.0.0.1")));
    assert_eq!(attr(won, "server.port"), Some(&Value::I64(8080)));
    let root = &spans[0];
    assert_eq!(attr(root, "sluice.lane"), Some(&Value::from("interactive")));
    assert_eq!(attr(root, "sluice.tenant"), Some(&Value::from("acme")));
    assert_eq!(attr(root, "sluice.trace.kept"), Some(&Value::from("error")));
    assert_eq!(
        attr(root, "sluice.deadline_left_ms"),
        Some(&Value::I64(500))
    );
    assert_eq!(attr(root, "sluice.cost"), Some(&Value::F64(0.0015)));
    assert_eq!(
        attr(root, "http.response.status_code"),
        Some(&Value::I64(200))
    );
}

#[test]
fn a_call_refused_before_dispatch_ends_its_spans_at_the_step_that_refused() {
    let (mut r, settled) = retried_stream();
    r.attempts.clear();
    r.timings.first_byte = None;
    r.timings.dispatched = None;
    let m = &mut r.timings.marks;
    (m.routed, m.looked_up, m.queued) = (None, None, None);
    r.status = 404;
    r.error = Some(ErrorKind::ModelNotFound);
    let spans = of(&r, &upstreams(), Kept::Head, settled);
    let names: Vec<&str> = spans.iter().map(|s| &*s.name).collect();
    assert_eq!(names[1..], ["ingress", "auth", "route", "settle"]);
    let route = named(&spans, "route");
    assert_eq!(
        attr(route, "error.type"),
        Some(&Value::from("model_not_found"))
    );
    assert_eq!(
        route.end_time,
        r.timings.received_wall + Duration::from_millis(1500)
    );
}

#[test]
fn a_fallback_is_an_event_and_marks_the_attempts_after_it() {
    let (mut r, settled) = retried_stream();
    r.fallbacks.push(FallbackTaken {
        from: Arc::from("chat"),
        to: Arc::from("backup"),
        reason: "unavailable",
        after: 1,
    });
    let spans = of(&r, &upstreams(), Kept::Head, settled);
    let root = &spans[0];
    assert_eq!(root.events.len(), 1);
    assert_eq!(root.events[0].name, "fallback");
    assert_eq!(
        root.events[0].timestamp,
        r.timings.received_wall + Duration::from_millis(300)
    );
    assert_eq!(
        attr(
            named(&spans, "chat east-model"),
            "sluice.attempt.fallback_from"
        ),
        None
    );
    assert_eq!(
        attr(
            named(&spans, "chat west-model"),
            "sluice.attempt.fallback_from"
        ),
        Some(&Value::from("chat"))
    );
}

#[test]
fn an_untraced_call_makes_no_spans() {
    let (mut r, settled) = retried_stream();
    r.trace = None;
    assert!(of(&r, &upstreams(), Kept::Head, settled).is_empty());
}

/// A complete answer's attempt is timed to its first chunk too (its first byte).
#[test]
fn complete_attempts_have_a_time_to_first_chunk() {
    let (mut r, settled) = retried_stream();
    r.stream = false;
    let spans = of(&r, &upstreams(), Kept::Error, settled);
    let won = named(&spans, "chat west-model");
    assert_eq!(
        attr(won, "gen_ai.response.time_to_first_chunk"),
        Some(&Value::F64(0.35))
    );
    assert_eq!(
        attr(won, "gen_ai.request.stream"),
        Some(&Value::Bool(false))
    );
}
