//! End-to-end tests: the gateway on port 0 in front of a local fake upstream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod admin;
mod anthropic;
mod cache;
mod defaults;
mod errors;
mod hostile;
mod messages;
mod proxy;
mod shutdown;
mod support;
