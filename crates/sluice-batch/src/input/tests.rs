//! The input file's checks, line by line.

use super::*;

fn chat(id: &str, system: &str, question: &str) -> String {
    serde_json::json!({
        "custom_id": id, "method": "POST", "url": "/v1/chat/completions",
        "body": {"model": "chat", "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": question}
        ]}
    })
    .to_string()
}

#[test]
fn good_lines_come_back_in_order_with_blank_lines_skipped() {
    let file = [
        chat("a", "review", "one"),
        String::new(),
        chat("b", "review", "two"),
        chat("c", "summarise", "three"),
    ]
    .join("\n");
    let lines = check(&file, Limits::default()).unwrap();
    let ids: Vec<(&str, u64)> = lines.iter().map(|l| (&*l.custom_id, l.number)).collect();
    assert_eq!(ids, [("a", 1), ("b", 3), ("c", 4)]);
    assert_eq!(lines[0].endpoint, Endpoint::Chat);
    assert_eq!(lines[0].prefix, lines[1].prefix, "same system prompt");
    assert_ne!(lines[0].prefix, lines[2].prefix, "another system prompt");
    assert!(lines[0].body.contains("\"one\""));
}

#[test]
fn every_bad_line_is_named_with_its_field() {
    let file = [
        chat("a", "s", "q"),
        "{not json".to_string(),
        r#"{"method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"x"}]}}"#.to_string(),
        chat("a", "s", "again"),
        r#"{"custom_id":"d","method":"GET","url":"/v1/chat/completions","body":{}}"#.to_string(),
        r#"{"custom_id":"e","method":"POST","url":"/v1/images","body":{}}"#.to_string(),
        r#"{"custom_id":"f","method":"POST","url":"/v1/chat/completions","body":{"messages":[]}}"#.to_string(),
        r#"{"custom_id":"g","method":"POST","url":"/v1/chat/completions","body":{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}}"#.to_string(),
        r#"{"custom_id":7,"method":"POST","url":"/v1/chat/completions","body":{}}"#.to_string(),
        r#"{"custom_id":"h","method":"POST","url":"/v1/chat/completions"}"#.to_string(),
        r#"{"custom_id":"i","method":"POST","url":"/v1/messages","body":{"model":"m","messages":[{"role":"user","content":"x"}]}}"#.to_string(),
    ]
    .join("\n");
    let errors = check(&file, Limits::default()).unwrap_err();
    let got: Vec<(u64, Option<&str>)> = errors
        .iter()
        .map(|e| (e.line, e.param.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            (2, None),
            (3, Some("custom_id")),
            (4, Some("custom_id")),
            (5, Some("method")),
            (6, Some("url")),
            (7, Some("body.model")),
            (8, Some("body.stream")),
            (9, Some("custom_id")),
            (10, Some("body")),
            (11, Some("body.max_tokens")),
        ],
        "{errors:#?}"
    );
    assert!(
        errors[2]
            .to_string()
            .starts_with("line 4: custom_id `a` is already used by line 1")
    );
    assert!(errors[4].message.contains("/v1/chat/completions"));
}

#[test]
fn an_empty_file_and_one_too_long_are_refused() {
    let empty = check("\n\n", Limits::default()).unwrap_err();
    assert_eq!(empty[0].line, 0);
    assert!(empty[0].message.contains("no requests"));
    let file = (0..4)
        .map(|i| chat(&i.to_string(), "s", "q"))
        .collect::<Vec<_>>()
        .join("\n");
    let limits = Limits {
        max_lines: 3,
        ..Limits::default()
    };
    let long = check(&file, limits).unwrap_err();
    assert!(long[0].message.contains("at most 3"), "{long:?}");
}

#[test]
fn each_api_has_its_own_shared_prefix() {
    let line = |url: &str, body: serde_json::Value| {
        serde_json::json!({"custom_id": "x", "method": "POST", "url": url, "body": body})
            .to_string()
    };
    let messages = |system: &str| {
        line(
            "/v1/messages",
            serde_json::json!({"model": "m", "max_tokens": 10, "system": system,
                "messages": [{"role": "user", "content": "q"}]}),
        )
    };
    let a = check(&messages("s1"), Limits::default()).unwrap();
    let b = check(&messages("s1"), Limits::default()).unwrap();
    let c = check(&messages("s2"), Limits::default()).unwrap();
    assert_eq!(a[0].endpoint, Endpoint::Messages);
    assert_eq!(a[0].prefix, b[0].prefix);
    assert_ne!(a[0].prefix, c[0].prefix);
    let e = check(
        &line(
            "/v1/embeddings",
            serde_json::json!({"model": "e", "input": "hello"}),
        ),
        Limits::default(),
    )
    .unwrap();
    assert_eq!(e[0].endpoint, Endpoint::Embeddings);
}

#[test]
fn a_document_line_is_checked_as_a_document() {
    let doc = |id: &str, body: serde_json::Value| {
        serde_json::json!({"custom_id": id, "method": "POST", "url": "/v1/analyses", "body": body})
            .to_string()
    };
    let good =
        serde_json::from_str::<serde_json::Value>(&document::write("a.txt", b"1. Term.")).unwrap();
    let file = [
        doc("a", good.clone()),
        doc(
            "b",
            serde_json::json!({"filename": "b.pdf", "file_data": "%%%"}),
        ),
        doc("c", serde_json::json!({"file_data": "aGk="})),
    ]
    .join("\n");
    let errors = check(&file, Limits::default()).unwrap_err();
    let got: Vec<(u64, Option<&str>)> = errors
        .iter()
        .map(|e| (e.line, e.param.as_deref()))
        .collect();
    assert_eq!(
        got,
        [(2, Some("body.file_data")), (3, Some("body.filename"))]
    );
    let lines = check(&doc("a", good), Limits::default()).unwrap();
    assert_eq!(lines[0].endpoint, Endpoint::Analyses);
    assert_eq!(document::read(&lines[0].body).unwrap().bytes, b"1. Term.");
}
