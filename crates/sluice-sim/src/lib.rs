//! Rehearsal tooling: simulated LLM upstreams (in-process and over HTTP), scenarios as data
//! files, an open-loop load generator, and a virtual-time harness that runs a scenario
//! against the real gateway stack.
//!
//! The simulator is a product feature: users rehearse incidents and tune policies with it
//! before production, and sluice's own tail tests stand on it.

pub mod cache;
pub mod contract;
pub mod dist;
pub mod faq;
pub mod harness;
pub mod incoming;
pub mod judge;
pub mod limits;
pub mod load;
pub mod provider;
pub mod reader;
pub mod reviewer;
pub mod scenario;
pub mod script;
pub mod server;
pub mod spec;
pub mod structured;
pub mod upstream;
pub mod variants;

pub use provider::SimProvider;
pub use spec::UpstreamSpec;
pub use upstream::{SimUpstream, Stats};
