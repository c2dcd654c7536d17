//! Tail-latency machinery with no LLM knowledge: rotating percentile windows, and (as they land)
//! hedging, concurrency limits, lanes, breakers and deadlines.
//!
//! Every algorithm here takes `now` as an argument, so it runs the same on tokio's paused clock.

pub mod window;

pub use window::{LatencyWindow, Percentiles, WindowConfig, WindowError};
