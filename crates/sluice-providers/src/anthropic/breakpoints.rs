//! Prompt-cache breakpoints placed for the client. Anthropic caches a prompt only up to the
//! blocks marked `cache_control`; OpenAI-shaped clients mark nothing, so without this an
//! Anthropic upstream behind sluice would never read its cache.
//!
//! Two marks at most, each where the prefix before it is sent again: the end of the system
//! prompt (every request of an application shares it), and the end of everything but the
//! newest block (a conversation's history, or a document sent as its own block before the
//! question about it). A mark is only placed where the prefix reaches the model's minimum
//! cacheable length (estimated at four bytes a token), and nothing is placed when the
//! client marked anything itself. A write costs 1.25 times the input price and a read 0.1:
//! one read within the cache's five minutes pays for the write, and these are the prefixes
//! that get read again; the newest block alone, which may never recur, is not marked.

use serde_json::{Map, Value, json};

/// Bytes of text counted as one token.
const BYTES_PER_TOKEN: u64 = 4;

/// Where a block sits: in `system`, or in message `m`'s content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    System(usize),
    Message(usize, usize),
}

/// Places breakpoints in `body` (a Messages request as translated) where the prefix before
/// them is at least `min_tokens` long.
pub fn place(body: &mut Value, min_tokens: u64) {
    let Some(obj) = body.as_object() else {
        return;
    };
    if obj.contains_key("cache_control") || marked(obj) {
        return;
    }
    // Every block in prompt order, with the prompt's estimated tokens up to its end.
    let mut blocks: Vec<(At, u64)> = Vec::new();
    let mut bytes = obj.get("tools").map_or(0, |t| t.to_string().len() as u64);
    if let Some(Value::Array(system)) = obj.get("system") {
        for (i, b) in system.iter().enumerate() {
            bytes += block_bytes(b);
            blocks.push((At::System(i), bytes / BYTES_PER_TOKEN));
        }
    }
    let system_end = blocks.last().copied();
    if let Some(Value::Array(messages)) = obj.get("messages") {
        for (m, msg) in messages.iter().enumerate() {
            if let Some(Value::Array(content)) = msg.get("content") {
                for (i, b) in content.iter().enumerate() {
                    bytes += block_bytes(b);
                    blocks.push((At::Message(m, i), bytes / BYTES_PER_TOKEN));
                }
            }
        }
    }
    let history_end = blocks
        .len()
        .checked_sub(2)
        .and_then(|i| blocks.get(i).copied());
    let mut marks = Vec::with_capacity(2);
    if let Some((at, tokens)) = system_end
        && tokens >= min_tokens
    {
        marks.push(at);
    }
    if let Some((at, tokens)) = history_end
        && tokens >= min_tokens
        && matches!(at, At::Message(..))
    {
        marks.push(at);
    }
    for at in marks {
        if let Some(Value::Object(b)) = block_mut(body, at) {
            b.insert("cache_control".into(), json!({"type": "ephemeral"}));
        }
    }
}

/// Whether any block already carries `cache_control`.
fn marked(obj: &Map<String, Value>) -> bool {
    let has = |blocks: Option<&Value>| {
        blocks
            .and_then(Value::as_array)
            .is_some_and(|bs| bs.iter().any(|b| b.get("cache_control").is_some()))
    };
    has(obj.get("system"))
        || has(obj.get("tools"))
        || obj
            .get("messages")
            .and_then(Value::as_array)
            .is_some_and(|ms| ms.iter().any(|m| has(m.get("content"))))
}

/// The bytes of text a block holds (text, a tool call's input, a tool result's content);
/// images count nothing.
fn block_bytes(b: &Value) -> u64 {
    let len = match b.get("type").and_then(Value::as_str) {
        Some("text") => b.get("text").and_then(Value::as_str).map_or(0, str::len),
        Some("tool_use") => b.get("input").map_or(0, |i| i.to_string().len()),
        Some("tool_result") => match b.get("content") {
            Some(Value::String(s)) => s.len(),
            Some(other) => other.to_string().len(),
            None => 0,
        },
        _ => 0,
    };
    len as u64
}

fn block_mut(body: &mut Value, at: At) -> Option<&mut Value> {
    match at {
        At::System(i) => body.get_mut("system")?.get_mut(i),
        At::Message(m, i) => body
            .get_mut("messages")?
            .get_mut(m)?
            .get_mut("content")?
            .get_mut(i),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(n: usize) -> Value {
        json!({"type": "text", "text": "x".repeat(n)})
    }

    fn marks(body: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for (i, b) in body["system"].as_array().into_iter().flatten().enumerate() {
            if b.get("cache_control").is_some() {
                out.push(format!("system[{i}]"));
            }
        }
        for (m, msg) in body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            for (i, b) in msg["content"].as_array().into_iter().flatten().enumerate() {
                if b.get("cache_control").is_some() {
                    out.push(format!("messages[{m}][{i}]"));
                }
            }
        }
        out
    }

    #[test]
    fn a_long_system_prompt_is_marked_and_a_lone_question_is_not() {
        let mut body = json!({
            "system": [text(2000), text(3000)],
            "messages": [{"role": "user", "content": [text(9000)]}],
        });
        place(&mut body, 1024);
        assert_eq!(marks(&body), ["system[1]"]);
        assert_eq!(body["system"][1]["cache_control"]["type"], "ephemeral");
    }

    #[test]
    fn a_conversations_history_and_a_document_before_its_question_are_marked() {
        let mut chat = json!({
            "system": [text(5000)],
            "messages": [
                {"role": "user", "content": [text(400)]},
                {"role": "assistant", "content": [text(800)]},
                {"role": "user", "content": [text(100)]},
            ],
        });
        place(&mut chat, 1024);
        assert_eq!(marks(&chat), ["system[0]", "messages[1][0]"]);

        let mut doc = json!({
            "messages": [{"role": "user", "content": [text(20_000), text(200)]}],
        });
        place(&mut doc, 1024);
        assert_eq!(marks(&doc), ["messages[0][0]"]);
    }

    #[test]
    fn short_prefixes_and_marked_requests_are_left_alone() {
        let mut short = json!({
            "system": [text(1000)],
            "messages": [
                {"role": "user", "content": [text(500)]},
                {"role": "assistant", "content": [text(500)]},
                {"role": "user", "content": [text(100)]},
            ],
        });
        let before = short.clone();
        place(&mut short, 1024);
        assert_eq!(short, before, "about 500 tokens: under the minimum");

        let mut client = json!({
            "system": [text(8000)],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "y".repeat(8000), "cache_control": {"type": "ephemeral", "ttl": "1h"}},
                text(10)]}],
        });
        let before = client.clone();
        place(&mut client, 1024);
        assert_eq!(client, before, "the client manages its own breakpoints");
    }
}
