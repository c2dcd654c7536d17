//! The gateway: an OpenAI-compatible HTTP front (axum), the request stack, the admin API and
//! graceful shutdown.
//!
//! [`stack`] holds the order of the layers a request walks through, written once, top to
//! bottom. Every other module is one step of that walk or the glue around it.

pub mod admin;
pub mod auth;
pub mod billing;
pub mod builder;
pub mod cache;
pub mod cache_api;
pub mod call;
pub mod deadline;
pub mod dispatch;
pub mod gateway;
pub mod ingress;
pub mod keys_api;
pub mod limiter;
pub mod metering;
pub mod policies;
pub mod providers;
pub mod rescue;
pub mod respond;
pub mod routing;
pub mod server;
pub mod stack;
pub mod status;
pub mod tenants_api;
pub mod usage_api;

pub use gateway::{Gateway, GatewayBuilder};
pub use server::{Server, ShutdownHandle};
