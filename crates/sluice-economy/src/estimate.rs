//! How many tokens a request's prompt holds, counted with the cl100k tokenizer (embedded in
//! the binary). The gateway loads a [`Tokenizer`] when it is built, before it answers
//! `/readyz`, and holds it: a request can only count with one already loaded, so none pays
//! for loading it. Only requests whose tenant has credits or quotas are counted: the count
//! costs about a millisecond per 4 KB of prompt.

use std::sync::{Arc, OnceLock};

use sluice_core::ChatRequest;
use tiktoken_rs::CoreBPE;

/// Loaded once per process: every gateway built in it shares the one table.
static CL100K: OnceLock<Arc<CoreBPE>> = OnceLock::new();

/// The tokenizer could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("the cl100k tokenizer could not be loaded ({0}); prompts could not be counted")]
pub struct TokenizerError(String);

/// The prompt counter, loaded.
#[derive(Clone)]
pub struct Tokenizer {
    bpe: Arc<CoreBPE>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokenizer(cl100k)")
    }
}

/// Tokens each message adds beyond its text (role and separators, as OpenAI counts them).
const PER_MESSAGE: u64 = 4;

impl Tokenizer {
    /// Loads the tokenizer (a start-up step), or says why it failed.
    pub fn load() -> Result<Self, TokenizerError> {
        if let Some(bpe) = CL100K.get() {
            return Ok(Self { bpe: bpe.clone() });
        }
        let bpe = tiktoken_rs::cl100k_base().map_err(|e| TokenizerError(e.to_string()))?;
        let bpe = CL100K.get_or_init(|| Arc::new(bpe)).clone();
        Ok(Self { bpe })
    }

    /// The cl100k tokens of `text`.
    pub fn tokens(&self, text: &str) -> u64 {
        self.bpe.encode_ordinary(text).len() as u64
    }

    /// The prompt's tokens: its text's cl100k tokens plus a few per message.
    pub fn prompt_tokens(&self, request: &ChatRequest) -> u64 {
        let text = request.prompt_text();
        let messages = request.message_count() as u64;
        self.bpe.encode_ordinary(&text).len() as u64 + PER_MESSAGE * messages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_tokens_not_bytes() {
        let body = serde_json::json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "You review contracts."},
                {"role": "user", "content": [{"type": "text", "text": "hello world ".repeat(100)}]}
            ]
        });
        let r = ChatRequest::parse(body.to_string().as_bytes()).unwrap();
        let t = Tokenizer::load().unwrap();
        let n = t.prompt_tokens(&r);
        // "hello world " is two tokens; a hundred of them, plus the roles, the system text and
        // the per-message overhead.
        assert!((200..=230).contains(&n), "{n}");
        // Chinese text: 160 characters, 480 bytes. A byte count over four says 120 tokens;
        // cl100k counts about one token or more per character.
        let zh = "合同第四条约定的违约责任是否合理".repeat(10);
        let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": zh}]});
        let r = ChatRequest::parse(body.to_string().as_bytes()).unwrap();
        assert!(t.prompt_tokens(&r) > 150, "{}", t.prompt_tokens(&r));
    }
}
