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
//! The state is a pure function of what it is told.

/// Calls that may await an answer while nothing is known of the upstream.
pub const INITIAL: usize = 4;

/// The window of one upstream's calls while its limit is unknown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlowStart {
    window: usize,
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
    pub fn allows(&mut self) -> bool {
        let yes = self.known || self.unanswered < self.window;
        self.held |= !yes;
        yes
    }

    /// A call was sent.
    pub fn sent(&mut self) {
        self.unanswered += 1;
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
    pub fn answered(&mut self, dropped: bool) {
        self.unanswered = self.unanswered.saturating_sub(1);
        if !dropped && std::mem::take(&mut self.held) {
            self.window = self.window.saturating_add(1);
        }
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
        let mut s = SlowStart::new();
        for _ in 0..INITIAL {
            assert!(s.allows());
            s.sent();
        }
        assert!(!s.allows(), "the initial window is full");
        s.answered(false);
        assert_eq!(s.window(), INITIAL + 1, "it held a call back: one more");
        assert!(s.allows());
        s.sent();
        assert!(s.allows());
        s.sent();
        // Light traffic: answers while nothing waits open nothing.
        s.answered(false);
        s.answered(false);
        assert_eq!(s.window(), INITIAL + 1);
        s.gone();
        assert!(s.allows());
    }

    #[test]
    fn a_refusal_opens_nothing_and_knowing_the_limit_ends_it() {
        let mut s = SlowStart::new();
        for _ in 0..INITIAL {
            s.sent();
        }
        assert!(!s.allows());
        s.answered(true);
        assert_eq!(s.window(), INITIAL, "a refusal opens no more");
        assert!(s.allows(), "but frees its place");
        let mut s = SlowStart::new();
        s.known();
        assert!(!s.opening());
        for _ in 0..1_000 {
            s.sent();
        }
        assert!(s.allows());
    }
}
