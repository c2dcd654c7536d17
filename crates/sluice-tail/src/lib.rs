//! Tail-latency machinery with no LLM knowledge: rotating percentile windows, hedge and retry
//! budgets, concurrency limits, lanes with fair queues, rate pacing and breakers.
//!
//! Every algorithm here takes `now` as an argument, so it runs the same on tokio's paused clock.

pub mod admission;
pub mod breaker;
pub mod bucket;
pub mod budget;
pub mod cooldown;
pub mod fair_budget;
pub mod hedge;
pub mod limit;
pub mod pace;
pub mod retry;
pub mod window;

pub use breaker::{Breaker, BreakerPolicy, BreakerSnapshot, BreakerState, Verdict};
pub use bucket::MinuteBucket;
pub use budget::Budget;
pub use cooldown::Cooldowns;
pub use fair_budget::FairBudget;
pub use hedge::HedgePolicy;
pub use pace::{PaceSpec, Pacer};
pub use retry::RetryPolicy;
pub use window::{LatencyWindow, Percentiles, WindowConfig, WindowError};
