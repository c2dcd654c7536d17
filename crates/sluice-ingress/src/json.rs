//! Reading and writing the JSON bodies a translation works on, with refusals that name
//! where the body is wrong.

use serde_json::{Map, Value};
use sluice_core::{ErrorKind, GatewayError};

/// A 400 naming `param`.
pub fn bad(param: impl Into<String>, message: impl Into<String>) -> GatewayError {
    GatewayError::new(ErrorKind::InvalidRequest, message.into()).with_param(param.into())
}

/// A client's body as a JSON value: bad JSON is refused naming its line and column, and a
/// body past the structure bound ([`sluice_core::budget`]) before it is parsed.
pub fn read(raw: &[u8]) -> Result<Value, GatewayError> {
    if !sluice_core::budget::within(raw) {
        return Err(GatewayError::new(
            ErrorKind::InvalidRequest,
            sluice_core::budget::refusal("the request body"),
        ));
    }
    serde_json::from_slice(raw).map_err(|e| {
        GatewayError::new(
            ErrorKind::InvalidJson,
            format!(
                "request body is not valid JSON: line {} column {}",
                e.line(),
                e.column()
            ),
        )
    })
}

/// A client's body as a JSON object.
pub fn read_object(raw: &[u8]) -> Result<Map<String, Value>, GatewayError> {
    match read(raw)? {
        Value::Object(body) => Ok(body),
        _ => Err(GatewayError::new(
            ErrorKind::InvalidRequest,
            "request body must be a JSON object",
        )),
    }
}

/// `v` written out.
pub fn write(v: &Value) -> Result<Vec<u8>, GatewayError> {
    serde_json::to_vec(v)
        .map_err(|e| GatewayError::new(ErrorKind::Internal, format!("writing JSON: {e}")))
}

/// Each tool call of a chat message: its id, its function's name and its arguments' text.
pub fn tool_calls(message: &Value) -> impl Iterator<Item = (&str, &str, &str)> {
    fn text<'a>(v: Option<&'a Value>, or: &'static str) -> &'a str {
        v.and_then(Value::as_str).unwrap_or(or)
    }
    message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|call| {
            let f = call.get("function").unwrap_or(&Value::Null);
            (
                text(call.get("id"), ""),
                text(f.get("name"), ""),
                text(f.get("arguments"), "{}"),
            )
        })
}

/// A chat-completions answer read back, with its first choice.
pub fn chat_answer(body: &[u8]) -> Result<(Value, Value), GatewayError> {
    let unreadable = |what: &str| {
        GatewayError::new(
            ErrorKind::UpstreamProtocol,
            format!("the upstream's answer could not be read as a chat completion: {what}"),
        )
    };
    if !sluice_core::budget::within(body) {
        return Err(unreadable(&sluice_core::budget::refusal("it")));
    }
    let chat: Value = serde_json::from_slice(body).map_err(|e| unreadable(&e.to_string()))?;
    let choice = chat
        .get("choices")
        .and_then(|c| c.get(0))
        .cloned()
        .ok_or_else(|| unreadable("no choice"))?;
    Ok((chat, choice))
}
