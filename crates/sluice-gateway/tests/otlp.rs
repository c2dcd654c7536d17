//! Traces end to end, exported to a real OTLP receiver: Arize Phoenix (PyPI's
//! `arize-phoenix`, which `scripts/test` installs into a private virtual environment with
//! `scripts/install-otlp-receiver` and names in `SLUICE_PHOENIX`), started by the test on
//! private loopback ports, its HTTP (`/v1/traces`, protobuf) and gRPC receivers both used.
//! The spans are read back through Phoenix's own API. A gateway in front of the fake
//! upstream keeps, at a head ratio of 0, the call whose client sampled its trace, the call
//! that failed and the call over its SLO, and not the quick fine one; the upstream saw each
//! attempt's span as the parent in `traceparent`. A gateway exporting to a dead collector
//! answers every request and counts the traces it could not send.
//!
//! Phoenix and the collector run on the wall clock: every wait is bounded and polls.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gateway/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// Phoenix, killed and its folder removed when the test ends.
struct Phoenix {
    child: Child,
    dir: PathBuf,
    http: u16,
    grpc: u16,
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn start_phoenix() -> Phoenix {
    let bin = std::env::var("SLUICE_PHOENIX").expect(
        "SLUICE_PHOENIX names the OTLP receiver's executable; scripts/test installs it (scripts/install-otlp-receiver)",
    );
    let dir = std::env::temp_dir().join(format!("sluice-phoenix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (http, grpc) = (free_port(), free_port());
    let log = std::fs::File::create(dir.join("log")).unwrap();
    let child = Command::new(bin)
        .arg("serve")
        .env("PHOENIX_HOST", "127.0.0.1")
        .env("PHOENIX_PORT", http.to_string())
        .env("PHOENIX_GRPC_PORT", grpc.to_string())
        .env("PHOENIX_WORKING_DIR", &dir)
        .env("PHOENIX_TELEMETRY_ENABLED", "false")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("starting Phoenix");
    let p = Phoenix {
        child,
        dir,
        http,
        grpc,
    };
    let client = reqwest::Client::new();
    let until = Instant::now() + Duration::from_secs(180);
    loop {
        let up = client
            .get(format!("http://127.0.0.1:{http}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if up {
            return p;
        }
        assert!(
            Instant::now() < until,
            "Phoenix did not start within 180 s: {}",
            std::fs::read_to_string(p.dir.join("log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Every span Phoenix holds, as OTLP JSON.
async fn spans(p: &Phoenix) -> Vec<Value> {
    let url = format!(
        "http://127.0.0.1:{}/v1/projects/default/spans/otlpv1?limit=1000",
        p.http
    );
    match reqwest::get(url).await {
        Ok(r) if r.status().is_success() => {
            let v: Value = r.json().await.unwrap();
            v["data"].as_array().cloned().unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

/// A span attribute's value, whatever its OTLP JSON type.
fn attr(span: &Value, key: &str) -> Option<Value> {
    let a = span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)?;
    let v = a["value"].as_object()?;
    let (_, inner) = v.iter().find(|(_, v)| !v.is_null())?;
    Some(match inner {
        Value::String(s) => s.parse::<i64>().map_or_else(|_| json!(s), |n| json!(n)),
        other => other.clone(),
    })
}

/// The spans of the trace whose server span has `sluice.request_id` = `id`.
fn trace_of<'a>(all: &'a [Value], id: &str) -> Vec<&'a Value> {
    let Some(root) = all
        .iter()
        .find(|s| attr(s, "sluice.request_id") == Some(json!(id)))
    else {
        return Vec::new();
    };
    all.iter()
        .filter(|s| s["trace_id"] == root["trace_id"])
        .collect()
}

/// The gateway's `/metrics` page.
async fn metrics(r: &support::Running) -> String {
    reqwest::get(format!("{}/metrics", r.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The server span of a trace's spans.
fn server_span<'a>(spans: &[&'a Value]) -> &'a Value {
    spans
        .iter()
        .find(|s| attr(s, "sluice.request_id").is_some())
        .expect("a server span")
}

/// Polls Phoenix until every request id in `ids` has its spans (bounded).
async fn wait_for(p: &Phoenix, ids: &[&str]) -> Vec<Value> {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let all = spans(p).await;
        if ids.iter().all(|id| !trace_of(&all, id).is_empty()) {
            return all;
        }
        assert!(
            Instant::now() < until,
            "Phoenix holds no spans of some of {ids:?} after 60 s: {} spans",
            all.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn traces_section(endpoint: &str, protocol: &str) -> String {
    format!(
        "\n[traces]\nenabled = true\nprotocol = \"{protocol}\"\nendpoint = \"{endpoint}\"\nsample = 0.0\nflush = \"100ms\"\ntimeout = \"2s\"\n\n[slo.gated]\nkind = \"latency\"\nmeasure = \"total\"\nthreshold = \"200ms\"\nobjective = 0.99\ngroups = [\"gated\"]\n"
    )
}

async fn chat(
    r: &support::Running,
    model: &str,
    id: &str,
    headers: &[(&str, &str)],
) -> reqwest::StatusCode {
    let mut req = r
        .client
        .post(format!("{}/v1/chat/completions", r.url))
        .header("x-request-id", id)
        .json(&support::body(model, model == "gated"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    resp.bytes().await.unwrap();
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_a_real_otlp_receiver_over_http_and_grpc() {
    let phoenix = start_phoenix().await;
    let endpoint = format!("http://127.0.0.1:{}/v1/traces", phoenix.http);
    let r = support::start_with(&traces_section(&endpoint, "http/protobuf")).await;
    let tp = format!("00-{TRACE}-{CLIENT_SPAN}-01");
    let headers = [
        ("traceparent", tp.as_str()),
        ("tracestate", "congo=t61rcWkgMzE"),
    ];
    assert_eq!(chat(&r, "ok", "sampled", &headers).await, 200);
    assert_eq!(chat(&r, "broken", "failed", &[]).await, 502);
    assert_eq!(chat(&r, "ok", "quick", &[]).await, 200);
    // A stream held past its SLO's 200 ms before its rest is let through.
    let slow = {
        let (client, url) = (r.client.clone(), r.url.clone());
        tokio::spawn(async move {
            let resp = client
                .post(format!("{url}/v1/chat/completions"))
                .header("x-request-id", "slow")
                .json(&support::body("gated", true))
                .send()
                .await
                .unwrap();
            resp.bytes().await.unwrap();
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    r.upstream.fake.gate.add_permits(1);
    slow.await.unwrap();

    let all = wait_for(&phoenix, &["sampled", "failed", "slow"]).await;
    // The quick, fine, unsampled call was not kept (the others were, so it would be there).
    assert!(
        trace_of(&all, "quick").is_empty(),
        "the quick call was not kept"
    );

    // The sampled call: the client's trace, continued.
    let sampled = trace_of(&all, "sampled");
    let root = server_span(&sampled);
    assert_eq!(root["trace_id"], TRACE, "{root}");
    assert_eq!(root["parent_span_id"], CLIENT_SPAN, "{root}");
    assert_eq!(attr(root, "sluice.trace.kept"), Some(json!("head")));
    assert_eq!(attr(root, "http.response.status_code"), Some(json!(200)));
    let names: BTreeSet<&str> = sampled.iter().filter_map(|s| s["name"].as_str()).collect();
    for step in [
        "ingress",
        "auth",
        "route",
        "cache",
        "queue interactive",
        "chat ok",
        "settle",
    ] {
        assert!(names.contains(step), "{step} in {names:?}");
    }
    for s in &sampled {
        if s["span_id"] != root["span_id"] {
            assert_eq!(s["parent_span_id"], root["span_id"], "{s}");
        }
    }
    // The attempt is a GenAI client span, and its id went upstream as the parent.
    let attempt = sampled.iter().find(|s| s["name"] == "chat ok").unwrap();
    assert_eq!(attr(attempt, "gen_ai.operation.name"), Some(json!("chat")));
    // The well-known name of what the provider speaks; the configuration's name apart.
    assert_eq!(attr(attempt, "gen_ai.provider.name"), Some(json!("openai")));
    assert_eq!(attr(attempt, "sluice.provider"), Some(json!("fake")));
    assert_eq!(attr(attempt, "gen_ai.response.id"), Some(json!("cmpl-1")));
    assert_eq!(attr(attempt, "gen_ai.response.model"), Some(json!("ok")));
    let reasons = attr(attempt, "gen_ai.response.finish_reasons").unwrap();
    assert!(reasons.to_string().contains("\"stop\""), "{reasons}");
    // A complete answer's first chunk is its first byte: timed on every attempt.
    assert!(
        attr(attempt, "gen_ai.response.time_to_first_chunk").is_some(),
        "{attempt}"
    );
    assert_eq!(attr(attempt, "gen_ai.request.model"), Some(json!("ok")));
    assert_eq!(
        attr(attempt, "gen_ai.usage.input_tokens"),
        Some(json!(2006))
    );
    assert_eq!(
        attr(attempt, "gen_ai.usage.output_tokens"),
        Some(json!(300))
    );
    assert_eq!(
        attr(attempt, "gen_ai.usage.cache_read.input_tokens"),
        Some(json!(1920))
    );
    assert_eq!(attr(attempt, "server.address"), Some(json!("127.0.0.1")));
    assert_eq!(
        attr(attempt, "server.port"),
        Some(json!(i64::from(r.upstream.addr.port())))
    );
    let seen = r.upstream.fake.headers.lock().clone();
    let sent: Vec<(String, Option<String>)> = seen
        .iter()
        .map(|h| {
            (
                h["traceparent"].to_str().unwrap().to_string(),
                h.get("tracestate").map(|v| v.to_str().unwrap().to_string()),
            )
        })
        .collect();
    let expected = format!("00-{TRACE}-{}-01", attempt["span_id"].as_str().unwrap());
    assert_eq!(sent[0], (expected, Some("congo=t61rcWkgMzE".to_string())));

    // The failed call: kept for its error, with the error on the server span.
    let failed = trace_of(&all, "failed");
    let froot = server_span(&failed);
    assert_eq!(attr(froot, "sluice.trace.kept"), Some(json!("error")));
    assert_eq!(
        attr(froot, "error.type"),
        Some(json!("upstream_server_error"))
    );
    assert!(
        froot["parent_span_id"].is_null(),
        "a trace of its own: {froot}"
    );
    assert_eq!(froot["status"]["code"], 2, "status ERROR: {froot}");
    // The slow stream: kept for its SLO, with its stream span.
    let slow = trace_of(&all, "slow");
    let sroot = server_span(&slow);
    assert_eq!(attr(sroot, "sluice.trace.kept"), Some(json!("over_slo")));
    assert!(slow.iter().any(|s| s["name"] == "stream"));
    let page = metrics(&r).await;
    for why in ["head", "error", "over_slo"] {
        assert!(
            page.contains(&format!("sluice_traces_kept_total{{outcome=\"{why}\"}} 1")),
            "{why}: {page}"
        );
    }

    // The same receiver over gRPC.
    let endpoint = format!("http://127.0.0.1:{}", phoenix.grpc);
    let g = support::start_with(&traces_section(&endpoint, "grpc")).await;
    let tp = format!("00-{TRACE:.16}{:016x}-{CLIENT_SPAN}-01", 7);
    assert_eq!(
        chat(&g, "deepseek", "over-grpc", &[("traceparent", &tp)]).await,
        200
    );
    let all = wait_for(&phoenix, &["over-grpc"]).await;
    let grpc = trace_of(&all, "over-grpc");
    let attempt = grpc.iter().find(|s| s["name"] == "chat deepseek").unwrap();
    assert_eq!(
        attr(attempt, "gen_ai.usage.cache_read.input_tokens"),
        Some(json!(768))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_collector_costs_only_a_counter() {
    let endpoint = format!("http://127.0.0.1:{}/v1/traces", free_port());
    let r = support::start_with(&traces_section(&endpoint, "http/protobuf")).await;
    let tp = format!("00-{TRACE}-{CLIENT_SPAN}-01");
    for i in 0..20 {
        let id = format!("dead-{i}");
        assert_eq!(chat(&r, "ok", &id, &[("traceparent", &tp)]).await, 200);
    }
    let until = Instant::now() + Duration::from_secs(30);
    let counts = loop {
        let page = metrics(&r).await;
        let mut counts = BTreeMap::new();
        for line in page.lines() {
            if let Some(rest) = line.strip_prefix("sluice_traces_total{outcome=\"") {
                let (outcome, n) = rest.split_once("\"} ").unwrap();
                counts.insert(outcome.to_string(), n.parse::<u64>().unwrap());
            }
        }
        if counts.values().sum::<u64>() == 20 || Instant::now() > until {
            break counts;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(counts.get("failed"), Some(&20), "{counts:?}");
    assert_eq!(counts.get("exported"), None, "{counts:?}");
}
