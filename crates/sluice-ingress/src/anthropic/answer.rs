//! A chat-completions answer written as a Messages answer: reasoning as a thinking block,
//! text, tool calls as `tool_use` blocks, the finish reason as a stop reason, usage with the
//! prompt cache's reads and writes apart from the uncached input.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sluice_core::{ErrorKind, GatewayError};

/// A chat `finish_reason` as a Messages `stop_reason`.
pub fn stop_reason(finish: &str) -> &'static str {
    match finish {
        "length" => "max_tokens",
        "tool_calls" | "function_call" => "tool_use",
        "content_filter" => "refusal",
        _ => "end_turn",
    }
}

/// A message id in Messages' form: the upstream's, prefixed `msg_` unless it already is.
pub fn message_id(id: &str) -> String {
    if id.starts_with("msg_") {
        id.to_string()
    } else {
        format!("msg_{id}")
    }
}

/// Chat usage (`prompt_tokens` counting every input token) as Messages usage
/// (`input_tokens` counting only the uncached ones).
pub(crate) fn usage(u: Option<ChatUsage>) -> MessageUsage {
    let u = u.unwrap_or_default();
    let details = u.prompt_tokens_details.unwrap_or_default();
    MessageUsage {
        input_tokens: u
            .prompt_tokens
            .saturating_sub(details.cached_tokens)
            .saturating_sub(details.cache_write_tokens),
        output_tokens: u.completion_tokens,
        cache_read_input_tokens: details.cached_tokens,
        cache_creation_input_tokens: details.cache_write_tokens,
    }
}

/// A chat-completions answer, as far as a Messages answer reads it (strings borrowed from
/// the body where they hold no escapes).
#[derive(Deserialize)]
struct ChatAnswer<'a> {
    #[serde(borrow, default)]
    id: Cow<'a, str>,
    #[serde(borrow, default)]
    model: Cow<'a, str>,
    #[serde(borrow, default)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<ChatUsage>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    message: ChatMessage<'a>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Default, Deserialize)]
struct ChatMessage<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Vec<ToolCall<'a>>,
}

#[derive(Deserialize)]
struct ToolCall<'a> {
    #[serde(borrow, default)]
    id: Cow<'a, str>,
    #[serde(borrow)]
    function: Function<'a>,
}

#[derive(Deserialize)]
struct Function<'a> {
    #[serde(borrow, default)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Cow<'a, str>,
}

/// A chat answer's usage, as far as Messages reports it.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
pub(crate) struct ChatUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: u64,
    #[serde(default)]
    cache_write_tokens: u64,
}

#[derive(Serialize)]
struct Message<'a> {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    model: &'a str,
    content: Vec<Block<'a>>,
    stop_reason: Option<&'static str>,
    stop_sequence: Option<()>,
    usage: MessageUsage,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Thinking {
        thinking: &'a str,
        signature: &'static str,
    },
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a RawValue,
    },
}

/// Messages' usage.
#[derive(Serialize)]
pub(crate) struct MessageUsage {
    input_tokens: u64,
    output_tokens: u64,
    cache_read_input_tokens: u64,
    cache_creation_input_tokens: u64,
}

/// Writes the chat-completions answer `body` as a Messages answer.
pub fn from_chat(body: &[u8]) -> Result<Vec<u8>, GatewayError> {
    let protocol = |what: String| GatewayError::new(ErrorKind::UpstreamProtocol, what);
    if !sluice_core::budget::within(body) {
        return Err(protocol(sluice_core::budget::refusal(
            "the upstream's answer",
        )));
    }
    let chat: ChatAnswer<'_> = serde_json::from_slice(body).map_err(|e| {
        protocol(format!(
            "the upstream's answer could not be read as a chat completion: {e}"
        ))
    })?;
    let Some(choice) = chat.choices.first() else {
        return Err(protocol(
            "the upstream's answer could not be read as a chat completion: no choice".into(),
        ));
    };
    let m = &choice.message;
    // Every tool call's arguments, checked to be JSON (an empty text is an empty object).
    let inputs =
        m.tool_calls
            .iter()
            .map(|c| {
                let args = c.function.arguments.trim();
                serde_json::from_str::<&RawValue>(if args.is_empty() { "{}" } else { args })
                    .map_err(|e| {
                        protocol(format!(
                            "the upstream's tool call arguments are not JSON: {e}"
                        ))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
    let mut content = Vec::with_capacity(2 + inputs.len());
    if let Some(t) = m.reasoning_content.as_deref().filter(|t| !t.is_empty()) {
        content.push(Block::Thinking {
            thinking: t,
            signature: "",
        });
    }
    if let Some(t) = m.content.as_deref().filter(|t| !t.is_empty()) {
        content.push(Block::Text { text: t });
    }
    for (c, input) in m.tool_calls.iter().zip(inputs) {
        content.push(Block::ToolUse {
            id: &c.id,
            name: &c.function.name,
            input,
        });
    }
    let out = Message {
        id: message_id(&chat.id),
        kind: "message",
        role: "assistant",
        model: &chat.model,
        content,
        stop_reason: choice.finish_reason.as_deref().map(stop_reason),
        stop_sequence: None,
        usage: usage(chat.usage),
    };
    serde_json::to_vec(&out)
        .map_err(|e| GatewayError::new(ErrorKind::Internal, format!("writing JSON: {e}")))
}
