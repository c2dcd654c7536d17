//! The attributes a span's facts are written as: GenAI usage and response, optional text,
//! durations in seconds and milliseconds.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::KeyValue;
use sluice_core::Usage;

/// The GenAI usage attributes: input tokens include cache reads and writes.
pub(super) fn usage_attrs(a: &mut Vec<KeyValue>, u: &Usage) {
    let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    a.push(KeyValue::new(
        "gen_ai.usage.input_tokens",
        int(u.prompt_tokens),
    ));
    a.push(KeyValue::new(
        "gen_ai.usage.output_tokens",
        int(u.completion_tokens),
    ));
    a.push(KeyValue::new(
        "gen_ai.usage.cache_read.input_tokens",
        int(u.cached_tokens),
    ));
    a.push(KeyValue::new(
        "gen_ai.usage.cache_creation.input_tokens",
        int(u.cache_write_tokens),
    ));
    if u.reasoning_tokens > 0 {
        a.push(KeyValue::new(
            "gen_ai.usage.reasoning.output_tokens",
            int(u.reasoning_tokens),
        ));
    }
}

/// `gen_ai.response.*`: the answer's id, the model that wrote it and why it stopped.
pub(super) fn response_attrs(a: &mut Vec<KeyValue>, resp: &sluice_core::ResponseMeta) {
    text(a, "gen_ai.response.id", resp.id.as_ref());
    text(a, "gen_ai.response.model", resp.model.as_ref());
    if !resp.finish_reasons.is_empty() {
        let reasons: Vec<opentelemetry::StringValue> = resp
            .finish_reasons
            .iter()
            .map(|r| opentelemetry::StringValue::from(r.to_string()))
            .collect();
        a.push(KeyValue::new(
            "gen_ai.response.finish_reasons",
            opentelemetry::Value::Array(reasons.into()),
        ));
    }
}

/// `key` when the value is known.
pub(super) fn text(a: &mut Vec<KeyValue>, key: &'static str, v: Option<&Arc<str>>) {
    if let Some(v) = v {
        a.push(KeyValue::new(key, v.to_string()));
    }
}

/// Seconds, as span attributes give them.
pub(super) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Whole milliseconds, as span attributes give them.
pub(super) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
