//! Which time to live a prompt-cache breakpoint asks for: Anthropic keeps a marked prefix 5
//! minutes (a write at 1.25 times the input price) or, asked, 1 hour (a write at 2 times);
//! each read (0.1 times) renews it. A prefix reused every few minutes is served by 5 minutes;
//! one reused every 10 or 40 minutes would be written again at every use with 5 minutes, and
//! is cheaper written once for an hour. So the rule: a prefix whose typical gap between uses
//! (the median of its last four) lies above 5 minutes and within the hour gets 1 hour; any
//! other, and one seen fewer than three times, gets 5 minutes. State and a pure decision of
//! `now`.

use std::time::Duration;

use hashbrown::HashMap;
use tokio::time::Instant;

/// The shorter time to live.
pub const FIVE_MINUTES: Duration = Duration::from_secs(300);
/// The longer one.
pub const ONE_HOUR: Duration = Duration::from_secs(3_600);
/// Gaps kept per prefix.
const GAPS: usize = 4;
/// Prefixes remembered at most; past it, those unused for an hour are forgotten.
const PREFIXES_KEPT: usize = 20_000;

/// A breakpoint's time to live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// 5 minutes (the default; nothing is written in the mark).
    FiveMinutes,
    /// 1 hour (`"ttl": "1h"`).
    OneHour,
}

#[derive(Clone, Debug)]
struct Seen {
    last: Instant,
    gaps: [Duration; GAPS],
    known: usize,
}

/// When each prefix was last used, and its recent gaps.
#[derive(Debug, Default)]
pub struct Reuse {
    seen: HashMap<u64, Seen>,
}

impl Reuse {
    /// Nothing seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a use of prefix `key` at `now` and says which time to live its mark asks for.
    pub fn observe(&mut self, now: Instant, key: u64) -> Ttl {
        if self.seen.len() >= PREFIXES_KEPT && !self.seen.contains_key(&key) {
            self.seen
                .retain(|_, s| now.saturating_duration_since(s.last) < ONE_HOUR);
            if self.seen.len() >= PREFIXES_KEPT {
                self.seen.clear();
            }
        }
        let s = self.seen.entry(key).or_insert(Seen {
            last: now,
            gaps: [Duration::ZERO; GAPS],
            known: 0,
        });
        let gap = now.saturating_duration_since(s.last);
        if s.known > 0 || !gap.is_zero() {
            s.gaps[s.known % GAPS] = gap;
            s.known += 1;
        }
        s.last = now;
        choose(&s.gaps[..s.known.min(GAPS)])
    }
}

/// The rule, over the gaps known (most recent up to four): the median above 5 minutes and
/// within the hour asks for 1 hour. Fewer than two gaps say nothing yet.
pub fn choose(gaps: &[Duration]) -> Ttl {
    if gaps.len() < 2 {
        return Ttl::FiveMinutes;
    }
    let mut g = gaps.to_vec();
    g.sort_unstable();
    let median = g[g.len() / 2];
    if median > FIVE_MINUTES && median <= ONE_HOUR {
        Ttl::OneHour
    } else {
        Ttl::FiveMinutes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mins(m: u64) -> Duration {
        Duration::from_secs(60 * m)
    }

    #[test]
    fn the_rule_reads_the_median_gap() {
        assert_eq!(choose(&[]), Ttl::FiveMinutes);
        assert_eq!(
            choose(&[mins(20)]),
            Ttl::FiveMinutes,
            "one gap says nothing"
        );
        assert_eq!(choose(&[mins(20), mins(30)]), Ttl::OneHour);
        assert_eq!(choose(&[mins(1), mins(2), mins(3)]), Ttl::FiveMinutes);
        assert_eq!(
            choose(&[mins(90), mins(120)]),
            Ttl::FiveMinutes,
            "beyond the hour"
        );
        assert_eq!(
            choose(&[mins(5), mins(5)]),
            Ttl::FiveMinutes,
            "5 minutes suffice"
        );
        assert_eq!(
            choose(&[mins(1), mins(15), mins(20), mins(25)]),
            Ttl::OneHour,
            "one quick reuse does not outweigh three slow ones"
        );
    }

    #[test]
    fn a_prefix_reused_every_twenty_minutes_moves_to_an_hour() {
        let t0 = Instant::now();
        let mut r = Reuse::new();
        let got: Vec<Ttl> = (0..4).map(|i| r.observe(t0 + mins(20 * i), 7)).collect();
        assert_eq!(
            got,
            [
                Ttl::FiveMinutes,
                Ttl::FiveMinutes,
                Ttl::OneHour,
                Ttl::OneHour
            ]
        );
        // Another prefix, reused every minute, stays at 5 minutes.
        let quick: Vec<Ttl> = (0..6).map(|i| r.observe(t0 + mins(i), 8)).collect();
        assert!(quick.iter().all(|t| *t == Ttl::FiveMinutes));
    }
}
