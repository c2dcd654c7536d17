//! The dashboards and alert rules shipped in `deploy/` read only metrics sluice exports: every
//! `sluice_*` name in the Grafana dashboard's queries and the Prometheus rules' expressions
//! and advice (recorded series aside) is a family sluice registers. The registered families
//! are read from the telemetry crate's registrations, checked against a running gateway's
//! `/metrics` (which lists only families with samples); and after traffic of every kind
//! (both lanes, a 429, a wait for a pause, failures, a hedge, a stream, a cache hit, semantic lookups, a compressed
//! document, prefix churn, an SLO breach, admission and breakers), every
//! family they name is live, with every label they select or aggregate by, and every label
//! value they select.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::collections::{BTreeMap, BTreeSet};

use crate::scripted::{End, PRICE, ask_with, rig, scrape, send};

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
    // The text format names a counter's family with its `_total`; the registration without.
    let scraped: BTreeSet<String> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| {
            let (name, kind) = l.split_once(' ')?;
            Some(match kind {
                "counter" => name.strip_suffix("_total").unwrap_or(name).to_string(),
                _ => name.to_string(),
            })
        })
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
    for (name, _) in sluice_telemetry::metrics::WINDOW_PERCENTILES {
        out.insert(format!("sluice_upstream_latency_window_{name}_seconds"));
    }
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

/// The rules' expressions and the advice of their alerts (YAML's `\"` read as `"`).
fn rule_lines(path: &str) -> String {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("expr:") || l.starts_with("look_at:"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\"", "\"")
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

/// A live page's series: family (sample suffixes off) to each sample's labels.
fn series(page: &str) -> BTreeMap<String, Vec<BTreeMap<String, String>>> {
    let mut out: BTreeMap<String, Vec<BTreeMap<String, String>>> = BTreeMap::new();
    for line in page
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let name = names_in(&line[..name_end]).into_iter().next();
        let Some(name) = name else { continue };
        let mut labels = BTreeMap::new();
        if line[name_end..].starts_with('{') {
            let body = &line[name_end + 1..line.rfind('}').unwrap()];
            for (k, v) in matchers(body) {
                labels.insert(k, v.1);
            }
        }
        out.entry(name).or_default().push(labels);
    }
    out
}

/// The `label op "value"` matchers of a selector's body: label to (op, value).
fn matchers(body: &str) -> Vec<(String, (String, String))> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(q) = rest.find('"') {
        let head = &rest[..q];
        let op_at = head
            .rfind(|c: char| c != '=' && c != '~' && c != '!')
            .map_or(0, |i| i + 1);
        let label = head[..op_at]
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_string();
        let op = head[op_at..].to_string();
        let mut end = q + 1;
        let bytes = rest.as_bytes();
        while end < bytes.len() && bytes[end] != b'"' {
            end += if bytes[end] == b'\\' { 2 } else { 1 };
        }
        out.push((label, (op, rest[q + 1..end].to_string())));
        rest = &rest[(end + 1).min(rest.len())..];
    }
    out
}

/// What a query or a hint asks of the metrics: (family, label, `Some(value)` for an equality
/// matcher). `by (...)` (in queries) and `by a and b` (in hints) ask their labels of every
/// family named in the same query or hint clause.
fn asks(text: &str) -> Vec<(String, String, Option<String>)> {
    let mut out = Vec::new();
    // Hints are clauses apart by `;`; queries are one per line.
    for clause in text.split(['\n', ';']).flat_map(|c| c.split(" against ")) {
        let families = names_in(clause);
        // Selectors.
        let mut rest = clause;
        while let Some(at) = rest.find("sluice_") {
            let tail = &rest[at..];
            let name_end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            let family = names_in(&tail[..name_end]).into_iter().next();
            let after = &tail[name_end..];
            if let (Some(f), true) = (&family, after.starts_with('{')) {
                let close = after.find('}').unwrap();
                for (label, (op, value)) in matchers(&after[1..close]) {
                    let exact = (op == "=" && !value.contains('$')).then_some(value);
                    out.push((f.clone(), label, exact));
                }
            }
            rest = &tail[name_end.max(1)..];
        }
        // Aggregations.
        let mut by: Vec<String> = Vec::new();
        for part in clause.split("by (").skip(1) {
            let inside = &part[..part.find(')').unwrap_or(part.len())];
            by.extend(inside.split(',').map(|l| l.trim().to_string()));
        }
        for part in clause.split(" by ").skip(1) {
            if part.starts_with('(') {
                continue;
            }
            // "by a and b": the words up to the first mark, joined by "and".
            let head = part
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ' '))
                .next()
                .unwrap_or("");
            let mut words = head.split_whitespace();
            while let Some(label) = words.next() {
                by.push(label.to_string());
                if words.next() != Some("and") {
                    break;
                }
            }
        }
        for f in &families {
            for label in &by {
                if !label.is_empty() && label != "le" {
                    out.push((f.clone(), label.clone(), None));
                }
            }
        }
    }
    out
}

#[tokio::test(start_paused = true)]
async fn every_family_label_and_value_named_in_deploy_and_hints_is_live() {
    let slo = sluice_telemetry::slo::Slo {
        name: std::sync::Arc::from("interactive_ttfb"),
        objective: sluice_telemetry::slo::Objective::Latency {
            measure: sluice_telemetry::slo::Measure::Ttfb,
            threshold: std::time::Duration::from_millis(500),
            target: 0.99,
        },
        lanes: Vec::new(),
        groups: Vec::new(),
    };
    let r = rig(true, |b| {
        b.limits(sluice_gateway::assemble::DEFAULT_LIMIT)
            .breakers(sluice_tail::BreakerPolicy::default())
            .retries(sluice_tail::RetryPolicy::default())
            .hedging(sluice_tail::HedgePolicy {
                quantile: 0.5,
                min_samples: 1,
                ..sluice_tail::HedgePolicy::default()
            })
            .watch_prefixes(1.0)
            .answer_cache(std::time::Duration::from_secs(60), 1 << 20)
            .price("m", PRICE)
            .tenant_class("acme", "enterprise")
            .slo(slo)
            .compress(
                "chat",
                sluice_context::compress::Compress { budget: Some(400) },
            )
            // Met only by the same question again: every lookup counted, none served.
            .semantic_cache(
                sluice_cache::semantic::Policy {
                    mode: sluice_cache::semantic::Mode::Static {
                        threshold: 0.9999,
                        audit: 0.0,
                    },
                    ttl: std::time::Duration::from_secs(600),
                    max_bytes: 1 << 20,
                },
                1.0,
                crate::scripted::embedder(),
            )
    });
    // Both lanes; a 429 then an answer elsewhere; failures; a hedge; a slow call (a bad SLO
    // event); a stream; a system prompt that carries the time (its prefix churns); the same
    // question twice (a cache hit).
    let chat = |text: &str| {
        format!(r#"{{"model":"chat","messages":[{{"role":"user","content":"{text}"}}]}}"#)
    };
    let mut got = Vec::new();
    r.a.push(100, true);
    got.push(send(&r.router, &[], "m-1", &chat("one")).await.status);
    r.a.push(100, true);
    got.push(
        send(
            &r.router,
            &[("x-sluice-lane", "batch")],
            "m-2",
            &chat("batch"),
        )
        .await
        .status,
    );
    r.a.push_end(50, End::Limited(1));
    r.b.push(100, true);
    got.push(
        send(
            &r.router,
            &[("x-sluice-tenant", "acme")],
            "m-3",
            &chat("limited"),
        )
        .await
        .status,
    );
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    r.a.push(50, false);
    r.b.push(50, false);
    got.push(send(&r.router, &[], "m-4", &chat("failing")).await.status);
    tokio::time::sleep(std::time::Duration::from_secs(60)).await;
    r.a.push(900, true);
    r.b.push(100, true);
    got.push(send(&r.router, &[], "m-5", &chat("hedged")).await.status);
    r.a.push(900, true);
    r.b.push(900, true);
    got.push(send(&r.router, &[], "m-6", &chat("slow")).await.status);
    r.a.push_end(100, End::Stream { frames: 3, gap: 10 });
    got.push(ask_with(&r.router, &[], "m-7", true).await.status);
    for (i, at) in ["10:00:00", "10:00:07"].iter().enumerate() {
        r.a.push(100, true);
        let body = format!(
            r#"{{"model":"chat","messages":[{{"role":"system","content":"Now is 2026-12-03T{at}Z. You help."}},{{"role":"user","content":"q{i}"}}]}}"#
        );
        got.push(
            send(
                &r.router,
                &[("x-sluice-tenant", "acme")],
                &format!("m-8-{i}"),
                &body,
            )
            .await
            .status,
        );
    }
    got.push(send(&r.router, &[], "m-9", &chat("one")).await.status);
    // A long contract and a question about it, over the group's budget: compressed.
    let clauses: Vec<String> = (1..=80)
        .map(|i| format!("{i}. The supplier shall keep record {i} for {i} years and report it."))
        .collect();
    let document = format!(
        "{}\n\nHow long must the supplier keep record 7?",
        clauses.join("\n\n")
    );
    r.a.push(100, true);
    let body =
        serde_json::json!({"model": "chat", "messages": [{"role": "user", "content": document}]});
    got.push(send(&r.router, &[], "m-10", &body.to_string()).await.status);
    // Both deployments hold their queues for a second (as after a 429's `retry-after`): the
    // call waits for the provider's limit (sluice_rate_limit_waits_total).
    for d in &r.gw.routes().group("chat").unwrap().deployments {
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
        d.limiter.as_ref().unwrap().pause_until(until);
    }
    r.a.push(100, true);
    got.push(send(&r.router, &[], "m-11", &chat("paused")).await.status);
    let statuses = got;
    let page = scrape(&r.router).await;
    // Every call was answered: failed attempts were retried elsewhere.
    assert_eq!(statuses, [200; 12]);
    // The page (text format 0.0.4, as asked for no format) follows Prometheus' conventions.
    promtool_accepts(&page);
    assert!(
        page.contains(r#"outcome="upstream_server_error""#),
        "{page}"
    );
    let live = series(&page);
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");
    let mut hints = String::new();
    for c in sluice_telemetry::slo::Culprit::ALL {
        hints.push_str(&sluice_telemetry::slo::rules::look_at(c));
        hints.push('\n');
    }
    let sources = [
        (
            "grafana/sluice.json",
            dashboard_queries(&format!("{root}/grafana/sluice.json")),
        ),
        (
            "prometheus/sluice-rules.yml",
            rule_lines(&format!("{root}/prometheus/sluice-rules.yml")),
        ),
        ("the alerts' hints", hints),
    ];
    let mut problems = Vec::new();
    let mut checked = 0;
    for (file, text) in &sources {
        for family in names_in(text) {
            if !live.contains_key(&family) {
                problems.push(format!("{file}: {family} is not on a live /metrics"));
            }
        }
        for (family, label, value) in asks(text) {
            let Some(samples) = live.get(&family) else {
                continue;
            };
            checked += 1;
            if !samples.iter().any(|s| s.contains_key(&label)) {
                problems.push(format!("{file}: {family} has no label `{label}`"));
            } else if let Some(v) = &value
                && !samples.iter().any(|s| s.get(&label) == Some(v))
            {
                problems.push(format!(
                    "{file}: no {family}{{{label}=\"{v}\"}} after traffic of every kind"
                ));
            }
        }
    }
    assert!(checked >= 30, "only {checked} labels checked");
    assert!(problems.is_empty(), "{problems:#?}\n{page}");
}

#[test]
fn selectors_and_aggregations_are_read_from_queries_and_hints() {
    let q = asks(
        "sum by (le, group) (rate(sluice_request_duration_seconds_bucket{group=~\"$group\", lane=\"batch\"}[5m]))",
    );
    assert!(q.contains(&(
        "sluice_request_duration_seconds".into(),
        "lane".into(),
        Some("batch".into())
    )));
    assert!(q.contains(&(
        "sluice_request_duration_seconds".into(),
        "group".into(),
        None
    )));
    assert!(!q.iter().any(|(_, l, _)| l == "le"));
    let h = asks(
        "GET /admin/diagnose; sluice_requests_total by upstream and code; sluice_queue_duration_seconds by lane",
    );
    assert!(h.contains(&("sluice_requests".into(), "upstream".into(), None)));
    assert!(h.contains(&("sluice_requests".into(), "code".into(), None)));
    assert!(h.contains(&("sluice_queue_duration_seconds".into(), "lane".into(), None)));
    assert!(!h.contains(&("sluice_requests".into(), "lane".into(), None)));
}

/// `promtool check metrics` (Debian's prometheus package, which `scripts/test` installs) reads
/// `page` and finds nothing to say of it.
fn promtool_accepts(page: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool: scripts/test installs Debian's prometheus package");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {said}"
    );
}
