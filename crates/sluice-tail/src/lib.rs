//! Tail-latency machinery with no LLM knowledge: rotating percentile windows, and (as they land)
//! hedging, concurrency limits, lanes, breakers and deadlines.
//!
//! Every algorithm here takes `now` as an argument, so it runs the same on tokio's paused clock.

pub mod cooldown;
pub mod hedge;
pub mod window;

pub use cooldown::Cooldowns;
pub use hedge::{HedgeBudget, HedgePolicy};
pub use window::{LatencyWindow, Percentiles, WindowConfig, WindowError};
