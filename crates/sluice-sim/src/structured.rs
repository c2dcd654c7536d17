//! What shape a simulated answer takes: text, JSON the request's `response_format` asks for,
//! or a call of the tool its `tool_choice` forces, with arguments that match the tool's
//! schema. So tool and structured-output flows run offline, end to end.
//!
//! Values are made from the JSON schema deterministically: an object gets every property, an
//! enum its first member, a number its lower bound, a string a word (or a date, an email, a
//! URI for those formats), an array its fewest items (at least one).

use serde_json::{Map, Value, json};

/// The shape of an answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Shape {
    /// Text (the simulator's words, or a scripted content).
    #[default]
    Text,
    /// JSON text as the message's content.
    Json(String),
    /// A call of the tool `name` with `arguments` (JSON text).
    Tool {
        /// The tool's name.
        name: String,
        /// Its arguments, as JSON text.
        arguments: String,
    },
}

impl Shape {
    /// The text the answer carries (what its output tokens are counted from), if not plain.
    pub fn text(&self) -> Option<&str> {
        match self {
            Self::Text => None,
            Self::Json(s) => Some(s),
            Self::Tool { arguments, .. } => Some(arguments),
        }
    }
}

/// The shape `body` (OpenAI or Anthropic) asks for: a forced tool first, then JSON output.
pub fn shape_of(body: &Map<String, Value>) -> Shape {
    if let Some((name, schema)) = forced_tool(body)
        .or_else(|| gemini_forced_tool(body))
        .or_else(|| bedrock_forced_tool(body))
    {
        let args = value_of(&schema, &schema, 0);
        return Shape::Tool {
            name,
            arguments: args.to_string(),
        };
    }
    if let Some(schema) = body.get("generationConfig").and_then(|c| {
        c.get("responseJsonSchema")
            .or_else(|| c.get("responseSchema"))
    }) {
        return Shape::Json(value_of(schema, schema, 0).to_string());
    }
    let Some(format) = body.get("response_format") else {
        return Shape::Text;
    };
    match format.get("type").and_then(Value::as_str) {
        Some("json_schema") => {
            if let Some(v) = crate::reviewer::verdict(body) {
                return Shape::Json(v);
            }
            let schema = format
                .get("json_schema")
                .and_then(|j| j.get("schema"))
                .cloned()
                .unwrap_or_else(|| json!({"type": "object"}));
            Shape::Json(value_of(&schema, &schema, 0).to_string())
        }
        Some("json_object") => Shape::Json(json!({"answer": "clause"}).to_string()),
        _ => Shape::Text,
    }
}

/// The tool a request forces, with its parameters' schema: OpenAI's `tool_choice`
/// `"required"` or `{"type": "function", "function": {"name"}}`, Anthropic's `{"type":
/// "any"}` or `{"type": "tool", "name"}`. `"required"` and `"any"` take the first tool.
fn forced_tool(body: &Map<String, Value>) -> Option<(String, Value)> {
    let choice = body.get("tool_choice")?;
    let tools = body.get("tools")?.as_array()?;
    let named = match choice {
        Value::String(s) if s == "required" => None,
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("function") => Some(o.get("function")?.get("name")?.as_str()?.to_string()),
            Some("tool") => Some(o.get("name")?.as_str()?.to_string()),
            Some("any") => None,
            _ => return None,
        },
        _ => return None,
    };
    tools.iter().find_map(|t| {
        // OpenAI: {"type": "function", "function": {"name", "parameters"}};
        // Anthropic: {"name", "input_schema"}.
        let (name, schema) = match t.get("function") {
            Some(f) => (f.get("name")?.as_str()?, f.get("parameters")),
            None => (t.get("name")?.as_str()?, t.get("input_schema")),
        };
        if named.as_deref().is_some_and(|n| n != name) {
            return None;
        }
        let schema = schema.cloned().unwrap_or_else(|| json!({"type": "object"}));
        Some((name.to_string(), schema))
    })
}

/// The function a Gemini request forces (`toolConfig.functionCallingConfig.mode` `ANY`), with
/// its parameters' schema: the first of `allowedFunctionNames`, else the first declared.
fn gemini_forced_tool(body: &Map<String, Value>) -> Option<(String, Value)> {
    let config = body.get("toolConfig")?.get("functionCallingConfig")?;
    if config.get("mode").and_then(Value::as_str) != Some("ANY") {
        return None;
    }
    let allowed = config
        .get("allowedFunctionNames")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str);
    let declared = body
        .get("tools")?
        .as_array()?
        .iter()
        .filter_map(|t| t.get("functionDeclarations").and_then(Value::as_array))
        .flatten();
    declared
        .filter_map(|d| Some((d.get("name")?.as_str()?, d)))
        .find(|(name, _)| allowed.is_none_or(|a| a == *name))
        .map(|(name, d)| {
            let schema = d
                .get("parametersJsonSchema")
                .or_else(|| d.get("parameters"))
                .cloned()
                .unwrap_or_else(|| json!({"type": "object"}));
            (name.to_string(), schema)
        })
}

/// The tool a Bedrock request forces (`toolConfig.toolChoice` `any` or `tool`), with its
/// input schema: the named one, else the first.
fn bedrock_forced_tool(body: &Map<String, Value>) -> Option<(String, Value)> {
    let config = body.get("toolConfig")?;
    let choice = config.get("toolChoice")?;
    let named = match (choice.get("tool"), choice.get("any")) {
        (Some(t), _) => Some(t.get("name")?.as_str()?),
        (None, Some(_)) => None,
        (None, None) => return None,
    };
    config
        .get("tools")?
        .as_array()?
        .iter()
        .filter_map(|t| t.get("toolSpec"))
        .filter_map(|s| Some((s.get("name")?.as_str()?, s)))
        .find(|(name, _)| named.is_none_or(|n| n == *name))
        .map(|(name, s)| {
            let schema = s
                .pointer("/inputSchema/json")
                .cloned()
                .unwrap_or_else(|| json!({"type": "object"}));
            (name.to_string(), schema)
        })
}

/// How deep a schema is followed (a recursive `$ref` stops here with `null`).
const MAX_DEPTH: usize = 16;

/// A value that `schema` accepts; `root` resolves `$ref`s (`#/$defs/...`,
/// `#/definitions/...`).
pub fn value_of(schema: &Value, root: &Value, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    let Some(s) = schema.as_object() else {
        return Value::Null; // `true` or `{}`: anything goes; null is something
    };
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        return resolve(r, root).map_or(Value::Null, |t| value_of(t, root, depth + 1));
    }
    if let Some(c) = s.get("const") {
        return c.clone();
    }
    if let Some(first) = s
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = s.get(key).and_then(Value::as_array).and_then(|a| a.first()) {
            return value_of(first, root, depth + 1);
        }
    }
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        // A list of types: the first that is not null.
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if s.contains_key("properties") => "object",
        _ if s.contains_key("items") => "array",
        _ => "string",
    };
    match ty {
        "object" => {
            let mut out = Map::new();
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    out.insert(k.clone(), value_of(v, root, depth + 1));
                }
            }
            Value::Object(out)
        }
        "array" => {
            let n = s
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .max(1);
            let item = s
                .get("items")
                .map_or(Value::Null, |i| value_of(i, root, depth + 1));
            Value::Array((0..n.min(8)).map(|_| item.clone()).collect())
        }
        "integer" => json!(bound(s).ceil() as i64),
        "number" => json!(bound(s)),
        "boolean" => Value::Bool(true),
        "null" => Value::Null,
        _ => Value::String(string_of(s)),
    }
}

/// A number's lower bound (0 when it has none, or its upper bound when that is lower).
fn bound(s: &Map<String, Value>) -> f64 {
    let min = s
        .get("minimum")
        .and_then(Value::as_f64)
        .or_else(|| {
            s.get("exclusiveMinimum")
                .and_then(Value::as_f64)
                .map(|m| m + 1.0)
        })
        .unwrap_or(0.0);
    match s.get("maximum").and_then(Value::as_f64) {
        Some(max) if max < min => max,
        _ => min,
    }
}

fn string_of(s: &Map<String, Value>) -> String {
    let base = match s.get("format").and_then(Value::as_str) {
        Some("date") => "2026-01-01",
        Some("date-time") => "2026-01-01T00:00:00Z",
        Some("email") => "party@example.com",
        Some("uri") | Some("url") => "https://example.com/clause",
        Some("uuid") => "00000000-0000-4000-8000-000000000000",
        _ => "clause",
    };
    let min = s.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
    let mut out = base.to_string();
    while out.len() < min {
        out.push('x');
    }
    if let Some(max) = s.get("maxLength").and_then(Value::as_u64) {
        out.truncate(max as usize);
    }
    out
}

fn resolve<'a>(r: &str, root: &'a Value) -> Option<&'a Value> {
    let path = r.strip_prefix("#/")?;
    path.split('/').try_fold(root, |v, seg| {
        v.get(seg.replace("~1", "/").replace("~0", "~"))
    })
}

#[cfg(test)]
mod tests;
