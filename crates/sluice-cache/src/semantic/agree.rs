//! Whether a verification's fresh answer agrees with the entry's: tool calls and JSON content
//! exactly, equal texts at once, different texts by meaning (their embeddings this close or
//! closer). The embedding is the caller's; the decision is here.

use serde_json::Value;

use super::cosine;

/// Two answers' texts this similar (or more) agree.
pub const ANSWERS_AGREE: f64 = 0.9;

/// What an answer says, to compare two: its tool calls or its JSON content exactly, else its
/// text by meaning.
#[derive(Clone, Debug, PartialEq)]
pub enum Said {
    /// Compared exactly.
    Exact(Value),
    /// Compared by meaning.
    Text(String),
}

/// What a complete OpenAI answer says (`None`: no message to read).
pub fn said(body: &[u8]) -> Option<Said> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let message = v.get("choices")?.get(0)?.get("message")?;
    if let Some(calls) = message.get("tool_calls").filter(|c| !c.is_null()) {
        return Some(Said::Exact(calls.clone()));
    }
    let text = message.get("content")?.as_str()?;
    match serde_json::from_str::<Value>(text) {
        Ok(j) if j.is_object() || j.is_array() => Some(Said::Exact(j)),
        _ => Some(Said::Text(text.to_string())),
    }
}

/// Whether two answers agree.
#[derive(Clone, Debug, PartialEq)]
pub enum Agreement {
    /// Decided: they do, or they do not.
    Known(bool),
    /// Two different texts: they agree when their embeddings do ([`close`]).
    ByMeaning(String, String),
}

/// Whether `fresh` agrees with `cached` (both complete OpenAI answers).
pub fn compare(fresh: &[u8], cached: &[u8]) -> Agreement {
    match (said(fresh), said(cached)) {
        (Some(Said::Exact(a)), Some(Said::Exact(b))) => Agreement::Known(a == b),
        (Some(Said::Text(a)), Some(Said::Text(b))) if a == b => Agreement::Known(true),
        (Some(Said::Text(a)), Some(Said::Text(b))) => Agreement::ByMeaning(a, b),
        _ => Agreement::Known(false),
    }
}

/// Whether two answers' text embeddings are close enough to agree.
pub fn close(a: &[f32], b: &[f32]) -> bool {
    cosine(a, b) >= ANSWERS_AGREE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(content: &str) -> Vec<u8> {
        serde_json::json!({"choices": [{"message": {"role": "assistant", "content": content}}]})
            .to_string()
            .into_bytes()
    }

    #[test]
    fn structured_answers_compare_exactly_and_texts_by_meaning() {
        let json_a = answer(r#"{"risk": "low", "clause": 4}"#);
        let json_b = answer(r#"{"clause": 4, "risk": "low"}"#);
        assert_eq!(
            compare(&json_a, &json_b),
            Agreement::Known(true),
            "key order"
        );
        assert_eq!(
            compare(&json_a, &answer(r#"{"risk": "high", "clause": 4}"#)),
            Agreement::Known(false)
        );
        assert_eq!(
            compare(&answer("yes"), &answer("yes")),
            Agreement::Known(true)
        );
        assert_eq!(
            compare(
                &answer("Reset it from settings."),
                &answer("Use the reset link.")
            ),
            Agreement::ByMeaning(
                "Reset it from settings.".into(),
                "Use the reset link.".into()
            )
        );
        assert_eq!(
            compare(&json_a, &answer("low risk")),
            Agreement::Known(false)
        );
        assert_eq!(compare(b"not json", &answer("x")), Agreement::Known(false));
        let tools = serde_json::json!({"choices": [{"message": {"tool_calls": [{"id": "a"}]}}]});
        assert_eq!(
            said(tools.to_string().as_bytes()),
            Some(Said::Exact(serde_json::json!([{"id": "a"}])))
        );
    }

    #[test]
    fn close_embeddings_agree() {
        assert!(close(&[1.0, 0.0], &[0.99, 0.05]));
        assert!(!close(&[1.0, 0.0], &[0.0, 1.0]));
    }
}
