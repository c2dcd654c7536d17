//! Which answers the caches keep: a chat completion with at least one choice that says
//! something (text, tool calls, a refusal, audio), or an embeddings list with at least one
//! item. An error in a 200's body, a body that is neither, or an answer with nothing in it
//! is passed to its client as it came and never stored: a cache would otherwise serve one
//! upstream's bad moment to every later asker.

use serde_json::Value;

/// Why an answer is not stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unkept {
    /// Not a JSON object.
    #[error("not a JSON object")]
    NotJson,
    /// An error object, though it came with a 200.
    #[error("an error body")]
    Error,
    /// No `choices`, or none in it.
    #[error("no choices")]
    NoChoices,
    /// Choices, none with anything in it.
    #[error("an empty answer")]
    Empty,
}

/// Whether `body` (an OpenAI chat completion or embeddings list) is an answer worth storing.
pub fn worth_keeping(body: &[u8]) -> Result<(), Unkept> {
    let Ok(Value::Object(answer)) = serde_json::from_slice::<Value>(body) else {
        return Err(Unkept::NotJson);
    };
    let errs = answer.get("error").is_some_and(|e| !e.is_null())
        || answer.get("object").and_then(Value::as_str) == Some("error");
    if errs {
        return Err(Unkept::Error);
    }
    if let Some(Value::Array(items)) = answer.get("data") {
        // An embeddings answer.
        return if items.is_empty() {
            Err(Unkept::Empty)
        } else {
            Ok(())
        };
    }
    let Some(Value::Array(choices)) = answer.get("choices") else {
        return Err(Unkept::NoChoices);
    };
    if choices.is_empty() {
        return Err(Unkept::NoChoices);
    }
    if choices.iter().any(says_something) {
        Ok(())
    } else {
        Err(Unkept::Empty)
    }
}

fn says_something(choice: &Value) -> bool {
    let Some(message) = choice.get("message") else {
        return false;
    };
    let filled = |v: &Value| match v {
        Value::String(s) => !s.trim().is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => false,
    };
    ["content", "tool_calls", "function_call", "refusal", "audio"]
        .iter()
        .any(|field| message.get(*field).is_some_and(filled))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_answers_that_say_something_are_kept() {
        let text = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}"#;
        assert_eq!(worth_keeping(text), Ok(()));
        let call = br#"{"choices":[{"message":{"content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}"#;
        assert_eq!(worth_keeping(call), Ok(()));
        let refusal = br#"{"choices":[{"message":{"content":null,"refusal":"I cannot help."}}]}"#;
        assert_eq!(worth_keeping(refusal), Ok(()));
        let vectors =
            br#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1]}]}"#;
        assert_eq!(worth_keeping(vectors), Ok(()));
        for (body, why) in [
            (
                &br#"{"error":{"message":"overloaded","type":"server_error"}}"#[..],
                Unkept::Error,
            ),
            (
                br#"{"object":"error","message":"bad","code":400}"#,
                Unkept::Error,
            ),
            (br#"{"choices":[],"error":{"message":"x"}}"#, Unkept::Error),
            (br#"{"id":"odd"}"#, Unkept::NoChoices),
            (br#"{"choices":[]}"#, Unkept::NoChoices),
            (
                br#"{"choices":[{"message":{"role":"assistant","content":""}}]}"#,
                Unkept::Empty,
            ),
            (
                br#"{"choices":[{"message":{"content":"  \n"}},{"message":{"tool_calls":[]}}]}"#,
                Unkept::Empty,
            ),
            (br#"{"choices":[{"finish_reason":"stop"}]}"#, Unkept::Empty),
            (br#"{"object":"list","data":[]}"#, Unkept::Empty),
            (b"not json", Unkept::NotJson),
            (b"[1]", Unkept::NotJson),
        ] {
            assert_eq!(
                worth_keeping(body),
                Err(why),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
