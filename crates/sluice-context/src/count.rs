//! Counting tokens: compression and progressive loading ask a [`Count`] how many tokens a
//! text is, so that their budgets are ones the provider would agree with in every script (a
//! byte count over four says a Chinese character is three quarters of a token; a real
//! tokenizer says one or more).

use sluice_core::ChatRequest;

/// Tokens each message adds beyond its text (its role and separators).
pub const PER_MESSAGE: u64 = 4;

/// Something that counts tokens.
pub trait Count: Send + Sync {
    /// The tokens of `text`.
    fn tokens(&self, text: &str) -> u64;

    /// The tokens of `request`'s prompt: its text's, and a few a message.
    fn prompt(&self, request: &ChatRequest) -> u64 {
        self.tokens(&request.prompt_text()) + PER_MESSAGE * request.message_count() as u64
    }
}

/// A token for every four bytes: a rough rule, chosen on purpose where the text is known to
/// be English and counting must cost nothing (tests of the ranking, say); it undercounts
/// Chinese and Japanese about threefold.
#[derive(Clone, Copy, Debug, Default)]
pub struct FourBytes;

impl Count for FourBytes {
    fn tokens(&self, text: &str) -> u64 {
        (text.len() as u64).div_ceil(4)
    }
}
