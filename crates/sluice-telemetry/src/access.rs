//! The access log: one line per finished request (JSON or logfmt), written by a thread of
//! its own so that a slow or blocked output never holds a request. Off unless configured.

use std::fmt::Write as _;
use std::io::Write;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::SystemTime;

use prometheus_client::metrics::counter::Counter;
use sluice_core::{AttemptKind, CallRecord};

/// Whether and how the access log is written (`[telemetry] access_log`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessLogSetting {
    /// No access log.
    #[default]
    Off,
    /// One JSON object per line.
    Json,
    /// `key=value` pairs.
    Logfmt,
}

impl AccessLogSetting {
    /// The format lines are written in; `None`: none are.
    pub fn format(self) -> Option<AccessFormat> {
        match self {
            Self::Off => None,
            Self::Json => Some(AccessFormat::Json),
            Self::Logfmt => Some(AccessFormat::Logfmt),
        }
    }
}

/// How lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessFormat {
    /// One JSON object per line.
    Json,
    /// `key=value` pairs, values with spaces or quotes quoted.
    Logfmt,
}

/// Lines waiting for the writer; beyond this, lines are dropped and counted.
const QUEUE: usize = 8192;

enum Msg {
    Line(String),
    /// Answered once every line sent before it is written and flushed.
    Sync(SyncSender<()>),
}

/// The access log's sending side, held by the gateway.
#[derive(Debug)]
pub struct AccessLog {
    format: AccessFormat,
    tx: SyncSender<Msg>,
    dropped: Counter,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Line(_) => "Line",
            Self::Sync(_) => "Sync",
        })
    }
}

impl AccessLog {
    /// Starts the writer thread, writing to `out`; lines it drops are counted in `dropped`
    /// (the `sluice_access_log_dropped_lines` metric).
    pub fn start(
        format: AccessFormat,
        out: Box<dyn Write + Send>,
        dropped: Counter,
    ) -> std::io::Result<Self> {
        let (tx, rx) = sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("sluice-access-log".into())
            .spawn(move || write_lines(&rx, out))?;
        Ok(Self {
            format,
            tx,
            dropped,
        })
    }

    /// Logs `record`'s line; never waits: when the writer is behind by a full queue the
    /// line is dropped and counted.
    pub fn log(&self, record: &CallRecord) {
        let text = line(record, self.format);
        match self.tx.try_send(Msg::Line(text)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.inc();
            }
        }
    }

    /// Lines dropped because the writer could not keep up (or had failed).
    pub fn dropped(&self) -> u64 {
        self.dropped.get()
    }

    /// Waits until every line logged so far is written and flushed (at shutdown, and in
    /// tests). Blocks the calling thread.
    pub fn sync(&self) {
        let (tx, rx) = sync_channel(1);
        if self.tx.send(Msg::Sync(tx)).is_ok() {
            let _ = rx.recv();
        }
    }
}

fn write_lines(rx: &Receiver<Msg>, out: Box<dyn Write + Send>) {
    let mut out = std::io::BufWriter::new(out);
    let mut failed = false;
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        // Everything already queued goes out in one flush.
        while let Some(msg) = next {
            match msg {
                Msg::Line(text) => {
                    if !failed && let Err(e) = out.write_all(text.as_bytes()) {
                        tracing::error!("access log: writing failed, lines are dropped: {e}");
                        failed = true;
                    }
                }
                Msg::Sync(done) => {
                    let _ = out.flush();
                    let _ = done.send(());
                }
            }
            next = rx.try_recv().ok();
        }
        if !failed && let Err(e) = out.flush() {
            tracing::error!("access log: writing failed, lines are dropped: {e}");
            failed = true;
        }
    }
}

/// Milliseconds rounded to the microsecond.
fn ms(d: Option<std::time::Duration>) -> Option<f64> {
    d.map(|d| (d.as_secs_f64() * 1e6).round() / 1e3)
}

/// The fields of one line, in order.
fn fields(r: &CallRecord) -> Vec<(&'static str, Field)> {
    let usage = r.usage.unwrap_or_default();
    let t = &r.timings;
    let count = |k: AttemptKind| r.attempts.iter().filter(|a| a.kind == k).count() as u64;
    let text = |v: &Option<Arc<str>>| v.as_deref().map_or(Field::Null, |s| Field::Text(s.into()));
    vec![
        ("ts", Field::Text(timestamp(t.received_wall))),
        ("request_id", Field::Text(r.request_id.as_str().into())),
        ("tenant", text(&r.tenant)),
        ("key", text(&r.api_key)),
        ("group", text(&r.model_group)),
        ("lane", text(&r.lane)),
        ("upstream", text(&r.upstream)),
        ("status", Field::Int(u64::from(r.status))),
        (
            "error",
            r.error
                .map_or(Field::Null, |e| Field::Text(e.code().into())),
        ),
        ("stream", Field::Bool(r.stream)),
        (
            "ttfb_ms",
            ms(t.first_byte
                .map(|f| f.saturating_duration_since(t.received)))
            .map_or(Field::Null, Field::Float),
        ),
        ("total_ms", ms(t.total()).map_or(Field::Null, Field::Float)),
        ("prompt_tokens", Field::Int(usage.prompt_tokens)),
        ("cached_tokens", Field::Int(usage.cached_tokens)),
        ("completion_tokens", Field::Int(usage.completion_tokens)),
        ("usage_estimated", Field::Bool(r.usage_estimated)),
        ("cost_micros", r.cost_micros.map_or(Field::Null, Field::Int)),
        (
            "cache",
            r.cache
                .map_or(Field::Null, |c| Field::Text(c.label().into())),
        ),
        ("attempts", Field::Int(r.attempts.len() as u64)),
        ("hedges", Field::Int(count(AttemptKind::Hedge))),
        (
            "hedge_rule",
            r.hedge_rule.map_or(Field::Null, |h| Field::Text(h.into())),
        ),
        ("retries", Field::Int(count(AttemptKind::Retry))),
    ]
}

enum Field {
    Null,
    Bool(bool),
    Int(u64),
    Float(f64),
    Text(String),
}

/// `record` as one line, newline included.
pub fn line(record: &CallRecord, format: AccessFormat) -> String {
    let fields = fields(record);
    match format {
        AccessFormat::Json => {
            let mut map = serde_json::Map::new();
            for (k, v) in fields {
                let v = match v {
                    Field::Null => serde_json::Value::Null,
                    Field::Bool(b) => b.into(),
                    Field::Int(n) => n.into(),
                    Field::Float(f) => f.into(),
                    Field::Text(s) => s.into(),
                };
                map.insert(k.to_string(), v);
            }
            let mut out = serde_json::Value::Object(map).to_string();
            out.push('\n');
            out
        }
        AccessFormat::Logfmt => {
            let mut out = String::new();
            for (k, v) in fields {
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push_str(k);
                out.push('=');
                match v {
                    Field::Null => {}
                    Field::Bool(b) => out.push_str(if b { "true" } else { "false" }),
                    Field::Int(n) => {
                        let _ = write!(out, "{n}");
                    }
                    Field::Float(f) => {
                        let _ = write!(out, "{f}");
                    }
                    Field::Text(s) => logfmt_value(&mut out, &s),
                }
            }
            out.push('\n');
            out
        }
    }
}

fn logfmt_value(out: &mut String, s: &str) {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| !c.is_whitespace() && !c.is_control() && c != '"' && c != '=');
    if plain {
        out.push_str(s);
    } else {
        // A JSON string is a quoted logfmt value with its escapes.
        out.push_str(&serde_json::Value::from(s).to_string());
    }
}

/// RFC 3339 in UTC with milliseconds.
fn timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

#[cfg(test)]
mod tests;
