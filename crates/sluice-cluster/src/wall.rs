//! The wall clock that records shared between instances carry: each instance's monotonic
//! clock is its own, so a time told to another instance travels as milliseconds since the
//! epoch and comes back as an age.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `t` in milliseconds since the epoch (0 before it).
pub(crate) fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How long ago `at_ms` was when the wall clock reads `now` (zero for a time to come).
pub(crate) fn age(at_ms: u64, now: SystemTime) -> Duration {
    Duration::from_millis(ms(now).saturating_sub(at_ms))
}
