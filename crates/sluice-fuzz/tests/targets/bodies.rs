//! Request bodies of every client API, and answers translated both ways.

use sluice_core::ChatRequest;
use sluice_ingress::{Dialect, anthropic, embeddings, gemini, responses};
use sluice_providers::anthropic::translate_request;

use crate::{fuzz, is_json, json, refused_as_client};

/// The top of a chat answer.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    choices: Option<&'a serde_json::value::RawValue>,
}

const WORDS: &[&[u8]] = &[
    b"model",
    b"messages",
    b"role",
    b"content",
    b"system",
    b"user",
    b"assistant",
    b"tool",
    b"developer",
    b"tools",
    b"tool_choice",
    b"tool_calls",
    b"tool_call_id",
    b"function",
    b"name",
    b"arguments",
    b"parameters",
    b"type",
    b"text",
    b"image_url",
    b"url",
    b"stream",
    b"stream_options",
    b"include_usage",
    b"max_tokens",
    b"max_completion_tokens",
    b"n",
    b"temperature",
    b"stop",
    b"response_format",
    b"json_schema",
    b"input",
    b"instructions",
    b"input_text",
    b"function_call",
    b"function_call_output",
    b"call_id",
    b"output",
    b"tool_use",
    b"tool_result",
    b"tool_use_id",
    b"input_schema",
    b"cache_control",
    b"ephemeral",
    b"contents",
    b"parts",
    b"systemInstruction",
    b"generationConfig",
    b"functionCall",
    b"functionResponse",
    b"functionDeclarations",
    b"toolConfig",
    b"inlineData",
    b"candidates",
    b"usageMetadata",
    b"promptFeedback",
    b"output",
    b"toolUse",
    b"toolUseId",
    b"stopReason",
    b"inputTokens",
    b"cacheReadInputTokens",
    b"thinking",
    b"budget_tokens",
    b"image",
    b"source",
    b"base64",
    b"data",
    b"media_type",
    b"document",
    b"stop_sequences",
    b"top_k",
    b"metadata",
    b"auto",
    b"none",
    b"required",
    b"any",
    b"max_output_tokens",
    b"text_delta",
    b"choices",
    b"message",
    b"delta",
    b"finish_reason",
    b"usage",
    b"prompt_tokens",
    b"completion_tokens",
    b"cached_tokens",
    b"prompt_tokens_details",
    b"stop_reason",
    b"input_tokens",
    b"output_tokens",
    b"cache_read_input_tokens",
    b"cache_creation_input_tokens",
    b"id",
    b"encoding_format",
    b"dimensions",
    b"\xe2\x80\xae",
    b"\\u0000",
    b"\\ud800",
    b"1e999",
    b"-0",
    b"null",
    b"[]",
    b"{}",
];

/// The chat body scanner, and the translation to Messages for an Anthropic upstream.
#[test]
fn chat_request() {
    fuzz(
        json("chat-request", WORDS),
        |input| match ChatRequest::parse(input) {
            Err(e) => refused_as_client(&e),
            Ok(req) => match translate_request(&req, "claude", 4096) {
                Err(e) => refused_as_client(&e),
                Ok(v) if v.get("messages").is_some_and(serde_json::Value::is_array) => Ok(()),
                Ok(v) => Err(format!("translated to Messages without messages: {v}")),
            },
        },
    )
}

/// A translated request is one the chat scanner takes, or refuses as the client's mistake.
fn rescanned(chat: &[u8]) -> Result<(), String> {
    match ChatRequest::parse(chat) {
        Ok(_) => Ok(()),
        Err(e) => refused_as_client(&e),
    }
}

/// The Messages ingress (and `count_tokens`): a refusal in Anthropic's error shape.
#[test]
fn messages_request() {
    fuzz(json("messages-request", WORDS), |input| {
        let _ = anthropic::count_request(input);
        match anthropic::to_chat(input) {
            Ok(chat) => rescanned(&chat),
            Err(e) => {
                refused_as_client(&e)?;
                let (status, body) = Dialect::Anthropic
                    .refusal(&e)
                    .ok_or("no Anthropic-shaped refusal")?;
                let v: serde_json::Value =
                    serde_json::from_slice(&body).map_err(|e| format!("refusal not JSON: {e}"))?;
                let shaped = v["type"] == "error"
                    && v["error"]["type"].is_string()
                    && v["error"]["message"].is_string();
                if !shaped || status != Dialect::Anthropic.status(&e) {
                    return Err(format!("refusal {status} not in Anthropic's shape: {v}"));
                }
                Ok(())
            }
        }
    })
}

/// The Gemini ingress (and `countTokens`): a refusal in Google's error shape.
#[test]
fn gemini_request() {
    fuzz(json("gemini-request", WORDS), |input| {
        let _ = gemini::count_request(input, "m");
        match gemini::to_chat(input, "m", input.len() % 2 == 0) {
            Ok(chat) => rescanned(&chat),
            Err(e) => {
                refused_as_client(&e)?;
                let dialect = Dialect::Gemini { stream: false };
                let (status, body) = dialect.refusal(&e).ok_or("no Google-shaped refusal")?;
                let v: serde_json::Value =
                    serde_json::from_slice(&body).map_err(|e| format!("refusal not JSON: {e}"))?;
                let shaped = v["error"]["code"] == status
                    && v["error"]["status"].is_string()
                    && v["error"]["message"].is_string();
                if !shaped {
                    return Err(format!("refusal {status} not in Google's shape: {v}"));
                }
                Ok(())
            }
        }
    })
}

/// The Responses ingress.
#[test]
fn responses_request() {
    fuzz(
        json("responses-request", WORDS),
        |input| match responses::to_chat(input) {
            Ok(chat) => rescanned(&chat),
            Err(e) => refused_as_client(&e),
        },
    )
}

/// The embeddings ingress.
#[test]
fn embeddings_request() {
    fuzz(
        json("embeddings-request", WORDS),
        |input| match embeddings::to_chat(input) {
            Ok(chat) => rescanned(&chat),
            Err(e) => refused_as_client(&e),
        },
    )
}

/// A chat answer, as an upstream's (usage read) and translated for Messages, Responses and
/// Gemini clients: JSON out, or a refusal that names the fault.
#[test]
fn chat_answer() {
    fuzz(json("chat-answer", WORDS), |input| {
        let body = bytes::Bytes::copy_from_slice(input);
        let _ = sluice_providers::replay::answer(sluice_providers::replay::Api::Chat, body);
        for (dialect, out) in [
            ("Messages", anthropic::from_chat(input)),
            ("Responses", responses::from_chat(input)),
            ("Gemini", gemini::from_chat(input)),
        ] {
            match out {
                Ok(json) => {
                    is_json(&json).map_err(|e| format!("{dialect} answer is not JSON: {e}"))?;
                }
                Err(e) if e.message.trim().is_empty() => {
                    return Err(format!("{dialect} translation refused with no message"));
                }
                Err(_) => {}
            }
        }
        Ok(())
    })
}

/// Complete answers of Messages, Responses, Gemini and Bedrock upstreams, read as chat
/// answers.
#[test]
fn upstream_answers() {
    use sluice_providers::replay::{Api, answer};
    for (name, api) in [
        ("messages-answer", Api::Messages),
        ("responses-answer", Api::Responses),
        ("gemini-answer", Api::Gemini),
        ("bedrock-answer", Api::Bedrock),
    ] {
        fuzz(json(name, WORDS), |input| {
            match answer(api, bytes::Bytes::copy_from_slice(input)) {
                Ok(done) => {
                    is_json(&done.body)
                        .map_err(|e| format!("the chat answer made is not JSON: {e}"))?;
                    let head: Head<'_> = match serde_json::from_slice(&done.body) {
                        Ok(head) => head,
                        // Deeper than sluice's parser reads: its grammar was checked above.
                        Err(_) => return Ok(()),
                    };
                    if head.choices.is_none() {
                        return Err("the chat answer made has no choices".into());
                    }
                    Ok(())
                }
                Err(e) if !e.kind.is_upstream() => Err(format!("not an upstream fault: {e}")),
                Err(_) => Ok(()),
            }
        });
    }
}
