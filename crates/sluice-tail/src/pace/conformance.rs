//! The behaviour every [`Cooling`] and every [`Pace`] keeps, whatever holds them: one suite
//! per kind, run against the in-process ones here and against the Redis ones in
//! `sluice-cluster`'s tests (with the `conformance` feature). For cool-downs, `a` and `b`
//! are two instances on one store (the same object in one process); what `a` starts, `b`
//! sees within [`LANDS_WITHIN`]. For pacing, every instance given paces one deployment's
//! limit: together they send no more than it allows, and use most of it.

// Test support: a check that fails panics, as a test's assertion does.
#![allow(clippy::panic, clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Cooling, Pace};

/// How long a cool-down started on one instance may take to reach another.
pub const LANDS_WITHIN: Duration = Duration::from_secs(5);

/// Runs every check; keys are named under `tag`.
pub async fn run(a: &dyn Cooling, b: &dyn Cooling, tag: &str) {
    let k: Arc<str> = Arc::from(format!("{tag}-deployment").as_str());
    let other: Arc<str> = Arc::from(format!("{tag}-other").as_str());
    let now = Instant::now();
    let s = Duration::from_secs;
    assert!(!a.active(&k, now), "nothing cools before it is started");
    a.start(&k, now, s(2));
    assert!(a.active(&k, now) && a.active(&k, now + s(1)));
    assert!(!a.active(&k, now + s(3)), "a cool-down ends by itself");
    a.start(&k, now, s(1));
    assert!(
        a.active(&k, now + Duration::from_millis(1_500)),
        "a later end wins"
    );
    assert!(!a.active(&other, now), "another key does not cool");
    let deadline = tokio::time::Instant::now() + LANDS_WITHIN;
    while !b.active(&k, Instant::now()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the other instance never saw the cool-down"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !b.active(&k, Instant::now() + s(10)),
        "the other instance's cool-down ends with it"
    );
    assert!(!b.active(&other, Instant::now()));
}

/// How long the pacing check sends.
pub const PACED_FOR: Duration = Duration::from_secs(2);

/// Sends as fast as `instances` allow for [`PACED_FOR`] (each in a task of its own, on the
/// wall clock), all pacing one deployment of `per_minute` requests: the calls sent stay
/// within the rate plus one second's burst, and reach at least half the rate.
pub async fn pacing(instances: Vec<Box<dyn Pace>>, per_minute: u64) {
    let start = Instant::now();
    let end = start + PACED_FOR;
    let tasks: Vec<_> = instances
        .into_iter()
        .map(|mut p| {
            tokio::spawn(async move {
                let mut sent = 0u64;
                loop {
                    let now = Instant::now();
                    if now >= end {
                        return sent;
                    }
                    let at = p.ready_at(now, 1);
                    if at <= now {
                        p.take(now, 1);
                        sent += 1;
                    } else {
                        tokio::time::sleep_until(at.min(now + Duration::from_millis(5))).await;
                    }
                }
            })
        })
        .collect();
    let mut sent = 0;
    for t in tasks {
        sent += t.await.unwrap_or(0);
    }
    let per_second = per_minute as f64 / 60.0;
    let allowed = per_second * PACED_FOR.as_secs_f64() + per_second.ceil();
    assert!(
        sent as f64 <= allowed,
        "{sent} calls sent in {PACED_FOR:?} at {per_minute} a minute (at most {allowed})"
    );
    assert!(
        sent as f64 >= 0.5 * per_second * PACED_FOR.as_secs_f64(),
        "{sent} calls sent in {PACED_FOR:?} at {per_minute} a minute: the limit goes unused"
    );
}

/// How long the learning check sends.
pub const LEARNING_FOR: Duration = Duration::from_secs(8);
/// What the learning check forgives: the first calls, sent before anything is known.
pub const LEARNING_FROM: Duration = Duration::from_secs(2);

/// `instances` with no limit configured, offered twice what an upstream of `per_minute`
/// (one second's burst, announcing nothing) takes for [`LEARNING_FOR`], each 429 met as the
/// gateway meets it ([`super::after_429`]: a pause only while nothing is paced): after
/// [`LEARNING_FROM`], under 2% of the calls sent meet a 429 and the upstream takes at least
/// four fifths of its limit. (Together the instances learn one limit: each pacing to all
/// of what it measured would send several times it.)
pub async fn learning(instances: Vec<Box<dyn Pace>>, per_minute: u64) {
    let start = Instant::now();
    let upstream = Arc::new(parking_lot::Mutex::new(crate::MinuteBucket::new(
        per_minute,
        Some(per_minute.div_ceil(60)),
        start,
    )));
    let n = instances.len() as f64;
    let every = Duration::from_secs_f64(60.0 / per_minute as f64 * n / 2.0);
    let tasks: Vec<_> = instances
        .into_iter()
        .map(|mut p| {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                // (sent, refused, taken) after LEARNING_FROM.
                let mut counts = (0u64, 0u64, 0u64);
                let mut next = Instant::now();
                while next < start + LEARNING_FOR {
                    tokio::time::sleep_until(next).await;
                    loop {
                        let now = Instant::now();
                        let at = p.ready_at(now, 1);
                        if at <= now {
                            break;
                        }
                        tokio::time::sleep_until(at.min(now + Duration::from_millis(5))).await;
                    }
                    let now = Instant::now();
                    p.take(now, 1);
                    let taken = upstream.lock().try_take(now, 1);
                    if !taken {
                        p.exhausted(now);
                        let paced = p.state(now).0.is_some();
                        if let Some(until) = super::after_429(now, None, paced).pause_until {
                            p.paused(now, until);
                        }
                    }
                    if now >= start + LEARNING_FROM {
                        counts.0 += 1;
                        counts.1 += u64::from(!taken);
                        counts.2 += u64::from(taken);
                    }
                    next = (next + every).max(now);
                }
                counts
            })
        })
        .collect();
    let (mut sent, mut refused, mut taken) = (0, 0, 0);
    for t in tasks {
        let (s, r, k) = t.await.unwrap_or_default();
        sent += s;
        refused += r;
        taken += k;
    }
    let secs = (LEARNING_FOR - LEARNING_FROM).as_secs_f64();
    let limit = per_minute as f64 / 60.0 * secs;
    eprintln!("learning: {sent} sent, {refused} refused, {taken} taken of {limit:.0} allowed");
    assert!(
        refused as f64 <= 0.02 * sent as f64,
        "{refused} of {sent} calls met a 429 once the limit was learnt"
    );
    assert!(
        taken as f64 >= 0.8 * limit,
        "the upstream took {taken} calls where its limit allows {limit:.0}"
    );
}

#[cfg(test)]
mod tests {
    use parking_lot::Mutex;

    use crate::pace::Cooldowns;

    /// The in-process cool-downs keep the behaviour every store keeps.
    #[tokio::test]
    async fn local_cooldowns_conform() {
        let local = Mutex::new(Cooldowns::default());
        super::run(&local, &local, "local").await;
    }

    /// One in-process pacer keeps to its limit and uses it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_local_pacer_conforms() {
        let spec = crate::pace::PaceSpec {
            rpm: Some(600),
            tpm: None,
        };
        let p = crate::pace::Pacer::new(spec, tokio::time::Instant::now());
        super::pacing(vec![Box::new(p)], 600).await;
    }

    /// One in-process pacer learns a limit no answer announces from its 429s.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_local_pacer_learns_a_bare_limit() {
        let p = crate::pace::Pacer::new(Default::default(), tokio::time::Instant::now());
        super::learning(vec![Box::new(p)], 600).await;
    }
}
