//! A call's place in a distributed trace: the trace it belongs to, the span sluice opened for
//! it, the client's span it continues, whether the trace was sampled at its head, and the
//! vendors' `tracestate` it passes on.

use std::sync::Arc;

use tokio::time::Instant;

/// The ids of a traced call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceIds {
    /// The trace: the client's, or a new one.
    pub trace_id: u128,
    /// The span sluice opened for the call (its server span).
    pub span_id: u64,
    /// The client's span the call continues, when the client sent a `traceparent`.
    pub parent: Option<u64>,
    /// Whether the trace was sampled at its head (the client's flag, or sluice's ratio).
    pub sampled: bool,
    /// The client's `tracestate`, passed upstream unchanged.
    pub state: Option<Arc<str>>,
}

impl TraceIds {
    /// The span id of the call's own step `n` (attempts are `1 + index`; other steps use
    /// numbers from [`STEP_BASE`] up): a mix of the call's span id and `n`, so the id sent
    /// upstream and the exported span agree without being stored.
    pub fn child(&self, n: u64) -> u64 {
        let id = mix(self.span_id ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        // Zero is not a valid span id.
        if id == 0 { 1 } else { id }
    }

    /// The span id of attempt `index`.
    pub fn attempt(&self, index: usize) -> u64 {
        self.child(1 + index as u64)
    }
}

/// Where the step numbers of spans other than attempts start.
pub const STEP_BASE: u64 = 1 << 32;

/// SplitMix64's finaliser: spreads every bit of `x` over the result.
pub fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// When the steps before dispatch ended, noted only for traced calls (an untraced call reads
/// no clock for them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Marks {
    /// The body was read and parsed.
    pub parsed: Option<Instant>,
    /// The caller, lane and deadline were known.
    pub identified: Option<Instant>,
    /// The model group was chosen.
    pub routed: Option<Instant>,
    /// The answer caches were consulted.
    pub looked_up: Option<Instant>,
    /// Dispatch began: admission to the first deployment's queue.
    pub queued: Option<Instant>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(span_id: u64) -> TraceIds {
        TraceIds {
            trace_id: 7,
            span_id,
            parent: None,
            sampled: true,
            state: None,
        }
    }

    #[test]
    fn child_ids_differ_by_step_and_by_call() {
        let a = ids(0x1234);
        let mut seen = std::collections::HashSet::new();
        for i in 0..64 {
            assert!(seen.insert(a.attempt(i)));
            assert!(seen.insert(a.child(STEP_BASE + i as u64)));
        }
        assert!(!seen.contains(&ids(0x1235).attempt(0)));
        assert_eq!(a.attempt(3), a.attempt(3));
        assert!(!seen.contains(&0));
    }
}
