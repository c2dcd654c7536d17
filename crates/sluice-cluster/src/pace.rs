//! A deployment's pacing shared by every instance: one bucket per dimension in Redis, from
//! which each instance leases a few requests and tokens at a time (a twentieth of a second's
//! worth, at least what the waiting call needs) and spends them locally, so admission asks
//! synchronously and Redis is asked about once per lease, in the background. A lease unused
//! after [`LEASE_LIFE`] is dropped, never given back: the cluster can only send less than the
//! limit, never more. A 429's pause and the provider's rate-limit reports reach the shared
//! bucket with the next lease. While Redis cannot answer, the instance paces alone at its
//! share of each limit.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use redis::Script;
use sluice_tail::pace::{Dimension, DimensionState, Pace, PaceSpec, Pacer};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::health::{Health, Kind};
use crate::store::Redis;

/// How long a lease may be spent: a unit leased early and spent late arrives closer to the
/// next than the bucket allowed, so leases are short-lived.
pub const LEASE_LIFE: Duration = Duration::from_millis(250);
/// The share of the assumed burst the shared bucket allows: units leased by several
/// instances reach the provider with a few milliseconds of jitter each, and a bucket as
/// deep as the provider's would meet its edge.
const BURST_SHARE: f64 = 0.8;
/// The share of the burst lanes after the first leave in the bucket for the first lane's
/// calls on any instance (batch work never takes the last of it from interactive calls).
const KEEP_FOR_FIRST_LANE: f64 = 0.25;
/// How much of a second's rate one lease asks for.
const LEASE_SHARE: f64 = 0.05;
/// How soon admission looks again while a lease is on its way.
const POLL: Duration = Duration::from_millis(1);

/// What this instance holds of the shared bucket, and what it must tell it.
#[derive(Debug)]
struct Stock {
    requests: u64,
    tokens: u64,
    expires: Instant,
    /// Tokens the call waiting needs (the first lane's, when one of its calls waits).
    want_tokens: u64,
    /// Whether a call of the first lane asked since the last lease (then the lease may take
    /// what later lanes leave in the bucket).
    first_lane_asked: bool,
    asking: bool,
    /// Redis said nothing can go before this; `true` when it said so to a call of a later
    /// lane (whose wait the first lane's calls need not share).
    not_before: Option<(Instant, bool)>,
    /// A 429's pause to tell every instance.
    pause: Option<Duration>,
    /// What the upstream last said is left (requests, tokens).
    left: [Option<u64>; 2],
    /// The rates in force: configured, lowered by what answers report.
    rpm: u64,
    tpm: u64,
}

#[derive(Debug)]
struct Shared {
    stock: Mutex<Stock>,
    wake: Notify,
}

/// One deployment's pacer, shared through Redis.
#[derive(Debug)]
pub struct RedisPace {
    shared: Arc<Shared>,
    health: Arc<Health>,
    /// The pacer of this instance's share, used while Redis cannot answer.
    local: Pacer,
    spec: PaceSpec,
    worker: tokio::task::JoinHandle<()>,
}

impl Drop for RedisPace {
    fn drop(&mut self) {
        self.worker.abort();
    }
}

/// One second's worth of `per_minute` (the burst sluice assumes of a provider's limit), less
/// the margin for jitter.
fn burst(per_minute: u64) -> u64 {
    ((per_minute.div_ceil(60) as f64 * BURST_SHARE).floor() as u64).max(1)
}

/// What lanes after the first leave in a bucket of `burst`.
fn keep(burst: u64) -> u64 {
    (burst as f64 * KEEP_FOR_FIRST_LANE).floor() as u64
}

fn lease(per_minute: u64) -> u64 {
    ((per_minute as f64 / 60.0 * LEASE_SHARE).ceil() as u64).max(1)
}

impl RedisPace {
    /// Starts the pacer of `deployment` with `spec`, keeping `share` of it while Redis cannot
    /// answer.
    pub(crate) fn start(
        redis: Arc<Redis>,
        health: Arc<Health>,
        deployment: &str,
        spec: PaceSpec,
        share: f64,
    ) -> Self {
        let now = Instant::now();
        let part = |n: Option<u64>| n.map(|n| ((n as f64 * share).floor() as u64).max(1));
        let local = Pacer::new(
            PaceSpec {
                rpm: part(spec.rpm),
                tpm: part(spec.tpm),
            },
            now,
        );
        let shared = Arc::new(Shared {
            stock: Mutex::new(Stock {
                requests: 0,
                tokens: 0,
                expires: now,
                want_tokens: 0,
                first_lane_asked: false,
                asking: false,
                not_before: None,
                pause: None,
                left: [None, None],
                rpm: spec.rpm.unwrap_or(0),
                tpm: spec.tpm.unwrap_or(0),
            }),
            wake: Notify::new(),
        });
        let key = redis.key(&format!("pace:{{{deployment}}}"));
        let worker = tokio::spawn(lease_loop(redis, health.clone(), shared.clone(), key));
        Self {
            shared,
            health,
            local,
            spec,
            worker,
        }
    }

    fn ask(&self, s: &mut Stock) {
        if !s.asking {
            s.asking = true;
            self.shared.wake.notify_one();
        }
    }
}

/// Asks Redis for a lease each time the pacer wakes it.
async fn lease_loop(redis: Arc<Redis>, health: Arc<Health>, shared: Arc<Shared>, key: String) {
    let script = Script::new(include_str!("pace/lease.lua"));
    loop {
        shared.wake.notified().await;
        let (args, pause) = {
            let mut s = shared.stock.lock();
            let pause = s.pause.take();
            let want_req = lease(s.rpm.max(1));
            let least_tok = s.want_tokens.min(burst(s.tpm.max(1)));
            let want_tok = lease(s.tpm.max(1)).max(s.want_tokens);
            let left = s.left;
            s.left = [None, None];
            let (rb, tb) = (burst(s.rpm.max(1)), burst(s.tpm.max(1)));
            let later = !s.first_lane_asked;
            s.first_lane_asked = false;
            (
                [
                    s.rpm,
                    rb,
                    want_req,
                    s.tpm,
                    tb,
                    want_tok,
                    least_tok,
                    if later { keep(rb) } else { 0 },
                    if later { keep(tb) } else { 0 },
                ],
                (pause, left),
            )
        };
        let (pause, left) = pause;
        let opt = |v: Option<u64>| v.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let got = redis
            .eval::<Vec<i64>>(&script, |i| {
                i.key(&key);
                for a in &args[..7] {
                    i.arg(*a);
                }
                i.arg(pause.map_or(0, |p| p.as_micros() as u64))
                    .arg(opt(left[0]))
                    .arg(opt(left[1]))
                    .arg(args[7])
                    .arg(args[8]);
            })
            .await;
        let now = Instant::now();
        let mut s = shared.stock.lock();
        s.asking = false;
        match got {
            Ok(v) => {
                let n = |i: usize| u64::try_from(v.get(i).copied().unwrap_or(0)).unwrap_or(0);
                let wait = Duration::from_micros(n(2));
                if wait.is_zero() {
                    if s.expires <= now {
                        s.requests = 0;
                        s.tokens = 0;
                    }
                    s.requests += n(0);
                    s.tokens += n(1);
                    s.expires = now + LEASE_LIFE;
                    s.not_before = None;
                } else {
                    s.not_before = Some((now + wait, args[7] > 0 || args[8] > 0));
                }
            }
            Err(e) => {
                // What was not told is told with the next lease.
                if s.pause.is_none() {
                    s.pause = pause;
                }
                health.failed(Kind::Pacing, &e);
            }
        }
    }
}

impl Pace for RedisPace {
    fn ready_at(&mut self, now: Instant, tokens: u64) -> Instant {
        self.ready_in_lane(now, tokens, 0)
    }

    fn ready_in_lane(&mut self, now: Instant, tokens: u64, lane: usize) -> Instant {
        if self.health.is_down() {
            return self.local.ready_at(now, tokens);
        }
        let mut s = self.shared.stock.lock();
        if s.expires <= now {
            s.requests = 0;
            s.tokens = 0;
        }
        let need = if s.tpm > 0 {
            tokens.min(burst(s.tpm))
        } else {
            0
        };
        let fits = (s.rpm == 0 || s.requests >= 1) && (s.tpm == 0 || s.tokens >= need);
        if fits {
            return now;
        }
        // A later lane's call never hides that a call of the first lane waits.
        if lane == 0 || !s.first_lane_asked {
            s.want_tokens = tokens;
        }
        s.first_lane_asked |= lane == 0;
        if let Some((at, later)) = s.not_before
            && at > now
            && (!later || lane > 0)
        {
            return at;
        }
        self.ask(&mut s);
        now + POLL
    }

    fn take(&mut self, now: Instant, tokens: u64) {
        // The local share counts too, so an outage does not start from a full bucket.
        self.local.take(now, tokens);
        if self.health.is_down() {
            return;
        }
        let mut s = self.shared.stock.lock();
        s.requests = s.requests.saturating_sub(1);
        s.tokens = s.tokens.saturating_sub(tokens);
        // The next lease is asked for before this one is spent.
        let low = (s.rpm > 0 && s.requests < lease(s.rpm).div_ceil(2))
            || (s.tpm > 0 && s.tokens < lease(s.tpm).div_ceil(2));
        if low {
            self.ask(&mut s);
        }
    }

    fn observe(
        &mut self,
        now: Instant,
        dim: Dimension,
        limit: u64,
        remaining: u64,
        reset: Duration,
    ) {
        self.local.observe(now, dim, limit, remaining, reset);
        let mut s = self.shared.stock.lock();
        match dim {
            Dimension::Requests => {
                s.rpm = self.spec.rpm.map_or(limit, |c| c.min(limit));
                s.left[0] = Some(remaining);
            }
            Dimension::Tokens => {
                s.tpm = self.spec.tpm.map_or(limit, |c| c.min(limit));
                s.left[1] = Some(remaining);
            }
        }
    }

    fn exhausted(&mut self, now: Instant) {
        self.local.exhausted(now);
        let mut s = self.shared.stock.lock();
        s.requests = 0;
        s.tokens = 0;
    }

    fn paused(&mut self, now: Instant, until: Instant) {
        self.exhausted(now);
        let mut s = self.shared.stock.lock();
        let d = until.saturating_duration_since(now);
        s.pause = Some(s.pause.map_or(d, |p| p.max(d)));
        s.not_before = Some((until, false));
        self.ask(&mut s);
    }

    fn state(&mut self, now: Instant) -> (Option<DimensionState>, Option<DimensionState>) {
        if self.health.is_down() {
            return self.local.state(now);
        }
        let s = self.shared.stock.lock();
        let dim = |rate: u64, have: u64| {
            (rate > 0).then(|| DimensionState {
                per_minute: rate,
                burst: burst(rate),
                available: have,
            })
        };
        (dim(s.rpm, s.requests), dim(s.tpm, s.tokens))
    }
}
