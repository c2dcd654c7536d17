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
}
