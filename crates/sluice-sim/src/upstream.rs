//! One simulated upstream: decides, for each request, what happens to it (a 429, a fault, or
//! an answer with its timings), and keeps the statistics a rehearsal reads afterwards.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;
use sluice_tail::MinuteBucket;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::cache::PromptCache;
use crate::limits::RateState;
use crate::spec::{Faults, UpstreamSpec};

/// What the simulator needs to know about a request.
#[derive(Clone, Debug)]
pub struct Incoming {
    /// The request id (counted, so duplicated hedges show).
    pub request_id: String,
    /// Prompt tokens (estimated from the text).
    pub prompt_tokens: u64,
    /// Block-prefix hashes of the prompt, for the prompt cache.
    pub prefix_hashes: Vec<u64>,
    /// The client's output cap.
    pub max_tokens: Option<u64>,
    /// The prompt's text (what a reading model reads).
    pub text: Vec<u8>,
}

/// Why a request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// 500.
    Error500,
    /// 503.
    Error503,
    /// Connection dropped.
    Reset,
}

/// An answer's shape and timing.
#[derive(Clone, Debug, PartialEq)]
pub struct AnswerPlan {
    /// Time to the first token (stall, cache, load and incidents included).
    pub ttft: Duration,
    /// Delay per output token.
    pub per_token: Duration,
    /// Tokens per stream chunk.
    pub tokens_per_chunk: u32,
    /// Output length.
    pub output_tokens: u32,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Prompt tokens served from the emulated cache.
    pub cached_tokens: u64,
    /// A mid-stream stall: after this many tokens, for this long.
    pub mid_stream_stall: Option<(u32, Duration)>,
    /// Rate-limit state to report in headers.
    pub rate: RateState,
    /// Sequence number (for ids).
    pub seq: u64,
    /// What the answer says, when the model reads its prompt (else filler words).
    pub content: Option<String>,
}

/// What happens to a request.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// 429 with these limits.
    RateLimited(RateState),
    /// A fault after a delay.
    Fail(Fault, Duration),
    /// An answer.
    Answer(AnswerPlan),
}

/// What a rehearsal reads afterwards.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Stats {
    /// Requests received.
    pub requests: u64,
    /// Requests whose id had been seen before (hedges and retries of one call).
    pub duplicate_requests: u64,
    /// 429s sent.
    pub rate_limited: u64,
    /// 500s injected.
    pub error_500: u64,
    /// 503s injected.
    pub error_503: u64,
    /// Connections dropped.
    pub resets: u64,
    /// Streams stalled mid-way.
    pub mid_stream_stalls: u64,
    /// Requests that stalled before their first token.
    pub stalls: u64,
    /// Answers planned.
    pub answered: u64,
    /// Prompt tokens reported as cached.
    pub cached_tokens: u64,
    /// Most requests in service at once.
    pub max_busy: u32,
    /// How many times each request id was received.
    pub request_ids: HashMap<String, u32>,
}

struct State {
    rpm: Option<MinuteBucket>,
    tpm: Option<MinuteBucket>,
    cache: PromptCache,
    stats: Stats,
    seq: u64,
}

/// A simulated upstream.
pub struct SimUpstream {
    name: Arc<str>,
    spec: UpstreamSpec,
    /// This upstream's seed; each request's draws derive from it and the request's id.
    seed: u64,
    start: Instant,
    state: Mutex<State>,
    slots: Option<Arc<Semaphore>>,
    /// Slots out of service while an incident cuts capacity.
    held: Mutex<Holding>,
    busy: AtomicU32,
}

/// The slots an incident takes out of service.
#[derive(Default)]
struct Holding {
    /// Slots taken out (their permits forgotten).
    out: u32,
    /// Slots still to take out, as the requests holding them finish.
    owed: u32,
}

impl std::fmt::Debug for SimUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimUpstream")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Counts a request as being served until dropped; holds its capacity slot.
pub struct Busy {
    upstream: Arc<SimUpstream>,
    slot: Option<OwnedSemaphorePermit>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.upstream.busy.fetch_sub(1, Ordering::Relaxed);
        let mut h = self.upstream.held.lock();
        if h.owed > 0
            && let Some(slot) = self.slot.take()
        {
            // An incident is taking slots out: this one goes out of service, not back.
            slot.forget();
            h.owed -= 1;
            h.out += 1;
        }
    }
}

/// A seed per upstream, from the run's seed and the upstream's name, so adding an upstream
/// does not change the draws of the others. Each request's generator is then seeded from this
/// and the request's id (and how many times this upstream has seen that id), so a request gets
/// the same latency, faults and output length however many requests came before it: two runs
/// of one traffic under different policies compare request by request ("common random
/// numbers"), and only a policy's extra requests (hedges) draw anew.
fn derive_seed(seed: u64, name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl SimUpstream {
    /// A fresh upstream whose clock (for incidents) starts `now`.
    pub fn new(name: &str, spec: UpstreamSpec, seed: u64, now: Instant) -> Self {
        let state = State {
            rpm: (spec.rpm > 0).then(|| MinuteBucket::new(spec.rpm, spec.rpm_burst, now)),
            tpm: (spec.tpm > 0).then(|| MinuteBucket::new(spec.tpm, spec.tpm_burst, now)),
            cache: PromptCache::new(spec.prompt_cache.ttl, spec.prompt_cache.min_tokens),
            stats: Stats::default(),
            seq: 0,
        };
        let slots = (spec.capacity > 0).then(|| Arc::new(Semaphore::new(spec.capacity as usize)));
        Self {
            name: Arc::from(name),
            spec,
            seed: derive_seed(seed, name),
            start: now,
            state: Mutex::new(state),
            slots,
            held: Mutex::new(Holding::default()),
            busy: AtomicU32::new(0),
        }
    }

    /// The upstream's name.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// The upstream's configuration.
    pub fn spec(&self) -> &UpstreamSpec {
        &self.spec
    }

    /// A copy of the statistics so far.
    pub fn stats(&self) -> Stats {
        self.state.lock().stats.clone()
    }

    /// Takes slots out of service while an incident cuts capacity at `now`, and puts them
    /// back after. Free slots go at once; busy ones as their requests finish, as on a server
    /// losing replicas (what they serve completes, nothing new starts there).
    fn follow_capacity(&self, now: Instant) {
        let Some(slots) = &self.slots else {
            return;
        };
        let t = now.saturating_duration_since(self.start);
        let factor: f64 = self
            .spec
            .degradations
            .iter()
            .filter(|d| d.from <= t && t < d.to)
            .map(|d| d.capacity_factor)
            .product();
        let target = (f64::from(self.spec.capacity) * (1.0 - factor)).round() as u32;
        let mut h = self.held.lock();
        let current = h.out + h.owed;
        if target > current {
            let more = target - current;
            let now_out = slots.forget_permits(more as usize) as u32;
            h.out += now_out;
            h.owed += more - now_out;
        } else if target < current {
            let mut back = current - target;
            let forgiven = back.min(h.owed);
            h.owed -= forgiven;
            back -= forgiven;
            h.out -= back;
            slots.add_permits(back as usize);
        }
    }

    /// Waits for a capacity slot (beyond `capacity` requests queue, as in a full server).
    pub async fn admit(self: &Arc<Self>) -> Busy {
        self.follow_capacity(Instant::now());
        let slot = match &self.slots {
            Some(s) => s.clone().acquire_owned().await.ok(),
            None => None,
        };
        let now_busy = self.busy.fetch_add(1, Ordering::Relaxed) + 1;
        let mut st = self.state.lock();
        st.stats.max_busy = st.stats.max_busy.max(now_busy);
        Busy {
            upstream: self.clone(),
            slot,
        }
    }

    /// The incident factors in force at `now`: (latency factor, 500 rate, 503 rate).
    fn incident(&self, now: Instant) -> (f64, f64, f64) {
        let t = now.saturating_duration_since(self.start);
        let mut factor = 1.0;
        let (mut e500, mut e503) = (self.spec.faults.error_500, self.spec.faults.error_503);
        for d in self
            .spec
            .degradations
            .iter()
            .filter(|d| d.from <= t && t < d.to)
        {
            factor *= d.latency_factor;
            e500 = d.error_500.unwrap_or(e500);
            e503 = d.error_503.unwrap_or(e503);
        }
        (factor, e500, e503)
    }

    /// Decides what happens to `req`, arriving `now`.
    pub fn plan(&self, req: &Incoming, now: Instant) -> Plan {
        let (factor, e500, e503) = self.incident(now);
        let spec = &self.spec;
        let mut st = self.state.lock();
        let st = &mut *st;
        st.stats.requests += 1;
        let seen = st
            .stats
            .request_ids
            .entry(req.request_id.clone())
            .or_insert(0);
        *seen += 1;
        let occurrence = *seen;
        if occurrence > 1 {
            st.stats.duplicate_requests += 1;
        }
        let mut rng = StdRng::seed_from_u64(derive_seed(
            self.seed ^ u64::from(occurrence),
            &req.request_id,
        ));
        st.seq += 1;
        let expected_out = req
            .max_tokens
            .unwrap_or(u64::from(spec.output_tokens_median));
        let announced = |mut r: RateState| {
            if !spec.rate_headers {
                // Only a 429's Retry-After: the limits themselves are not announced.
                r.requests = None;
                r.tokens = None;
            }
            if !spec.retry_after {
                r.retry_after = None;
            }
            r
        };
        if let Some(limited) = rate_limit(st, now, req.prompt_tokens + expected_out) {
            st.stats.rate_limited += 1;
            return Plan::RateLimited(announced(limited));
        }
        let rate = announced(rate_state(st, now, None));
        let faults = &spec.faults;
        let (fault, mid_stall) = roll_fault(rng.random(), faults, e500, e503);
        if let Some(f) = fault {
            match f {
                Fault::Error500 => st.stats.error_500 += 1,
                Fault::Error503 => st.stats.error_503 += 1,
                Fault::Reset => st.stats.resets += 1,
            }
            return Plan::Fail(f, faults.error_delay.mul_f64(factor));
        }
        let (body_ttft, stall) = spec.ttft().sample(&mut rng);
        if !stall.is_zero() {
            st.stats.stalls += 1;
        }
        let cached = if spec.prompt_cache.enabled {
            st.cache
                .lookup_and_store(now, &req.prefix_hashes)
                .min(req.prompt_tokens)
        } else {
            0
        };
        st.stats.cached_tokens += cached;
        let cached_share = if req.prompt_tokens > 0 {
            cached as f64 / req.prompt_tokens as f64
        } else {
            0.0
        };
        let cache_speedup =
            1.0 - cached_share * (1.0 - spec.prompt_cache.ttft_factor.clamp(0.0, 1.0));
        let busy = f64::from(self.busy.load(Ordering::Relaxed));
        let load = if spec.capacity > 0 {
            1.0 + spec.load_slowdown * (busy / f64::from(spec.capacity)).min(1.0)
        } else {
            1.0
        };
        let content = if spec.reader {
            Some(crate::reader::answer(
                &req.text,
                crate::reader::DEFAULT_SENTINEL,
            ))
        } else if spec.faq {
            crate::faq::shipped().and_then(|f| f.answer(&req.text))
        } else {
            None
        };
        let output_tokens = match &content {
            Some(c) => u32::try_from(crate::cache::tokens_of(c.len())).unwrap_or(u32::MAX),
            None => spec.output().sample(&mut rng, req.max_tokens),
        };
        let prefill = spec
            .prefill_per_token
            .saturating_mul(u32::try_from(req.prompt_tokens - cached).unwrap_or(u32::MAX));
        let mid_stream_stall = mid_stall.then(|| {
            st.stats.mid_stream_stalls += 1;
            (output_tokens / 2, faults.mid_stream_stall)
        });
        st.stats.answered += 1;
        Plan::Answer(AnswerPlan {
            ttft: (body_ttft.mul_f64(cache_speedup) + prefill).mul_f64(factor)
                + stall.mul_f64(factor),
            per_token: spec.per_token.mul_f64(factor * load),
            tokens_per_chunk: spec.tokens_per_chunk.max(1),
            output_tokens,
            prompt_tokens: req.prompt_tokens,
            cached_tokens: cached,
            mid_stream_stall,
            rate,
            seq: st.seq,
            content,
        })
    }
}

/// What a roll of `roll` draws: a fault (a 500 with probability `e500`, a 503 with `e503`,
/// a reset), else whether the answer stalls mid-stream.
fn roll_fault(roll: f64, faults: &Faults, e500: f64, e503: f64) -> (Option<Fault>, bool) {
    let mut edge = 0.0;
    for (f, p) in [
        (Fault::Error500, e500),
        (Fault::Error503, e503),
        (Fault::Reset, faults.reset),
    ] {
        edge += p;
        if roll < edge {
            return (Some(f), false);
        }
    }
    (None, roll < edge + faults.stall_mid_stream)
}

/// Takes one request and `tokens` from the buckets; on refusal returns the 429's state.
fn rate_limit(st: &mut State, now: Instant, tokens: u64) -> Option<RateState> {
    if let Some(b) = st.rpm.as_mut()
        && !b.try_take(now, 1)
    {
        let wait = b.wait_for(now, 1);
        return Some(rate_state(st, now, Some(wait)));
    }
    if let Some(b) = st.tpm.as_mut()
        && !b.try_take(now, tokens)
    {
        let wait = b.wait_for(now, tokens);
        // The request was refused: give its request unit back.
        if let Some(r) = st.rpm.as_mut() {
            r.refund(1);
        }
        return Some(rate_state(st, now, Some(wait)));
    }
    None
}

fn rate_state(st: &mut State, now: Instant, retry_after: Option<Duration>) -> RateState {
    let dim = |b: &mut Option<MinuteBucket>| {
        b.as_mut()
            .map(|b| (b.limit(), b.remaining(now), b.until_full(now)))
    };
    RateState {
        requests: dim(&mut st.rpm),
        tokens: dim(&mut st.tpm),
        retry_after,
    }
}

#[cfg(test)]
mod tests;
