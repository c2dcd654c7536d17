//! Messages' tools, `tool_choice` and `thinking` checked by its rules, and the tools and
//! choice written as chat completions' functions.

use serde_json::{Map, Value, json};
use sluice_core::GatewayError;

use super::{block_type, string_field};
use crate::json::bad;

/// Custom tools as functions; Anthropic's server tools have no chat-completions form.
pub(super) fn tools(value: &Value) -> Result<Value, GatewayError> {
    let Some(list) = value.as_array() else {
        return Err(bad("tools", "tools: must be an array"));
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let at = format!("tools[{i}]");
        match t.get("type").and_then(Value::as_str) {
            None | Some("custom") => {}
            Some(other) => {
                return Err(bad(
                    format!("{at}.type"),
                    format!("{at}.type: the server tool `{other}` cannot be translated"),
                ));
            }
        }
        let name = string_field(t, "name", &at)?;
        let Some(schema @ Value::Object(_)) = t.get("input_schema") else {
            return Err(bad(
                format!("{at}.input_schema"),
                format!("{at}.input_schema: Field required (an object)"),
            ));
        };
        let mut function = json!({"name": name, "parameters": schema});
        if let (Some(d), Some(obj)) = (t.get("description"), function.as_object_mut()) {
            obj.insert("description".into(), d.clone());
        }
        out.push(json!({"type": "function", "function": function}));
    }
    Ok(Value::Array(out))
}

pub(super) fn tool_choice(value: &Value, out: &mut Map<String, Value>) -> Result<(), GatewayError> {
    let kind = block_type(value, "tool_choice")?;
    let choice = match kind {
        "auto" => Value::from("auto"),
        "any" => Value::from("required"),
        "none" => Value::from("none"),
        "tool" => {
            let name = string_field(value, "name", "tool_choice")?;
            json!({"type": "function", "function": {"name": name}})
        }
        other => {
            return Err(bad(
                "tool_choice.type",
                format!("tool_choice.type: `{other}` is not auto, any, tool or none"),
            ));
        }
    };
    out.insert("tool_choice".into(), choice);
    if value
        .get("disable_parallel_tool_use")
        .and_then(Value::as_bool)
        == Some(true)
    {
        out.insert("parallel_tool_calls".into(), Value::Bool(false));
    }
    Ok(())
}

/// `thinking`: enabled with a budget of at least 1,024 tokens, disabled, or adaptive.
pub(super) fn check_thinking(value: &Value) -> Result<(), GatewayError> {
    match block_type(value, "thinking")? {
        "enabled" => match value.get("budget_tokens").and_then(Value::as_u64) {
            Some(n) if n >= 1024 => Ok(()),
            _ => Err(bad(
                "thinking.budget_tokens",
                "thinking.budget_tokens: must be an integer of at least 1024",
            )),
        },
        "disabled" | "adaptive" => Ok(()),
        other => Err(bad(
            "thinking.type",
            format!("thinking.type: `{other}` is not enabled, disabled or adaptive"),
        )),
    }
}
