//! A request rate learnt from 429s, for an upstream that announces no limit (no
//! `x-ratelimit-*` or `anthropic-ratelimit-*` headers, only a 429 and its `retry-after`, as
//! many providers answer) and has none configured.
//!
//! A 429 says the upstream is full now: what it accepted over the last second (requests sent
//! less those refused) is its rate, and sluice paces at nine tenths of it. Further 429s
//! within a second (the rest of the same burst) only refine that estimate downward, never
//! compound it. While the pace is what holds calls back, it grows by 0.3% a second, so a
//! limit that rose is found again: from nine tenths back to the limit takes about 35 s, so a
//! saturated upstream meets a 429 about once a minute (0.17% of attempts in the simulator's
//! flood on a 10-a-second limit). The decision is a pure function of the instants it is told
//! of.

use std::time::Duration;

use tokio::time::Instant;

/// How far back sends and refusals are counted.
const SPAN: Duration = Duration::from_secs(1);
/// Slots the span is counted in.
const SLOTS: usize = 10;
/// The share of the measured rate paced at.
const HEADROOM: f64 = 0.9;
/// Growth per second while the pace holds calls back.
const GROWTH_PER_SECOND: f64 = 0.003;
/// Further 429s this soon after a cut refine it, not cut again.
const HOLD: Duration = Duration::from_secs(1);

/// What has been sent and refused, and the rate learnt so far.
#[derive(Debug)]
pub struct Learner {
    /// Sends and refusals per slot of `SPAN / SLOTS`, by slot number.
    slots: [(u64, u32, u32); SLOTS],
    origin: Instant,
    /// The learnt rate (requests a second) and when it was last cut.
    rate: Option<(f64, Instant)>,
    /// When growth was last applied.
    grown: Option<Instant>,
}

impl Learner {
    /// Nothing learnt, counting from `now`.
    pub fn new(now: Instant) -> Self {
        Self {
            slots: [(u64::MAX, 0, 0); SLOTS],
            origin: now,
            rate: None,
            grown: None,
        }
    }

    fn slot(&mut self, now: Instant) -> &mut (u64, u32, u32) {
        let width = SPAN.as_nanos() / SLOTS as u128;
        let n = u64::try_from(now.saturating_duration_since(self.origin).as_nanos() / width)
            .unwrap_or(u64::MAX);
        let s = &mut self.slots[(n % SLOTS as u64) as usize];
        if s.0 != n {
            *s = (n, 0, 0);
        }
        s
    }

    /// Sent and refused over the span ending at `now`.
    fn counts(&self, now: Instant) -> (u64, u64) {
        let width = SPAN.as_nanos() / SLOTS as u128;
        let n = u64::try_from(now.saturating_duration_since(self.origin).as_nanos() / width)
            .unwrap_or(u64::MAX);
        self.slots
            .iter()
            .filter(|s| s.0 <= n && n - s.0 < SLOTS as u64)
            .fold((0, 0), |(a, b), s| (a + u64::from(s.1), b + u64::from(s.2)))
    }

    /// The learnt rate, requests a second.
    pub fn rate(&self) -> Option<f64> {
        self.rate.map(|(r, _)| r)
    }

    /// A request sent at `now`; `held_back` when the learnt pace was what it waited for.
    /// Returns the new rate when it grew.
    pub fn sent(&mut self, now: Instant, held_back: bool) -> Option<f64> {
        let s = self.slot(now);
        s.1 = s.1.saturating_add(1);
        let (rate, _) = self.rate?;
        let last = self.grown.unwrap_or(now);
        self.grown = Some(now);
        if !held_back {
            return None;
        }
        let dt = now.saturating_duration_since(last).min(SPAN).as_secs_f64();
        let grown = rate * (1.0 + GROWTH_PER_SECOND * dt);
        if let Some((r, _)) = self.rate.as_mut() {
            *r = grown;
        }
        Some(grown)
    }

    /// A 429 at `now`: the rate to pace at from now on (nine tenths of what the upstream
    /// accepted over the last second), or `None` when the last second says nothing of a
    /// rate (nothing sent then was accepted: a call sent long before, or a quota spent for
    /// the day, which the 429's pause is for).
    pub fn refused(&mut self, now: Instant) -> Option<f64> {
        let s = self.slot(now);
        s.2 = s.2.saturating_add(1);
        let (sent, refused) = self.counts(now);
        let accepted = sent.saturating_sub(refused);
        if accepted == 0 {
            return None;
        }
        let measured = accepted as f64 / SPAN.as_secs_f64() * HEADROOM;
        let rate = match self.rate {
            Some((r, cut)) if now.saturating_duration_since(cut) < HOLD => (r.min(measured), cut),
            _ => (measured, now),
        };
        self.rate = Some(rate);
        self.grown = Some(now);
        Some(rate.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_burst_that_meets_the_limit_paces_at_nine_tenths_of_what_was_accepted() {
        let t = Instant::now();
        let mut l = Learner::new(t);
        // 64 sent at once, the upstream takes 10 and refuses the rest.
        for _ in 0..64 {
            assert_eq!(l.sent(t, false), None, "nothing learnt yet");
        }
        let first = l.refused(t + ms(5)).unwrap();
        assert!((first - 63.0 * 0.9).abs() < 1e-9, "{first}");
        let mut last = first;
        for i in 1..54 {
            last = l.refused(t + ms(5 + i)).unwrap();
            assert!(last <= first);
        }
        assert!((last - 9.0).abs() < 1e-9, "{last}");
        // The same burst's refusals do not compound: the estimate stays at 9.
        assert!((l.rate().unwrap() - 9.0).abs() < 1e-9);
    }

    #[test]
    fn a_later_429_measures_again_and_old_sends_leave_the_span() {
        let t = Instant::now();
        let mut l = Learner::new(t);
        for _ in 0..20 {
            l.sent(t, false);
        }
        for i in 0..10 {
            l.refused(t + ms(i));
        }
        assert!((l.rate().unwrap() - 9.0).abs() < 1e-9);
        // Two seconds on, paced at nine a second, a 429: the upstream now takes fewer.
        let later = t + Duration::from_secs(3);
        for i in 0..9 {
            l.sent(later - ms(900) + ms(i * 100), true);
        }
        let cut = l.refused(later).unwrap();
        assert!((cut - 8.0 * 0.9).abs() < 1e-9, "{cut}");
        // A 429 long after the last send says nothing of a rate: the pace stays.
        assert_eq!(l.refused(later + Duration::from_secs(5)), None);
        assert!((l.rate().unwrap() - cut).abs() < 1e-9);
    }

    #[test]
    fn the_pace_grows_only_while_it_holds_calls_back() {
        let t = Instant::now();
        let mut l = Learner::new(t);
        l.sent(t, false);
        l.sent(t, false);
        l.refused(t);
        let start = l.rate().unwrap();
        assert!((start - 0.9).abs() < 1e-9);
        assert_eq!(l.sent(t + ms(500), false), None, "not held back: no growth");
        let mut at = t + ms(500);
        for _ in 0..100 {
            at += Duration::from_secs(1);
            l.sent(at, true);
        }
        let grown = l.rate().unwrap();
        let expected = start * 1.003f64.powi(100);
        assert!((grown - expected).abs() < 1e-6, "{grown} vs {expected}");
    }
}
