//! Where a job stands: its items by state, its place in the batch lane ("queued 47/200"),
//! the lane's drain rate and the time left at that rate. Pure: the counts come from the
//! store, the rate from items ended in the last minute (on every instance).

use serde::Serialize;

use crate::counts::Counts;

/// The window the drain rate is measured over, in milliseconds.
pub const RATE_WINDOW_MS: i64 = 60_000;

/// What the batch lane holds, seen from one job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lane {
    /// Items queued in the lane, every job's.
    pub queued: u64,
    /// Items of other jobs that will be sent before this job's next one.
    pub ahead: u64,
    /// Items (every job's) that ended with an answer or an error in the last
    /// [`RATE_WINDOW_MS`].
    pub ended_last_window: u64,
}

/// A job's progress, as `GET /v1/batches/{id}` reports it beside OpenAI's fields.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Progress {
    /// Its items in all.
    pub total: u64,
    /// Not yet sent.
    pub queued: u64,
    /// Sent, not yet ended.
    pub running: u64,
    /// Ended with a 2xx answer.
    pub done: u64,
    /// Ended with an error (the upstream's, or sluice's).
    pub failed: u64,
    /// Ended unsent: cancelled or past the window.
    pub cancelled: u64,
    /// Of those, ended by the window.
    pub expired: u64,
    /// Items of earlier jobs that will be sent before this job's next one.
    pub ahead: u64,
    /// Items queued in the batch lane, every job's.
    pub lane_queued: u64,
    /// The lane's drain rate: items ended a second over the last minute.
    pub per_second: f64,
    /// Seconds until its last item is expected to end at that rate (`None` with no rate yet,
    /// or once nothing is left).
    pub eta_seconds: Option<f64>,
    /// Of its items' prompt tokens, the share read from the provider's prompt cache.
    pub cached_share: f64,
    /// "queued 47/200": its items not yet sent, of all.
    pub line: String,
}

/// The progress of a job with `counts` in `lane`.
pub fn progress(counts: &Counts, lane: Lane) -> Progress {
    let per_second = lane.ended_last_window as f64 * 1000.0 / RATE_WINDOW_MS as f64;
    let left = lane.ahead + counts.queued + counts.running;
    let eta_seconds = (left > 0 && per_second > 0.0).then(|| left as f64 / per_second);
    let total = counts.total();
    Progress {
        total,
        queued: counts.queued,
        running: counts.running,
        done: counts.done,
        failed: counts.failed,
        cancelled: counts.cancelled + counts.expired,
        expired: counts.expired,
        ahead: lane.ahead,
        lane_queued: lane.queued,
        per_second,
        eta_seconds,
        cached_share: if counts.prompt_tokens == 0 {
            0.0
        } else {
            counts.cached_tokens as f64 / counts.prompt_tokens as f64
        },
        line: format!("queued {}/{total}", counts.queued),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eta_counts_what_is_ahead_at_the_lanes_rate() {
        let counts = Counts {
            queued: 47,
            running: 3,
            done: 150,
            prompt_tokens: 1_000,
            cached_tokens: 900,
            ..Counts::default()
        };
        let lane = Lane {
            queued: 147,
            ahead: 100,
            ended_last_window: 300,
        };
        let p = progress(&counts, lane);
        assert_eq!(p.line, "queued 47/200");
        assert_eq!(p.per_second, 5.0);
        assert_eq!(p.eta_seconds, Some(30.0));
        assert!((p.cached_share - 0.9).abs() < 1e-9);
    }

    #[test]
    fn no_rate_no_eta_and_nothing_left_no_eta() {
        let counts = Counts {
            queued: 2,
            ..Counts::default()
        };
        assert_eq!(progress(&counts, Lane::default()).eta_seconds, None);
        let ended = Counts {
            done: 2,
            ..Counts::default()
        };
        let lane = Lane {
            ended_last_window: 10,
            ..Lane::default()
        };
        assert_eq!(progress(&ended, lane).eta_seconds, None);
        assert_eq!(progress(&ended, lane).line, "queued 0/2");
    }
}
