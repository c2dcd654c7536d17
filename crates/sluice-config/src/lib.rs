//! Configuration: TOML documents read with every error reported at once, with its key path
//! and line, and the gateway's schema resolved into validated settings.
//!
//! Reading happens in two steps. [`Document`] parses the text and deserialises each section
//! on its own, so one bad section does not hide the errors of the next; unknown keys are all
//! collected instead of stopping at the first. Then [`gateway::load`] checks what types cannot
//! (references between sections, URLs, environment variables) and hands out plain settings.

pub mod diagnostic;
pub mod document;
pub mod gateway;
pub mod toggle;

pub use diagnostic::{Diagnostic, Diagnostics};
pub use document::Document;
pub use toggle::Toggle;

/// Serde helpers for durations written as `"30s"`, `"250ms"`, `"2m"`.
pub use humantime_serde as duration;
