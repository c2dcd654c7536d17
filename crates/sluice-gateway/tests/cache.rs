//! The exact answer cache in front of a scripted upstream, in virtual time: a repeated
//! request is answered without the upstream (as JSON or replayed as a stream), per tenant,
//! until its time to live runs out; `Cache-Control` can refresh or skip it; failures and
//! streams that cannot be rebuilt into a complete answer are not stored; a hit costs nothing, spends no quota, and is counted in the
//! metrics and the ledger with what it saved.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use sluice_core::{CacheLookup, Usage};
use sluice_economy::Limits;
use sluice_gateway::GatewayBuilder;
use sluice_tail::BreakerPolicy;
use tokio::time::sleep;

use crate::scripted::{
    End, Got, PRICE, Rig, admin, ask_with, get_json, ledgered, rig, scrape, send,
};

const USAGE: Usage = crate::scripted::PLAIN_USAGE;

const ANSWER: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Clause 4 is void."},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":100,"total_tokens":1100}}"#;

const ACME: [(&str, &str); 1] = [("x-sluice-tenant", "acme")];

fn cached(configure: impl FnOnce(GatewayBuilder) -> GatewayBuilder) -> Rig {
    let r = rig(false, |b| {
        configure(
            b.price("m", PRICE)
                .answer_cache(Duration::from_secs(60), 1 << 20),
        )
    });
    *r.a.usage.lock() = Some(USAGE);
    *r.a.answer.lock() = Some(Bytes::from_static(ANSWER.as_bytes()));
    r
}

fn header(got: &Got, name: &str) -> Option<String> {
    got.headers
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
}

#[tokio::test(start_paused = true)]
async fn a_repeated_request_is_answered_from_the_cache_without_the_upstream() {
    let r = cached(|b| b);
    let first = ask_with(&r.router, &ACME, "r-1", false).await;
    assert_eq!(first.status, 200);
    assert_eq!(header(&first, "x-sluice-cache").as_deref(), Some("miss"));
    assert_eq!(header(&first, "x-sluice-upstream").as_deref(), Some("a"));
    assert_eq!(r.a.calls(), 1);

    sleep(Duration::from_secs(5)).await;
    let again = ask_with(&r.router, &ACME, "r-2", false).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.text, first.text, "the stored answer, byte for byte");
    assert_eq!(header(&again, "x-sluice-cache").as_deref(), Some("hit"));
    assert_eq!(
        header(&again, "x-sluice-upstream").as_deref(),
        Some("none"),
        "no upstream asked"
    );
    assert_eq!(header(&again, "age").as_deref(), Some("5"));
    assert_eq!(header(&again, "x-request-id").as_deref(), Some("r-2"));
    assert!(
        again.timing().contains("cache;desc=\"hit\""),
        "{}",
        again.timing()
    );
    assert!(again.timing().contains("total;dur="), "{}", again.timing());
    assert_eq!(r.a.calls(), 1, "the upstream was not asked again");

    let bought = r.record("r-1");
    let served = r.record("r-2");
    assert_eq!(bought.cache, Some(CacheLookup::Miss));
    assert_eq!(served.cache, Some(CacheLookup::Hit));
    assert!(served.attempts.is_empty());
    assert_eq!(served.usage, None);
    assert_eq!(served.cost_micros, None, "a hit costs nothing");
    let cost = PRICE.cost(&USAGE).0;
    assert_eq!(bought.cost_micros, Some(cost));
    assert_eq!(served.cache_saved_micros, cost);

    let metrics = scrape(&r.router).await;
    for (result, n) in [("hit", 1), ("miss", 1)] {
        let line =
            format!("sluice_answer_cache_requests_total{{group=\"chat\",result=\"{result}\"}} {n}");
        assert!(metrics.contains(&line), "{line} in\n{metrics}");
    }
    let saved = format!("sluice_answer_cache_saved_micros_total{{group=\"chat\"}} {cost}");
    assert!(metrics.contains(&saved), "{saved} in\n{metrics}");
}

#[tokio::test(start_paused = true)]
async fn without_a_cache_nothing_is_looked_up() {
    let r = rig(false, |b| b);
    for id in ["n-1", "n-2"] {
        let got = ask_with(&r.router, &ACME, id, false).await;
        assert_eq!(got.status, 200);
        assert_eq!(header(&got, "x-sluice-cache"), None);
        assert_eq!(r.record(id).cache, None);
    }
    assert_eq!(r.a.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_key_is_the_tenant_the_group_and_every_field_but_their_order() {
    let r = cached(|b| b);
    let base = r#"{"model":"chat","messages":[{"role":"user","content":"hi"}],"temperature":0}"#;
    assert_eq!(send(&r.router, &ACME, "k-1", base).await.status, 200);
    let reordered =
        r#"{"temperature":0,"messages":[{"role":"user","content":"hi"}],"model":"chat"}"#;
    let got = send(&r.router, &ACME, "k-2", reordered).await;
    assert_eq!(header(&got, "x-sluice-cache").as_deref(), Some("hit"));
    assert_eq!(r.a.calls(), 1);

    let warmer = r#"{"model":"chat","messages":[{"role":"user","content":"hi"}],"temperature":1}"#;
    let got = send(&r.router, &ACME, "k-3", warmer).await;
    assert_eq!(header(&got, "x-sluice-cache").as_deref(), Some("miss"));
    assert_eq!(r.a.calls(), 2);

    let globex = [("x-sluice-tenant", "globex")];
    let got = send(&r.router, &globex, "k-4", base).await;
    assert_eq!(
        header(&got, "x-sluice-cache").as_deref(),
        Some("miss"),
        "tenants never share answers"
    );
    assert_eq!(r.a.calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn cache_control_skips_or_refreshes_the_cache() {
    let r = cached(|b| b);
    let no_store = [ACME[0], ("cache-control", "no-store")];
    let got = ask_with(&r.router, &no_store, "c-1", false).await;
    assert_eq!(header(&got, "x-sluice-cache").as_deref(), Some("bypass"));
    // `no-store` stored nothing: the next plain request misses.
    let got = ask_with(&r.router, &ACME, "c-2", false).await;
    assert_eq!(header(&got, "x-sluice-cache").as_deref(), Some("miss"));
    assert_eq!(r.a.calls(), 2);
    // `no-cache` is not served from the cache, but its fresh answer is stored.
    let no_cache = [ACME[0], ("cache-control", "no-cache")];
    let got = ask_with(&r.router, &no_cache, "c-3", false).await;
    assert_eq!(header(&got, "x-sluice-cache").as_deref(), Some("bypass"));
    assert_eq!(r.a.calls(), 3);
    let got = ask_with(&r.router, &ACME, "c-4", false).await;
    assert_eq!(header(&got, "x-sluice-cache").as_deref(), Some("hit"));
    assert_eq!(r.a.calls(), 3);
    assert_eq!(r.record("c-1").cache, Some(CacheLookup::Bypass));
}

#[tokio::test(start_paused = true)]
async fn an_answer_expires_after_its_time_to_live() {
    let r = cached(|b| b);
    assert_eq!(ask_with(&r.router, &ACME, "t-1", false).await.status, 200);
    sleep(Duration::from_secs(58)).await;
    let got = ask_with(&r.router, &ACME, "t-2", false).await;
    assert_eq!(header(&got, "x-sluice-cache").as_deref(), Some("hit"));
    sleep(Duration::from_secs(2)).await;
    let got = ask_with(&r.router, &ACME, "t-3", false).await;
    assert_eq!(header(&got, "x-sluice-cache").as_deref(), Some("miss"));
    assert_eq!(r.a.calls(), 2);
    // The fresh answer is stored in its turn.
    let got = ask_with(&r.router, &ACME, "t-4", false).await;
    assert_eq!(header(&got, "x-sluice-cache").as_deref(), Some("hit"));
    assert_eq!(r.a.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_stream_request_is_served_by_replaying_a_stored_answer() {
    let r = cached(|b| b);
    assert_eq!(ask_with(&r.router, &ACME, "s-1", false).await.status, 200);
    let body = r#"{"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}"#;
    let got = send(&r.router, &ACME, "s-2", body).await;
    assert_eq!(got.status, 200);
    assert_eq!(r.a.calls(), 1);
    assert_eq!(header(&got, "x-sluice-cache").as_deref(), Some("hit"));
    assert_eq!(
        header(&got, "content-type").as_deref(),
        Some("text/event-stream")
    );
    let events: Vec<&str> = got
        .text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").unwrap())
        .collect();
    assert_eq!(events.len(), 3, "{}", got.text);
    let chunk: Value = serde_json::from_str(events[0]).unwrap();
    assert_eq!(chunk["object"], "chat.completion.chunk");
    assert_eq!(chunk["choices"][0]["delta"]["content"], "Clause 4 is void.");
    assert_eq!(chunk["choices"][0]["finish_reason"], "stop");
    let usage: Value = serde_json::from_str(events[1]).unwrap();
    assert_eq!(usage["usage"]["total_tokens"], 1100);
    assert_eq!(events[2], "[DONE]");
    assert!(r.record("s-2").stream);
}

#[tokio::test(start_paused = true)]
async fn an_error_body_or_an_empty_answer_is_passed_on_and_never_stored() {
    for (n, body) in [
        r#"{"error":{"message":"overloaded","type":"server_error"}}"#,
        r#"{"id":"odd"}"#,
        r#"{"choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}]}"#,
    ]
    .into_iter()
    .enumerate()
    {
        let r = cached(|b| b);
        *r.a.answer.lock() = Some(Bytes::from_static(body.as_bytes()));
        let first = ask_with(&r.router, &ACME, &format!("o-{n}-1"), false).await;
        assert_eq!(first.text, body, "the client gets what came");
        for (id, stream) in [("2", false), ("3", true)] {
            let got = ask_with(&r.router, &ACME, &format!("o-{n}-{id}"), stream).await;
            assert_eq!(header(&got, "x-sluice-cache").as_deref(), Some("miss"), "{body}");
        }
        assert_eq!(r.a.calls(), 3, "nothing was stored: {body}");
    }
}

#[tokio::test(start_paused = true)]
async fn failures_and_streams_that_cannot_be_rebuilt_are_not_stored() {
    let r = cached(|b| b);
    r.a.push(10, false);
    assert_eq!(ask_with(&r.router, &ACME, "f-1", false).await.status, 502);
    let got = ask_with(&r.router, &ACME, "f-2", false).await;
    assert_eq!(got.status, 200);
    assert_eq!(header(&got, "x-sluice-cache").as_deref(), Some("miss"));
    assert_eq!(r.a.calls(), 2);

    let r = cached(|b| b);
    for id in ["f-3", "f-4"] {
        r.a.push_end(10, End::Stream { frames: 3, gap: 5 });
        let got = ask_with(&r.router, &ACME, id, true).await;
        assert_eq!(got.status, 200);
        assert!(got.text.contains("\"n\":2"), "{}", got.text);
    }
    // These frames are not chat-completion chunks: no answer can be rebuilt from them.
    assert_eq!(r.a.calls(), 2, "passed through, not stored");
}

#[tokio::test(start_paused = true)]
async fn a_hit_spends_no_quota() {
    let limits = Limits {
        rpm: Some(1),
        ..Limits::default()
    };
    let r = cached(|b| b.tenant_limits("acme", limits));
    assert_eq!(ask_with(&r.router, &ACME, "q-1", false).await.status, 200);
    for id in ["q-2", "q-3"] {
        let got = ask_with(&r.router, &ACME, id, false).await;
        assert_eq!(got.status, 200, "{}", got.text);
        assert_eq!(header(&got, "x-sluice-cache").as_deref(), Some("hit"));
    }
    // A request the cache cannot answer still meets the quota.
    let other = r#"{"model":"chat","messages":[{"role":"user","content":"other"}]}"#;
    assert_eq!(send(&r.router, &ACME, "q-4", other).await.status, 429);
}

#[tokio::test(start_paused = true)]
async fn a_hit_is_served_while_every_breaker_of_the_group_is_open() {
    let policy = BreakerPolicy {
        min_calls: 5,
        ..BreakerPolicy::default()
    };
    let r = cached(|b| b.breakers(policy));
    assert_eq!(ask_with(&r.router, &ACME, "b-0", false).await.status, 200);
    // Other requests fail until the breaker opens; then they are refused at once.
    let mut opened = false;
    for i in 1..=10 {
        r.a.push_end(10, End::Fail);
        let other = format!(r#"{{"model":"chat","messages":[{{"role":"user","content":"{i}"}}]}}"#);
        match send(&r.router, &ACME, &format!("b-{i}"), &other)
            .await
            .status
        {
            503 => {
                opened = true;
                break;
            }
            status => assert_eq!(status, 502),
        }
    }
    assert!(opened, "the breaker opened");
    let calls = r.a.calls();
    let got = ask_with(&r.router, &ACME, "b-7", false).await;
    assert_eq!(got.status, 200);
    assert_eq!(header(&got, "x-sluice-cache").as_deref(), Some("hit"));
    assert_eq!(r.a.calls(), calls);
}

// On the real clock: the SQLite pool's timeouts would fire at once in paused time.
#[tokio::test]
async fn the_ledger_counts_a_hit_at_no_cost_with_what_it_saved() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger, store) = ledgered(&dir.path().join("ledger.db")).await;
    let r = cached(|b| b.ledger(ledger, store.clone()));
    for id in ["l-1", "l-2", "l-3"] {
        assert_eq!(ask_with(&r.router, &ACME, id, false).await.status, 200);
    }
    let cost = PRICE.cost(&USAGE).0;
    let v = get_json(&r.router, "/admin/usage?group_by=tenant").await;
    let row = &v["rows"][0];
    assert_eq!(row["tenant"], "acme", "{v}");
    assert_eq!(row["requests"], 3);
    assert_eq!(row["cost_micros"], cost, "only the first call was bought");
    assert_eq!(row["tokens"]["prompt"], 1_000);
    assert_eq!(row["cache_hits"], 2);
    assert_eq!(row["cache_saved_micros"], 2 * cost);
}

#[tokio::test(start_paused = true)]
async fn the_admin_api_shows_the_cache_and_empties_it() {
    let r = cached(|b| b.admin_token("admin-secret"));
    assert_eq!(ask_with(&r.router, &ACME, "a-1", false).await.status, 200);
    let (status, v) = admin(
        &r.router,
        "GET",
        "/admin/cache",
        Some("admin-secret"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(v["enabled"], true);
    assert_eq!(v["entries"], 1);
    assert_eq!(v["max_bytes"], 1 << 20);
    assert_eq!(v["ttl_seconds"], 60.0);
    assert!(v["bytes"].as_u64().unwrap() > ANSWER.len() as u64, "{v}");

    let (status, _) = admin(&r.router, "DELETE", "/admin/cache", None, Value::Null).await;
    assert_eq!(status, 401, "the admin token is required");
    let (status, v) = admin(
        &r.router,
        "DELETE",
        "/admin/cache",
        Some("admin-secret"),
        Value::Null,
    )
    .await;
    assert_eq!((status, v["purged"].as_u64()), (200, Some(1)));
    let got = ask_with(&r.router, &ACME, "a-2", false).await;
    assert_eq!(header(&got, "x-sluice-cache").as_deref(), Some("miss"));
    assert_eq!(r.a.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn emptying_the_cache_needs_an_admin_token_configured_and_a_cache() {
    let r = cached(|b| b);
    let (status, v) = admin(&r.router, "DELETE", "/admin/cache", None, Value::Null).await;
    assert_eq!(status, 403);
    assert_eq!(v["error"]["type"], "permission_error");
    let r = rig(false, |b| b.admin_token("t"));
    let (status, v) = admin(&r.router, "GET", "/admin/cache", Some("t"), Value::Null).await;
    assert_eq!((status, v["enabled"].as_bool()), (200, Some(false)));
    let (status, v) = admin(&r.router, "DELETE", "/admin/cache", Some("t"), Value::Null).await;
    assert_eq!(status, 404);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[cache] enabled"),
        "{v}"
    );
}

/// Sends `n` identical requests at once (`stream` or not, with `headers`); their answers in
/// request order.
async fn together(
    r: &Rig,
    n: usize,
    prefix: &str,
    headers: &[(&str, &str)],
    stream: bool,
) -> Vec<Got> {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let router = r.router.clone();
            let headers: Vec<(String, String)> = headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let id = format!("{prefix}-{i}");
            tokio::spawn(async move {
                let h: Vec<(&str, &str)> = headers
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                ask_with(&router, &h, &id, stream).await
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[tokio::test(start_paused = true)]
async fn identical_requests_in_flight_wait_for_the_first_ones_answer() {
    let r = cached(|b| b);
    r.a.push(1_000, true);
    let got = together(&r, 5, "w", &ACME, false).await;
    assert_eq!(
        r.a.calls(),
        1,
        "one upstream call for five identical requests"
    );
    for g in &got {
        assert_eq!(g.status, 200);
        assert_eq!(g.text, got[0].text);
    }
    let outcomes: Vec<_> = (0..5)
        .map(|i| r.record(&format!("w-{i}")).cache.unwrap())
        .collect();
    assert_eq!(
        outcomes.iter().filter(|c| **c == CacheLookup::Miss).count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(
        outcomes
            .iter()
            .filter(|c| **c == CacheLookup::Coalesced)
            .count(),
        4
    );
    let waited = got
        .iter()
        .find(|g| header(g, "x-sluice-cache").as_deref() == Some("coalesced"))
        .unwrap();
    assert!(
        waited.timing().contains("cache;desc=\"coalesced\""),
        "{}",
        waited.timing()
    );
    let follower = (0..5)
        .map(|i| r.record(&format!("w-{i}")))
        .find(|rec| rec.cache == Some(CacheLookup::Coalesced))
        .unwrap();
    assert_eq!(follower.cost_micros, None);
    assert_eq!(follower.cache_saved_micros, PRICE.cost(&USAGE).0);
}

#[tokio::test(start_paused = true)]
async fn when_the_first_fails_those_waiting_ask_the_upstream() {
    let r = cached(|b| b);
    r.a.push(1_000, false);
    let got = together(&r, 3, "x", &ACME, false).await;
    let mut statuses: Vec<u16> = got.iter().map(|g| g.status).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 200, 502]);
    assert_eq!(r.a.calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn streams_do_not_wait_and_a_deadline_bounds_the_wait() {
    let r = cached(|b| b);
    for _ in 0..2 {
        r.a.push_end(1_000, End::Stream { frames: 2, gap: 5 });
    }
    let got = together(&r, 2, "s", &ACME, true).await;
    assert!(got.iter().all(|g| g.status == 200));
    assert_eq!(r.a.calls(), 2, "a stream goes upstream rather than wait");

    let r = cached(|b| b);
    r.a.push(1_000, true);
    let leader = {
        let router = r.router.clone();
        tokio::spawn(async move { ask_with(&router, &ACME, "d-0", false).await })
    };
    tokio::task::yield_now().await;
    sleep(Duration::from_millis(10)).await;
    let hurried = [ACME[0], ("x-sluice-timeout-ms", "200")];
    let late = ask_with(&r.router, &hurried, "d-1", false).await;
    assert_eq!(late.status, 504, "{}", late.text);
    assert_eq!(late.body["error"]["code"], "deadline_exceeded");
    assert_eq!(leader.await.unwrap().status, 200);
    assert_eq!(r.a.calls(), 1);
}
