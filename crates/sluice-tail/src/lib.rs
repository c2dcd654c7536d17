//! Tail-latency machinery with no LLM knowledge: rotating percentile windows, hedge and retry
//! budgets, concurrency limits, lanes with fair queues, rate pacing and breakers.
//!
//! Every algorithm here takes `now` as an argument, so it runs the same on tokio's paused clock.
//! Each policy's whole decision lives in its own folder, as state plus a function of `now`
//! and the facts: `hedge/` (when and where to hedge, its budget), `retry/` (whether, where
//! and when to retry), `breaker/` (when an upstream is out), `admission/` (who gets a slot,
//! in which order; its `glue` alone reads the clock and hands permits over channels),
//! `pace/` (holding calls back under rate limits, and what a 429 decides). `deadline` says
//! whether a late attempt still fits.
//!
//! Each policy owns its parameters: the configuration reads `hedge = { ... }`, `retry`,
//! `breaker`, `limit` and `[lanes.*]` straight into [`HedgePolicy`], [`RetryPolicy`],
//! [`BreakerPolicy`], [`limit::LimitParams`] and [`admission::LaneParams`], whose defaults
//! and `problems()` are the only ones.

pub mod admission;
pub mod breaker;
pub mod bucket;
pub mod budget;
pub mod deadline;
pub mod hedge;
pub mod limit;
pub mod normal;
pub mod pace;
pub mod retry;
pub mod window;

pub use breaker::{Breaker, BreakerPolicy, BreakerSnapshot, BreakerState, Verdict};
pub use bucket::MinuteBucket;
pub use budget::Budget;
pub use hedge::{FairBudget, HedgeLanes, HedgePolicy, Hedging};
pub use pace::{Cooldowns, Pace, PaceSpec, Pacer};
pub use retry::{RetryPolicy, Retrying};
/// What is wrong with a parameter: the field (empty for the whole table) and why.
pub type Problem = (&'static str, String);

pub use window::{LatencyWindow, Percentiles, WindowConfig, WindowError};
