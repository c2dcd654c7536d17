//! Slow start: how many calls may await an answer from an upstream whose limit is unknown.
//!
//! A freshly started gateway knows nothing of a provider's rate limit until the provider
//! answers: its first answers announce the limit in headers, or its first 429s let the pacer
//! learn it. Sent all at once, a burst's calls reach the provider before any answer returns,
//! and a provider of ten a second refuses all but ten (several instances started together
//! multiply that). So, as TCP opens its window, calls sent and not yet answered (no first
//! byte) are held to a window that starts at [`INITIAL`] and grows by one with each answer
//! that is not a refusal, but only while the window is what holds calls back (so it doubles
//! each round trip under a burst, and light traffic before a burst opens nothing: a window
//! is grown only by being used). A stream past its first byte no longer counts. It ends when
//! the pacer paces requests (a report announced the provider's limit, or a 429 taught one,
//! here or on another instance of a cluster), or when the window has grown to the
//! concurrency limit (an upstream with no rate limit at all). A provider that answers in a
//! millisecond opens the window in a few milliseconds; a burst at one rate-limited at ten a
//! second meets a few refusals per instance, not the burst's size. Routing and hedges are not
//! held to the window (admission's `admits_now`): it opens with the next answers.
//!
//! The window counts calls, not a rate; what a provider limits is the rate. So, beside the
//! window, a call may also go while the calls sent in the current second are fewer than the
//! highest rate of answers the upstream gave without a refusal (averaged over ten seconds).
//! An upstream that slows down at the same arrivals then keeps its rate: without this, a
//! window opened to the 10 or so calls a 1.5 s upstream needed at 5 a second held one six
//! times slower to about 1 a second, and calls queued for up to 14 s while the rate the
//! provider had always taken was never tried.
//! The state is a pure function of what it is told and when.

use tokio::time::Instant;

use super::state::Recent;

/// Calls that may await an answer while nothing is known of the upstream.
pub const INITIAL: usize = 4;

/// The window of one upstream's calls while its limit is unknown.
#[derive(Clone, Debug, PartialEq)]
pub struct SlowStart {
    window: usize,
    /// Answers without a refusal over the last ten seconds.
    good: Option<Recent>,
    /// The highest rate of those seen, a second.
    proven: f64,
    /// Calls sent in the current second: (second since `good`'s origin, count).
    this_second: (u64, u32),
    /// Whether the window held a call back since the last answer.
    held: bool,
    /// Whether the upstream's limit is known (then the window is open for good).
    known: bool,
    /// Calls sent and not yet answered.
    unanswered: usize,
}

impl SlowStart {
    /// Nothing known.
    pub fn new() -> Self {
        Self {
            window: INITIAL,
            good: None,
            proven: 0.0,
            this_second: (0, 0),
            held: false,
            known: false,
            unanswered: 0,
        }
    }

    /// Open from the start: the upstream's limit is known (or the operator's to keep).
    pub fn open() -> Self {
        Self {
            known: true,
            ..Self::new()
        }
    }

    /// Whether one more call may go; a `false` is remembered as the window holding calls
    /// back.
    pub fn allows(&mut self, now: Instant) -> bool {
        let yes = self.known || self.unanswered < self.window || self.within_proven(now);
        self.held |= !yes;
        yes
    }

    /// Whether the calls sent this second are fewer than the proven rate.
    fn within_proven(&mut self, now: Instant) -> bool {
        let second = self.second(now);
        let sent = if self.this_second.0 == second {
            self.this_second.1
        } else {
            0
        };
        f64::from(sent) < self.proven.ceil()
    }

    /// The second `now` falls in, counted from the first answer.
    fn second(&self, now: Instant) -> u64 {
        self.good.as_ref().map_or(0, |g| g.second_of(now))
    }

    /// A call was sent at `now`.
    pub fn sent(&mut self, now: Instant) {
        self.unanswered += 1;
        let second = self.second(now);
        if self.this_second.0 == second {
            self.this_second.1 += 1;
        } else {
            self.this_second = (second, 1);
        }
    }

    /// A call sent ended without an answer (cancelled, or failed before one).
    pub fn gone(&mut self) {
        self.unanswered = self.unanswered.saturating_sub(1);
    }

    /// Calls that may await an answer (`usize::MAX` once the upstream's limit is known).
    pub fn window(&self) -> usize {
        if self.known { usize::MAX } else { self.window }
    }

    /// One call's answer (its first byte, or its failure): any answer but a refusal
    /// (`dropped`) opens the window by one if it held calls back.
    pub fn answered(&mut self, now: Instant, dropped: bool) {
        self.unanswered = self.unanswered.saturating_sub(1);
        if dropped {
            return;
        }
        let good = self.good.get_or_insert_with(|| Recent::new(now));
        good.count(now);
        self.proven = self.proven.max(good.per_second(now));
        if std::mem::take(&mut self.held) {
            self.window = self.window.saturating_add(1);
        }
    }

    /// The highest rate of answers without a refusal seen, a second.
    pub fn proven(&self) -> f64 {
        self.proven
    }

    /// The pacer paces by a limit announced or learnt: the window opens for good.
    pub fn known(&mut self) {
        self.known = true;
    }

    /// Whether the window still applies.
    pub fn opening(&self) -> bool {
        !self.known
    }
}

impl Default for SlowStart {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_opens_by_one_per_answer_only_while_it_holds_calls_back() {
        let now = Instant::now();
        let mut s = SlowStart::new();
        for _ in 0..INITIAL {
            assert!(s.allows(now));
            s.sent(now);
        }
        assert!(!s.allows(now), "the initial window is full");
        s.answered(now, false);
        assert_eq!(s.window(), INITIAL + 1, "it held a call back: one more");
        assert!(s.allows(now));
        s.sent(now);
        assert!(s.allows(now));
        s.sent(now);
        // Light traffic: answers while nothing waits open nothing.
        s.answered(now, false);
        s.answered(now, false);
        assert_eq!(s.window(), INITIAL + 1);
        s.gone();
        assert!(s.allows(now));
    }

    #[test]
    fn a_refusal_opens_nothing_and_knowing_the_limit_ends_it() {
        let now = Instant::now();
        let mut s = SlowStart::new();
        for _ in 0..INITIAL {
            s.sent(now);
        }
        assert!(!s.allows(now));
        s.answered(now, true);
        assert_eq!(s.window(), INITIAL, "a refusal opens no more");
        assert!(s.allows(now), "but frees its place");
        let mut s = SlowStart::new();
        s.known();
        assert!(!s.opening());
        for _ in 0..1_000 {
            s.sent(now);
        }
        assert!(s.allows(now));
    }

    /// Five answers a second for ten seconds, the window never full: then the upstream
    /// slows, the window fills with calls awaiting answers, and five a second still go.
    #[test]
    fn the_rate_already_answered_goes_on_when_answers_take_longer() {
        let mut t = Instant::now();
        let mut s = SlowStart::new();
        for _ in 0..50 {
            t += std::time::Duration::from_millis(200);
            assert!(s.allows(t));
            s.sent(t);
            s.answered(t, false);
        }
        assert!((s.proven() - 5.0).abs() < 1.0, "{}", s.proven());
        assert_eq!(s.window(), INITIAL, "never held: never opened");
        // Now nothing is answered: the window fills, the proven rate still lets calls go.
        let mut sent = 0;
        for _ in 0..40 {
            t += std::time::Duration::from_millis(100);
            if s.allows(t) {
                s.sent(t);
                sent += 1;
            }
        }
        // Four seconds: the window's 4, then at most the proven rate each second.
        assert!((16..=24).contains(&sent), "{sent} sent in 4 s");
        let refused = (0..100).filter(|_| {
            let yes = s.allows(t);
            if yes {
                s.sent(t);
            }
            !yes
        });
        assert!(refused.count() >= 90, "a burst is still held to the rate");
    }
}
