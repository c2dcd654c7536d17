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
//!
//! Each mark's time to live comes from a choice the caller makes per prefix (`ttl`, given a
//! digest of the blocks up to the mark; see [`super::ttl`]). Anthropic wants marks kept
//! longer before those kept shorter, so a system mark before an hour-long history mark is
//! kept an hour too.

use std::hash::BuildHasher;

use serde_json::{Map, Value, json};

use super::ttl::Ttl;

/// How marks get their time to live: a digest of the prompt up to each mark, and a choice
/// per digest.
pub struct TtlChoice<'a> {
    /// Hashes block text into the digest.
    pub hasher: &'a hashbrown::DefaultHashBuilder,
    /// The time to live for a prefix's digest.
    pub choose: &'a mut dyn FnMut(u64) -> Ttl,
}

/// Bytes of text counted as one token.
const BYTES_PER_TOKEN: u64 = 4;

/// Where a block sits: in `system`, or in message `m`'s content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    System(usize),
    Message(usize, usize),
}

/// Places breakpoints in `body` (a Messages request as translated) where the prefix before
/// them is at least `min_tokens` long, each kept 5 minutes unless `ttl` chooses otherwise.
pub fn place(body: &mut Value, min_tokens: u64, mut ttl: Option<TtlChoice<'_>>) {
    let Some(obj) = body.as_object() else {
        return;
    };
    if obj.contains_key("cache_control") || marked(obj) {
        return;
    }
    // Every block in prompt order, with the prompt's estimated tokens up to its end and (when
    // times to live are chosen) a digest of the prompt up to its end.
    let mut blocks: Vec<(At, u64, u64)> = Vec::new();
    let tools = obj.get("tools").map(Value::to_string);
    let mut bytes = tools.as_ref().map_or(0, |t| t.len() as u64);
    let hasher = ttl.as_ref().map(|t| t.hasher);
    let mut digest = match (hasher, &tools) {
        (Some(h), Some(t)) => h.hash_one(t.as_bytes()),
        _ => 0,
    };
    let fold = |digest: &mut u64, b: &Value| {
        if let Some(h) = hasher {
            *digest = match b.get("text").and_then(Value::as_str) {
                Some(t) => h.hash_one((*digest, t)),
                None => h.hash_one((*digest, b.to_string())),
            };
        }
    };
    if let Some(Value::Array(system)) = obj.get("system") {
        for (i, b) in system.iter().enumerate() {
            bytes += block_bytes(b);
            fold(&mut digest, b);
            blocks.push((At::System(i), bytes / BYTES_PER_TOKEN, digest));
        }
    }
    let system_end = blocks.last().copied();
    if let Some(Value::Array(messages)) = obj.get("messages") {
        for (m, msg) in messages.iter().enumerate() {
            if let Some(Value::Array(content)) = msg.get("content") {
                for (i, b) in content.iter().enumerate() {
                    bytes += block_bytes(b);
                    fold(&mut digest, b);
                    blocks.push((At::Message(m, i), bytes / BYTES_PER_TOKEN, digest));
                }
            }
        }
    }
    let history_end = blocks
        .len()
        .checked_sub(2)
        .and_then(|i| blocks.get(i).copied());
    let mut marks: Vec<(At, Ttl)> = Vec::with_capacity(2);
    let mut kept = |digest: u64| match ttl.as_mut() {
        Some(t) => (t.choose)(digest),
        None => Ttl::FiveMinutes,
    };
    if let Some((at, tokens, digest)) = system_end
        && tokens >= min_tokens
    {
        marks.push((at, kept(digest)));
    }
    if let Some((at, tokens, digest)) = history_end
        && tokens >= min_tokens
        && matches!(at, At::Message(..))
    {
        let t = kept(digest);
        if t == Ttl::OneHour
            && let Some(first) = marks.first_mut()
        {
            first.1 = Ttl::OneHour;
        }
        marks.push((at, t));
    }
    for (at, t) in marks {
        if let Some(Value::Object(b)) = block_mut(body, at) {
            let mark = match t {
                Ttl::FiveMinutes => json!({"type": "ephemeral"}),
                Ttl::OneHour => json!({"type": "ephemeral", "ttl": "1h"}),
            };
            b.insert("cache_control".into(), mark);
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
        place(&mut body, 1024, None);
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
        place(&mut chat, 1024, None);
        assert_eq!(marks(&chat), ["system[0]", "messages[1][0]"]);

        let mut doc = json!({
            "messages": [{"role": "user", "content": [text(20_000), text(200)]}],
        });
        place(&mut doc, 1024, None);
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
        place(&mut short, 1024, None);
        assert_eq!(short, before, "about 500 tokens: under the minimum");

        let mut client = json!({
            "system": [text(8000)],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "y".repeat(8000), "cache_control": {"type": "ephemeral", "ttl": "1h"}},
                text(10)]}],
        });
        let before = client.clone();
        place(&mut client, 1024, None);
        assert_eq!(client, before, "the client manages its own breakpoints");
    }

    #[test]
    fn a_mark_asks_for_the_hour_its_prefix_needs_and_the_system_mark_follows() {
        let hasher = hashbrown::DefaultHashBuilder::default();
        let body = || {
            json!({"system": [text(8000)], "messages": [
                {"role": "user", "content": [text(8000)]},
                {"role": "assistant", "content": [text(40)]},
                {"role": "user", "content": [text(40)]}
            ]})
        };
        // History kept an hour: the system mark before it is too.
        let mut b = body();
        let mut seen = Vec::new();
        let mut choose = |d: u64| {
            seen.push(d);
            if seen.len() == 2 {
                Ttl::OneHour
            } else {
                Ttl::FiveMinutes
            }
        };
        place(
            &mut b,
            1024,
            Some(TtlChoice {
                hasher: &hasher,
                choose: &mut choose,
            }),
        );
        assert_eq!(
            b["system"][0]["cache_control"],
            json!({"type": "ephemeral", "ttl": "1h"})
        );
        assert_eq!(
            b["messages"][1]["content"][0]["cache_control"],
            json!({"type": "ephemeral", "ttl": "1h"})
        );
        // The same prompt gives the same digests; a different system prompt others.
        let digests = |b: &mut Value| {
            let mut d = Vec::new();
            let mut choose = |x: u64| {
                d.push(x);
                Ttl::FiveMinutes
            };
            place(
                b,
                1024,
                Some(TtlChoice {
                    hasher: &hasher,
                    choose: &mut choose,
                }),
            );
            d
        };
        let first = digests(&mut body());
        assert_eq!(first, digests(&mut body()));
        let mut other = body();
        other["system"][0]["text"] = json!("y".repeat(8000));
        let second = digests(&mut other);
        assert_ne!(first[0], second[0]);
        assert_eq!(first.len(), 2);
        let mut five = body();
        digests(&mut five);
        assert_eq!(
            five["system"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
    }
}
