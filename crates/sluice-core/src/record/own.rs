//! What the upstream itself took of a call, each attempt timed from its own start (never
//! from dispatch, which also holds queueing, 429 pauses and retries).

use std::time::Duration;

use super::{Attempt, AttemptOutcome, CallRecord, Phase};

impl CallRecord {
    /// The answering attempt's own time to its first byte (or to its end), from its own
    /// start: the attempt of the upstream that answered whose figure is least. `None` when no
    /// attempt answered.
    pub fn answered_own(&self, phase: Phase) -> Option<Duration> {
        let up = self.upstream.as_ref()?;
        let ok = |a: &&Attempt| a.upstream == *up && a.outcome == AttemptOutcome::Ok;
        let took = |a: &Attempt| {
            let to = match phase {
                Phase::Ttfb => a.first_byte,
                Phase::Total => self.end_of(a),
            };
            Some(to?.saturating_duration_since(a.started))
        };
        self.attempts.iter().filter(ok).filter_map(took).min()
    }

    /// What the upstream itself took of `phase`: [`CallRecord::answered_own`], or, when no
    /// attempt answered, the longest an attempt was out unanswered (the least it took).
    /// `None` when no attempt went.
    pub fn attempt_own(&self, phase: Phase) -> Option<Duration> {
        self.answered_own(phase).or_else(|| {
            self.attempts
                .iter()
                .filter_map(|a| Some(self.end_of(a)?.saturating_duration_since(a.started)))
                .max()
        })
    }

    /// When `a` ended, or the call did while it was still out.
    fn end_of(&self, a: &Attempt) -> Option<tokio::time::Instant> {
        a.ended.or(self.timings.done)
    }
}
