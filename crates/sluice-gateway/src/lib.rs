//! The gateway: an OpenAI-compatible HTTP front (axum), the request's walk, the admin API and
//! graceful shutdown.
//!
//! - [`walk`]: the walk of a chat-completions request, its order written once in
//!   `walk/mod.rs`, each step a module of that folder (dispatch carries out the decisions of
//!   `sluice-tail`'s policies; routing is `sluice-routing`, the answer cache `sluice-cache`).
//! - [`admin`]: `/admin/*` and its guard. [`public`]: models, health, readiness, metrics.
//! - [`assemble`]: the gateway built from configuration (policies, providers).
//! - [`gateway`]: the state every request shares, as handles each in its own folder:
//!   [`tenants`], [`caches`], [`pacing`], [`shaping`], [`observers`], [`learning`];
//!   [`server`]: the router, serving, draining.

pub mod admin;
pub mod analyses;
pub mod app;
pub mod assemble;
pub mod batches;
pub mod caches;
pub mod cluster;
pub mod dashboard;
pub mod feedback;
pub mod gateway;
pub mod learning;
pub mod observers;
pub mod pacing;
pub mod public;
pub mod reconfigure;
pub mod server;
pub mod shaping;
pub mod tenants;
pub mod walk;

pub use app::App;
pub use assemble::{BuildError, GatewayBuilder, GroupPolicies, TraceSetup};
pub use gateway::Gateway;
pub use server::{Server, ShutdownHandle};
