use super::*;

#[test]
fn openai_cached_tokens() {
    let u = from_openai(&json!({
        "prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": 1920}
    }))
    .unwrap();
    assert_eq!(
        (u.prompt_tokens, u.completion_tokens, u.cached_tokens),
        (2006, 300, 1920)
    );
}

#[test]
fn deepseek_hit_and_miss() {
    let u = from_openai(&json!({
        "prompt_tokens": 1000, "completion_tokens": 10,
        "prompt_cache_hit_tokens": 768, "prompt_cache_miss_tokens": 232
    }))
    .unwrap();
    assert_eq!((u.prompt_tokens, u.cached_tokens), (1000, 768));
    let no_prompt = from_openai(&json!({
        "completion_tokens": 10, "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36
    }))
    .unwrap();
    assert_eq!(no_prompt.prompt_tokens, 100);
}

#[test]
fn kimi_top_level_cached_tokens() {
    let u = from_openai(&json!({"prompt_tokens": 50, "completion_tokens": 5, "cached_tokens": 32}))
        .unwrap();
    assert_eq!(u.cached_tokens, 32);
}

#[test]
fn null_or_garbage_is_no_usage() {
    assert_eq!(from_openai(&Value::Null), None);
    assert_eq!(from_openai(&json!("x")), None);
}

#[test]
fn usage_text_reads_as_the_value_does() {
    for v in [
        json!({"prompt_tokens": 2006, "completion_tokens": 300,
               "prompt_tokens_details": {"cached_tokens": 1920}}),
        json!({"completion_tokens": 10, "prompt_cache_hit_tokens": 64,
               "prompt_cache_miss_tokens": 36}),
        json!({"prompt_tokens": 50, "completion_tokens": 5, "cached_tokens": 32,
               "completion_tokens_details": {"reasoning_tokens": 4}}),
        Value::Null,
        json!("x"),
        json!({"prompt_tokens": "many"}),
    ] {
        assert_eq!(from_openai_text(&v.to_string()), from_openai(&v), "{v}");
    }
    assert_eq!(
        from_openai_text(r#"{"prompt_tokens": 7, "completion_tokens": 1}"#)
            .map(|u| u.prompt_tokens),
        Some(7)
    );
}

#[test]
fn anthropic_counts_cache_reads_and_writes_as_prompt() {
    let mut u: AnthropicUsage = serde_json::from_value(json!({
        "input_tokens": 21, "cache_creation_input_tokens": 188086,
        "cache_read_input_tokens": 0, "output_tokens": 1
    }))
    .unwrap();
    u.merge(&AnthropicUsage {
        output_tokens: Some(393),
        ..AnthropicUsage::default()
    });
    let n = u.normalise();
    assert_eq!(n.prompt_tokens, 188107);
    assert_eq!(n.cache_write_tokens, 188086);
    assert_eq!(n.completion_tokens, 393);
    let back = to_openai_json(&n);
    assert_eq!(back["total_tokens"], 188500);
}

#[test]
fn reasoning_tokens_are_read_and_rendered() {
    let u = from_openai(&json!({
        "prompt_tokens": 40, "completion_tokens": 900,
        "completion_tokens_details": {"reasoning_tokens": 768}
    }))
    .unwrap();
    assert_eq!((u.completion_tokens, u.reasoning_tokens), (900, 768));
    assert_eq!(
        to_openai_json(&u)["completion_tokens_details"]["reasoning_tokens"],
        768
    );
}

#[test]
fn anthropic_reports_which_writes_are_kept_an_hour() {
    let u: AnthropicUsage = serde_json::from_value(json!({
        "input_tokens": 10, "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 0,
        "output_tokens": 5,
        "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000}
    }))
    .unwrap();
    let n = u.normalise();
    assert_eq!(
        (n.cache_write_tokens, n.cache_write_long_tokens),
        (3000, 2000)
    );
    let plain: AnthropicUsage =
        serde_json::from_value(json!({"input_tokens": 1, "cache_creation_input_tokens": 9}))
            .unwrap();
    assert_eq!(plain.normalise().cache_write_long_tokens, 0);
}
