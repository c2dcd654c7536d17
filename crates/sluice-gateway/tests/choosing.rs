//! Choosing the model in virtual time: fallbacks between groups (context window, an
//! upstream's context-length refusal, open breakers, a quota) and task routes, through the
//! router in-process.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::sync::Arc;

use sluice_economy::{InfoOverride, Limits, Micros, Price};
use sluice_routing::rules::{Rule, TaskRoute};
use sluice_tail::BreakerPolicy;

use sluice_gateway::GatewayBuilder;

use crate::scripted::{End, Rig, ask_with, dep_on, rig_over, scrape, send};

/// `chat` on `a` (model `small`, a 1,000-token window), falling back to `big` on `b`.
fn with_fallback(configure: impl FnOnce(GatewayBuilder) -> GatewayBuilder) -> Rig {
    rig_over(vec![dep_on("a", "small")], |b| {
        let small = InfoOverride {
            context_window: Some(1_000),
            max_output: Some(500),
            ..InfoOverride::default()
        };
        configure(
            b.model("big", vec![dep_on("b", "large")])
                .model_info("small", &small)
                .unwrap()
                .fallbacks("chat", &["big".into()]),
        )
    })
}

fn body(max_tokens: u64) -> String {
    format!(
        r#"{{"model":"chat","messages":[{{"role":"user","content":"hi"}}],"max_tokens":{max_tokens}}}"#
    )
}

#[tokio::test(start_paused = true)]
async fn a_prompt_too_long_for_the_window_goes_to_the_fallback_without_an_upstream_call() {
    let r = with_fallback(|b| b);
    let got = send(&r.router, &[], "w-0", &body(2_000)).await;
    assert_eq!(got.status, 200, "{}", got.text);
    assert_eq!(
        (r.a.calls(), r.b.calls()),
        (0, 1),
        "nothing was sent to the small model"
    );
    let rec = r.record("w-0");
    assert_eq!(rec.fallbacks.len(), 1);
    assert_eq!(
        (
            &*rec.fallbacks[0].from,
            &*rec.fallbacks[0].to,
            rec.fallbacks[0].reason
        ),
        ("chat", "big", "context_window")
    );
    assert_eq!(rec.model_group.as_deref(), Some("big"));
    assert_eq!(
        got.headers["x-sluice-route"],
        "fallback chat -> big (context_window)"
    );
    let timing = got.headers["server-timing"].to_str().unwrap();
    assert!(
        timing.contains(r#"fallback;desc="chat -> big context_window""#),
        "{timing}"
    );
    // A request that fits stays where it was sent.
    let small = send(&r.router, &[], "w-1", &body(100)).await;
    assert_eq!(small.status, 200);
    assert_eq!((r.a.calls(), r.b.calls()), (1, 1));
    assert!(r.record("w-1").fallbacks.is_empty());
    let page = scrape(&r.router).await;
    assert!(
        page.contains(r#"sluice_fallbacks_total{group="chat",to="big",reason="context_window"} 1"#),
        "{page}"
    );
}

#[tokio::test(start_paused = true)]
async fn without_a_fallback_a_prompt_too_long_is_a_400_naming_the_sizes() {
    let r = rig_over(vec![dep_on("a", "small")], |b| {
        let small = InfoOverride {
            context_window: Some(1_000),
            max_output: Some(500),
            ..InfoOverride::default()
        };
        b.model_info("small", &small).unwrap()
    });
    let got = send(&r.router, &[], "n-0", &body(2_000)).await;
    assert_eq!(got.status, 400);
    assert_eq!(got.body["error"]["param"], "messages");
    assert_eq!(got.body["error"]["code"], "context_length_exceeded");
    assert_eq!(got.body["error"]["type"], "invalid_request_error");
    let message = got.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("max_tokens (2000)") && message.contains("(1000 tokens)"),
        "{message}"
    );
    assert_eq!(r.a.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_upstream_saying_the_prompt_is_too_long_sends_the_request_on_in_the_same_call() {
    let r = with_fallback(|b| b);
    let too_long = r#"{"error":{"message":"This model's maximum context length is 1000 tokens","code":"context_length_exceeded"}}"#;
    r.a.push_end(20, End::RejectWith(400, too_long));
    let got = send(&r.router, &[], "c-0", &body(100)).await;
    assert_eq!(got.status, 200, "{}", got.text);
    assert_eq!((r.a.calls(), r.b.calls()), (1, 1));
    assert_eq!(r.record("c-0").fallbacks[0].reason, "context_length");
    // Another refusal is the client's answer, as it was.
    r.a.push_end(20, End::Reject(400));
    let got = send(&r.router, &[], "c-1", &body(100)).await;
    assert_eq!(got.status, 400);
    assert_eq!(r.b.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn with_every_breaker_of_a_group_open_its_fallback_serves_with_no_client_error() {
    let policy = BreakerPolicy {
        min_calls: 5,
        ..BreakerPolicy::default()
    };
    let r = with_fallback(|b| b.breakers(policy));
    // The failures that open the breaker are served by the fallback too: a failed upstream
    // hands the request on once the group has made its tries.
    for i in 0..5 {
        r.a.push(10, false);
        let got = ask_with(&r.router, &[], &format!("f-{i}"), false).await;
        assert_eq!(got.status, 200);
        assert_eq!(
            r.record(&format!("f-{i}")).fallbacks[0].reason,
            "upstream_failed"
        );
    }
    let (calls, fallen) = (r.a.calls(), r.b.calls());
    for i in 0..10 {
        let got = send(&r.router, &[], &format!("o-{i}"), &body(100)).await;
        assert_eq!(got.status, 200, "{}", got.text);
    }
    assert_eq!(r.a.calls(), calls, "the open breaker kept calls off a");
    assert_eq!(r.b.calls() - fallen, 10);
    assert_eq!(r.record("o-9").fallbacks[0].reason, "unavailable");
}

#[tokio::test(start_paused = true)]
async fn a_tenant_short_of_credits_for_one_group_is_served_by_a_cheaper_fallback() {
    let dear = Price {
        input: Micros(100_000_000),
        cached_input: Micros(100_000_000),
        cache_write: Micros(100_000_000),
        output: Micros(100_000_000),
        published: None,
    };
    let cheap = Price {
        input: Micros(1_000_000),
        cached_input: Micros(1_000_000),
        cache_write: Micros(1_000_000),
        output: Micros(1_000_000),
        published: None,
    };
    let limits = Limits {
        credits: Some(Micros(5_000)),
        ..Limits::default()
    };
    let r = with_fallback(|b| {
        b.price("small", dear)
            .price("large", cheap)
            .tenant_limits("acme", limits)
    });
    let acme = [("x-sluice-tenant", "acme")];
    let got = send(&r.router, &acme, "q-0", &body(100)).await;
    assert_eq!(got.status, 200, "{}", got.text);
    assert_eq!((r.a.calls(), r.b.calls()), (0, 1));
    assert_eq!(r.record("q-0").fallbacks[0].reason, "quota");
    // The reservation at the dear price was given back: the credits cover the next call.
    let again = send(&r.router, &acme, "q-1", &body(100)).await;
    assert_eq!(again.status, 200, "{}", again.text);
}

fn auto() -> TaskRoute {
    TaskRoute {
        name: Arc::from("auto"),
        rules: vec![
            Rule {
                name: Arc::from("reviews"),
                group: Arc::from("big"),
                task: vec!["contract-review".into()],
                ..Rule::default()
            },
            Rule {
                name: Arc::from("tools"),
                group: Arc::from("big"),
                tools: Some(true),
                ..Rule::default()
            },
        ],
        default: Arc::from("chat"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_task_route_chooses_the_group_by_what_the_request_says_and_says_which_rule() {
    let r = rig_over(vec![dep_on("a", "m")], |b| {
        b.model("big", vec![dep_on("b", "m")]).task_route(auto())
    });
    // The route is a model name clients may send: the model list says so.
    let listed = crate::scripted::get_json(&r.router, "/v1/models").await;
    assert!(
        listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["id"] == "auto" && m["sluice_kind"] == "route"),
        "{listed}"
    );
    let ask_auto = |extra: &str| {
        format!(r#"{{"model":"auto","messages":[{{"role":"user","content":"hi"}}]{extra}}}"#)
    };
    let by_header = send(
        &r.router,
        &[("x-sluice-task", "contract-review")],
        "t-0",
        &ask_auto(""),
    )
    .await;
    assert_eq!(by_header.status, 200, "{}", by_header.text);
    assert_eq!(by_header.headers["x-sluice-route"], "auto: reviews -> big");
    let rec = r.record("t-0");
    let taken = rec.route.as_ref().unwrap();
    assert_eq!(
        (&*taken.rule, &*taken.group, taken.unknown_task),
        ("reviews", "big", false)
    );
    assert_eq!(rec.model_group.as_deref(), Some("big"));

    let by_metadata = send(
        &r.router,
        &[],
        "t-1",
        &ask_auto(r#","metadata":{"task":"contract-review"}"#),
    )
    .await;
    assert_eq!(
        by_metadata.headers["x-sluice-route"],
        "auto: reviews -> big"
    );
    let tools = send(
        &r.router,
        &[],
        "t-2",
        &ask_auto(r#","tools":[{"type":"function","function":{"name":"f"}}]"#),
    )
    .await;
    assert_eq!(tools.headers["x-sluice-route"], "auto: tools -> big");
    let plain = send(&r.router, &[], "t-3", &ask_auto("")).await;
    assert_eq!(plain.headers["x-sluice-route"], "auto: default -> chat");
    // A task no rule names goes by the default, and is counted.
    let odd = send(
        &r.router,
        &[("x-sluice-task", "poetry")],
        "t-4",
        &ask_auto(""),
    )
    .await;
    assert_eq!(odd.status, 200);
    assert!(r.record("t-4").route.as_ref().unwrap().unknown_task);
    assert_eq!((r.a.calls(), r.b.calls()), (2, 3));
    let page = scrape(&r.router).await;
    assert!(
        page.contains(r#"sluice_unknown_tasks_total{group="auto"} 1"#),
        "{page}"
    );
    assert!(
        page.contains(r#"sluice_routed_requests_total{route="auto",rule="reviews",group="big"} 2"#),
        "{page}"
    );
    // A malformed declared task is the client's error, named.
    let bad = send(
        &r.router,
        &[],
        "t-5",
        &ask_auto(r#","metadata":{"task":7}"#),
    )
    .await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.body["error"]["param"], "metadata.task");
    // Asking for a model that is neither names the routes too.
    let missing = send(
        &r.router,
        &[],
        "t-6",
        r#"{"model":"nope","messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await;
    assert_eq!(missing.status, 404);
    assert!(missing.text.contains("auto"), "{}", missing.text);
}
