//! `[traces]`: OpenTelemetry traces of calls, exported over OTLP; off by default.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::diagnostic::Diagnostic;
use crate::document::{Document, Seg};

/// How spans reach the collector.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum TraceProtocol {
    /// OTLP over HTTP with protobuf bodies.
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// OTLP over gRPC.
    #[serde(rename = "grpc")]
    Grpc,
}

/// `[traces]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct TracesConfig {
    /// Whether calls are traced at all (`false`: no ids, no headers, no exporter).
    pub enabled: bool,
    /// The collector: for `http/protobuf` the traces URL (default
    /// `http://127.0.0.1:4318/v1/traces`), for `grpc` its address (`http://127.0.0.1:4317`).
    pub endpoint: Option<String>,
    /// `http/protobuf` (the default) or `grpc`.
    pub protocol: TraceProtocol,
    /// The share of traces kept at their head (0.01).
    pub sample: f64,
    /// Whether a client's `traceparent` sampled flag decides instead of `sample` (true).
    pub honour_parent: bool,
    /// Whether failed calls (5xx, 429, a failed attempt) are kept whatever the head said.
    pub keep_errors: bool,
    /// Whether calls an SLO judged bad are kept whatever the head said.
    pub keep_over_slo: bool,
    /// The most spans one export sends (512).
    pub batch: usize,
    /// The longest a span waits for its batch (1 s).
    #[serde(with = "humantime_serde")]
    pub flush: Duration,
    /// Kept calls waiting for the exporter before further ones are dropped (2048).
    pub queue: usize,
    /// The longest one export may take (5 s).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// The resource's `service.name` ("sluice").
    pub service_name: String,
    /// Further resource attributes.
    pub resource: BTreeMap<String, String>,
}

impl Default for TracesConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            endpoint: None,
            protocol: TraceProtocol::HttpProtobuf,
            sample: 0.01,
            honour_parent: true,
            keep_errors: true,
            keep_over_slo: true,
            batch: 512,
            flush: Duration::from_secs(1),
            queue: 2048,
            timeout: Duration::from_secs(5),
            service_name: "sluice".into(),
            resource: BTreeMap::new(),
        }
    }
}

impl TracesConfig {
    /// The collector's URL, the protocol's default when none is set.
    pub fn endpoint(&self) -> String {
        match (&self.endpoint, self.protocol) {
            (Some(e), _) => e.clone(),
            (None, TraceProtocol::HttpProtobuf) => "http://127.0.0.1:4318/v1/traces".into(),
            (None, TraceProtocol::Grpc) => "http://127.0.0.1:4317".into(),
        }
    }
}

/// What types cannot check of `[traces]`.
pub(super) fn check(doc: &Document<'_>, t: &TracesConfig, diags: &mut Vec<Diagnostic>) {
    let at = |field: &str| [Seg::Key("traces".into()), Seg::Key(field.into())];
    if !(0.0..=1.0).contains(&t.sample) {
        diags.push(doc.diag(&at("sample"), "must be from 0 to 1"));
    }
    for (field, n) in [("batch", t.batch), ("queue", t.queue)] {
        if n == 0 {
            diags.push(doc.diag(&at(field), "must be at least 1"));
        }
    }
    if t.timeout.is_zero() {
        diags.push(doc.diag(&at("timeout"), "must be longer than 0"));
    }
    if t.flush.is_zero() {
        diags.push(doc.diag(&at("flush"), "must be longer than 0"));
    }
    if t.service_name.is_empty() {
        diags.push(doc.diag(&at("service_name"), "must not be empty"));
    }
    if let Some(e) = &t.endpoint {
        match url::Url::parse(e) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
            _ => diags.push(doc.diag(&at("endpoint"), format!("`{e}` is not an http(s) URL"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::gateway::{Secrets, check};

    const BASE: &str = "[server]\nlisten = \"127.0.0.1:0\"\n";

    fn errors(extra: &str) -> Vec<String> {
        let text = format!("{BASE}{extra}");
        let env = std::collections::BTreeMap::new();
        check(&text, &env, &[], Secrets::Required)
            .errors
            .0
            .iter()
            .map(|d| format!("{}: {}", d.path, d.message))
            .collect()
    }

    #[test]
    fn traces_are_off_by_default_and_read_when_on() {
        let env = std::collections::BTreeMap::new();
        let off = check(BASE, &env, &[], Secrets::Required).config.unwrap();
        assert!(!off.traces.enabled);
        let text = format!(
            "{BASE}[traces]\nenabled = true\nprotocol = \"grpc\"\nsample = 0.5\nflush = \"200ms\"\nresource = {{ \"deployment.environment.name\" = \"test\" }}\n"
        );
        let on = check(&text, &env, &[], Secrets::Required)
            .config
            .unwrap()
            .traces;
        assert!(on.enabled);
        assert_eq!(on.protocol, super::TraceProtocol::Grpc);
        assert_eq!(on.endpoint(), "http://127.0.0.1:4317");
        assert_eq!(on.flush, std::time::Duration::from_millis(200));
        assert_eq!(on.resource.len(), 1);
    }

    #[test]
    fn bad_trace_settings_name_their_field() {
        let errs = errors(
            "[traces]\nsample = 1.5\nbatch = 0\nendpoint = \"localhost:4318\"\ntimeout = \"0s\"\n",
        );
        for field in [
            "traces.sample",
            "traces.batch",
            "traces.endpoint",
            "traces.timeout",
        ] {
            assert!(
                errs.iter().any(|e| e.starts_with(field)),
                "{field}: {errs:?}"
            );
        }
        let errs = errors("[traces]\nprotocol = \"thrift\"\n");
        assert!(
            errs.iter().any(|e| e.starts_with("traces.protocol")),
            "{errs:?}"
        );
    }
}
