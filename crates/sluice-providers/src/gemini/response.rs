//! Gemini `generateContent` answer → chat-completions answer: each candidate a choice (its
//! text, its thoughts as `reasoning_content`, its function calls as tool calls), usage read
//! from `usageMetadata`; a prompt Gemini blocked is a content-filter error, never an empty
//! answer.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError, Usage};

use crate::unix_now;
use crate::usage::{GeminiUsage, to_openai_json};

/// One `generateContent` answer (or one chunk of a stream).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Answer {
    #[serde(default)]
    pub candidates: Vec<Candidate>,
    #[serde(default)]
    pub usage_metadata: Option<GeminiUsage>,
    #[serde(default)]
    pub model_version: Option<String>,
    #[serde(default)]
    pub response_id: Option<String>,
    #[serde(default)]
    pub prompt_feedback: Option<Feedback>,
}

/// What Gemini said of the prompt.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Feedback {
    #[serde(default)]
    pub block_reason: Option<String>,
}

/// One candidate answer.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Candidate {
    #[serde(default)]
    pub content: Option<Content>,
    #[serde(default)]
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub index: Option<u64>,
}

/// A candidate's content.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Content {
    #[serde(default)]
    pub parts: Vec<Part>,
}

/// One part: text (a thought, when `thought`), or a function call.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Part {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub thought: bool,
    #[serde(default)]
    pub function_call: Option<Call>,
    #[serde(default)]
    pub thought_signature: Option<String>,
}

/// A function call.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Call {
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    #[serde(default)]
    pub args: Option<Value>,
}

impl Call {
    /// As a chat-completions tool call, numbered `n` when Gemini gave it no id; the signature
    /// kept where the client sends it back.
    pub(crate) fn tool_call(&self, n: usize, signature: Option<&str>) -> Value {
        let mut call = json!({
            "id": self.id.clone().unwrap_or_else(|| format!("call_{n}")),
            "type": "function",
            "function": {
                "name": self.name,
                "arguments": self.args.as_ref().map_or_else(|| "{}".to_string(), Value::to_string),
            },
        });
        if let (Some(sig), Some(obj)) = (signature, call.as_object_mut()) {
            obj.insert(
                "extra_content".into(),
                json!({ "google": { "thought_signature": sig } }),
            );
        }
        call
    }
}

/// A `finishReason` as a chat-completions `finish_reason`.
pub(crate) fn finish_reason(reason: &str, called: bool) -> &'static str {
    match reason {
        "MAX_TOKENS" => "length",
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            "content_filter"
        }
        _ if called => "tool_calls",
        _ => "stop",
    }
}

/// The content-filter error of a prompt Gemini blocked.
pub(crate) fn blocked(upstream: &str, reason: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::ContentFiltered,
        format!("upstream {upstream} blocked the prompt ({reason})"),
    )
}

/// The malformed-answer error of `upstream`.
pub(crate) fn unreadable(upstream: &str, e: impl std::fmt::Display) -> GatewayError {
    GatewayError::new(
        ErrorKind::UpstreamProtocol,
        format!("upstream {upstream} answered an unreadable generateContent answer: {e}"),
    )
}

/// Translates a complete answer of `upstream`; returns the OpenAI body and the usage.
pub fn translate_response(raw: &[u8], upstream: &str) -> Result<(Bytes, Usage), GatewayError> {
    let answer: Answer = serde_json::from_slice(raw).map_err(|e| unreadable(upstream, e))?;
    if let Some(reason) = answer
        .prompt_feedback
        .as_ref()
        .and_then(|f| f.block_reason.as_deref())
    {
        return Err(blocked(upstream, reason));
    }
    if answer.candidates.is_empty() {
        return Err(unreadable(upstream, "no candidates"));
    }
    let mut calls = 0;
    let choices: Vec<Value> = answer
        .candidates
        .iter()
        .enumerate()
        .map(|(i, c)| choice(c, i, &mut calls))
        .collect();
    let usage = answer.usage_metadata.unwrap_or_default().normalise();
    let body = json!({
        "id": answer.response_id.unwrap_or_default(),
        "object": "chat.completion",
        "created": unix_now(),
        "model": answer.model_version.unwrap_or_default(),
        "choices": choices,
        "usage": to_openai_json(&usage),
    });
    Ok((Bytes::from(body.to_string()), usage))
}

/// One candidate as a choice; `calls` numbers the tool calls Gemini gave no id, across
/// candidates.
fn choice(c: &Candidate, i: usize, calls: &mut usize) -> Value {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    for p in c.content.iter().flat_map(|c| &c.parts) {
        if let Some(f) = &p.function_call {
            tool_calls.push(f.tool_call(*calls, p.thought_signature.as_deref()));
            *calls += 1;
        } else if let Some(t) = &p.text {
            if p.thought {
                reasoning.push_str(t);
            } else {
                text.push_str(t);
            }
        }
    }
    let content = if text.is_empty() && !tool_calls.is_empty() {
        Value::Null
    } else {
        Value::from(text)
    };
    let mut message = json!({ "role": "assistant", "content": content });
    if let Some(obj) = message.as_object_mut() {
        if !tool_calls.is_empty() {
            obj.insert("tool_calls".into(), Value::Array(tool_calls.clone()));
        }
        if !reasoning.is_empty() {
            obj.insert("reasoning_content".into(), Value::from(reasoning));
        }
    }
    let finish = c
        .finish_reason
        .as_deref()
        .map(|r| finish_reason(r, !tool_calls.is_empty()));
    json!({
        "index": c.index.unwrap_or(i as u64),
        "message": message,
        "finish_reason": finish,
    })
}
