//! One ledger row: what one call was, used and cost.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sluice_core::calendar::civil_from_days;

/// Tokens of one call by kind. `prompt` counts every input token, `cached` and `cache_write`
/// are parts of it; `reasoning` is the part of `completion` spent thinking.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// All input tokens.
    pub prompt: u64,
    /// Input tokens read from the provider's prompt cache.
    pub cached: u64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write: u64,
    /// Output tokens.
    pub completion: u64,
    /// Output tokens spent reasoning.
    pub reasoning: u64,
}

impl Tokens {
    /// Input plus output.
    pub fn total(&self) -> u64 {
        self.prompt + self.completion
    }
}

/// Whether (and where) the call's input was served from a cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheOutcome {
    /// No cached input.
    #[default]
    Miss,
    /// Part of the prompt was read from the provider's prompt cache.
    Provider,
    /// The whole answer was served from sluice's exact answer cache: no upstream was asked.
    Exact,
    /// The whole answer was served from the semantic cache (an earlier answer to a question
    /// meaning the same): no upstream was asked.
    Semantic,
    /// A would-be semantic hit asked upstream to verify its entry's answer: billed as a call,
    /// its cost what verification spends (as a hedge's is what hedging spends).
    SemanticVerify,
}

impl CacheOutcome {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Miss => "miss",
            Self::Provider => "provider",
            Self::Exact => "exact",
            Self::Semantic => "semantic",
            Self::SemanticVerify => "semantic_verify",
        }
    }

    /// The outcome a stored text names (unknown texts read as a miss).
    pub fn parse(s: &str) -> Self {
        match s {
            "provider" => Self::Provider,
            "exact" => Self::Exact,
            "semantic" => Self::Semantic,
            "semantic_verify" => Self::SemanticVerify,
            _ => Self::Miss,
        }
    }
}

/// One finished call, as the ledger keeps it. Its texts are shared (`Arc<str>`): the
/// gateway fills them from the call record's names without copying, and the store binds
/// them to its `INSERT` without copying again.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The request id (`x-request-id`).
    pub request_id: Arc<str>,
    /// When the request arrived, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The tenant it was for.
    pub tenant: Option<Arc<str>>,
    /// The name of the API key it came with.
    pub api_key: Option<Arc<str>>,
    /// The model group the client asked for.
    pub model_group: Option<Arc<str>>,
    /// The deployment that answered.
    pub upstream: Option<Arc<str>>,
    /// The upstream's model name (what prices are keyed by).
    pub model: Option<Arc<str>>,
    /// The HTTP status the client got.
    pub status: u16,
    /// The error code, when the call failed.
    pub error: Option<Arc<str>>,
    /// Whether the client asked for a stream.
    pub stream: bool,
    /// Tokens by kind.
    pub tokens: Tokens,
    /// Everything the call cost, in micro-units: the answer plus `extra_micros`; `None` when
    /// it is not known (an upstream whose model has no price worked on it), never a 0 that
    /// would read as free.
    pub cost_micros: Option<u64>,
    /// What the provider's prompt cache saved against the full input price (negative when
    /// cache writes cost more than the reads saved); for an answer served from the answer
    /// cache, what that answer cost when it was first bought.
    pub saved_micros: i64,
    /// The part of `cost_micros` spent on hedges and retries that did not answer.
    pub extra_micros: u64,
    /// Whether the input came from a cache.
    pub cache: CacheOutcome,
    /// Time to the first byte from arrival, in milliseconds.
    pub ttfb_ms: Option<u64>,
    /// Time from arrival to the end, in milliseconds.
    pub total_ms: u64,
    /// Attempts made, the first included.
    pub attempts: u32,
    /// Of which hedges.
    pub hedges: u32,
    /// Of which retries.
    pub retries: u32,
    /// The batch item the call ran (`BATCH_ID/LINE`), for a call of a batch job: the ledger
    /// keeps at most one row per item, so an item sent again after a crash is billed once.
    pub batch_item: Option<Arc<str>>,
    /// The currency the answering model's price is published in, when it is not the one
    /// the gateway bills in (`cost_micros` is in that one, converted at its rate).
    pub currency: Option<Arc<str>>,
    /// The answer's cost in `currency`: what the provider bills for it.
    pub native_micros: Option<u64>,
    /// The hold its tenant's reservation was kept under in a cluster's shared book
    /// (`INSTANCE-N`), so that a dead instance's holds are settled from their rows.
    pub hold: Option<Arc<str>>,
    /// Whether the call's spend was settled in the ledger's database already (its hold was
    /// kept there while Redis could not answer): the writer then does not add it to the
    /// tenant's balance again. Not a column.
    #[serde(skip)]
    pub settled_in_ledger: bool,
}

/// The UTC calendar day (`YYYY-MM-DD`) of a Unix time in milliseconds.
pub fn utc_day(at_ms: i64) -> String {
    let (y, m, d) = civil_from_days(at_ms.div_euclid(86_400_000));
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_utc_calendar_days() {
        assert_eq!(utc_day(0), "1970-01-01");
        assert_eq!(utc_day(86_399_999), "1970-01-01");
        assert_eq!(utc_day(86_400_000), "1970-01-02");
        assert_eq!(utc_day(-1), "1969-12-31");
        // 2024-02-29T12:00:00Z
        assert_eq!(utc_day(1_709_208_000_000), "2024-02-29");
        // 2026-11-30T23:59:59Z
        assert_eq!(utc_day(1_796_083_199_000), "2026-11-30");
    }

    #[test]
    fn cache_outcomes_round_trip() {
        for c in [
            CacheOutcome::Miss,
            CacheOutcome::Provider,
            CacheOutcome::Exact,
            CacheOutcome::Semantic,
            CacheOutcome::SemanticVerify,
        ] {
            assert_eq!(CacheOutcome::parse(c.as_str()), c);
        }
    }
}
