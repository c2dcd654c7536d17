//! Withdrawals: one token per job whose items this gateway runs, cancelled when the job is
//! cancelled (here at once, or seen in the store by the keeper when another instance took
//! the cancel), so that its items still waiting for a slot end unsent and unbilled while
//! those already sent finish.

use std::collections::HashMap;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// The tokens of the jobs whose items run here.
#[derive(Debug, Default)]
pub(crate) struct Withdrawals(Mutex<HashMap<String, CancellationToken>>);

impl Withdrawals {
    /// The token that withdraws job `id`'s items.
    pub(crate) fn token(&self, id: &str) -> CancellationToken {
        self.0.lock().entry(id.to_string()).or_default().clone()
    }

    /// Withdraws job `id`'s items that were not sent (and any later asked for).
    pub(crate) fn withdraw(&self, id: &str) {
        self.token(id).cancel();
    }

    /// Forgets job `id` (it ended).
    pub(crate) fn forget(&self, id: &str) {
        self.0.lock().remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_withdrawn_job_withdraws_the_items_that_hold_its_token_and_later_ones() {
        let w = Withdrawals::default();
        let waiting = w.token("b1");
        let other = w.token("b2");
        w.withdraw("b1");
        assert!(waiting.is_cancelled());
        assert!(
            w.token("b1").is_cancelled(),
            "an item asked for later is withdrawn too"
        );
        assert!(!other.is_cancelled());
        w.forget("b1");
        assert!(!w.token("b1").is_cancelled(), "forgotten once it ended");
    }
}
