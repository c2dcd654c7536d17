//! Where a job stands: its items by state ("queued 47/200, running 3, done 150/200"), its
//! place in the batch lane, the lane's drain rate and the time left at that rate. Pure: the
//! counts come from the store (every instance's items). The rate is Little's law: the items
//! in flight in the lane over the time an item spent in flight, from the items ended in the
//! last minute; so it is right from the first items' end, when a count of ends over the
//! minute would still hold the minute before the lane was busy.

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
    /// Items in flight in the lane, every job's.
    pub running: u64,
    /// Their time in flight so far, summed, in milliseconds.
    pub running_ms: u64,
    /// The time in flight so far of the one sent last, in milliseconds.
    pub youngest_ms: u64,
    /// Items (every job's) that ended with an answer or an error in the last
    /// [`RATE_WINDOW_MS`].
    pub ended_last_window: u64,
    /// Of those, the items whose start is known.
    pub timed_last_window: u64,
    /// Their time from start to end, summed, in milliseconds.
    pub timed_ms_last_window: u64,
}

impl Lane {
    /// Items ended a second: in flight over the time an item spends in flight (Little's
    /// law) while items are in flight and some have ended; else the ends counted over the
    /// window. The time in flight counts what the items still in flight have spent so far
    /// beside what the ended ones took (time at risk over ends): from ended items alone it
    /// would be the quickest items' time, while the slow ones of the same wave still run.
    pub fn per_second(&self) -> f64 {
        if self.running > 0
            && let Some(w) = self.in_flight_s()
        {
            return self.running as f64 / w;
        }
        self.ended_last_window as f64 * 1000.0 / RATE_WINDOW_MS as f64
    }

    /// The time an item spends in flight, in seconds, when known (see
    /// [`Lane::per_second`]).
    fn in_flight_s(&self) -> Option<f64> {
        let at_risk_ms = self.timed_ms_last_window + self.running_ms;
        (self.timed_last_window > 0 && at_risk_ms > 0)
            .then(|| at_risk_ms as f64 / 1000.0 / self.timed_last_window as f64)
    }

    /// Seconds until the last of `queued` items (behind `ahead` others) and of those in
    /// flight ends. With items still to send: the last is sent once those before it drained
    /// at the lane's rate, then spends an item's time in flight. With all sent: what the one
    /// sent last has still to spend, at least half an item's time (one slower than most is
    /// not done for being old).
    fn eta(&self, queued: u64, running: u64) -> Option<f64> {
        let rate = self.per_second();
        if queued + running == 0 || rate <= 0.0 {
            return None;
        }
        let Some(w) = self.in_flight_s() else {
            return Some((self.ahead + queued + running) as f64 / rate);
        };
        if self.ahead + queued > 0 {
            return Some((self.ahead + queued) as f64 / rate + w);
        }
        let youngest = self.youngest_ms as f64 / 1000.0;
        Some((w - youngest).max(w / 2.0))
    }
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
    /// The lane's drain rate, items ended a second (see [`Lane::per_second`]).
    pub per_second: f64,
    /// Seconds until its last item is expected to end at that rate (`None` with no rate yet,
    /// or once nothing is left).
    pub eta_seconds: Option<f64>,
    /// Of its items' prompt tokens, the share read from the provider's prompt cache.
    pub cached_share: f64,
    /// "queued 47/200, running 3, done 150/200" (", failed 2", ", cancelled 5" when any):
    /// each of its items counted once, in the state it is in.
    pub line: String,
}

/// The progress of a job with `counts` in `lane`.
pub fn progress(counts: &Counts, lane: Lane) -> Progress {
    let per_second = lane.per_second();
    let eta_seconds = lane.eta(counts.queued, counts.running);
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
        line: line(counts, total),
    }
}

/// Each item counted once, in its state.
fn line(c: &Counts, total: u64) -> String {
    let mut line = format!(
        "queued {}/{total}, running {}, done {}/{total}",
        c.queued, c.running, c.done
    );
    let ended_unsent = c.cancelled + c.expired;
    for (what, n) in [("failed", c.failed), ("cancelled", ended_unsent)] {
        if n > 0 {
            line.push_str(&format!(", {what} {n}"));
        }
    }
    line
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod unit {
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
            ..Lane::default()
        };
        let p = progress(&counts, lane);
        assert_eq!(p.line, "queued 47/200, running 3, done 150/200");
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
        assert_eq!(
            progress(&ended, lane).line,
            "queued 0/2, running 0, done 2/2"
        );
        let mixed = Counts {
            done: 5,
            failed: 2,
            cancelled: 1,
            expired: 2,
            ..Counts::default()
        };
        assert_eq!(
            progress(&mixed, lane).line,
            "queued 0/10, running 0, done 5/10, failed 2, cancelled 3"
        );
    }
}
