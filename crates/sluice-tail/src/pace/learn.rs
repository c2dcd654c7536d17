//! A request rate learnt from 429s, for an upstream that announces no limit (no
//! `x-ratelimit-*` or `anthropic-ratelimit-*` headers, only a 429 and its `retry-after`, as
//! many providers answer) and has none configured.
//!
//! A 429 says the upstream is full now. Over any stretch of sending before it, the upstream
//! took its rate for the stretch plus what its bucket held at the start, at most a second's
//! worth; so its rate is at least what it accepted (requests sent less those refused) over
//! the stretch plus one second. The highest such bound over the last ten seconds is the
//! estimate, and sluice paces at nineteen twentieths of it. (Counting only the last second would
//! take a full bucket's burst for rate, and pace at up to twice the limit.) Further
//! 429s within a second (the rest of the same burst) only refine that estimate downward,
//! never compound it. While the pace is what holds calls back, it grows by 0.6% a second, so
//! the headroom is taken back within about ten seconds and a limit that rose is found again
//! (a 429 that names no wait then only cuts the pace: see `cooldown::after_429`). The
//! decision is a pure function of the instants it is told of.
//!
//! In a cluster each instance keeps one of these for what it sent, and the shared pacer
//! paces at the sum of the instances' measures (`sluice-cluster`).

use std::time::Duration;

use tokio::time::Instant;

/// A gap in sending this long leaves a provider's bucket full (its burst is at most a
/// second's worth of its rate), and is the burst the measure allows for.
pub const SPAN: Duration = Duration::from_secs(1);
/// The longest stretch of sending measured.
const WINDOW: Duration = Duration::from_secs(10);
/// Width of one counting slot.
const SLOT: Duration = Duration::from_millis(100);
/// Slots the window is counted in.
const SLOTS: usize = (WINDOW.as_millis() / SLOT.as_millis()) as usize;
/// The share of the measured rate paced at.
pub const HEADROOM: f64 = 0.95;
/// Growth per second while the pace holds calls back.
pub const GROWTH_PER_SECOND: f64 = 0.006;
/// Further 429s this soon after a cut refine it, not cut again.
pub const HOLD: Duration = Duration::from_secs(1);

/// What has been sent and refused, and the rate learnt so far.
#[derive(Debug)]
pub struct Learner {
    /// Sends and refusals per slot of [`SLOT`], by slot number.
    slots: Box<[(u64, u32, u32); SLOTS]>,
    origin: Instant,
    /// The last send.
    last_sent: Option<Instant>,
    /// The learnt rate (requests a second) and when it was last cut.
    rate: Option<(f64, Instant)>,
    /// When growth was last applied.
    grown: Option<Instant>,
}

impl Learner {
    /// Nothing learnt, counting from `now`.
    pub fn new(now: Instant) -> Self {
        Self {
            slots: Box::new([(u64::MAX, 0, 0); SLOTS]),
            origin: now,
            last_sent: None,
            rate: None,
            grown: None,
        }
    }

    fn slot_number(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.origin).as_nanos() / SLOT.as_nanos())
            .unwrap_or(u64::MAX)
    }

    fn slot(&mut self, now: Instant) -> &mut (u64, u32, u32) {
        let n = self.slot_number(now);
        let s = &mut self.slots[(n % SLOTS as u64) as usize];
        if s.0 != n {
            *s = (n, 0, 0);
        }
        s
    }

    /// What the upstream takes a second, at least, by what it accepted up to `now`: over
    /// any stretch of `w` it took its rate for `w` plus what its bucket held at the start (at
    /// most [`SPAN`]'s worth), so each stretch's accepted calls over `w + SPAN` is a lower
    /// bound of its rate, and the highest of them over the last [`WINDOW`] is the estimate.
    fn taken_per_second(&self, now: Instant) -> Option<f64> {
        let last = self.last_sent?;
        if now.saturating_duration_since(last) >= SPAN {
            // Nothing sent for a while: a 429 now is of a call sent long before, or of a
            // quota spent for the day, which its pause is for.
            return None;
        }
        let n = self.slot_number(now);
        let mut by_age = [0i64; SLOTS];
        for s in self
            .slots
            .iter()
            .filter(|s| s.0 <= n && n - s.0 < SLOTS as u64)
        {
            by_age[(n - s.0) as usize] += i64::from(s.1) - i64::from(s.2);
        }
        // The current slot has run only part of its width.
        let into = now.saturating_duration_since(self.origin).as_secs_f64()
            - n as f64 * SLOT.as_secs_f64();
        let mut accepted = 0i64;
        let mut best = 0.0f64;
        for (age, a) in by_age.iter().enumerate() {
            accepted += a;
            let stretch = SLOT.as_secs_f64() * age as f64 + into;
            best = best.max(accepted as f64 / (stretch + SPAN.as_secs_f64()));
        }
        (best > 0.0).then_some(best)
    }

    /// The learnt rate, requests a second.
    pub fn rate(&self) -> Option<f64> {
        self.rate.map(|(r, _)| r)
    }

    /// A request sent at `now`; `held_back` when the learnt pace was what it waited for.
    /// Returns the new rate when it grew.
    pub fn sent(&mut self, now: Instant, held_back: bool) -> Option<f64> {
        self.last_sent = Some(now);
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

    /// What this learner's own sends say of the upstream at `now`, when another instance of a
    /// cluster met its limit: nineteen twentieths of what the upstream takes a second from here, at
    /// least (`None` when it says nothing). Counts no refusal and changes nothing.
    pub fn measure(&self, now: Instant) -> Option<f64> {
        self.taken_per_second(now).map(|r| r * HEADROOM)
    }

    /// A 429 at `now`: the rate to pace at from now on (nineteen twentieths of what the upstream
    /// takes a second, at least, by what it accepted), or `None` when that says nothing of a
    /// rate (nothing sent in the last second, or nothing accepted).
    pub fn refused(&mut self, now: Instant) -> Option<f64> {
        let s = self.slot(now);
        s.2 = s.2.saturating_add(1);
        let measured = self.measure(now)?;
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

    /// [`HEADROOM`] of `accepted` over a stretch of `stretch` plus a second.
    fn paced(accepted: f64, stretch: Duration) -> f64 {
        accepted / (stretch.as_secs_f64() + 1.0) * HEADROOM
    }

    #[test]
    fn a_burst_that_meets_the_limit_paces_below_what_was_accepted() {
        let t = Instant::now();
        let mut l = Learner::new(t);
        // 64 sent at once, the upstream takes 10 and refuses the rest.
        for _ in 0..64 {
            assert_eq!(l.sent(t, false), None, "nothing learnt yet");
        }
        let first = l.refused(t + ms(5)).unwrap();
        assert!((first - paced(63.0, ms(5))).abs() < 1e-9, "{first}");
        let mut last = first;
        for i in 1..54 {
            last = l.refused(t + ms(5 + i)).unwrap();
            assert!(last <= first);
        }
        assert!((last - paced(10.0, ms(58))).abs() < 1e-9, "{last}");
        // The same burst's refusals do not compound.
        assert!((l.rate().unwrap() - last).abs() < 1e-9);
    }

    #[test]
    fn a_full_bucket_is_not_taken_for_the_rate() {
        // An upstream of 10 a second with a second's burst, offered 20 a second: its first
        // 429 comes after a second, 20 accepted; its rate is 10, not 20.
        let t = Instant::now();
        let mut l = Learner::new(t);
        for i in 0..20 {
            l.sent(t + ms(i * 50), false);
        }
        let at = t + ms(1_000);
        l.sent(at, false);
        let cut = l.refused(at).unwrap();
        assert!((9.0 * HEADROOM..=10.0 * HEADROOM).contains(&cut), "{cut}");
    }

    #[test]
    fn a_later_429_measures_again_over_the_last_ten_seconds() {
        let t = Instant::now();
        let mut l = Learner::new(t);
        for _ in 0..20 {
            l.sent(t, false);
        }
        for i in 0..10 {
            l.refused(t + ms(i));
        }
        let first = l.rate().unwrap();
        assert!((first - paced(10.0, ms(9))).abs() < 1e-9, "{first}");
        // After a gap of two seconds, eight seconds paced at 8 a second, then a 429: the
        // upstream takes 8 a second, less what the eight seconds leave uncertain.
        let from = t + Duration::from_secs(2);
        for i in 0..64 {
            l.sent(from + ms(i * 125), true);
        }
        let later = from + ms(8_000);
        let cut = l.refused(later).unwrap();
        assert!(
            (paced(63.0, ms(8_100))..=8.0 * HEADROOM).contains(&cut),
            "{cut}"
        );
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
        assert!((start - HEADROOM).abs() < 1e-9, "{start}");
        assert_eq!(l.sent(t + ms(500), false), None, "not held back: no growth");
        let mut at = t + ms(500);
        for _ in 0..100 {
            at += Duration::from_secs(1);
            l.sent(at, true);
        }
        let grown = l.rate().unwrap();
        let expected = start * (1.0 + GROWTH_PER_SECOND).powi(100);
        assert!((grown - expected).abs() < 1e-6, "{grown} vs {expected}");
    }
}
