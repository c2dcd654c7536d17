//! What of a request the semantic cache matches: its newest user message, by meaning; and
//! everything else, exactly: the tenant, the model group, every other field of the body
//! (system prompt, tools, sampling settings, response format) and every earlier message,
//! byte for byte, hashed into the partition the entry lives in. A request the cache must not
//! answer by meaning (sampling too hot, several choices asked for, tool results in the
//! conversation, a last message that is not the user's text, or one too long to be a
//! question: a document, which would cost more to embed than it could save) is not a
//! question.

use serde_json::Value;
use sha2::{Digest, Sha256};
use sluice_core::ChatRequest;

use super::guard::Facts;

/// Fields that say how the answer is delivered, not what it is.
const DELIVERY_FIELDS: [&str; 2] = ["stream", "stream_options"];

/// The temperature of a request that sets none (OpenAI's default).
pub const DEFAULT_TEMPERATURE: f64 = 1.0;

/// The longest message matched by meaning by default, in characters.
pub const DEFAULT_MAX_CHARS: usize = 2000;

/// What a request must stay within to be matched by meaning.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// The hottest `temperature`.
    pub temperature_ceiling: f64,
    /// The longest newest user message, in characters.
    pub max_chars: usize,
}

impl Limits {
    /// Up to `temperature_ceiling`, messages up to [`DEFAULT_MAX_CHARS`].
    pub fn new(temperature_ceiling: f64) -> Self {
        Self {
            temperature_ceiling,
            max_chars: DEFAULT_MAX_CHARS,
        }
    }
}

/// Why a request is not matched by meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ineligible {
    /// Its `temperature` is above the configured ceiling.
    Temperature,
    /// It asks for more than one choice (`n > 1`).
    Choices,
    /// The conversation carries tool results (or tool calls).
    ToolResults,
    /// Its last message is not a user's text.
    NotAQuestion,
    /// Its last message is longer than a question.
    TooLong,
}

impl Ineligible {
    /// The label in metrics.
    pub fn label(self) -> &'static str {
        match self {
            Self::Temperature => "temperature",
            Self::Choices => "n",
            Self::ToolResults => "tool_results",
            Self::NotAQuestion => "not_a_question",
            Self::TooLong => "too_long",
        }
    }
}

/// A request as the semantic cache sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Question {
    /// The digest of everything that must match exactly.
    pub partition: u64,
    /// The newest user message's text.
    pub text: String,
    /// What that text says beyond its meaning.
    pub facts: Facts,
}

fn text_of(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let mut out = String::new();
            for p in parts {
                if p.get("type").and_then(Value::as_str) != Some("text") {
                    return None; // an image or a file: not matched by meaning
                }
                out.push_str(p.get("text")?.as_str()?);
                out.push('\n');
            }
            Some(out)
        }
        _ => None,
    }
}

impl Question {
    /// `request` (from `tenant`, to `group`) as a question, unless it may not be answered by
    /// meaning; `ceiling`: the hottest `temperature` served.
    pub fn of(
        tenant: Option<&str>,
        group: &str,
        request: &ChatRequest,
        limits: &Limits,
    ) -> Result<Self, Ineligible> {
        let temperature = request
            .value("temperature")
            .and_then(|v| v.as_f64())
            .unwrap_or(DEFAULT_TEMPERATURE);
        if temperature > limits.temperature_ceiling {
            return Err(Ineligible::Temperature);
        }
        if request
            .value("n")
            .and_then(|v| v.as_u64())
            .is_some_and(|n| n > 1)
        {
            return Err(Ineligible::Choices);
        }
        let Some(Value::Array(messages)) = request.value("messages") else {
            return Err(Ineligible::NotAQuestion);
        };
        let tools_used = messages.iter().any(|m| {
            matches!(
                m.get("role").and_then(Value::as_str),
                Some("tool" | "function")
            ) || m.get("tool_calls").is_some_and(|c| !c.is_null())
        });
        if tools_used {
            return Err(Ineligible::ToolResults);
        }
        let Some((last, earlier)) = messages.split_last() else {
            return Err(Ineligible::NotAQuestion);
        };
        if last.get("role").and_then(Value::as_str) != Some("user") {
            return Err(Ineligible::NotAQuestion);
        }
        let text = last
            .get("content")
            .and_then(text_of)
            .filter(|t| !t.trim().is_empty())
            .ok_or(Ineligible::NotAQuestion)?;
        if text.len() > limits.max_chars && text.chars().count() > limits.max_chars {
            return Err(Ineligible::TooLong);
        }
        let mut h = Sha256::new();
        let mut part = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        part(tenant.unwrap_or("").as_bytes());
        part(group.as_bytes());
        let mut fields: Vec<(&str, &[u8])> = request
            .fields()
            .filter(|(name, _)| *name != "messages" && !DELIVERY_FIELDS.contains(name))
            .collect();
        fields.sort_unstable_by_key(|(name, _)| *name);
        for (name, value) in fields {
            part(name.as_bytes());
            part(value);
        }
        for m in earlier {
            part(m.to_string().as_bytes());
        }
        // The newest message's other fields (its name, say) must match too.
        if let Value::Object(o) = last {
            for (k, v) in o.iter().filter(|(k, _)| *k != "content") {
                part(k.as_bytes());
                part(v.to_string().as_bytes());
            }
        }
        let digest = h.finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        Ok(Self {
            partition: u64::from_le_bytes(first),
            facts: Facts::of(&text),
            text,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(body: &str) -> ChatRequest {
        ChatRequest::parse(body.as_bytes()).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn q(tenant: &str, body: &str) -> Result<Question, Ineligible> {
        Question::of(Some(tenant), "chat", &req(body), &Limits::new(1.0))
    }

    const ASK: &str = r#"{"model":"chat","temperature":0,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"How do I reset my password?"}]}"#;

    #[test]
    fn only_the_newest_user_message_is_left_to_meaning() {
        let a = q("acme", ASK).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(a.text, "How do I reset my password?");
        let other_words = ASK.replace("How do I reset my password?", "Password reset steps?");
        let b = q("acme", &other_words).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(a.partition, b.partition, "same partition, other words");
        // Streaming or not is how, not what.
        let streamed = ASK.replace(r#""temperature":0,"#, r#""temperature":0,"stream":true,"#);
        assert_eq!(q("acme", &streamed).map(|q| q.partition), Ok(a.partition));
        // Another tenant, system prompt, sampling setting, tool list or earlier turn: another
        // partition.
        let differ = [
            q("globex", ASK),
            q("acme", &ASK.replace("Be brief.", "Be thorough.")),
            q(
                "acme",
                &ASK.replace(r#""temperature":0"#, r#""temperature":0.2"#),
            ),
            q(
                "acme",
                &ASK.replace(
                    r#""temperature":0,"#,
                    r#""temperature":0,"tools":[{"type":"function","function":{"name":"f"}}],"#,
                ),
            ),
        ];
        for d in differ {
            assert_ne!(d.map(|q| q.partition), Ok(a.partition));
        }
        assert_ne!(
            Question::of(Some("acme"), "big", &req(ASK), &Limits::new(1.0)).map(|q| q.partition),
            Ok(a.partition)
        );
    }

    #[test]
    fn what_may_not_be_answered_by_meaning_is_said() {
        let hot = ASK.replace(r#""temperature":0"#, r#""temperature":1.3"#);
        assert_eq!(q("acme", &hot), Err(Ineligible::Temperature));
        let unset = ASK.replace(r#""temperature":0,"#, "");
        assert_eq!(
            Question::of(None, "chat", &req(&unset), &Limits::new(0.5)),
            Err(Ineligible::Temperature)
        );
        let many = ASK.replace(r#""temperature":0"#, r#""temperature":0,"n":3"#);
        assert_eq!(q("acme", &many), Err(Ineligible::Choices));
        let tool = r#"{"model":"chat","messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"}],"temperature":0}"#;
        assert_eq!(q("acme", tool), Err(Ineligible::ToolResults));
        let image = r#"{"model":"chat","temperature":0,"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:"}}]}]}"#;
        assert_eq!(q("acme", image), Err(Ineligible::NotAQuestion));
        let parts = r#"{"model":"chat","temperature":0,"messages":[{"role":"user","content":[{"type":"text","text":"How do I reset my password?"}]}]}"#;
        assert!(q("acme", parts).is_ok_and(|q| q.text.starts_with("How do I reset")));
        assert_eq!(Ineligible::ToolResults.label(), "tool_results");
        // A document is not a question; the limit counts characters, not bytes.
        let long = ASK.replace("How do I reset my password?", &"word ".repeat(500));
        assert_eq!(q("acme", &long), Err(Ineligible::TooLong));
        let cjk = ASK.replace("How do I reset my password?", &"密".repeat(1500));
        assert!(q("acme", &cjk).is_ok(), "1,500 characters, 4,500 bytes");
    }
}

/// A call's question, kept until its answer comes: stored under it, or (verifying) compared
/// with the entry's answer.
#[derive(Debug)]
pub struct Pending {
    /// The question.
    pub question: Question,
    /// Its vector.
    pub vector: Vec<f32>,
    /// The entry whose answer the call's verifies, at what similarity, and the probability
    /// with which it was chosen for verifying.
    pub verifies: Option<(u64, f64, f64)>,
}
