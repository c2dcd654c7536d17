use super::*;
use crate::limits::RateState;

fn plan(tokens: u32) -> AnswerPlan {
    AnswerPlan {
        ttft: Duration::from_millis(500),
        per_token: Duration::from_millis(10),
        tokens_per_chunk: 4,
        output_tokens: tokens,
        prompt_tokens: 2000,
        cached_tokens: 1024,
        mid_stream_stall: None,
        rate: RateState::default(),
        seq: 1,
        content: None,
    }
}

fn render(api: Api, stream: bool) -> Render {
    Render {
        api,
        model: "sim".into(),
        stream,
        include_usage: true,
        shape: crate::structured::Shape::Text,
    }
}

fn waits(steps: &[Step]) -> Duration {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Wait(d) => Some(*d),
            _ => None,
        })
        .sum()
}

#[test]
fn a_stream_takes_ttft_plus_decode_time() {
    let steps = answer(&plan(10), &render(Api::Openai, true));
    assert_eq!(steps[0], Step::Wait(Duration::from_millis(500)));
    // 10 tokens in chunks of 4: waits of 40 ms and 20 ms after the first chunk.
    assert_eq!(waits(&steps), Duration::from_millis(560));
    let frames: Vec<String> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Frame(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        })
        .collect();
    assert!(frames[0].contains("\"role\":\"assistant\""));
    assert!(frames.iter().any(|f| f.contains("\"cached_tokens\":1024")));
    assert_eq!(frames.last().unwrap(), "data: [DONE]\n\n");
}

#[test]
fn a_mid_stream_stall_sits_inside_the_stream() {
    let mut p = plan(20);
    p.mid_stream_stall = Some((10, Duration::from_secs(300)));
    let steps = answer(&p, &render(Api::Openai, true));
    assert!(waits(&steps) > Duration::from_secs(300));
    let first_frame = steps
        .iter()
        .position(|s| matches!(s, Step::Frame(_)))
        .unwrap();
    let stall = steps
        .iter()
        .position(|s| *s == Step::Wait(Duration::from_secs(300)))
        .unwrap();
    assert!(stall > first_frame, "the stream starts before it stalls");
}

#[test]
fn anthropic_streams_parse_with_the_anthropic_translator() {
    let steps = answer(&plan(9), &render(Api::Anthropic, true));
    let mut wire = Vec::new();
    for s in &steps {
        if let Step::Frame(b) = s {
            wire.extend_from_slice(b);
        }
    }
    let mut parser = sluice_providers::sse::SseParser::new();
    let mut events = Vec::new();
    parser.push(&wire, &mut events).unwrap();
    let mut t = sluice_providers::anthropic::StreamTranslator::new(true);
    let mut out = std::collections::VecDeque::new();
    for e in &events {
        t.event(e, &mut out).unwrap();
    }
    assert!(t.finished());
    let usage = out.iter().find_map(|e| match e {
        sluice_providers::StreamEvent::Usage(u) => Some(*u),
        _ => None,
    });
    assert_eq!(usage.unwrap().cached_tokens, 1024);
    assert_eq!(usage.unwrap().prompt_tokens, 2000);
}

#[test]
fn complete_bodies_translate() {
    let body = complete_body(&plan(5), &render(Api::Anthropic, false));
    let (_, u) = sluice_providers::anthropic::translate_response(&body).unwrap();
    assert_eq!(
        (u.prompt_tokens, u.completion_tokens, u.cached_tokens),
        (2000, 5, 1024)
    );
}

#[test]
fn a_read_answer_is_the_content_whole_and_streamed_in_pieces() {
    let mut p = plan(5);
    p.content = Some("The term is 3 years.".into());
    let body = complete_body(&p, &render(Api::Openai, false));
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "The term is 3 years."
    );
    let mut text = String::new();
    for s in answer(&p, &render(Api::Openai, true)) {
        if let Step::Frame(f) = s
            && let Some(json) = std::str::from_utf8(&f).unwrap().strip_prefix("data: ")
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(json.trim())
            && let Some(t) = v
                .pointer("/choices/0/delta/content")
                .and_then(|t| t.as_str())
        {
            text.push_str(t);
        }
    }
    assert_eq!(text, "The term is 3 years.");
}

#[test]
fn gemini_answers_parse_with_the_gemini_translator() {
    let body = complete_body(&plan(5), &render(Api::Gemini, false));
    let (_, u) = sluice_providers::gemini::translate_response(&body, "sim").unwrap();
    assert_eq!(
        (u.prompt_tokens, u.completion_tokens, u.cached_tokens),
        (2000, 5, 1024)
    );
    let steps = answer(&plan(9), &render(Api::Gemini, true));
    let mut wire = Vec::new();
    for s in &steps {
        if let Step::Frame(b) = s {
            assert!(
                b.ends_with(b"\r\n\r\n"),
                "Google's servers end events in CRLF pairs"
            );
            wire.extend_from_slice(b);
        }
    }
    let mut events = Vec::new();
    sluice_providers::sse::SseParser::new()
        .push(&wire, &mut events)
        .unwrap();
    let mut t = sluice_providers::gemini::StreamTranslator::new("sim".into(), true);
    let mut out = std::collections::VecDeque::new();
    for e in &events {
        t.event(e, &mut out).unwrap();
    }
    let text: String = out
        .iter()
        .filter_map(|e| match e {
            sluice_providers::StreamEvent::Frame(b) => {
                let s = std::str::from_utf8(b).ok()?;
                let v: serde_json::Value =
                    serde_json::from_str(s.trim().strip_prefix("data: ")?).ok()?;
                v["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_string)
            }
            _ => None,
        })
        .collect();
    assert_eq!(text, super::text(0, 9));
    let e: serde_json::Value =
        serde_json::from_slice(&error_body(Api::Gemini, 429, "slow down")).unwrap();
    assert_eq!(e["error"]["status"], "RESOURCE_EXHAUSTED");
}

#[test]
fn bedrock_answers_parse_with_the_bedrock_translator() {
    use futures::StreamExt;
    use sluice_providers::replay::{Api as Upstream, stream};
    let body = complete_body(&plan(5), &render(Api::Bedrock, false));
    let (_, u) = sluice_providers::bedrock::translate_response(&body, "sim", "m").unwrap();
    assert_eq!(
        (u.prompt_tokens, u.completion_tokens, u.cached_tokens),
        (2000, 5, 1024)
    );
    // The stream, in AWS's event stream, read by the adapter's own decoder and translator.
    let frames: Vec<Bytes> = answer(&plan(9), &render(Api::Bedrock, true))
        .into_iter()
        .filter_map(|s| match s {
            Step::Frame(b) => Some(b),
            _ => None,
        })
        .collect();
    let events: Vec<_> =
        futures::executor::block_on(stream(Upstream::Bedrock, frames, true).collect());
    let mut text = String::new();
    let mut usage = None;
    for e in events {
        match e.unwrap() {
            sluice_providers::StreamEvent::Frame(f) => {
                let s = String::from_utf8_lossy(&f).into_owned();
                if let Some(v) = s
                    .trim()
                    .strip_prefix("data: ")
                    .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
                {
                    text.push_str(v["choices"][0]["delta"]["content"].as_str().unwrap_or(""));
                }
            }
            sluice_providers::StreamEvent::Usage(u) => usage = Some(u),
            sluice_providers::StreamEvent::Native(_) => {}
        }
    }
    assert_eq!(text, super::text(0, 9));
    assert_eq!(usage.unwrap().cached_tokens, 1024);
}
