//! A job's items by state, as the store counts them and the job's status and progress read
//! them.

/// A job's items by state, and the tokens of those that ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Not yet sent.
    pub queued: u64,
    /// Sent and not yet ended.
    pub running: u64,
    /// Ended with a 2xx answer.
    pub done: u64,
    /// Ended with an error.
    pub failed: u64,
    /// Ended unsent by a cancellation.
    pub cancelled: u64,
    /// Ended unsent by the window.
    pub expired: u64,
    /// Prompt tokens of the items that ended.
    pub prompt_tokens: u64,
    /// Of which read from the provider's prompt cache.
    pub cached_tokens: u64,
    /// Completion tokens of the items that ended.
    pub completion_tokens: u64,
}

impl Counts {
    /// Items in all.
    pub fn total(&self) -> u64 {
        self.queued + self.running + self.done + self.failed + self.cancelled + self.expired
    }
}
