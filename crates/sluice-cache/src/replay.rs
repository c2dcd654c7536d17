//! A stored complete answer replayed as the SSE stream a streaming client expects: one
//! `chat.completion.chunk` per choice carrying its whole message as the delta and its finish
//! reason, the usage chunk when the client asked for one, then `[DONE]`.

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::HEAD_FIELDS;

/// Why a stored answer cannot be replayed (it is then treated as a miss).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Not JSON.
    #[error("stored answer is not JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// JSON, but not a chat completion with choices.
    #[error("stored answer has no `choices`")]
    NoChoices,
}

/// The SSE body replaying `answer` (an OpenAI `chat.completion`), with a usage chunk when
/// `include_usage`.
pub fn frames(answer: &[u8], include_usage: bool) -> Result<Bytes, ReplayError> {
    let Value::Object(mut whole) = serde_json::from_slice(answer)? else {
        return Err(ReplayError::NoChoices);
    };
    let Some(Value::Array(choices)) = whole.remove("choices") else {
        return Err(ReplayError::NoChoices);
    };
    let usage = whole.remove("usage");
    let mut head = Map::new();
    for name in HEAD_FIELDS {
        if let Some(v) = whole.get(name) {
            head.insert(name.into(), v.clone());
        }
    }
    head.insert("object".into(), json!("chat.completion.chunk"));

    let mut out = Vec::with_capacity(answer.len() + 256);
    for (i, choice) in choices.into_iter().enumerate() {
        let Value::Object(mut choice) = choice else {
            return Err(ReplayError::NoChoices);
        };
        let mut delta = match choice.remove("message") {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        // In a stream each tool call says which one it continues.
        if let Some(Value::Array(calls)) = delta.get_mut("tool_calls") {
            for (n, call) in calls.iter_mut().enumerate() {
                if let Value::Object(c) = call {
                    c.insert("index".into(), json!(n));
                }
            }
        }
        let mut one = Map::new();
        one.insert(
            "index".into(),
            choice.remove("index").unwrap_or_else(|| json!(i)),
        );
        one.insert("delta".into(), Value::Object(delta));
        if let Some(lp) = choice.remove("logprobs") {
            one.insert("logprobs".into(), lp);
        }
        one.insert(
            "finish_reason".into(),
            choice.remove("finish_reason").unwrap_or(Value::Null),
        );
        let mut chunk = head.clone();
        chunk.insert("choices".into(), json!([Value::Object(one)]));
        if include_usage {
            chunk.insert("usage".into(), Value::Null);
        }
        push(&mut out, &Value::Object(chunk))?;
    }
    if include_usage && let Some(u) = usage {
        let mut chunk = head;
        chunk.insert("choices".into(), json!([]));
        chunk.insert("usage".into(), u);
        push(&mut out, &Value::Object(chunk))?;
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    Ok(Bytes::from(out))
}

fn push(out: &mut Vec<u8>, chunk: &Value) -> Result<(), ReplayError> {
    out.extend_from_slice(b"data: ");
    serde_json::to_writer(&mut *out, chunk)?;
    out.extend_from_slice(b"\n\n");
    Ok(())
}
