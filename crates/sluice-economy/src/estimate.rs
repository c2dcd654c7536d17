//! How many tokens a request's prompt holds, counted with the cl100k tokenizer (embedded in
//! the binary; loaded once, by [`load`] when the gateway starts with tenants to count for,
//! else on first use). Only requests whose tenant has credits or quotas are counted: the
//! count costs about a millisecond per 4 KB of prompt.

use std::sync::LazyLock;

use sluice_core::ChatRequest;
use tiktoken_rs::CoreBPE;

static CL100K: LazyLock<Option<CoreBPE>> = LazyLock::new(|| tiktoken_rs::cl100k_base().ok());

/// The tokenizer could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("the cl100k tokenizer could not be loaded; prompts could not be counted")]
pub struct TokenizerError;

/// Loads the tokenizer now (a start-up step, so no request pays for it), or says it failed.
pub fn load() -> Result<(), TokenizerError> {
    CL100K.as_ref().map(|_| ()).ok_or(TokenizerError)
}

/// Tokens each message adds beyond its text (role and separators, as OpenAI counts them).
const PER_MESSAGE: u64 = 4;

/// The prompt's tokens: its text's cl100k tokens plus a few per message (a byte count over
/// four if the tokenizer could not load).
pub fn prompt_tokens(request: &ChatRequest) -> u64 {
    let text = request.prompt_text();
    let messages = request.message_count() as u64;
    let counted = match &*CL100K {
        Some(bpe) => bpe.encode_ordinary(&text).len() as u64,
        None => {
            // Start-up refused to go without it when tenants were configured; a tenant made
            // later meets this: logged on every count, never silent.
            tracing::error!("tokenizer unavailable: prompt counted as bytes / 4");
            (text.len() as u64).div_ceil(4)
        }
    };
    counted + PER_MESSAGE * messages
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
        let n = prompt_tokens(&r);
        // "hello world " is two tokens; a hundred of them, plus the roles, the system text and
        // the per-message overhead.
        assert!((200..=230).contains(&n), "{n}");
        // Chinese text: 160 characters, 480 bytes. A byte count over four says 120 tokens;
        // cl100k counts about one token or more per character.
        let zh = "合同第四条约定的违约责任是否合理".repeat(10);
        let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": zh}]});
        let r = ChatRequest::parse(body.to_string().as_bytes()).unwrap();
        assert!(prompt_tokens(&r) > 150, "{}", prompt_tokens(&r));
    }
}
