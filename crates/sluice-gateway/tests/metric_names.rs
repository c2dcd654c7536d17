//! The dashboards and alert rules shipped in `deploy/` read only metrics sluice exports: every
//! `sluice_*` name in the Grafana dashboard's queries and the Prometheus rules' expressions
//! and advice (recorded series aside) is a family sluice registers. The registered families
//! are read from the telemetry crate's registrations, checked against a running gateway's
//! `/metrics` (which lists only families with samples).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::collections::BTreeSet;

use crate::scripted::{rig, scrape, send};

/// The `sluice_*` metric names `text` reads: recorded series (`sluice_slo:...`) left out,
/// sample suffixes taken off.
fn names_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("sluice_") {
        let start = i + at;
        let before = start.checked_sub(1).map(|b| bytes[b]);
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        i = end;
        // A label value (`culprit="sluice_queueing"`) follows `="` (or `=~"`).
        let label_value = text[..start].ends_with("=\"") || text[..start].ends_with("~\"");
        if label_value
            || before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            || bytes.get(end) == Some(&b':')
        {
            continue;
        }
        let mut name = &text[start..end];
        for suffix in ["_bucket", "_count", "_sum", "_total", "_created"] {
            if let Some(base) = name.strip_suffix(suffix) {
                name = base;
                break;
            }
        }
        out.insert(name.to_string());
    }
    out
}

#[tokio::test(start_paused = true)]
async fn every_metric_the_dashboard_and_the_rules_read_is_exported() {
    let r = rig(false, |b| b);
    let body = r#"{"model": "chat", "messages": [{"role": "user", "content": "hi"}]}"#;
    assert_eq!(send(&r.router, &[], "m-1", body).await.status, 200);
    let metrics = scrape(&r.router).await;
    let scraped: BTreeSet<String> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect();
    let families = registered();
    assert!(scraped.len() >= 10, "{scraped:?}");
    let unread: Vec<&String> = scraped.difference(&families).collect();
    assert!(
        unread.is_empty(),
        "registrations not found in the source: {unread:?}"
    );
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");
    for (file, text) in [
        (
            "grafana/sluice.json",
            dashboard_queries(&format!("{root}/grafana/sluice.json")),
        ),
        (
            "prometheus/sluice-rules.yml",
            rule_lines(&format!("{root}/prometheus/sluice-rules.yml")),
        ),
    ] {
        let read = names_in(&text);
        assert!(read.len() >= 8, "{file} reads {read:?}");
        let missing: Vec<&String> = read.iter().filter(|n| !families.contains(*n)).collect();
        assert!(
            missing.is_empty(),
            "{file} reads metrics sluice does not export: {missing:?}"
        );
    }
}

/// Every family the telemetry crate registers, with its `sluice_` prefix.
fn registered() -> BTreeSet<String> {
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-telemetry/src");
    let mut out = BTreeSet::new();
    for file in ["metrics.rs", "context.rs"] {
        let text = std::fs::read_to_string(format!("{src}/{file}")).unwrap();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("register(") {
            rest = rest[at + "register(".len()..].trim_start();
            // A registration names its family first; other calls named so do not.
            if let Some(named) = rest.strip_prefix('"') {
                let name = &named[..named.find('"').unwrap()];
                out.insert(format!("sluice_{name}"));
            }
        }
    }
    out
}

/// The queries of the dashboard's panels and variables.
fn dashboard_queries(path: &str) -> String {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out = String::new();
    for p in v["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            out.push_str(t["expr"].as_str().unwrap());
            out.push('\n');
        }
    }
    for t in v["templating"]["list"].as_array().unwrap() {
        if let Some(q) = t["query"].as_str() {
            out.push_str(q);
            out.push('\n');
        }
    }
    out
}

/// The rules' expressions and the advice of their alerts.
fn rule_lines(path: &str) -> String {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("expr:") || l.starts_with("look_at:"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn names_are_read_without_suffixes_or_recorded_series() {
    let n = names_in(
        "rate(sluice_requests_total[5m]) sluice_slo:bad:ratio_rate5m x_sluice_y sluice_request_duration_seconds_bucket{culprit=\"sluice_queueing\"}",
    );
    assert_eq!(
        n.into_iter().collect::<Vec<_>>(),
        ["sluice_request_duration_seconds", "sluice_requests"]
    );
}
