//! A slower upstream is not an overload. A delay-based limit reads latency above its baseline
//! as congestion and cuts; but an upstream can become slower for reasons of its own (a
//! degraded region, longer answers) while what sluice sends it costs it nothing more. Then
//! Little's law needs *more* in flight (arrival rate times latency), and every cut turns the
//! provider's slowdown into sluice's own queueing, refusals and missed deadlines.
//!
//! This stage sits between the windows and the algorithm, and tells the two apart by what
//! latency does as sluice's own concurrency moves. Congestion rises with it: a queue at the
//! upstream grows with what is sent, so latency climbs as requests in flight do, a window at
//! a time. An upstream's own slowdown does not: latency steps up at the concurrency it had
//! before, then sits at one level while in flight grows to carry the same arrivals, and when
//! a cut brings concurrency down, latency stays where it was. Two kinds of evidence make a
//! level the upstream's, and the algorithm is then handed latency over that level, so only
//! inflation beyond it reads as congestion:
//!
//! - a step: a window of calls sent at no more concurrency than the last calm window's took
//!   [`STEP`] times as long or more (no queue of sluice's making grows that much in one
//!   window); the level then rises to what the next few windows show (the step's own window
//!   straddles old answers and new);
//! - a cut as the experiment: over the last inflated windows concurrency came down by a
//!   fifth or more and latency hardly came down with it (an elasticity under
//!   [`MAX_ELASTICITY`]); what the algorithm cut meanwhile is given back (the limit of the
//!   last calm window).
//!
//! When latency falls, the level follows it down within two windows. Drops (429, 503,
//! timeouts) pass through untouched: they are overload whatever latency does.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use super::{Algorithm, Sample};

/// Latency this many times the level, at no more concurrency than the last calm window's,
/// is a step of the upstream's own.
pub const STEP: f64 = 3.0;
/// Windows looked back over.
const WINDOWS: usize = 10;
/// Latency (over its baseline) above this many times the upstream's level is inflated.
const INFLATED: f64 = 1.5;
/// The fewest inflated windows a level is judged from...
const MIN_WINDOWS: usize = 4;
/// ...of which the last this many are compared with those before them.
const LATER: usize = 3;
/// How far concurrency must have come down across them (the median in flight of the earlier
/// windows over the last ones').
const MIN_SPREAD: f64 = 1.25;
/// The most latency may rise with concurrency (the slope of log latency against log
/// requests in flight) for the inflation to be the upstream's own. A queue at the upstream
/// gives about 1 (latency in proportion to what is sent), a fixed slowdown about 0.
pub const MAX_ELASTICITY: f64 = 0.3;

/// Feeds `inner` each window's latency over the upstream's own level of slowness.
#[derive(Clone, Debug, PartialEq)]
pub struct Slowdown<A> {
    inner: A,
    /// The upstream's own slowness, in the units latency arrives in (1.0: none).
    level: f64,
    /// The last windows: (latency, most in flight).
    recent: VecDeque<(f64, usize)>,
    /// The limit at the last window that was not inflated: what cuts read from the
    /// upstream's own slowness took away, given back once that is known.
    calm_limit: Option<usize>,
    /// The most in flight at the last window that was not inflated.
    calm_inflight: usize,
    /// Windows after a step in which the level rises to what they show (the step's own
    /// window straddles it, old answers and new).
    settling: usize,
}

impl<A> Slowdown<A> {
    /// Wraps `inner`, with the upstream at its usual speed.
    pub fn new(inner: A) -> Self {
        Self {
            inner,
            level: 1.0,
            recent: VecDeque::with_capacity(WINDOWS),
            calm_limit: None,
            calm_inflight: 0,
            settling: 0,
        }
    }

    /// The upstream's own slowness now (1.0: none).
    pub fn level(&self) -> f64 {
        self.level
    }
}

/// The level the inflated windows among `recent` show, when concurrency came down across
/// them and latency did not come down with it; `None` when it did, or when too little is
/// known. A window that follows one not inflated is left out: it straddles the change, old
/// answers and new. The windows are split into the last three and those before them, and
/// latency's elasticity is read from the two parts' medians, which one slow window cannot
/// swing. Only a fall in concurrency is evidence: while it climbs, a queue building at the
/// upstream can show the same latency for a while (each answer's wait lags the queue).
pub fn own_level(recent: &VecDeque<(f64, usize)>, level: f64) -> Option<f64> {
    let inflated = |x: f64| x > INFLATED * level;
    let windows: Vec<(f64, usize)> = recent
        .iter()
        .zip(std::iter::once(None).chain(recent.iter().map(Some)))
        .filter(|((x, n), before)| {
            inflated(*x) && *n > 0 && before.is_some_and(|(b, _)| inflated(*b))
        })
        .map(|((x, n), _)| (*x, *n))
        .collect();
    if windows.len() < MIN_WINDOWS {
        return None;
    }
    let (earlier, later) = windows.split_at(windows.len() - LATER);
    let median = |half: &[(f64, usize)], of: fn(&(f64, usize)) -> f64| {
        let mut v: Vec<f64> = half.iter().map(of).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let n = |w: &(f64, usize)| w.1 as f64;
    let x = |w: &(f64, usize)| w.0;
    let (n_before, n_after) = (median(earlier, n), median(later, n));
    if n_before < MIN_SPREAD * n_after {
        return None;
    }
    let (x_before, x_after) = (median(earlier, x), median(later, x));
    let elasticity = (x_before / x_after).ln() / (n_before / n_after).ln();
    (elasticity < MAX_ELASTICITY).then(|| median(later, x))
}

impl<A: Algorithm> Algorithm for Slowdown<A> {
    fn limit(&self) -> usize {
        self.inner.limit()
    }

    fn update(&mut self, now: Instant, s: Sample) -> usize {
        let x = s.rtt.as_secs_f64();
        if self.recent.len() == WINDOWS {
            self.recent.pop_front();
        }
        self.recent.push_back((x, s.inflight));
        if x < self.level {
            // Down with the last windows' median: at once when the upstream recovers, not
            // with one quick window.
            let mut last: Vec<f64> = self.recent.iter().rev().take(LATER).map(|w| w.0).collect();
            last.sort_by(f64::total_cmp);
            self.level = last[last.len() / 2].clamp(1.0, self.level);
        }
        if self.settling > 0 && !s.dropped {
            self.settling -= 1;
            self.level = self.level.max(x);
        } else if x <= INFLATED * self.level {
            self.calm_limit = Some(self.inner.limit());
            self.calm_inflight = s.inflight;
        } else if !s.dropped && s.inflight <= self.calm_inflight && x >= STEP * self.level {
            // Answers to calls sent at no more concurrency than a calm window's took several
            // times as long: no queue sluice's concurrency built does that in one window.
            self.level = x;
            self.settling = LATER;
        } else if !s.dropped
            && let Some(level) = own_level(&self.recent, self.level)
        {
            self.level = level;
            if let Some(calm) = self.calm_limit {
                self.inner.raise_to(calm);
            }
        }
        let sample = Sample {
            rtt: Duration::from_secs_f64((x / self.level).clamp(1e-6, 1e6)),
            ..s
        };
        self.inner.update(now, sample)
    }

    fn raise_to(&mut self, limit: usize) {
        self.inner.raise_to(limit);
    }

    /// The last window read [`INFLATED`] times the baseline or more: slower of its own (a
    /// level known) or not yet known why.
    fn upstream_slower(&self) -> bool {
        self.recent.back().is_some_and(|(x, _)| *x > INFLATED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Gradient2;

    fn window(x: f64, inflight: usize) -> Sample {
        Sample {
            rtt: Duration::from_secs_f64(x),
            inflight,
            dropped: false,
            class: 0,
        }
    }

    /// Windows of a limit at its baseline, then an upstream six times slower at the same
    /// arrivals: in flight climbs as answers take longer, latency stays at six, the limit
    /// cuts, in flight comes down, latency does not: the cuts are given back.
    #[test]
    fn an_upstream_six_times_slower_is_not_read_as_congestion() {
        let mut t = Instant::now();
        let mut plain = Gradient2::new(64, 1, 256).against(1.0, 1.5);
        let mut judged = Slowdown::new(Gradient2::new(64, 1, 256).against(1.0, 1.5));
        let feed = |a: &mut dyn Algorithm, t: &mut Instant, x: f64, need: usize| {
            *t += Duration::from_secs(1);
            let n = need.min(a.limit());
            a.update(*t, window(x, n));
        };
        for _ in 0..30 {
            feed(&mut plain, &mut t, 1.0, 8);
            feed(&mut judged, &mut t, 1.0, 8);
        }
        assert!(!judged.upstream_slower(), "at its baseline");
        let before = judged.limit();
        let mut lowest = before;
        for need in [10, 16, 22, 28, 34, 40].into_iter().chain([45; 20]) {
            feed(&mut plain, &mut t, 6.0, need);
            feed(&mut judged, &mut t, 6.0, need);
            lowest = lowest.min(judged.limit());
        }
        assert!(
            plain.limit() < 45,
            "the latency-only limit stays below the need: {}",
            plain.limit()
        );
        assert!(lowest < 45, "it cut first: {lowest}");
        assert!(
            judged.limit() >= before,
            "{} after {before}",
            judged.limit()
        );
        assert!((judged.level() - 6.0).abs() < 1e-9, "{}", judged.level());
        assert!(judged.upstream_slower(), "six times its baseline");
        // The upstream recovers: the level follows within two windows.
        feed(&mut judged, &mut t, 1.1, 8);
        feed(&mut judged, &mut t, 1.1, 8);
        assert!((judged.level() - 1.1).abs() < 1e-9, "{}", judged.level());
        assert!(!judged.upstream_slower(), "recovered");
    }

    /// A queue at the upstream: latency climbs in proportion to what is in flight.
    #[test]
    fn latency_that_rises_with_concurrency_is_still_congestion() {
        let mut t = Instant::now();
        let mut judged = Slowdown::new(Gradient2::new(64, 1, 256).against(1.0, 1.5));
        for _ in 0..30 {
            t += Duration::from_secs(1);
            judged.update(t, window(1.0, 24));
        }
        let before = judged.limit();
        for n in [30, 36, 42, 48, 54] {
            t += Duration::from_secs(1);
            // 20 served at once: the rest wait their turn.
            judged.update(t, window(n as f64 / 20.0, n));
        }
        assert_eq!(judged.level(), 1.0);
        assert!(judged.limit() < before, "{} after {before}", judged.limit());
    }

    #[test]
    fn a_level_needs_concurrency_to_come_down_and_latency_to_stay() {
        // The first inflated window, after one that was not, straddles the change.
        let cut: VecDeque<(f64, usize)> = [
            (1.0, 8),
            (3.4, 40),
            (6.0, 45),
            (6.1, 40),
            (5.9, 30),
            (6.3, 25),
        ]
        .into();
        assert_eq!(own_level(&cut, 1.0), Some(6.1));
        let climbing: VecDeque<(f64, usize)> = [
            (1.0, 8),
            (3.4, 11),
            (6.0, 20),
            (6.1, 30),
            (5.9, 40),
            (6.3, 45),
        ]
        .into();
        assert_eq!(own_level(&climbing, 1.0), None, "a climb proves nothing");
        let flat: VecDeque<(f64, usize)> = [(6.0, 30), (6.0, 30), (6.1, 31), (5.9, 30)].into();
        assert_eq!(own_level(&flat, 1.0), None, "no change: nothing known");
        let two: VecDeque<(f64, usize)> = [(1.0, 8), (3.4, 40), (6.0, 45), (6.1, 25)].into();
        assert_eq!(own_level(&two, 1.0), None, "too few windows");
        let draining: VecDeque<(f64, usize)> =
            [(2.9, 45), (2.9, 45), (2.5, 40), (2.1, 32), (1.8, 27)].into();
        assert_eq!(
            own_level(&draining, 1.0),
            None,
            "latency fell with it: congestion"
        );
    }

    /// Calls sent at the calm concurrency come back four times slower: the level steps up
    /// and settles at what the next windows show, and the limit is not cut.
    #[test]
    fn a_step_at_the_calm_concurrency_is_the_upstreams() {
        let mut t = Instant::now();
        let mut judged = Slowdown::new(Gradient2::new(64, 1, 256).against(1.0, 1.5));
        for _ in 0..10 {
            t += Duration::from_secs(1);
            judged.update(t, window(1.0, 40));
        }
        let before = judged.limit();
        for (x, n) in [(3.2, 40), (4.0, 50), (4.2, 60), (3.9, 64), (4.1, 64)] {
            t += Duration::from_secs(1);
            judged.update(t, window(x, n));
        }
        assert!((judged.level() - 4.0).abs() < 0.25, "{}", judged.level());
        assert!(
            judged.limit() >= before,
            "{} after {before}",
            judged.limit()
        );
    }
}
