//! A stream the client cuts is billed for what the upstream produced: read on to its usage
//! after the client left, or, past the bounds, estimated from what it produced and flagged.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::time::Duration;

use axum::body::Body;
use futures::StreamExt;
use sluice_gateway::walk::respond::READ_ON_FOR;
use tokio::time::sleep;
use tower::ServiceExt;

use crate::scripted::{End, PLAIN_USAGE, PRICE, Rig, rig};

/// Asks for a stream as `id`, reads its first `keep` chunks, and leaves.
async fn cut_after(r: &Rig, id: &str, keep: usize) {
    let req = http::Request::post("/v1/chat/completions")
        .header("content-type", "application/json")
        .header("x-request-id", id)
        .body(Body::from(
            r#"{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
        ))
        .unwrap();
    let resp = r.router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body().into_data_stream();
    for _ in 0..keep {
        body.next().await.unwrap().unwrap();
    }
    drop(body);
}

/// The bytes of the scripted upstream's first `frames` frames.
fn frame_bytes(frames: u32) -> u64 {
    (0..frames)
        .map(|i| format!("data: {{\"n\":{i}}}\n\n").len() as u64)
        .sum()
}

fn priced() -> Rig {
    let r = rig(false, |b| b.price("m", PRICE));
    *r.a.usage.lock() = Some(PLAIN_USAGE);
    r
}

#[tokio::test(start_paused = true)]
async fn a_cut_stream_is_read_on_to_its_usage_and_billed_by_it() {
    let r = priced();
    r.a.push_end(
        10,
        End::StreamWithUsage {
            frames: 20,
            gap: 100,
        },
    );
    cut_after(&r, "cut-1", 2).await;
    sleep(Duration::from_secs(5)).await;
    let rec = r.record("cut-1");
    assert_eq!(rec.status, 499, "the client left");
    assert_eq!(
        rec.usage,
        Some(PLAIN_USAGE),
        "the upstream's own usage, read on"
    );
    assert!(!rec.usage_estimated);
    assert_eq!(rec.cost_micros, Some(PRICE.cost(&PLAIN_USAGE).0));
    assert_eq!(rec.extra_cost_micros, 0, "the prompt is not billed twice");
    assert_eq!(rec.attempts[0].outcome, sluice_core::AttemptOutcome::Ok);
}

#[tokio::test(start_paused = true)]
async fn a_cut_stream_past_the_bound_is_estimated_from_what_it_produced() {
    let r = priced();
    // 100 ms a frame for far longer than sluice reads on.
    r.a.push_end(
        10,
        End::StreamWithUsage {
            frames: 100_000,
            gap: 100,
        },
    );
    cut_after(&r, "cut-2", 1).await;
    sleep(READ_ON_FOR + Duration::from_secs(5)).await;
    let rec = r.record("cut-2");
    assert_eq!(rec.status, 499);
    assert!(rec.usage_estimated, "flagged as estimated");
    let usage = rec.usage.unwrap();
    // About 300 frames (30 s at one each 100 ms) of 15 to 17 bytes were produced: some
    // 5 kB, 1,250 tokens.
    let tokens = |frames: u32| frame_bytes(frames).div_ceil(4);
    assert!(
        (tokens(280)..=tokens(320)).contains(&usage.completion_tokens),
        "{usage:?}"
    );
    let prompt_only = PRICE.cost(&sluice_core::Usage {
        prompt_tokens: usage.prompt_tokens,
        ..Default::default()
    });
    assert!(
        rec.cost_micros.unwrap() > prompt_only.0,
        "{:?}",
        rec.cost_micros
    );
    assert_eq!(rec.extra_cost_micros, 0);
}

#[tokio::test(start_paused = true)]
async fn a_cut_stream_that_ends_without_usage_is_estimated() {
    let r = priced();
    *r.a.usage.lock() = None;
    r.a.push_end(
        10,
        End::StreamWithUsage {
            frames: 50,
            gap: 10,
        },
    );
    cut_after(&r, "cut-3", 1).await;
    sleep(Duration::from_secs(5)).await;
    let rec = r.record("cut-3");
    assert_eq!(rec.status, 499);
    assert!(rec.usage_estimated);
    // Every byte the upstream produced, a token for four.
    assert_eq!(
        rec.usage.unwrap().completion_tokens,
        frame_bytes(50).div_ceil(4)
    );
}
