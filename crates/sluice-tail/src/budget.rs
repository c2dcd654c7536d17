//! A budget for optional or repeated work (hedges, retries): every request deposits a
//! fraction of a token, every extra attempt spends a whole one, and savings are capped. The
//! extra attempts stay below that fraction of traffic, and when everything fails or is slow
//! at once (an overload, where more attempts only add load) the budget runs dry and they stop.

/// Tokens for extra attempts.
#[derive(Clone, Debug, PartialEq)]
pub struct Budget {
    balance: f64,
    ratio: f64,
    burst: f64,
}

impl Budget {
    /// A budget of `ratio` extra attempts per request, saving up to `burst`. It starts full,
    /// as a service that has been quiet would be (empty when `ratio` is zero).
    pub fn new(ratio: f64, burst: f64) -> Self {
        let ratio = ratio.max(0.0);
        let burst = burst.max(1.0);
        Self {
            balance: if ratio > 0.0 { burst } else { 0.0 },
            ratio,
            burst,
        }
    }

    /// Credits one incoming request.
    pub fn deposit(&mut self) {
        self.balance = (self.balance + self.ratio).min(self.burst);
    }

    /// Spends one extra attempt if the budget has it.
    pub fn try_spend(&mut self) -> bool {
        if self.balance >= 1.0 {
            self.balance -= 1.0;
            true
        } else {
            false
        }
    }
}
