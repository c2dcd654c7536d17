//! Normalisation that keeps meaning and makes prompts cacheable, per model group, off by
//! default: tools in a stable order (by function name) with their JSON keys sorted, and the
//! lines of the leading system messages that hold a volatile token (a timestamp, a date, a
//! UUID, an id) moved out of them into one system message at the end of the conversation, so
//! everything before it (tools, system prompt, earlier turns, a document) stays byte for byte
//! the same from one request to the next and the provider's prompt cache can serve it. Only
//! the fields it changes are rewritten; every other field keeps the client's bytes.

use serde_json::{Map, Value};
use sluice_core::{ChatRequest, GatewayError};

use crate::churn::sorted_keys;
use crate::churn::volatile::holds_volatile;

/// What to normalise so that requests share a cached prefix: `normalise = { ... }` of a
/// `[models.GROUP]` (every field optional, unknown fields refused).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Normalise {
    /// Tools in a stable order (by function name), their JSON keys sorted.
    pub tools: bool,
    /// Lines of the system prompt holding a timestamp, date, UUID or id moved to a system
    /// message at the end of the conversation.
    pub volatile: bool,
}

/// What normalising changed.
#[derive(Debug)]
pub struct Normalised {
    /// The request as it is sent.
    pub request: ChatRequest,
    /// Whether the tools were reordered or their keys sorted.
    pub tools: bool,
    /// System-prompt lines moved to the end.
    pub lines_moved: usize,
}

fn tool_name(t: &Value) -> &str {
    t.pointer("/function/name")
        .or_else(|| t.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The tools' text in a stable form, when it differs from `raw`.
fn stable_tools(raw: &[u8]) -> Option<Vec<u8>> {
    let Ok(Value::Array(tools)) = serde_json::from_slice::<Value>(raw) else {
        return None;
    };
    let mut tools: Vec<(String, Value)> = tools
        .iter()
        .map(|t| {
            let s = sorted_keys(t);
            (s.to_string(), s)
        })
        .collect();
    tools.sort_by(|a, b| (tool_name(&a.1), &a.0).cmp(&(tool_name(&b.1), &b.0)));
    let out = serde_json::to_vec(&Value::Array(tools.into_iter().map(|t| t.1).collect())).ok()?;
    (out != raw).then_some(out)
}

/// The messages with volatile system lines moved to a system message at the end, and how
/// many moved; `None` when none did.
fn stable_messages(raw: &[u8]) -> Option<(Vec<u8>, usize)> {
    let Ok(Value::Array(mut messages)) = serde_json::from_slice::<Value>(raw) else {
        return None;
    };
    let mut moved: Vec<String> = Vec::new();
    for m in messages.iter_mut() {
        let role = m.get("role").and_then(Value::as_str);
        if !matches!(role, Some("system" | "developer")) {
            break;
        }
        let Some(Value::String(text)) = m.get_mut("content") else {
            continue;
        };
        if !text.lines().any(holds_volatile) {
            continue;
        }
        let (mut keep, mut out) = (Vec::new(), Vec::new());
        for line in text.split('\n') {
            if holds_volatile(line) {
                out.push(line.to_string());
            } else {
                keep.push(line);
            }
        }
        *text = keep.join("\n");
        moved.extend(out);
    }
    if moved.is_empty() {
        return None;
    }
    let n = moved.len();
    let mut tail = Map::new();
    tail.insert("role".into(), Value::from("system"));
    tail.insert("content".into(), Value::from(moved.join("\n")));
    messages.push(Value::Object(tail));
    Some((serde_json::to_vec(&Value::Array(messages)).ok()?, n))
}

/// `request` normalised as `n` asks; `None` when nothing changed (the request goes as it
/// came, byte for byte).
pub fn normalise(request: &ChatRequest, n: Normalise) -> Result<Option<Normalised>, GatewayError> {
    let tools = n
        .tools
        .then(|| request.field("tools").and_then(stable_tools))
        .flatten();
    let messages = n
        .volatile
        .then(|| request.field("messages").and_then(stable_messages))
        .flatten();
    if tools.is_none() && messages.is_none() {
        return Ok(None);
    }
    let mut replaced: Vec<(&str, &[u8])> = Vec::new();
    if let Some(t) = &tools {
        replaced.push(("tools", t));
    }
    if let Some((m, _)) = &messages {
        replaced.push(("messages", m));
    }
    Ok(Some(Normalised {
        request: request.with_fields(&replaced)?,
        tools: tools.is_some(),
        lines_moved: messages.map_or(0, |(_, n)| n),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ON: Normalise = Normalise {
        tools: true,
        volatile: true,
    };

    fn req(v: &Value) -> ChatRequest {
        ChatRequest::parse(v.to_string().as_bytes()).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn body(r: &ChatRequest) -> Value {
        Value::Object(r.to_map())
    }

    #[test]
    fn a_stable_request_goes_as_it_came() {
        let r = req(&json!({"model": "m", "temperature": 0,
            "tools": [{"function": {"name": "a", "parameters": {}}, "type": "function"}],
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi on 2026-12-01"}]}));
        assert!(
            normalise(&r, ON)
                .unwrap_or_else(|e| panic!("{e}"))
                .is_none()
        );
    }

    #[test]
    fn tools_get_a_stable_order_and_nothing_else_changes() {
        let tool = |n: &str| json!({"function": {"parameters": {"type": "object", "properties": {}}, "name": n}, "type": "function"});
        let r = req(
            &json!({"model": "m", "messages": [{"role": "user", "content": "q"}],
            "tools": [tool("search"), tool("fetch")], "temperature": 0.2}),
        );
        let n = normalise(&r, ON)
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("changed"));
        assert!(n.tools && n.lines_moved == 0);
        let tools = n.request.value("tools").unwrap_or_default();
        assert_eq!(tools[0]["function"]["name"], "fetch");
        // Keys sorted: "function" before "type", "name" before "parameters".
        let text =
            String::from_utf8_lossy(n.request.field("tools").unwrap_or_default()).to_string();
        assert!(
            text.starts_with(r#"[{"function":{"name":"fetch","parameters""#),
            "{text}"
        );
        // Every other field byte for byte.
        for (k, v) in r.fields().filter(|(k, _)| *k != "tools") {
            assert_eq!(n.request.field(k), Some(v), "{k}");
        }
        let order: Vec<&str> = n.request.fields().map(|(k, _)| k).collect();
        assert_eq!(order, vec!["model", "messages", "tools", "temperature"]);
        // Tools off: nothing done.
        let off = Normalise {
            tools: false,
            volatile: true,
        };
        assert!(
            normalise(&r, off)
                .unwrap_or_else(|e| panic!("{e}"))
                .is_none()
        );
    }

    #[test]
    fn volatile_system_lines_move_to_the_end_and_the_rest_stays() {
        let system = "You review contracts.\nCurrent time: 2026-12-01T10:00:07Z\nRequest id: 3f9a2c81-77d0-4b1e-9c3a-0d1e2f3a4b5c\nAnswer briefly.";
        let r = req(&json!({"model": "m", "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": "Clause 4?"},
            {"role": "assistant", "content": "Fine."},
            {"role": "user", "content": "And clause 9 (2026-12-01)?"}]}));
        let n = normalise(&r, ON)
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("changed"));
        assert_eq!(n.lines_moved, 2);
        let m = body(&n.request)["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let before = body(&r)["messages"].as_array().cloned().unwrap_or_default();
        assert_eq!(m[0]["content"], "You review contracts.\nAnswer briefly.");
        assert_eq!(m[1..4], before[1..4], "the conversation untouched");
        assert_eq!(m[4]["role"], "system");
        assert_eq!(
            m[4]["content"],
            "Current time: 2026-12-01T10:00:07Z\nRequest id: 3f9a2c81-77d0-4b1e-9c3a-0d1e2f3a4b5c"
        );
        assert_eq!(n.request.field("model"), r.field("model"));
        // Two requests a second apart now share everything up to the moved lines.
        let later = req(&json!({"model": "m", "messages": [
            {"role": "system", "content": system.replace("10:00:07", "10:00:08")},
            {"role": "user", "content": "Clause 4?"},
            {"role": "assistant", "content": "Fine."},
            {"role": "user", "content": "And clause 9 (2026-12-01)?"}]}));
        let m2 = body(
            &normalise(&later, ON)
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or_else(|| panic!("changed"))
                .request,
        )["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(m[..4], m2[..4]);
    }
}
