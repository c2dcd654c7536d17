//! Trace context through the gateway, in virtual time: a traced call continues the client's
//! trace (or starts one), sends each attempt upstream with its own span as the parent and
//! the client's `tracestate`, notes when each step before dispatch ended, and is kept at the
//! head, or at its end for failing or breaking an SLO; an untraced gateway sends nothing
//! and notes nothing. The exporter here points at a port nothing listens on: the requests
//! do not notice.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod scripted;

use std::sync::Arc;
use std::time::Duration;

use scripted::{ask_with, rig, scrape};
use sluice_gateway::TraceSetup;
use sluice_tail::retry::RetryPolicy;
use sluice_telemetry::slo::{Measure, Objective, Slo};
use sluice_trace::{ExportConfig, Protocol, Sampler};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// Tracing with head ratio `ratio`, exporting to a closed port.
fn setup(ratio: f64) -> TraceSetup {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    TraceSetup {
        sampler: Sampler {
            ratio,
            ..Sampler::default()
        },
        export: ExportConfig {
            endpoint: format!("http://127.0.0.1:{port}/v1/traces"),
            protocol: Protocol::HttpProtobuf,
            batch: 64,
            flush: Duration::from_millis(50),
            queue: 64,
            timeout: Duration::from_millis(200),
            service: "sluice-test".into(),
            resource: Vec::new(),
        },
    }
}

fn parent(flags: &str) -> String {
    format!("00-{TRACE}-{CLIENT_SPAN}-{flags}")
}

/// `sluice_traces_kept_total` for `why`, 0 when absent.
fn kept(page: &str, why: &str) -> u64 {
    let prefix = format!("sluice_traces_kept_total{{outcome=\"{why}\"}} ");
    page.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |v| v.parse().unwrap())
}

#[tokio::test(start_paused = true)]
async fn a_traced_call_continues_the_clients_trace_and_names_each_attempt_upstream() {
    let r = rig(true, |b| {
        b.retries(RetryPolicy::default()).traces(setup(0.0))
    });
    r.a.push(50, false);
    r.b.push(100, true);
    let tp = parent("01");
    let headers = [
        ("traceparent", tp.as_str()),
        ("tracestate", "congo=t61rcWkgMzE"),
    ];
    let got = ask_with(&r.router, &headers, "t-1", false).await;
    assert_eq!(got.status, 200);
    let rec = r.record("t-1");
    let ids = rec.trace.as_deref().expect("traced");
    assert_eq!(format!("{:032x}", ids.trace_id), TRACE);
    assert_eq!(ids.parent, Some(0x00f067aa0ba902b7));
    assert!(ids.sampled, "the client's flag decides");
    assert_eq!(rec.attempts.len(), 2);
    // Each attempt went with its own span as the parent, the client's tracestate unchanged.
    let first = r.a.traces.lock().clone();
    let second = r.b.traces.lock().clone();
    assert_eq!(
        first,
        [(
            Some(format!("00-{TRACE}-{:016x}-01", ids.attempt(0))),
            Some("congo=t61rcWkgMzE".to_string())
        )]
    );
    assert_eq!(
        second[0].0.as_deref(),
        Some(format!("00-{TRACE}-{:016x}-01", ids.attempt(1)).as_str())
    );
    assert_ne!(ids.attempt(0), ids.attempt(1));
    // The steps before dispatch were noted in order.
    let m = rec.timings.marks;
    let steps = [m.parsed, m.identified, m.routed, m.looked_up, m.queued];
    assert!(steps.iter().all(Option::is_some), "{m:?}");
    assert!(steps.windows(2).all(|w| w[0] <= w[1]));
    assert!(m.queued.unwrap() <= rec.attempts[0].started);
    let page = scrape(&r.router).await;
    assert_eq!(kept(&page, "head"), 1, "{page}");
}

#[tokio::test(start_paused = true)]
async fn without_a_valid_traceparent_the_call_starts_its_own_trace() {
    let r = rig(false, |b| b.traces(setup(1.0)));
    let bad = format!("00-{TRACE}-0000000000000000-01");
    let headers = [("traceparent", bad.as_str()), ("tracestate", "congo=x")];
    assert_eq!(
        ask_with(&r.router, &headers, "t-2", false).await.status,
        200
    );
    assert_eq!(ask_with(&r.router, &[], "t-3", false).await.status, 200);
    for id in ["t-2", "t-3"] {
        let rec = r.record(id);
        let ids = rec.trace.as_deref().unwrap();
        assert_ne!(format!("{:032x}", ids.trace_id), TRACE);
        assert_eq!(ids.parent, None);
        assert_eq!(ids.state, None, "no tracestate without a valid traceparent");
    }
    let sent = r.a.traces.lock().clone();
    assert_eq!(sent.len(), 2);
    assert!(
        sent.iter().all(|(p, s)| p.is_some() && s.is_none()),
        "{sent:?}"
    );
    assert_ne!(r.record("t-2").trace, r.record("t-3").trace);
}

#[tokio::test(start_paused = true)]
async fn failures_and_slo_breaches_are_kept_whatever_the_head_said() {
    let slo = Slo {
        name: Arc::from("fast"),
        objective: Objective::Latency {
            measure: Measure::Ttfb,
            threshold: Duration::from_millis(500),
            target: 0.99,
        },
        lanes: Vec::new(),
        groups: Vec::new(),
    };
    let r = rig(false, |b| b.traces(setup(0.0)).slo(slo));
    let unsampled = parent("00");
    let headers = [("traceparent", unsampled.as_str())];
    r.a.push(100, true); // quick and fine: not kept
    r.a.push(100, false); // failed: kept as an error
    r.a.push(900, true); // over the SLO: kept
    let statuses = [
        ask_with(&r.router, &headers, "k-1", false).await.status,
        ask_with(&r.router, &headers, "k-2", false).await.status,
        ask_with(&r.router, &headers, "k-3", false).await.status,
    ];
    assert_eq!(statuses, [200, 502, 200]);
    assert!(
        r.a.traces
            .lock()
            .iter()
            .all(|(p, _)| p.as_deref().unwrap().ends_with("-00"))
    );
    let page = scrape(&r.router).await;
    assert_eq!(
        (
            kept(&page, "head"),
            kept(&page, "error"),
            kept(&page, "over_slo")
        ),
        (0, 1, 1),
        "{page}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_untraced_gateway_sends_no_trace_context_and_notes_no_steps() {
    let r = rig(false, |b| b);
    let tp = parent("01");
    let headers = [("traceparent", tp.as_str())];
    assert_eq!(
        ask_with(&r.router, &headers, "u-1", false).await.status,
        200
    );
    let rec = r.record("u-1");
    assert!(rec.trace.is_none());
    assert_eq!(rec.timings.marks, sluice_core::Marks::default());
    assert_eq!(r.a.traces.lock().clone(), [(None, None)]);
    assert!(!scrape(&r.router).await.contains("sluice_traces"));
}
