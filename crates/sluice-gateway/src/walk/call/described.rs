//! What an answer says of itself besides its content (its id, the model that wrote it, why
//! each choice stopped), read for the call's trace: from a complete answer's JSON, or folded
//! in from a stream's chunks. Read only for traced calls.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Deserialize;
use sluice_core::ResponseMeta;

use super::Call;

#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    choices: Vec<Choice<'a>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

/// Folds what `json` (an answer, or one chunk of a stream) says into `meta`: the first id and
/// model seen, and every finish reason. A chunk that is not such JSON adds nothing: the
/// client still gets it as it came, and the span lacks what it did not say.
fn fold(meta: &mut ResponseMeta, json: &[u8]) {
    let Ok(head) = serde_json::from_slice::<Head<'_>>(json) else {
        return;
    };
    if meta.id.is_none() {
        meta.id = head.id.filter(|s| !s.is_empty()).map(|s| Arc::from(&*s));
    }
    if meta.model.is_none() {
        meta.model = head.model.filter(|s| !s.is_empty()).map(|s| Arc::from(&*s));
    }
    meta.finish_reasons.extend(
        head.choices
            .into_iter()
            .filter_map(|c| c.finish_reason.map(|r| Arc::from(&*r))),
    );
}

impl Call {
    fn traced_meta(&mut self) -> Option<&mut ResponseMeta> {
        let r = &mut self.record;
        r.trace.as_ref()?;
        Some(r.response.get_or_insert_with(ResponseMeta::default))
    }

    /// A complete answer (OpenAI JSON) came: what it says of itself, for a traced call.
    pub fn described(&mut self, body: &[u8]) {
        if let Some(meta) = self.traced_meta() {
            fold(meta, body);
        }
    }

    /// A stream's frame (`data: {...}\n\n`) went by: what it says of the answer, for a traced
    /// call.
    pub fn chunk_described(&mut self, frame: &[u8]) {
        let Some(meta) = self.traced_meta() else {
            return;
        };
        let text = frame.strip_prefix(b"data: ").unwrap_or(frame);
        let text = text.trim_ascii_end();
        if text.first() == Some(&b'{') {
            fold(meta, text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_and_a_stream_say_the_same_of_themselves() {
        let mut whole = ResponseMeta::default();
        fold(
            &mut whole,
            br#"{"id":"chatcmpl-1","model":"gpt-x-2026","choices":[{"index":0,"finish_reason":"stop","message":{"content":"hi"}}],"usage":{}}"#,
        );
        assert_eq!(whole.id.as_deref(), Some("chatcmpl-1"));
        assert_eq!(whole.model.as_deref(), Some("gpt-x-2026"));
        assert_eq!(whole.finish_reasons, vec![Arc::<str>::from("stop")]);
        let mut streamed = ResponseMeta::default();
        for chunk in [
            &br#"{"id":"chatcmpl-1","model":"gpt-x-2026","choices":[{"delta":{"content":"h"},"finish_reason":null}]}"#[..],
            br#"{"id":"chatcmpl-1","model":"gpt-x-2026","choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            br#"not json"#,
        ] {
            fold(&mut streamed, chunk);
        }
        assert_eq!(streamed, whole);
    }
}
