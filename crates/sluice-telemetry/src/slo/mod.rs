//! Service-level objectives: whether a finished call was a good or a bad event of an SLO, and
//! when bad, whose fault it was, so that an alert can say "the upstream is slow" apart from
//! "sluice is queueing". The judge is a pure function of what the call record says (and
//! whether its upstream is rate-limiting right now); [`rules`] writes the Prometheus rules
//! that turn the counts into multi-window, multi-burn-rate alerts per culprit.

mod params;
pub mod rules;

pub use params::{SloKind, SloParams};

use std::sync::Arc;
use std::time::Duration;

use sluice_core::{CallRecord, ErrorKind, Phase};

/// Which latency a latency objective bounds (`measure`, default `ttfb`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// Arrival to the first byte of the answer.
    #[default]
    Ttfb,
    /// Arrival to the last byte.
    Total,
}

/// What an SLO promises.
#[derive(Clone, Debug, PartialEq)]
pub enum Objective {
    /// At least `target` of answered requests within `threshold`.
    Latency {
        /// Which latency.
        measure: Measure,
        /// The bound.
        threshold: Duration,
        /// The share of good events promised (0.99).
        target: f64,
    },
    /// At least `target` of requests answered without a server-side error.
    Availability {
        /// The share promised (0.999).
        target: f64,
    },
    /// At least `floor` of prompt tokens served from the provider's prompt cache (judged
    /// from the token counters, not per request).
    CacheShare {
        /// The least share.
        floor: f64,
    },
    /// At least `target` of batch jobs finished within their window (judged as each job
    /// ends, not per request): a job whose window closed with items still queued is bad,
    /// and its culprit is the queue in sluice's batch lane.
    BatchWindow {
        /// The share promised (0.99).
        target: f64,
    },
}

/// How a batch job ended, as the batch-window SLO judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobEnd {
    /// Every item ended within the window.
    Completed,
    /// The client cancelled it: no event.
    Cancelled,
    /// Its window closed with items never sent.
    Expired,
}

/// One SLO, over the requests of some lanes and model groups (all when empty).
#[derive(Clone, Debug, PartialEq)]
pub struct Slo {
    /// Its name (a metric label).
    pub name: Arc<str>,
    /// What it promises.
    pub objective: Objective,
    /// Lanes it covers (all when empty).
    pub lanes: Vec<Arc<str>>,
    /// Model groups it covers (all when empty).
    pub groups: Vec<Arc<str>>,
}

/// Whose fault a bad event was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Culprit {
    /// The upstream took longer than the objective allows.
    UpstreamSlow,
    /// The upstream answered 429, or the call met a deployment paused after one: sluice
    /// waited for the provider's rate limit.
    UpstreamRateLimited,
    /// The upstream failed (5xx, timeout, connection, unreadable answer, breaker open).
    UpstreamErrors,
    /// The call waited in sluice's queue (admission) for a slot.
    SluiceQueueing,
    /// Time inside sluice other than queueing, or sluice's own failure.
    SluiceOverhead,
}

impl Culprit {
    /// Every culprit, in the order rules are written.
    pub const ALL: [Culprit; 5] = [
        Self::UpstreamSlow,
        Self::UpstreamRateLimited,
        Self::UpstreamErrors,
        Self::SluiceQueueing,
        Self::SluiceOverhead,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::UpstreamSlow => "upstream_slow",
            Self::UpstreamRateLimited => "upstream_rate_limited",
            Self::UpstreamErrors => "upstream_errors",
            Self::SluiceQueueing => "sluice_queueing",
            Self::SluiceOverhead => "sluice_overhead",
        }
    }
}

/// An event's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Within the objective.
    Good,
    /// Outside it, and why.
    Bad(Culprit),
}

/// What the judge reads of a finished call.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    /// Its lane.
    pub lane: Option<&'a str>,
    /// Its model group.
    pub group: Option<&'a str>,
    /// The status the client got.
    pub status: u16,
    /// Its error, if any.
    pub error: Option<ErrorKind>,
    /// Arrival to dispatch (parse, route, queue).
    pub queue: Duration,
    /// Dispatch to the upstream's first byte (or last, for [`Measure::Total`]); for a call
    /// that had none, dispatch to its end.
    pub upstream: Duration,
    /// What the upstream itself took: the answering attempt's own first byte (or last), from
    /// its own start, or, when none answered, the longest an attempt was out without an
    /// answer.
    pub attempt: Duration,
    /// Arrival to the first byte sent (the whole call when none was).
    pub ttfb: Duration,
    /// Arrival to the end.
    pub total: Duration,
    /// 429s its attempts met.
    pub upstream_429s: u32,
    /// Whether its upstream is pausing after a 429 now.
    pub cooling: bool,
    /// It waited in sluice's queue for the upstream's rate limit.
    pub rate_waited: bool,
    /// Sluice refused it, or it ran out of time, in a queue held while the upstream answered
    /// far slower than usual.
    pub slow_held: bool,
}

impl<'a> Facts<'a> {
    /// The facts of `r`, its upstream cooling or not.
    pub fn of(r: &'a CallRecord, measure: Measure, cooling: bool) -> Self {
        let t = &r.timings;
        let total = t.total().unwrap_or_default();
        let ttfb = t
            .first_byte
            .map_or(total, |f| f.saturating_duration_since(t.received));
        let (upstream, phase) = match measure {
            Measure::Ttfb => (t.upstream_ttfb(), Phase::Ttfb),
            Measure::Total => (t.upstream_total(), Phase::Total),
        };
        // A call that ran out waiting for the upstream's first byte spent its time there.
        let upstream = upstream.or_else(|| Some(t.done?.saturating_duration_since(t.dispatched?)));
        Self {
            lane: r.lane.as_deref(),
            group: r.model_group.as_deref(),
            status: r.status,
            error: r.error,
            queue: t.queue().unwrap_or(total),
            upstream: upstream.unwrap_or_default(),
            attempt: r.attempt_own(phase).unwrap_or_default(),
            ttfb,
            total,
            upstream_429s: r.upstream_429s,
            cooling,
            rate_waited: r.rate_waited,
            slow_held: r.slow_held,
        }
    }
}

/// Whether the client's own doing decides the status (a bad request, a refused key, its
/// quota or credits, leaving early): not an event of any SLO.
fn clients_doing(status: u16) -> bool {
    (400..500).contains(&status)
}

/// Who took the time of a slow or timed-out call: the upstream when its own attempt alone
/// took longer than `threshold` allows (the call would have been late had sluice spent
/// nothing on it: a queue that grew behind a slower upstream is its consequence, not its
/// cause); else the rate limit when one was met (a 429, a pause after one, or a wait for the
/// pacer, the deadline running out in it included); else the upstream when the deadline ran
/// out in a queue held while it answered far slower than usual; else the largest of
/// queueing, the upstream, and the rest.
fn slow_culprit(f: &Facts<'_>, value: Duration, threshold: Option<Duration>) -> Culprit {
    if threshold.is_some_and(|th| f.attempt > th) {
        return Culprit::UpstreamSlow;
    }
    if f.upstream_429s > 0 || f.cooling || f.rate_waited {
        return Culprit::UpstreamRateLimited;
    }
    if f.slow_held {
        return Culprit::UpstreamSlow;
    }
    let rest = value.saturating_sub(f.queue + f.upstream);
    if f.upstream >= f.queue && f.upstream >= rest {
        Culprit::UpstreamSlow
    } else if f.queue >= rest {
        Culprit::SluiceQueueing
    } else {
        Culprit::SluiceOverhead
    }
}

impl Slo {
    /// The share of good events it promises, for an SLO judged event by event (none for a
    /// prompt-cache floor).
    pub fn target(&self) -> Option<f64> {
        match self.objective {
            Objective::Latency { target, .. }
            | Objective::Availability { target }
            | Objective::BatchWindow { target } => Some(target),
            Objective::CacheShare { .. } => None,
        }
    }

    /// Whether a call of `lane` and `group` is one of this SLO's.
    pub fn covers(&self, lane: Option<&str>, group: Option<&str>) -> bool {
        let has = |list: &[Arc<str>], v: Option<&str>| {
            list.is_empty() || v.is_some_and(|v| list.iter().any(|x| &**x == v))
        };
        has(&self.lanes, lane) && has(&self.groups, group)
    }

    /// The latency this SLO measures, when it is a latency objective.
    pub fn measure(&self) -> Measure {
        match self.objective {
            Objective::Latency { measure, .. } => measure,
            _ => Measure::Ttfb,
        }
    }

    /// The verdict on a batch job that ended as `end`, `None` when it is no event of this
    /// SLO (another kind, or a job its client cancelled).
    pub fn judge_job(&self, end: JobEnd) -> Option<Verdict> {
        match (&self.objective, end) {
            (Objective::BatchWindow { .. }, JobEnd::Completed) => Some(Verdict::Good),
            (Objective::BatchWindow { .. }, JobEnd::Expired) => {
                Some(Verdict::Bad(Culprit::SluiceQueueing))
            }
            _ => None,
        }
    }

    /// The verdict on a call, `None` when it is no event of this SLO.
    pub fn judge(&self, f: &Facts<'_>) -> Option<Verdict> {
        if !self.covers(f.lane, f.group) {
            return None;
        }
        // An upstream's 429 passed to the client is the provider's limit, not the client's.
        if f.status == 429 && f.upstream_429s > 0 {
            return match self.objective {
                Objective::CacheShare { .. } | Objective::BatchWindow { .. } => None,
                _ => Some(Verdict::Bad(Culprit::UpstreamRateLimited)),
            };
        }
        if clients_doing(f.status) {
            return None;
        }
        match self.objective {
            Objective::CacheShare { .. } | Objective::BatchWindow { .. } => None,
            Objective::Latency {
                measure, threshold, ..
            } => {
                if f.status >= 500 {
                    // A failure is availability's to count; a time-out is slow too.
                    return (f.error == Some(ErrorKind::DeadlineExceeded))
                        .then(|| Verdict::Bad(slow_culprit(f, f.total, Some(threshold))));
                }
                let value = match measure {
                    Measure::Ttfb => f.ttfb,
                    Measure::Total => f.total,
                };
                Some(if value <= threshold {
                    Verdict::Good
                } else {
                    Verdict::Bad(slow_culprit(f, value, Some(threshold)))
                })
            }
            Objective::Availability { .. } => {
                if f.status < 500 {
                    return Some(Verdict::Good);
                }
                let rate_limited = f.upstream_429s > 0 || f.cooling || f.rate_waited;
                Some(Verdict::Bad(match f.error {
                    Some(
                        ErrorKind::UpstreamTimeout
                        | ErrorKind::UpstreamConnect
                        | ErrorKind::UpstreamServerError
                        | ErrorKind::UpstreamProtocol
                        | ErrorKind::UpstreamUnavailable,
                    ) => Culprit::UpstreamErrors,
                    Some(ErrorKind::Overloaded) if rate_limited => Culprit::UpstreamRateLimited,
                    // Refused for a queue the upstream's slowness built (each slot held
                    // longer): the upstream's.
                    Some(ErrorKind::Overloaded) if f.slow_held => Culprit::UpstreamSlow,
                    Some(ErrorKind::Overloaded) => Culprit::SluiceQueueing,
                    Some(ErrorKind::DeadlineExceeded) => slow_culprit(f, f.total, None),
                    _ => Culprit::SluiceOverhead,
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests;
