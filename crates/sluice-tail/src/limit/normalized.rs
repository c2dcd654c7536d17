//! Latency by kind of answer. A streamed answer's first byte comes once the prompt is read; a
//! complete answer's only once the whole output is written, ten times later. Fed raw to a
//! delay-based limit, a batch of complete answers arriving among streams looks like
//! congestion, and the limit collapses. This wrapper divides each sample by the running
//! average of its own class, so the algorithm inside sees how inflated latency is, whatever
//! the mix, in units of one second.
//!
//! An upstream that becomes slower for reasons of its own (not our load) looks inflated here
//! too, until the reference catches up (an hour at ten answers a second); the default limit
//! tells that apart from congestion a stage later ([`super::Slowdown`]).

use std::time::Duration;

use tokio::time::Instant;

use super::ema::ExpAvg;
use super::{Algorithm, Sample};

/// Samples a class's reference latency averages over, as it falls...
const BASELINE_SPAN: u32 = 600;
/// ...and as it rises.
const BASELINE_RISE_SPAN: u32 = 60_000;

/// Classes of answers whose latencies are compared only among themselves.
pub const CLASSES: usize = 2;

/// Feeds `inner` each sample's latency over its class's average.
#[derive(Clone, Debug, PartialEq)]
pub struct Normalized<A> {
    inner: A,
    baselines: [ExpAvg; CLASSES],
}

impl<A> Normalized<A> {
    /// Wraps `inner`. Each class's reference falls as an average of 600 samples but rises as
    /// one of 60,000: latency that rises because the limit lets too much through must stay
    /// visible as inflation until the limit comes down. With a symmetric average, a lasting
    /// overload (an upstream that lost half its capacity) became the new normal within
    /// minutes, and the limit grew back into it.
    pub fn new(inner: A) -> Self {
        let baseline = || ExpAvg::new(BASELINE_SPAN, 10).rising_over(BASELINE_RISE_SPAN);
        Self {
            inner,
            baselines: [baseline(), baseline()],
        }
    }
}

impl<A: Algorithm> Algorithm for Normalized<A> {
    fn limit(&self) -> usize {
        self.inner.limit()
    }

    fn update(&mut self, now: Instant, s: Sample) -> usize {
        let class = s.class.min(CLASSES - 1);
        let rtt = s.rtt.as_secs_f64();
        let base = self.baselines[class].add(rtt);
        let inflation = if base > 0.0 { rtt / base } else { 1.0 };
        let sample = Sample {
            rtt: Duration::from_secs_f64(inflation.clamp(1e-6, 1e6)),
            ..s
        };
        self.inner.update(now, sample)
    }

    fn raise_to(&mut self, limit: usize) {
        self.inner.raise_to(limit);
    }

    fn upstream_slower(&self) -> bool {
        self.inner.upstream_slower()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::{Gradient2, Windowed};

    fn sample(ms: u64, class: usize, inflight: usize) -> Sample {
        Sample {
            rtt: Duration::from_millis(ms),
            inflight,
            dropped: false,
            class,
        }
    }

    /// Feeds one sample every 10 ms for `secs`: `mix(i)` says which.
    fn run(limit: &mut dyn Algorithm, t: &mut Instant, secs: u64, mix: impl Fn(u64) -> Sample) {
        for i in 0..secs * 100 {
            *t += Duration::from_millis(10);
            let s = mix(i);
            limit.update(
                *t,
                Sample {
                    inflight: limit.limit(),
                    ..s
                },
            );
        }
    }

    #[test]
    fn a_shift_in_the_mix_of_answers_is_not_congestion() {
        let mut t = Instant::now();
        // Streams at 800 ms to first byte, then a batch of complete answers at 8 s joins in
        // (two in three), the upstream no slower than before.
        let streams = |_| sample(800, 0, 0);
        let mixed = |i: u64| {
            if !i.is_multiple_of(3) {
                sample(8_000, 1, 0)
            } else {
                sample(800, 0, 0)
            }
        };
        let mut raw = Windowed::new(Gradient2::new(64, 1, 256));
        run(&mut raw, &mut t, 30, streams);
        let raw_before = raw.limit();
        run(&mut raw, &mut t, 5, mixed);
        let mut norm = Normalized::new(Windowed::new(Gradient2::new(64, 1, 256)));
        run(&mut norm, &mut t, 30, streams);
        let before = norm.limit();
        run(&mut norm, &mut t, 5, mixed);
        assert!(
            raw.limit() * 4 < raw_before * 3,
            "raw latencies cut the limit: {} after {raw_before}",
            raw.limit()
        );
        assert!(norm.limit() >= before, "{} after {before}", norm.limit());
    }

    #[test]
    fn real_inflation_still_cuts_the_limit_as_much_as_raw_latencies_do() {
        let cut = |normalize: bool| {
            let mut t = Instant::now();
            let inner = Windowed::new(Gradient2::new(64, 1, 256));
            let mut limit: Box<dyn Algorithm> = if normalize {
                Box::new(Normalized::new(inner))
            } else {
                Box::new(inner)
            };
            run(&mut *limit, &mut t, 30, |_| sample(800, 0, 0));
            let before = limit.limit();
            // Every answer three times slower than usual.
            run(&mut *limit, &mut t, 3, |_| sample(2_400, 0, 0));
            (before, limit.limit())
        };
        let (raw_before, raw_after) = cut(false);
        let (before, after) = cut(true);
        assert!(raw_after < raw_before, "{raw_after} after {raw_before}");
        assert!(after < before, "{after} after {before}");
        assert!(
            (before - after) * 10 >= (raw_before - raw_after) * 7,
            "normalised cut {before}->{after}, raw {raw_before}->{raw_after}"
        );
    }
}
