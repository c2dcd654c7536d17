//! The client APIs sluice speaks besides chat completions, each met in one internal form.
//!
//! The internal form is a chat-completions request ([`sluice_core::ChatRequest`]) and a
//! chat-completions answer (JSON, or an SSE stream of chunks): the walk, the caches, billing
//! and every upstream adapter work on it alone and never learn which API a client spoke.
//! Each API here is translated once on the way in (its request to a chat request, checked by
//! its own rules, refused in its own error shape) and once on the way out (a chat answer or
//! stream to its own answer or events). Upstream adapters (`sluice-providers`) do the other
//! side: the internal form to each provider's API and back.

pub mod anthropic;

/// The API a client spoke, which decides how its answer and its errors are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI chat completions: the internal form itself, written out as it is.
    #[default]
    Chat,
    /// Anthropic Messages (`/v1/messages`).
    Anthropic,
}
