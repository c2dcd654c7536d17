//! OpenAI embeddings (`POST /v1/embeddings`), checked by OpenAI's rules. An embeddings
//! request is no chat: its chat form only carries what admission, the caches and billing
//! read (the model, the inputs as the prompt's text, no output), and the request itself
//! travels as its original, which an OpenAI-compatible upstream is sent as it came.

use serde_json::{Map, Value, json};
use sluice_core::GatewayError;

use crate::json::{bad, read_object, write};

/// Reads an embeddings body and writes its chat form.
pub fn to_chat(raw: &[u8]) -> Result<Vec<u8>, GatewayError> {
    let body = read_object(raw)?;
    let model = match body.get("model") {
        Some(Value::String(m)) if !m.is_empty() => m.clone(),
        None => return Err(bad("model", "`model` is required")),
        Some(_) => return Err(bad("model", "`model` must be a non-empty string")),
    };
    let text = inputs(body.get("input"))?;
    check_options(&body)?;
    write(&json!({
        "model": model,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 0,
    }))
}

/// The inputs' text, one per line: strings as they are, token arrays as their numbers (a
/// tokenizer counts about one token a number).
fn inputs(input: Option<&Value>) -> Result<String, GatewayError> {
    let empty = || bad("input", "`input` must not be empty");
    let tokens = |list: &[Value], at: &str| -> Result<String, GatewayError> {
        if list.is_empty() {
            return Err(bad(at, format!("`{at}` must not be empty")));
        }
        let numbers: Option<Vec<String>> = list
            .iter()
            .map(|t| t.as_u64().map(|n| n.to_string()))
            .collect();
        numbers
            .map(|n| n.join(" "))
            .ok_or_else(|| bad(at, format!("`{at}` must hold non-negative integer tokens")))
    };
    match input {
        None | Some(Value::Null) => Err(bad("input", "`input` is required")),
        Some(Value::String(s)) if s.is_empty() => Err(empty()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(list)) if list.is_empty() => Err(empty()),
        Some(Value::Array(list)) => match &list[..] {
            [Value::String(_), ..] => {
                let mut out = Vec::with_capacity(list.len());
                for (i, item) in list.iter().enumerate() {
                    match item {
                        Value::String(s) if !s.is_empty() => out.push(s.as_str()),
                        _ => {
                            return Err(bad(
                                format!("input[{i}]"),
                                format!("`input[{i}]` must be a non-empty string"),
                            ));
                        }
                    }
                }
                Ok(out.join("\n"))
            }
            [Value::Array(_), ..] => {
                let mut out = Vec::with_capacity(list.len());
                for (i, item) in list.iter().enumerate() {
                    let at = format!("input[{i}]");
                    match item {
                        Value::Array(t) => out.push(tokens(t, &at)?),
                        _ => {
                            return Err(bad(
                                at.clone(),
                                format!("`{at}` must be an array of tokens"),
                            ));
                        }
                    }
                }
                Ok(out.join("\n"))
            }
            _ => tokens(list, "input"),
        },
        Some(_) => Err(bad(
            "input",
            "`input` must be a string, an array of strings, or tokens",
        )),
    }
}

fn check_options(body: &Map<String, Value>) -> Result<(), GatewayError> {
    match body.get("encoding_format") {
        None | Some(Value::Null) => {}
        Some(Value::String(f)) if f == "float" || f == "base64" => {}
        Some(_) => {
            return Err(bad(
                "encoding_format",
                "`encoding_format` must be `float` or `base64`",
            ));
        }
    }
    match body.get("dimensions") {
        None | Some(Value::Null) => {}
        Some(v) if v.as_u64().is_some_and(|n| n >= 1) => {}
        Some(_) => {
            return Err(bad(
                "dimensions",
                "`dimensions` must be an integer of at least 1",
            ));
        }
    }
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        return Err(bad("stream", "embeddings are not streamed"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::ChatRequest;

    fn chat(v: Value) -> ChatRequest {
        ChatRequest::parse(&to_chat(v.to_string().as_bytes()).unwrap()).unwrap()
    }

    fn refused(v: Value) -> String {
        let e = to_chat(v.to_string().as_bytes()).unwrap_err();
        e.param.unwrap_or_default().into_owned()
    }

    #[test]
    fn every_input_shape_becomes_a_prompt_with_no_output() {
        let r = chat(json!({"model": "e", "input": "hello world"}));
        assert_eq!(r.max_tokens(), Some(0));
        assert_eq!(r.prompt_text(), "user\nhello world\n");
        let r = chat(json!({"model": "e", "input": ["a", "b"], "encoding_format": "base64"}));
        assert!(r.prompt_text().contains("a\nb"));
        let r = chat(json!({"model": "e", "input": [1, 2, 3], "dimensions": 8}));
        assert!(r.prompt_text().contains("1 2 3"));
        let r = chat(json!({"model": "e", "input": [[1, 2], [3]]}));
        assert!(r.prompt_text().contains("1 2\n3"));
    }

    #[test]
    fn bad_inputs_are_refused_by_name() {
        assert_eq!(refused(json!({"input": "x"})), "model");
        assert_eq!(refused(json!({"model": "e"})), "input");
        assert_eq!(refused(json!({"model": "e", "input": ""})), "input");
        assert_eq!(refused(json!({"model": "e", "input": []})), "input");
        assert_eq!(
            refused(json!({"model": "e", "input": ["a", ""]})),
            "input[1]"
        );
        assert_eq!(
            refused(json!({"model": "e", "input": ["a", 5]})),
            "input[1]"
        );
        assert_eq!(refused(json!({"model": "e", "input": [1, -2]})), "input");
        assert_eq!(
            refused(json!({"model": "e", "input": [[1], []]})),
            "input[1]"
        );
        assert_eq!(refused(json!({"model": "e", "input": {"a": 1}})), "input");
        assert_eq!(
            refused(json!({"model": "e", "input": "x", "encoding_format": "int8"})),
            "encoding_format"
        );
        assert_eq!(
            refused(json!({"model": "e", "input": "x", "dimensions": 0})),
            "dimensions"
        );
    }
}
