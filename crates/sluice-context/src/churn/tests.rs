//! The watch's verdicts: shared, changed, and each cause of churn, from real request bodies.

use serde_json::json;
use sluice_core::ChatRequest;

use super::*;

fn request(tools: Option<serde_json::Value>, system: &str, question: &str) -> ChatRequest {
    let mut body = json!({
        "model": "chat",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
    });
    if let Some(t) = tools {
        body["tools"] = t;
    }
    ChatRequest::parse(body.to_string().as_bytes()).unwrap_or_else(|e| panic!("{e:?}"))
}

fn sample(r: &ChatRequest) -> Sample {
    Sample::of(r).unwrap_or_else(|| panic!("no stable section"))
}

const RULES: &str = "You review supplier contracts. Flag automatic renewals, unlimited liability and missing termination clauses. ";

fn tool(name: &str) -> serde_json::Value {
    json!({"type": "function", "function": {"name": name, "description": "d", "parameters": {"type": "object", "properties": {}}}})
}

#[test]
fn the_same_prompt_is_shared_and_the_question_does_not_matter() {
    let mut w = Watch::new();
    let a = request(None, RULES, "Is clause 4 fair?");
    let b = request(None, RULES, "What does clause 9 say?");
    assert_eq!(w.observe("acme", "review", sample(&a)), Verdict::First);
    assert_eq!(w.observe("acme", "review", sample(&b)), Verdict::Shared);
    // Another tenant is watched apart.
    assert_eq!(w.observe("globex", "review", sample(&b)), Verdict::First);
    let r = w.report();
    assert_eq!((r[0].0, r[0].2.sampled, r[0].2.shared), ("acme", 2, 1));
}

#[test]
fn a_timestamp_in_the_system_prompt_is_named_with_its_offset_and_shape() {
    let mut w = Watch::new();
    let at = |t: &str| request(None, &format!("{RULES}Now: {t}. Be brief."), "q");
    w.observe("acme", "chat", sample(&at("2026-12-01T10:00:00Z")));
    let v = w.observe("acme", "chat", sample(&at("2026-12-01T10:00:07Z")));
    let Verdict::Churn {
        cause,
        offset,
        shape,
    } = v
    else {
        panic!("{v:?}");
    };
    assert_eq!(cause, Cause::Timestamp);
    assert_eq!(offset, 1 + RULES.len() + "Now: 2026-12-01T10:00:0".len());
    assert_eq!(shape, "9999-99-99a99:99:99a");
    let tally = w.report()[0].2.clone();
    assert_eq!(tally.churn["timestamp"].count, 1);
    // The report holds no text of the prompt.
    let shown = serde_json::to_string(&tally).unwrap_or_default();
    assert!(
        !shown.contains("supplier") && !shown.contains("2026"),
        "{shown}"
    );
}

#[test]
fn ids_dates_and_whitespace_are_told_apart_from_a_real_change() {
    let mut w = Watch::new();
    let with = |x: &str| request(None, &format!("{RULES}{x} Answer in English."), "q");
    w.observe(
        "t",
        "g",
        sample(&with("Request 3f9a2c81-77d0-4b1e-9c3a-0d1e2f3a4b5c.")),
    );
    let v = w.observe(
        "t",
        "g",
        sample(&with("Request 8b1c0d2e-1f3a-4b5c-8d7e-6f5a4b3c2d1e.")),
    );
    assert!(
        matches!(
            v,
            Verdict::Churn {
                cause: Cause::Uuid,
                ..
            }
        ),
        "{v:?}"
    );
    let v = w.observe("t", "g", sample(&with("Today is 2026-12-02.")));
    assert!(
        matches!(v, Verdict::Changed),
        "{v:?}: a new sentence, not a token"
    );
    w.observe("t", "g", sample(&with("Today is 2026-12-01.")));
    let v = w.observe("t", "g", sample(&with("Today is 2026-12-03.")));
    assert!(
        matches!(
            v,
            Verdict::Churn {
                cause: Cause::Date,
                ..
            }
        ),
        "{v:?}"
    );
    let v = w.observe("t", "g", sample(&with("Today  is 2026-12-03.")));
    assert!(
        matches!(
            v,
            Verdict::Churn {
                cause: Cause::Whitespace,
                ..
            }
        ),
        "{v:?}"
    );
    let v = w.observe("t", "g", sample(&request(None, "You write poems.", "q")));
    assert_eq!(v, Verdict::Changed);
}

#[test]
fn reordered_tools_and_reordered_keys_are_named() {
    let mut w = Watch::new();
    let tools = |names: &[&str]| json!(names.iter().map(|n| tool(n)).collect::<Vec<_>>());
    w.observe(
        "t",
        "g",
        sample(&request(Some(tools(&["search", "fetch"])), RULES, "q")),
    );
    let v = w.observe(
        "t",
        "g",
        sample(&request(Some(tools(&["fetch", "search"])), RULES, "q")),
    );
    assert!(
        matches!(
            v,
            Verdict::Churn {
                cause: Cause::ToolOrder,
                ..
            }
        ),
        "{v:?}"
    );
    // The same tool with its keys in another order.
    let reordered = json!([
        {"function": {"parameters": {"properties": {}, "type": "object"}, "description": "d", "name": "fetch"}, "type": "function"},
        tool("search"),
    ]);
    let v = w.observe("t", "g", sample(&request(Some(reordered), RULES, "q")));
    assert!(
        matches!(
            v,
            Verdict::Churn {
                cause: Cause::KeyOrder,
                ..
            }
        ),
        "{v:?}"
    );
    let v = w.observe(
        "t",
        "g",
        sample(&request(Some(tools(&["translate"])), RULES, "q")),
    );
    assert_eq!(v, Verdict::Changed, "other tools");
}

#[test]
fn nothing_stable_is_not_sampled_and_the_watch_is_bounded() {
    let bare = ChatRequest::parse(br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#)
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(Sample::of(&bare), None);
    let mut w = Watch::new();
    let s = Sample::from_parts(b"system prompt", 0);
    for i in 0..KEYS_KEPT + 5 {
        w.observe(&format!("t{i}"), "g", s.clone());
    }
    assert_eq!((w.report().len(), w.overflow), (KEYS_KEPT, 5));
    let long = Sample::from_parts(&vec![b'x'; 3 * SAMPLE_BYTES], 0);
    assert_eq!(long.text.len(), SAMPLE_BYTES);
}
