//! A deployment's pacing shared by every instance: one bucket per dimension in Redis, from
//! which each instance leases a few requests and tokens at a time (a twentieth of a second's
//! worth, at least what the waiting call needs) and spends them locally, so admission asks
//! synchronously and Redis is asked about once per lease, in the background. A lease unused
//! after [`LEASE_LIFE`] is dropped, never given back: the cluster can only send less than the
//! limit, never more. A 429's pause and the provider's rate-limit reports reach the shared
//! bucket with the next lease.
//!
//! The limit is one for the cluster however it is known: configured (`rpm`, `tpm`),
//! announced by the upstream's rate-limit headers (any instance's report reaches the bucket),
//! or learnt from bare 429s. Learning is [`sluice_tail::pace::learn`]'s rule made the
//! cluster's: a 429 starts a cut, each instance tells what the upstream accepted from it over
//! the last second (as one instance alone measures it), and the cluster paces at the sum;
//! while that pace holds calls back it grows as one. An instance with nothing paced still
//! asks every [`TELL_EVERY`] while it sends, so it hears of a cut or a pause.
//!
//! While Redis cannot answer, the instance paces alone at its share of each limit.

mod lease;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_tail::pace::learn::Learner;
use sluice_tail::pace::{Dimension, DimensionState, Pace, PaceSpec, Pacer};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::health::Health;
use crate::store::Redis;

/// How long a lease may be spent: a unit leased early and spent late arrives closer to the
/// next than the bucket allowed, so leases are short-lived.
pub const LEASE_LIFE: Duration = Duration::from_millis(250);
/// How often an instance whose calls go unpaced asks anyway while it sends: how soon it hears
/// that another instance met the limit.
pub const TELL_EVERY: Duration = Duration::from_millis(25);
/// The share of the assumed burst the shared bucket allows: units leased by several
/// instances reach the provider with a few milliseconds of jitter each, and a bucket as
/// deep as the provider's would meet its edge.
const BURST_SHARE: f64 = 0.8;
/// The share of the burst lanes after the first leave in the bucket for the first lane's
/// calls on any instance (batch work never takes the last of it from interactive calls).
const KEEP_FOR_FIRST_LANE: f64 = 0.25;
/// How much of a second's rate one lease asks for.
const LEASE_SHARE: f64 = 0.05;
/// The half-life of the grants by which instances take turns while the shared bucket is
/// short (see `lease.lua`): long enough to even out a burst's seconds, short enough that an
/// instance idle a while is not owed a backlog of units.
pub const TURN_HALF_LIFE: Duration = Duration::from_secs(2);
/// How soon admission looks again while a lease is on its way.
const POLL: Duration = Duration::from_millis(1);

/// What this instance learns of a limit no answer announces, and has yet to tell.
#[derive(Debug)]
struct Learning {
    /// What it sent and the upstream refused, over the last second.
    learner: Learner,
    /// 429s met since the last lease.
    refused: u32,
    /// The last cut heard of.
    epoch: i64,
    /// This instance's share of a cut: requests a second, when measured, and the cut it is
    /// of (`None`: whichever its 429 starts or refines).
    share: Option<(f64, Instant, Option<i64>)>,
}

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
    /// The bounds in force: configured, lowered by what answers announce (0: none).
    rpm: u64,
    tpm: u64,
    /// Whether an answer announced the request limit (then nothing is learnt).
    announced: bool,
    /// The request rate the shared bucket paces at, as Redis last said (0: unpaced).
    paced_rpm: u64,
    learning: Learning,
    /// When Redis was last asked.
    told_at: Option<Instant>,
    /// Calls waiting at this instance, told with each lease: its weight in the turns.
    waiting: usize,
}

impl Stock {
    /// Nothing leased, nothing heard, bounded by `spec`.
    fn new(spec: &PaceSpec, now: Instant) -> Self {
        let rpm = spec.rpm.unwrap_or(0);
        Self {
            requests: 0,
            tokens: 0,
            expires: now,
            want_tokens: 0,
            first_lane_asked: false,
            asking: false,
            not_before: None,
            pause: None,
            left: [None, None],
            rpm,
            tpm: spec.tpm.unwrap_or(0),
            announced: false,
            paced_rpm: rpm,
            learning: Learning {
                learner: Learner::new(now),
                refused: 0,
                epoch: 0,
                share: None,
            },
            told_at: None,
            waiting: 0,
        }
    }

    /// Whether nothing is paced: calls go without a lease.
    fn unpaced(&self) -> bool {
        self.paced_rpm == 0 && self.tpm == 0
    }
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

fn lease(per_minute: u64) -> u64 {
    ((per_minute as f64 / 60.0 * LEASE_SHARE).ceil() as u64).max(1)
}

impl RedisPace {
    /// Starts the pacer of `deployment` with `spec` for `instance`, keeping `share` of it
    /// while Redis cannot answer.
    pub(crate) fn start(
        redis: Arc<Redis>,
        health: Arc<Health>,
        (deployment, instance): (&str, Arc<str>),
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
            stock: Mutex::new(Stock::new(&spec, now)),
            wake: Notify::new(),
        });
        let key = redis.key(&format!("pace:{{{deployment}}}"));
        let worker = tokio::spawn(lease::run(
            redis,
            health.clone(),
            shared.clone(),
            key,
            instance,
        ));
        Self {
            shared,
            health,
            local,
            spec,
            worker,
        }
    }
}

/// Wakes the lease loop unless it is already on its way.
fn ask(shared: &Shared, s: &mut Stock) {
    if !s.asking {
        s.asking = true;
        shared.wake.notify_one();
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
        if let Some((at, later)) = s.not_before
            && at > now
            && s.unpaced()
            && (!later || lane > 0)
        {
            // Unpaced, but the cluster is paused.
            return at;
        }
        if s.unpaced() {
            return now;
        }
        if s.expires <= now {
            s.requests = 0;
            s.tokens = 0;
        }
        let need = if s.tpm > 0 {
            tokens.min(burst(s.tpm))
        } else {
            0
        };
        let fits = (s.paced_rpm == 0 || s.requests >= 1) && (s.tpm == 0 || s.tokens >= need);
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
        ask(&self.shared, &mut s);
        now + POLL
    }

    fn demand(&mut self, waiting: usize) {
        self.shared.stock.lock().waiting = waiting;
    }

    fn take(&mut self, now: Instant, tokens: u64) {
        // The local share counts too, so an outage does not start from a full bucket.
        self.local.take(now, tokens);
        let mut s = self.shared.stock.lock();
        s.learning.learner.sent(now, false);
        if self.health.is_down() {
            return;
        }
        s.requests = s.requests.saturating_sub(1);
        s.tokens = s.tokens.saturating_sub(tokens);
        let low = if s.unpaced() {
            // Nothing to lease: ask now and then, to hear of cuts and pauses.
            s.told_at.is_none_or(|t| now >= t + TELL_EVERY)
        } else {
            // The next lease is asked for before this one is spent.
            (s.paced_rpm > 0 && s.requests < lease(s.paced_rpm).div_ceil(2))
                || (s.tpm > 0 && s.tokens < lease(s.tpm).div_ceil(2))
        };
        if low {
            ask(&self.shared, &mut s);
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
                if !s.announced {
                    // The first report: the bucket paces at it from now on.
                    s.announced = true;
                    s.paced_rpm = s.rpm;
                    ask(&self.shared, &mut s);
                }
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
        let l = &mut s.learning;
        l.refused = l.refused.saturating_add(1);
        if let Some(rate) = l.learner.refused(now) {
            l.share = Some((rate, now, None));
            if s.paced_rpm == 0 && !s.announced {
                // Until Redis answers with the cluster's cut, this instance paces at its own
                // share of it (less than the cluster's rate: never more than it may send).
                s.paced_rpm = ((rate * 60.0).floor() as u64).max(1);
            }
        }
        ask(&self.shared, &mut s);
    }

    fn paused(&mut self, now: Instant, until: Instant) {
        let mut s = self.shared.stock.lock();
        let d = until.saturating_duration_since(now);
        s.pause = Some(s.pause.map_or(d, |p| p.max(d)));
        s.not_before = Some((until, false));
        ask(&self.shared, &mut s);
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
        (dim(s.paced_rpm, s.requests), dim(s.tpm, s.tokens))
    }
}
