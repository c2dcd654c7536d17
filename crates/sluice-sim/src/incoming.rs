//! Reads what the simulator needs from a request body (OpenAI, Anthropic or Gemini shape): the
//! prompt text for token counts and the prompt cache, the output cap, and the request id.

use serde_json::{Map, Value};

use crate::cache::{prefix_hashes, tokens_of};
use crate::upstream::Incoming;

fn push_content(out: &mut Vec<u8>, content: &Value) {
    match content {
        Value::String(s) => out.extend_from_slice(s.as_bytes()),
        Value::Array(parts) => {
            for p in parts {
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    out.extend_from_slice(t.as_bytes());
                }
            }
        }
        _ => {}
    }
}

/// The prompt as one byte string, in the order a provider would tokenise it.
pub fn prompt_text(body: &Map<String, Value>) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(system) = body.get("system") {
        out.extend_from_slice(b"system:");
        push_content(&mut out, system);
        out.push(b'\n');
    }
    // Gemini's: `systemInstruction` and `contents`, each of `parts`.
    if let Some(parts) = body.get("systemInstruction").and_then(|s| s.get("parts")) {
        out.extend_from_slice(b"system:");
        push_content(&mut out, parts);
        out.push(b'\n');
    }
    for key in ["messages", "contents"] {
        for m in body
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(role) = m.get("role").and_then(Value::as_str) {
                out.extend_from_slice(role.as_bytes());
                out.push(b':');
            }
            if let Some(c) = m.get("content").or_else(|| m.get("parts")) {
                push_content(&mut out, c);
            }
            out.push(b'\n');
        }
    }
    out
}

/// What the simulator reads off a request body.
pub fn incoming(body: &Map<String, Value>, request_id: &str) -> Incoming {
    let text = prompt_text(body);
    let max_tokens = ["max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|k| body.get(*k).and_then(Value::as_u64))
        .or_else(|| {
            body.get("generationConfig")
                .and_then(|c| c.get("maxOutputTokens"))
                .and_then(Value::as_u64)
        })
        .or_else(|| {
            body.get("inferenceConfig")
                .and_then(|c| c.get("maxTokens"))
                .and_then(Value::as_u64)
        });
    Incoming {
        request_id: request_id.to_string(),
        prompt_tokens: tokens_of(text.len()).max(1),
        prefix_hashes: prefix_hashes(&text),
        max_tokens,
        text,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn openai_and_anthropic_bodies_give_the_same_prompt() {
        let openai = json!({"messages": [
            {"role": "system", "content": "rules"},
            {"role": "user", "content": [{"type": "text", "text": "clause 4"}]}
        ]});
        let anthropic = json!({"system": [{"type": "text", "text": "rules"}], "messages": [
            {"role": "user", "content": [{"type": "text", "text": "clause 4"}]}
        ]});
        let a = prompt_text(openai.as_object().unwrap());
        let b = prompt_text(anthropic.as_object().unwrap());
        assert_eq!(a, b"system:rules\nuser:clause 4\n");
        assert_eq!(a, b);
    }

    #[test]
    fn token_estimate_and_max_tokens() {
        let body =
            json!({"messages": [{"role": "user", "content": "x".repeat(4000)}], "max_tokens": 64});
        let inc = incoming(body.as_object().unwrap(), "r1");
        assert_eq!(inc.prompt_tokens, 1002);
        assert_eq!(inc.max_tokens, Some(64));
        assert_eq!(inc.prefix_hashes.len(), 3);
    }
}
