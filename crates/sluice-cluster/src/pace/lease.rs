//! The lease loop of a shared pacer: each time the pacer wakes it, one script call tells
//! Redis what this instance has to tell (reports, 429s, its share of a cut, a pause) and takes
//! a lease, and the answer is carried into the stock. An answer of the wrong shape is a
//! counted error of pacing, never read as zero.

use std::sync::Arc;
use std::time::Duration;

use redis::Script;
use sluice_tail::pace::learn::{GROWTH_PER_SECOND, HOLD, SPAN};
use tokio::time::Instant;

use super::{
    BURST_SHARE, KEEP_FOR_FIRST_LANE, LEASE_LIFE, LEASE_SHARE, Shared, Stock, TURN_HALF_LIFE, ask,
};
use crate::ClusterError;
use crate::health::{Health, Kind};
use crate::store::Redis;

/// What one call tells Redis.
struct Told {
    rpm: u64,
    tpm: u64,
    want_tokens: u64,
    pause: Option<Duration>,
    left: [Option<u64>; 2],
    later: bool,
    refused: u32,
    announced: bool,
    share: Option<(f64, Option<i64>)>,
    waiting: usize,
}

/// What Redis answered.
struct Answer {
    requests: u64,
    tokens: u64,
    wait: Duration,
    paced_rpm: u64,
    epoch: i64,
}

/// Takes what `s` has to tell, as of `now`.
fn told(s: &mut Stock, now: Instant) -> Told {
    let later = !s.first_lane_asked;
    s.first_lane_asked = false;
    let l = &mut s.learning;
    let refused = std::mem::take(&mut l.refused);
    // A share is told while its cut may still take it.
    let share = l
        .share
        .filter(|(_, at, _)| now.saturating_duration_since(*at) < HOLD)
        .map(|(rate, _, of)| (rate, of));
    Told {
        rpm: s.rpm,
        tpm: s.tpm,
        want_tokens: s.want_tokens,
        pause: s.pause.take(),
        left: std::mem::take(&mut s.left),
        later,
        refused,
        announced: s.announced,
        share,
        waiting: s.waiting,
    }
}

fn read(v: &[i64]) -> Result<Answer, ClusterError> {
    let bad = || ClusterError::Malformed {
        what: "a pacing lease",
        got: format!("{v:?}"),
    };
    let &[requests, tokens, wait, paced, epoch] = v else {
        return Err(bad());
    };
    let n = |x: i64| u64::try_from(x).map_err(|_| bad());
    Ok(Answer {
        requests: n(requests)?,
        tokens: n(tokens)?,
        wait: Duration::from_micros(n(wait)?),
        paced_rpm: n(paced)?,
        epoch,
    })
}

/// Asks Redis for a lease each time the pacer wakes it.
pub(super) async fn run(
    redis: Arc<Redis>,
    health: Arc<Health>,
    shared: Arc<Shared>,
    key: String,
    instance: Arc<str>,
) {
    let script = Script::new(include_str!("lease.lua"));
    loop {
        shared.wake.notified().await;
        let t = told(&mut shared.stock.lock(), Instant::now());
        let opt = |v: Option<u64>| v.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let got = redis
            .eval::<Vec<i64>>(&script, |i| {
                i.key(&key)
                    .arg(t.rpm)
                    .arg(LEASE_SHARE)
                    .arg(t.tpm)
                    .arg(t.want_tokens)
                    .arg(t.pause.map_or(0, |p| p.as_micros() as u64))
                    .arg(opt(t.left[0]))
                    .arg(opt(t.left[1]))
                    .arg(u8::from(t.later))
                    .arg(t.refused)
                    .arg(u8::from(t.announced))
                    .arg(t.share.map_or(-1.0, |(r, _)| r))
                    .arg(t.share.and_then(|(_, of)| of).unwrap_or(-1))
                    .arg(&*instance)
                    .arg(BURST_SHARE)
                    .arg(KEEP_FOR_FIRST_LANE)
                    .arg(GROWTH_PER_SECOND)
                    .arg(HOLD.as_micros() as u64)
                    .arg(SPAN.as_micros() as u64)
                    .arg(TURN_HALF_LIFE.as_micros() as u64)
                    .arg(t.waiting);
            })
            .await
            .and_then(|v| read(&v));
        let now = Instant::now();
        let mut s = shared.stock.lock();
        s.asking = false;
        s.told_at = Some(now);
        match got {
            Ok(a) => carry(&shared, &mut s, &t, &a, now),
            Err(e) => {
                // What was not told is told with the next lease.
                if s.pause.is_none() {
                    s.pause = t.pause;
                }
                s.learning.refused = s.learning.refused.saturating_add(t.refused);
                health.failed(Kind::Pacing, &e);
            }
        }
    }
}

/// Carries Redis's answer `a` to what was told `t` into the stock.
fn carry(shared: &Shared, s: &mut Stock, t: &Told, a: &Answer, now: Instant) {
    if s.rpm != t.rpm || s.announced != t.announced || s.learning.refused > 0 {
        // An answer announced the limit, or a 429 came, while this lease was on its way: the
        // pace Redis answered is of what it was told, not of what is now known (read as such,
        // an instance that had just started pacing would stop). Ask again with it.
        ask(shared, s);
    } else {
        s.paced_rpm = a.paced_rpm;
    }
    if a.wait.is_zero() {
        if s.expires <= now {
            s.requests = 0;
            s.tokens = 0;
        }
        s.requests += a.requests;
        s.tokens += a.tokens;
        s.expires = now + LEASE_LIFE;
        s.not_before = None;
    } else {
        s.not_before = Some((now + a.wait, t.later));
    }
    let l = &mut s.learning;
    if a.epoch > l.epoch {
        l.epoch = a.epoch;
        match l.share {
            // This instance's 429 started the cut: its share was told with it.
            Some((rate, at, None)) if t.refused > 0 => l.share = Some((rate, at, Some(a.epoch))),
            // Another instance met the limit: this one tells what it sent that was taken.
            _ => {
                l.share = l
                    .learner
                    .measure(now)
                    .map(|rate| (rate, now, Some(a.epoch)));
                if l.share.is_some() {
                    ask(shared, s);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use parking_lot::Mutex;
    use sluice_tail::pace::PaceSpec;
    use tokio::sync::Notify;

    use super::*;

    fn unpaced() -> Answer {
        Answer {
            requests: 1,
            tokens: 0,
            wait: Duration::ZERO,
            paced_rpm: 0,
            epoch: 0,
        }
    }

    #[test]
    fn a_lease_asked_before_a_limit_was_announced_does_not_unpace_the_instance() {
        let now = Instant::now();
        let shared = Shared {
            stock: Mutex::new(Stock::new(&PaceSpec::default(), now)),
            wake: Notify::new(),
        };
        let mut s = shared.stock.lock();
        // The lease goes out knowing nothing; then an answer announces 600 a minute.
        let t = told(&mut s, now);
        s.rpm = 600;
        s.announced = true;
        s.paced_rpm = 600;
        carry(&shared, &mut s, &t, &unpaced(), now);
        assert_eq!(s.paced_rpm, 600, "still paced at what was announced");
        assert!(s.asking, "and Redis is asked again with it");
        // Told the same bounds, the answer's pace is carried.
        s.asking = false;
        let t = told(&mut s, now);
        carry(
            &shared,
            &mut s,
            &t,
            &Answer {
                paced_rpm: 540,
                ..unpaced()
            },
            now,
        );
        assert_eq!(s.paced_rpm, 540);
        assert!(!s.asking);
    }
}
