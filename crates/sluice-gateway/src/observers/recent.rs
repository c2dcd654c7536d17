//! The ring of recent calls the incident explainer reads, fed when each call settles.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_core::{AttemptKind, CallRecord};
use sluice_telemetry::diagnose::Summary;
use tokio::time::Instant;

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
            attempt_ttfb: r.answered_own(sluice_core::Phase::Ttfb).unwrap_or_default(),
            attempt_own: r.attempt_own(sluice_core::Phase::Ttfb).unwrap_or_default(),
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

    /// Every kept call, with when it ended, oldest first: for the latency history.
    pub(crate) fn all(&self) -> Vec<(Instant, Summary)> {
        self.calls.lock().iter().cloned().collect()
    }

    /// The calls that finished in `(now - from, now - to]`.
    pub(crate) fn between(&self, now: Instant, from: Duration, to: Duration) -> Vec<Summary> {
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
