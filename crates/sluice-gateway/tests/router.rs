//! The automatic router through the gateway, in virtual time: its choice explained in
//! `x-sluice-route` and the record, feedback (and its refusals), implicit signals, fallbacks
//! to the other candidates, `/admin/router`, and what it learnt surviving a restart.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use bytes::Bytes;
use serde_json::{Value, json};
use sluice_economy::{InfoOverride, Micros, Price};
use sluice_gateway::GatewayBuilder;
use sluice_routing::auto::{Belief, RouterPolicy, Stored};
use sluice_tail::BreakerPolicy;

use crate::scripted::{End, PRICE, Rig, dep_on, get_json, ledgered, post, rig_over, scrape, send};

const CHEAP: Price = Price {
    input: Micros(200_000),
    cached_input: Micros(50_000),
    cache_write: Micros(200_000),
    output: Micros(800_000),
    published: None,
};

/// `auto` over `chat` (model `small` on `a`, a tenth of the price, a 1,000-token window) and
/// `big` (model `large` on `b`), exploring and revisiting nothing so each choice is the rule's.
fn routed(configure: impl FnOnce(GatewayBuilder) -> GatewayBuilder) -> Rig {
    routed_with(
        RouterPolicy {
            explore: 0.0,
            revisit: 0.0,
            ..RouterPolicy::default()
        },
        configure,
    )
}

fn routed_with(
    policy: RouterPolicy,
    configure: impl FnOnce(GatewayBuilder) -> GatewayBuilder,
) -> Rig {
    rig_over(vec![dep_on("a", "small")], |b| {
        let small = InfoOverride {
            context_window: Some(1_000),
            max_output: Some(500),
            ..InfoOverride::default()
        };
        configure(
            b.model("big", vec![dep_on("b", "large")])
                .price("small", CHEAP)
                .price("large", PRICE)
                .model_info("small", &small)
                .unwrap()
                .router("auto", &["chat".into(), "big".into()], policy),
        )
    })
}

fn body(max_tokens: u64) -> String {
    format!(
        r#"{{"model":"auto","messages":[{{"role":"user","content":"hi"}}],"max_tokens":{max_tokens}}}"#
    )
}

async fn feedback(r: &Rig, headers: &[(&str, &str)], body: Value) -> (u16, Value) {
    post(&r.router, "/v1/feedback", headers, body).await
}

/// The belief `/admin/router` shows for `task` and `group`.
async fn belief(r: &Rig, task: &str, group: &str) -> (f64, f64) {
    let v = get_json(&r.router, "/admin/router").await;
    let tasks = v["routers"][0]["tasks"].as_array().unwrap();
    let t = tasks.iter().find(|t| t["task"] == task).unwrap();
    let c = t["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["group"] == group)
        .unwrap();
    (c["alpha"].as_f64().unwrap(), c["beta"].as_f64().unwrap())
}

const QA: (&str, &str) = ("x-sluice-task", "qa");

#[tokio::test(start_paused = true)]
async fn the_choice_is_explained_and_feedback_teaches_it() {
    let r = routed(|b| b);
    let got = send(&r.router, &[QA], "r-0", &body(100)).await;
    assert_eq!(got.status, 200, "{}", got.text);
    // Knowing nothing of either, it takes the dearest.
    assert_eq!((r.a.calls(), r.b.calls()), (0, 1));
    let route = got.headers["x-sluice-route"].to_str().unwrap();
    assert!(
        route.starts_with("auto: none_clears_floor -> big (task qa, floor 0.80;"),
        "{route}"
    );
    assert!(
        route.contains("chat q=0.50") && route.contains("big q=0.50"),
        "{route}"
    );
    let rec = r.record("r-0");
    let choice = rec.route.as_ref().unwrap().auto.as_ref().unwrap();
    assert_eq!(choice.candidates.len(), 2);
    assert!(choice.candidates[0].cost.unwrap() < choice.candidates[1].cost.unwrap());

    let (status, v) = feedback(&r, &[], json!({"request_id": "r-0", "score": 1})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (&v["group"], &v["task"], &v["router"]),
        (&json!("big"), &json!("qa"), &json!("auto"))
    );
    assert_eq!(belief(&r, "qa", "big").await, (2.0, 1.0));
    // Once is all.
    let (status, v) = feedback(&r, &[], json!({"request_id": "r-0", "score": 0})).await;
    assert_eq!((status, &v["error"]["code"]), (409, &json!("conflict")));
    // An id no router answer has, and a score out of range, are refused with the field.
    let (status, v) = feedback(&r, &[], json!({"request_id": "nope", "score": 1})).await;
    assert_eq!(status, 404);
    assert_eq!(v["error"]["type"], "not_found_error");
    assert_eq!(v["error"]["param"], "request_id");
    let (status, v) = feedback(&r, &[], json!({"request_id": "r-0", "score": 2})).await;
    assert_eq!((status, &v["error"]["param"]), (400, &json!("score")));
    let page = scrape(&r.router).await;
    assert!(
        page.contains(r#"sluice_router_feedback_total{route="auto",signal="explicit"} 1"#),
        "{page}"
    );
    assert!(
        page.contains(
            r#"sluice_routed_requests_total{route="auto",rule="none_clears_floor",group="big"} 1"#
        ),
        "{page}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_budget_mode_states_its_value_in_the_route_header() {
    let policy = RouterPolicy {
        explore: 0.0,
        revisit: 0.0,
        ..RouterPolicy::for_mode(Some(0.02))
    };
    let r = routed_with(policy, |b| b);
    let got = send(&r.router, &[QA], "r-v", &body(100)).await;
    assert_eq!(got.status, 200, "{}", got.text);
    let route = got.headers["x-sluice-route"].to_str().unwrap();
    assert!(
        route.starts_with("auto: best_value -> ") && route.contains("(task qa, value $0.0200;"),
        "{route}"
    );
    assert!(!route.contains("floor"), "{route}");
}

#[tokio::test(start_paused = true)]
async fn another_tenants_answer_cannot_be_scored() {
    let r = routed(|b| b);
    let acme = ("x-sluice-tenant", "acme");
    assert_eq!(
        send(&r.router, &[QA, acme], "t-0", &body(10)).await.status,
        200
    );
    let (status, v) = feedback(
        &r,
        &[("x-sluice-tenant", "rival")],
        json!({"request_id": "t-0", "score": 0}),
    )
    .await;
    assert_eq!(
        (status, &v["error"]["type"], &v["error"]["code"]),
        (403, &json!("permission_error"), &json!("permission_denied"))
    );
    assert_eq!(belief(&r, "qa", "big").await, (1.0, 1.0), "nothing learnt");
    let (status, _) = feedback(&r, &[acme], json!({"request_id": "t-0", "score": 0})).await;
    assert_eq!(status, 200);
    assert_eq!(belief(&r, "qa", "big").await, (1.0, 2.0));
}

#[tokio::test(start_paused = true)]
async fn an_answer_cut_short_not_json_failed_or_asked_again_counts_as_bad() {
    let r = routed(|b| b);
    let cut = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"The clause"},"finish_reason":"length"}]}"#;
    *r.b.answer.lock() = Some(Bytes::from_static(cut.as_bytes()));
    assert_eq!(send(&r.router, &[QA], "l-0", &body(10)).await.status, 200);
    assert_eq!(
        belief(&r, "qa", "big").await,
        (1.0, 2.0),
        "scored bad at once"
    );
    // Explicit feedback replaces the implicit score.
    let (status, v) = feedback(&r, &[], json!({"request_id": "l-0", "score": 1})).await;
    assert_eq!((status, &v["replaced"]), (200, &json!("length")));
    assert_eq!(belief(&r, "qa", "big").await, (2.0, 1.0));

    let prose = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"Sure! Here it is"},"finish_reason":"stop"}]}"#;
    *r.b.answer.lock() = Some(Bytes::from_static(prose.as_bytes()));
    let json_asked = r#"{"model":"auto","messages":[{"role":"user","content":"as JSON"}],"response_format":{"type":"json_object"}}"#;
    assert_eq!(send(&r.router, &[QA], "j-0", json_asked).await.status, 200);
    // The same request again, soon after: the first answer did not do.
    let again = r#"{"model":"auto","messages":[{"role":"user","content":"once more"}]}"#;
    assert_eq!(send(&r.router, &[QA], "s-0", again).await.status, 200);
    assert_eq!(send(&r.router, &[QA], "s-1", again).await.status, 200);
    r.b.push_end(10, End::Fail);
    // `big` fails; the router's other candidate takes the request (a failed upstream is a
    // fallback's reason), and `big` is still scored for its error.
    let served = send(&r.router, &[QA], "f-0", &body(10)).await;
    assert_eq!(served.status, 200, "{}", served.text);
    assert_eq!(r.record("f-0").fallbacks[0].reason, "upstream_failed");
    let page = scrape(&r.router).await;
    for signal in ["length", "invalid_json", "retried", "upstream_error"] {
        assert!(
            page.contains(&format!(
                r#"sluice_router_feedback_total{{route="auto",signal="{signal}"}} 1"#
            )),
            "{signal}\n{page}"
        );
    }
    // Three bad answers (the length one was replaced), wherever the router sent them once
    // `big` was believed worse than `chat`.
    let bad = belief(&r, "qa", "big").await.1 + belief(&r, "qa", "chat").await.1 - 2.0;
    assert_eq!(bad.round(), 3.0);
}

/// `auto` already sure that `chat` does for `qa`.
fn taught(b: GatewayBuilder) -> GatewayBuilder {
    b.router_state(
        "auto",
        vec![Stored {
            task: "qa".into(),
            group: "chat".into(),
            belief: Belief {
                alpha: 60.0,
                beta: 2.0,
            },
            output: Some(50.0),
            cached: None,
        }],
    )
}

#[tokio::test(start_paused = true)]
async fn the_other_candidates_take_what_the_winner_cannot() {
    let policy = BreakerPolicy {
        min_calls: 5,
        ..BreakerPolicy::default()
    };
    let r = routed(|b| taught(b).breakers(policy));
    let got = send(&r.router, &[QA], "w-0", &body(100)).await;
    assert_eq!(got.status, 200);
    assert_eq!(
        (r.a.calls(), r.b.calls()),
        (1, 0),
        "the cheap one clears the floor"
    );
    assert_eq!(
        r.record("w-0").route.unwrap().rule.as_ref(),
        "cheapest_clearing_floor"
    );
    // Too long for the cheap one's window: the other candidate, with no call to the first.
    let got = send(&r.router, &[QA], "w-1", &body(2_000)).await;
    assert_eq!(got.status, 200, "{}", got.text);
    assert_eq!((r.a.calls(), r.b.calls()), (1, 1));
    let rec = r.record("w-1");
    assert_eq!(rec.fallbacks[0].reason, "context_window");
    assert_eq!(rec.model_group.as_deref(), Some("big"));
    // Every breaker of the cheap one open: served by the other, no client error.
    for i in 0..5 {
        r.a.push_end(10, End::Fail);
        send(&r.router, &[QA], &format!("f-{i}"), &body(10)).await;
    }
    let before = r.a.calls();
    for i in 0..5 {
        let got = send(&r.router, &[QA], &format!("o-{i}"), &body(10)).await;
        assert_eq!(got.status, 200, "{}", got.text);
    }
    assert_eq!(r.a.calls(), before, "nothing went to the open breaker");
}

// SQLite's pool keeps real time: this one runs on the wall clock (it waits for nothing).
#[tokio::test]
async fn what_it_learnt_survives_a_restart_through_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let open = || ledgered(&path);
    let (ledger, store) = open().await;
    let r = routed(|b| b.ledger(ledger, store));
    send(&r.router, &[QA], "p-0", &body(10)).await;
    feedback(&r, &[], json!({"request_id": "p-0", "score": 1})).await;
    assert_eq!(r.gw.save_routers().await.unwrap(), 1);
    assert_eq!(r.gw.save_routers().await.unwrap(), 0, "nothing new to save");
    let before = get_json(&r.router, "/admin/router").await;
    drop(r);

    let (ledger, store) = open().await;
    let stored = sluice_gateway::feedback::persist::load(&*store, "auto")
        .await
        .unwrap();
    assert_eq!(stored.len(), 2);
    let again = routed(|b| b.ledger(ledger, store).router_state("auto", stored));
    let after = get_json(&again.router, "/admin/router").await;
    let beliefs = |v: &Value| v["routers"][0]["tasks"].clone();
    let (b, a) = (beliefs(&before), beliefs(&after));
    for c in 0..2 {
        for k in ["alpha", "beta", "output_tokens"] {
            assert_eq!(a[0]["candidates"][c][k], b[0]["candidates"][c][k], "{k}");
        }
    }
    assert_eq!(belief(&again, "qa", "big").await, (2.0, 1.0));
}

#[tokio::test(start_paused = true)]
async fn the_model_list_names_routers_beside_groups() {
    let r = routed(|b| b);
    let v = get_json(&r.router, "/v1/models").await;
    let listed: Vec<(String, String)> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["id"].as_str().unwrap().to_string(),
                m["sluice_kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (id, kind) in [("chat", "group"), ("big", "group"), ("auto", "router")] {
        assert!(
            listed.contains(&(id.to_string(), kind.to_string())),
            "{id}: {listed:?}"
        );
    }
}
