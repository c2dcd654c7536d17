//! The telemetry hub: takes finished call records, updates metrics and windows, and renders
//! the Prometheus page and the latency report.

use std::sync::Arc;

use prometheus_client::registry::Registry;
use sluice_core::{AttemptKind, AttemptOutcome, CallRecord, ErrorKind, Phase};
use sluice_tail::{WindowConfig, WindowError};
use tokio::time::Instant;

use crate::clients::{ClientKey, Clients};
use crate::metrics::{
    AffinityLabels, AttemptLabels, CacheLabels, ClientLabels, CostLabels, DeadlineLabels,
    FallbackLabels, GroupLabels, HedgeLabels, Metrics, PairLabels, RateWaitLabels, RequestLabels,
    RetryLabels, RouteLabels, TokenLabels, UpstreamLabels, WINDOW_PERCENTILES, WindowLabels,
};
use crate::series::{Series, SeriesCache, SeriesKey};
use crate::windows::{LatencyReport, WindowKey, Windows};

/// Label used where a record has no group or upstream.
const NONE: &str = "-";

/// Metrics and windows of one gateway.
#[derive(Debug)]
pub struct Telemetry {
    registry: Registry,
    metrics: Metrics,
    windows: Windows,
    /// What callers waited, per (lane, group, tenant class).
    clients: Clients,
    /// Handles on the series every request writes, by (group, upstream, lane, class, mode).
    series: SeriesCache,
    /// [`NONE`], shared by every series that uses it.
    none: Arc<str>,
    /// What tenants are called in labels.
    tenant_labels: crate::TenantLabels,
}

/// Counts a request as in flight until dropped.
#[derive(Debug)]
pub struct InflightGuard(Arc<Telemetry>);

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.0.metrics.inflight.dec();
    }
}

impl Telemetry {
    /// Empty telemetry with the given window shape.
    pub fn new(window: WindowConfig) -> Result<Self, WindowError> {
        let mut registry = Registry::default();
        let metrics = Metrics::new(&mut registry);
        Ok(Self {
            registry,
            metrics,
            windows: Windows::new(window)?,
            clients: Clients::new(window),
            series: SeriesCache::default(),
            none: Arc::from(NONE),
            tenant_labels: crate::TenantLabels::default(),
        })
    }

    /// Names tenants in labels as `labels` says.
    pub fn with_tenant_labels(mut self, labels: crate::TenantLabels) -> Self {
        self.tenant_labels = labels;
        self
    }

    /// `tenant`'s value in labels.
    pub fn tenant_label(&self, tenant: Option<&str>) -> Arc<str> {
        self.tenant_labels.value(tenant)
    }

    /// The metric families, for the parts of the gateway that count on their own.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Calls open now (their guards not yet dropped).
    pub fn in_flight(&self) -> i64 {
        self.metrics.inflight.get()
    }

    /// Counts a call in flight until the guard is dropped.
    pub fn inflight(self: &Arc<Self>) -> InflightGuard {
        self.metrics.inflight.inc();
        InflightGuard(self.clone())
    }

    /// Folds one finished call into metrics and windows.
    pub fn observe(&self, rec: &CallRecord) {
        // This runs once a request: the series it writes are held by (group, upstream, lane,
        // class, mode), found with one lookup; label values are shared, not copied.
        let group = rec.model_group.as_ref().unwrap_or(&self.none);
        let upstream = rec.upstream.as_ref().unwrap_or(&self.none);
        let lane = rec.lane.as_ref().unwrap_or(&self.none);
        let class = rec.class.as_ref().unwrap_or(&self.none);
        let m = &self.metrics;
        let key = SeriesKey {
            group,
            upstream,
            lane,
            class,
            stream: rec.stream,
        };
        let s = self.series.get(key);
        let code = rec.error.map_or("ok", ErrorKind::code);
        let request_labels = || RequestLabels {
            lane: lane.clone(),
            group: group.clone(),
            upstream: upstream.clone(),
            status: rec.status,
            code,
        };
        if rec.status == 200 && rec.error.is_none() {
            s.ok.get_or_init(|| m.requests.get_or_create(&request_labels()).clone())
                .inc();
        } else {
            m.requests.get_or_create(&request_labels()).inc();
        }
        self.count_route(rec);
        self.observe_client(rec, key, &s);
        for a in &rec.attempts {
            if *a.upstream == **upstream {
                self.observe_attempt(group, rec.stream, a, &s);
            } else {
                let other = self.series.get(SeriesKey {
                    upstream: &a.upstream,
                    ..key
                });
                self.observe_attempt(group, rec.stream, a, &other);
            }
        }
        self.count_decisions(rec, group);
        if let (Some(u), Some(upstream)) = (rec.usage, rec.upstream.as_ref()) {
            let tokens = s.tokens.get_or_init(|| {
                ["prompt", "completion", "cached", "cache_write"].map(|kind| {
                    let labels = TokenLabels {
                        group: group.clone(),
                        upstream: upstream.clone(),
                        kind,
                    };
                    m.tokens.get_or_create(&labels).clone()
                })
            });
            let counts = [
                u.prompt_tokens,
                u.completion_tokens,
                u.cached_tokens,
                u.cache_write_tokens,
            ];
            for (counter, n) in tokens.iter().zip(counts) {
                counter.inc_by(n);
            }
            self.count_prompt_cache(rec, group, upstream, &u, &s);
            if let Some(cost) = rec.cost_micros {
                let labels = || CostLabels {
                    group: group.clone(),
                    upstream: upstream.clone(),
                };
                s.cost
                    .get_or_init(|| m.cost_micros.get_or_create(&labels()).clone())
                    .inc_by(cost);
            }
        }
    }

    /// The task route that chose the call's group, an unknown task, the fallbacks taken.
    fn count_route(&self, rec: &CallRecord) {
        let m = &self.metrics;
        if let Some(t) = &rec.route {
            m.routed
                .get_or_create(&RouteLabels {
                    route: t.route.clone(),
                    rule: t.rule.clone(),
                    group: t.group.clone(),
                })
                .inc();
            if t.unknown_task {
                m.unknown_tasks
                    .get_or_create(&GroupLabels {
                        group: t.route.clone(),
                    })
                    .inc();
            }
        }
        for f in &rec.fallbacks {
            m.fallbacks
                .get_or_create(&FallbackLabels {
                    group: f.from.clone(),
                    to: f.to.clone(),
                    reason: f.reason,
                })
                .inc();
        }
    }

    /// What the policies decided for the call: hedges and retries denied, the answer cache,
    /// estimated or unpriced usage, prefix affinity, the stage its deadline ran out in.
    fn count_decisions(&self, rec: &CallRecord, group: &Arc<str>) {
        let m = &self.metrics;
        let g = || GroupLabels {
            group: group.clone(),
        };
        if rec.hedge_denied {
            self.count_hedge(group, "denied");
        }
        if rec.retry_denied {
            let labels = RetryLabels {
                group: group.clone(),
                outcome: "denied",
            };
            m.retries.get_or_create(&labels).inc();
        }
        if let Some(lookup) = rec.cache {
            let labels = CacheLabels {
                group: group.clone(),
                result: lookup.label(),
            };
            m.cache.get_or_create(&labels).inc();
            if rec.cache_saved_micros > 0 {
                m.cache_saved_micros
                    .get_or_create(&g())
                    .inc_by(rec.cache_saved_micros);
            }
        }
        if rec.usage_estimated || rec.unpriced {
            let labels = UpstreamLabels {
                group: group.clone(),
                upstream: rec.upstream.clone().unwrap_or_else(|| Arc::from("none")),
            };
            if rec.usage_estimated {
                m.usage_estimated.get_or_create(&labels).inc();
            }
            if rec.unpriced {
                m.unpriced.get_or_create(&labels).inc();
            }
        }
        if let Some(by_prefix) = rec.by_prefix {
            let labels = AffinityLabels {
                group: group.clone(),
                routed: if by_prefix { "prefix" } else { "weight" },
            };
            m.affinity.get_or_create(&labels).inc();
        }
        if let Some(stage) = rec.deadline_stage {
            let labels = DeadlineLabels {
                group: group.clone(),
                stage: stage.label(),
            };
            m.deadlines.get_or_create(&labels).inc();
        }
        if rec.rate_waited {
            let labels = RateWaitLabels {
                group: group.clone(),
                lane: rec.lane.clone().unwrap_or_else(|| Arc::from("-")),
            };
            m.rate_waits.get_or_create(&labels).inc();
        }
    }

    /// What the caller waited: from arrival to the first byte (the whole call when none came:
    /// an error's answer is its first byte) and to the last, in the histograms and the client
    /// windows of its (lane, group, class); and its time in sluice's queue.
    fn observe_client(&self, rec: &CallRecord, key: SeriesKey<'_>, s: &Series) {
        let m = &self.metrics;
        let labels = || ClientLabels {
            lane: key.lane.clone(),
            group: key.group.clone(),
            class: key.class.clone(),
        };
        let t = &rec.timings;
        if let Some(queue) = t.queue() {
            s.queue_seconds
                .get_or_init(|| m.queue_seconds.get_or_create(&labels()).clone())
                .observe(queue.as_secs_f64());
        }
        let (Some(done), Some(total)) = (t.done, t.total()) else {
            return;
        };
        let ttfb = t.first_byte.map_or(total, |f| {
            f.saturating_duration_since(t.received).min(total)
        });
        s.request_seconds
            .get_or_init(|| m.request_seconds.get_or_create(&labels()).clone())
            .observe(total.as_secs_f64());
        s.request_ttfb_seconds
            .get_or_init(|| m.request_ttfb_seconds.get_or_create(&labels()).clone())
            .observe(ttfb.as_secs_f64());
        let windows = s.client.get_or_init(|| {
            let k = ClientKey {
                lane: key.lane.clone(),
                group: key.group.clone(),
                class: key.class.clone(),
            };
            self.clients.get(&k, done)
        });
        if let Some(w) = windows {
            w.lock().record(done, ttfb, total);
        }
    }

    /// The provider prompt cache's share of a call's prompt, and its money, per tenant.
    fn count_prompt_cache(
        &self,
        rec: &CallRecord,
        group: &Arc<str>,
        upstream: &Arc<str>,
        u: &sluice_core::Usage,
        s: &Series,
    ) {
        let mut by_tenant = s.prompt_cache.lock();
        let counters = by_tenant.entry(rec.tenant.clone()).or_insert_with(|| {
            let tenant = self.tenant_label(rec.tenant.as_deref());
            let labels = |kind| crate::metrics::PromptCacheLabels {
                tenant: tenant.clone(),
                group: group.clone(),
                upstream: upstream.clone(),
                kind,
            };
            let m = &self.metrics;
            // One at a time: a family's guard must be gone before it is asked again.
            let token = |kind| m.prompt_cache_tokens.get_or_create(&labels(kind)).clone();
            let money = |kind| m.prompt_cache_micros.get_or_create(&labels(kind)).clone();
            let prompt = token("prompt");
            let cached = token("cached");
            let write = token("cache_write");
            let saved = money("saved");
            let premium = money("write_premium");
            [prompt, cached, write, saved, premium]
        });
        let counts = [
            u.prompt_tokens,
            u.cached_tokens,
            u.cache_write_tokens,
            rec.prompt_cache_saved_micros,
            rec.prompt_cache_premium_micros,
        ];
        for (counter, n) in counters.iter().zip(counts) {
            counter.inc_by(n);
        }
    }

    /// Records one attempt's latencies. Attempts sluice stopped waiting for count with the
    /// time it waited, a lower bound of the truth: timed-out attempts (the upstream's timeout
    /// or the request's deadline), and first attempts that lost to a hedge. Leaving them out would hide exactly the tail, and a hedging
    /// delay read from such a window would keep falling.
    fn observe_attempt(
        &self,
        group: &Arc<str>,
        stream: bool,
        a: &sluice_core::Attempt,
        s: &Series,
    ) {
        let m = &self.metrics;
        let labels = || AttemptLabels {
            upstream: a.upstream.clone(),
            outcome: a.outcome.label(),
        };
        if a.outcome == AttemptOutcome::Ok {
            s.attempt_ok
                .get_or_init(|| m.attempts.get_or_create(&labels()).clone())
                .inc();
        } else {
            m.attempts.get_or_create(&labels()).inc();
        }
        if a.kind == AttemptKind::Retry {
            let labels = RetryLabels {
                group: group.clone(),
                outcome: a.outcome.label(),
            };
            self.metrics.retries.get_or_create(&labels).inc();
        }
        if a.kind == AttemptKind::Hedge {
            let result = match a.outcome {
                AttemptOutcome::Ok => "won",
                AttemptOutcome::Lost => "lost",
                AttemptOutcome::Cancelled | AttemptOutcome::Pending => "cancelled",
                AttemptOutcome::Failed(_) => "failed",
            };
            self.count_hedge(group, result);
        }
        let censored = matches!(
            a.outcome,
            AttemptOutcome::Failed(ErrorKind::UpstreamTimeout | ErrorKind::DeadlineExceeded)
        ) || (a.outcome == AttemptOutcome::Lost && a.kind != AttemptKind::Hedge);
        let key = || WindowKey {
            group: group.clone(),
            upstream: a.upstream.clone(),
            stream,
        };
        let labels = || PairLabels {
            group: group.clone(),
            upstream: a.upstream.clone(),
            mode: key().mode(),
        };
        let end = a.ended.unwrap_or(a.started);
        let ttfb = a.first_byte.or(censored.then_some(end));
        let windows = |now| s.windows.get_or_init(|| self.windows.pair(&key(), now));
        if let Some(fb) = ttfb {
            let d = fb.saturating_duration_since(a.started);
            s.ttfb_seconds
                .get_or_init(|| m.upstream_ttfb_seconds.get_or_create(&labels()).clone())
                .observe(d.as_secs_f64());
            if let Some(w) = windows(fb) {
                Windows::record_in(w, Phase::Ttfb, fb, d);
            }
        }
        // An attempt's total time goes to its window only: the client-seen total is
        // `request_duration_seconds`, and a histogram per attempt of it doubled the scrape.
        if a.outcome == AttemptOutcome::Ok || censored {
            let d = end.saturating_duration_since(a.started);
            if let Some(w) = windows(end) {
                Windows::record_in(w, Phase::Total, end, d);
            }
        }
    }

    fn count_hedge(&self, group: &Arc<str>, result: &'static str) {
        let labels = HedgeLabels {
            group: group.clone(),
            result,
        };
        self.metrics.hedges.get_or_create(&labels).inc();
    }

    /// The percentile windows, for policies that read them (hedging, breakers).
    pub fn windows(&self) -> &Windows {
        &self.windows
    }

    /// The latency report at `now`: what callers waited, and what upstreams' attempts took.
    pub fn latency_report(&self, now: Instant) -> LatencyReport {
        let mut report = self.windows.report(now);
        report.clients = self.clients.report(now);
        report
    }

    /// The page in the Prometheus text format 0.0.4 (for a scraper that does not ask for
    /// OpenMetrics).
    pub fn render_text(&self, now: Instant) -> String {
        crate::text004::from_openmetrics(&self.render(now))
    }

    /// The OpenMetrics page, with window percentiles refreshed to `now`.
    pub fn render(&self, now: Instant) -> String {
        for u in self.windows.report(now).upstreams {
            for (phase, p) in [(Phase::Ttfb, u.ttfb), (Phase::Total, u.total)] {
                let labels = WindowLabels {
                    group: u.group.clone(),
                    upstream: u.upstream.clone(),
                    mode: u.mode,
                    phase: phase.label(),
                };
                for (family, (_, q, v)) in self.metrics.window_percentiles.iter().zip(p.labelled())
                {
                    debug_assert!(WINDOW_PERCENTILES.iter().any(|(_, wq)| *wq == q));
                    family.get_or_create(&labels).set(v.as_secs_f64());
                }
            }
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

mod events;
mod gauges;

#[cfg(test)]
mod tests;
