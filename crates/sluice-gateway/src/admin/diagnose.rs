//! `GET /admin/diagnose?window=300&baseline=1800`: the incident explainer over the calls kept
//! in memory: the last `window` seconds against the `baseline` seconds before them. Also the
//! ring those calls are kept in, fed when each call settles.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use sluice_core::{AttemptKind, CallRecord, ErrorKind, GatewayError};
use sluice_telemetry::diagnose::{Summary, explain};
use tokio::time::Instant;

use crate::Gateway;

/// The last calls, newest last, at most `keep` of them.
#[derive(Debug)]
pub struct Recent {
    keep: usize,
    calls: Mutex<VecDeque<(Instant, Summary)>>,
    /// `-`, shared by every call with no lane or upstream.
    none: Arc<str>,
}

impl Recent {
    /// Keeps the last `keep` calls.
    pub fn new(keep: usize) -> Self {
        Self {
            keep,
            calls: Mutex::new(VecDeque::with_capacity(keep.min(4_096))),
            none: Arc::from("-"),
        }
    }

    /// Keeps `r`, as of its end (the record's `done`, set as it settles).
    pub fn push(&self, r: &CallRecord) {
        let now = r.timings.done.unwrap_or(r.timings.received);
        let none = &self.none;
        let t = &r.timings;
        let total = t.total().unwrap_or_default();
        let upstream = r
            .upstream
            .as_ref()
            .or_else(|| r.attempts.last().map(|a| &a.upstream))
            .unwrap_or(none);
        let s = Summary {
            lane: r.lane.clone().unwrap_or_else(|| none.clone()),
            upstream: upstream.clone(),
            status: r.status,
            queue: t.queue().unwrap_or(total),
            upstream_ttfb: t.upstream_ttfb().unwrap_or_default(),
            ttfb: t
                .first_byte
                .map_or(total, |f| f.saturating_duration_since(t.received)),
            total,
            rate_limited: r.upstream_429s > 0 || r.rate_waited,
            hedged: r.attempts.iter().any(|a| a.kind == AttemptKind::Hedge),
            retried: r.attempts.iter().any(|a| a.kind == AttemptKind::Retry),
            cache_hit: r.cache.is_some_and(sluice_core::CacheLookup::served),
        };
        let mut calls = self.calls.lock();
        if calls.len() >= self.keep {
            calls.pop_front();
        }
        calls.push_back((now, s));
    }

    /// The calls that finished in `(now - from, now - to]`.
    fn between(&self, now: Instant, from: Duration, to: Duration) -> Vec<Summary> {
        self.calls
            .lock()
            .iter()
            .filter(|(at, _)| {
                let age = now.saturating_duration_since(*at);
                age < from && age >= to
            })
            .map(|(_, s)| s.clone())
            .collect()
    }
}

fn seconds(
    params: &HashMap<String, String>,
    name: &'static str,
    default: u64,
) -> Result<Duration, GatewayError> {
    match params.get(name) {
        None => Ok(Duration::from_secs(default)),
        Some(v) => match v.parse::<u64>() {
            Ok(s) if s > 0 => Ok(Duration::from_secs(s)),
            _ => Err(GatewayError::new(
                ErrorKind::InvalidRequest,
                format!("{name}: {v:?} is not a whole number of seconds above 0"),
            )
            .with_param(name)),
        },
    }
}

/// `GET /admin/diagnose`.
pub async fn show(
    State(gw): State<Arc<Gateway>>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    if let Some(unknown) = params
        .keys()
        .find(|k| !["window", "baseline"].contains(&k.as_str()))
    {
        return super::refuse(
            &GatewayError::new(
                ErrorKind::InvalidRequest,
                format!("unknown parameter `{unknown}`; use window, baseline (seconds)"),
            )
            .with_param(unknown.clone()),
        );
    }
    let (window, baseline) = match (
        seconds(&params, "window", 300),
        seconds(&params, "baseline", 1_800),
    ) {
        (Ok(w), Ok(b)) => (w, b),
        (Err(e), _) | (_, Err(e)) => return super::refuse(&e),
    };
    let Some(recent) = &gw.recent else {
        return super::refuse(&GatewayError::new(
            ErrorKind::NotFound,
            "the incident explainer keeps no calls: set [diagnose] keep above 0",
        ));
    };
    let now = Instant::now();
    let now_calls = recent.between(now, window, Duration::ZERO);
    let before = recent.between(now, window + baseline, window);
    let d = explain(&before, &now_calls);
    Json(serde_json::json!({
        "window_seconds": window.as_secs(),
        "baseline_seconds": baseline.as_secs(),
        "diagnosis": d,
    }))
    .into_response()
}
