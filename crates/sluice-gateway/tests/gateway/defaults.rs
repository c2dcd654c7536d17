//! sluice's defaults, from a configuration that sets no policy: a deployment that cannot be
//! reached, resets before any byte, or answers 502 or 503 is passed over for another of its
//! group, then for the group's fallbacks; 429s are retried within the same bounds as any
//! failure. And turning the defaults off gives a plain proxy back.

use std::net::SocketAddr;

use reqwest::Client;
use serde_json::Value;

use crate::support::{Upstream, body, closed_port, resetting, serve_toml, upstream};

fn provider(name: &str, addr: SocketAddr) -> String {
    format!("[providers.{name}]\nkind = \"openai\"\nbase_url = \"http://{addr}/v1\"\n")
}

async fn ask(client: &Client, url: &str, model: &str, id: &str) -> (u16, Value) {
    let resp = client
        .post(format!("{url}/v1/chat/completions"))
        .header("x-request-id", id)
        .json(&body(model, false))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// Asks `model` `n` times; the statuses.
async fn statuses(url: &str, model: &str, n: usize) -> Vec<u16> {
    let client = Client::new();
    let mut out = Vec::new();
    for i in 0..n {
        out.push(ask(&client, url, model, &format!("{model}-{i}")).await.0);
    }
    out
}

/// Providers `live` (the fake upstream), `dead` (a refused port) and `resetting` (closes
/// every connection before its first byte), and `extra` groups: the gateway's URL and the
/// fake upstream.
async fn gateway_with(extra: &str) -> (String, Upstream) {
    let live = upstream().await;
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[ledger]\nstore = \"off\"\n{}{}{}{extra}",
        provider("live", live.addr),
        provider("dead", closed_port().await),
        provider("resetting", resetting().await),
    );
    (serve_toml(&text).await, live)
}

/// A group over a dead deployment and a live one, configured no further.
const PAIR: &str = r#"
[models.pair]
deployments = [
  { provider = "dead", model = "ok" },
  { provider = "live", model = "ok" },
]
"#;

async fn gateway(extra: &str) -> String {
    let (url, live) = gateway_with(extra).await;
    // The fake upstream stays up for the test's length.
    std::mem::forget(live);
    url
}

#[tokio::test]
async fn a_dead_deployment_is_passed_over_without_configuration() {
    let url = gateway(PAIR).await;
    let got = statuses(&url, "pair", 20).await;
    assert!(got.iter().all(|s| *s == 200), "{got:?}");
}

#[tokio::test]
async fn a_dead_group_falls_back_without_a_breaker() {
    let url = gateway(
        r#"
[models.main]
deployments = [{ provider = "dead", model = "ok" }]
fallbacks = ["backup"]

[models.backup]
deployments = [{ provider = "live", model = "ok" }]
"#,
    )
    .await;
    let client = Client::new();
    let mut reasons = Vec::new();
    for i in 0..10 {
        let resp = client
            .post(format!("{url}/v1/chat/completions"))
            .json(&body("main", false))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "request {i}");
        let route = resp.headers()["x-sluice-route"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(route.starts_with("fallback main -> backup"), "{route}");
        reasons.push(route);
    }
    // The first falls back once its tries failed; within a few, the default breaker has
    // opened and the group is passed over at once.
    assert!(reasons[0].ends_with("(upstream_failed)"), "{reasons:?}");
    assert!(reasons[9].ends_with("(unavailable)"), "{reasons:?}");
}

#[tokio::test]
async fn a_502_a_503_and_a_reset_before_any_byte_are_tried_on_another_deployment() {
    let url = gateway(
        r#"
[models.gw502]
deployments = [
  { provider = "live", model = "bad-gateway", name = "sick" },
  { provider = "live", model = "ok", name = "well" },
]

[models.gw503]
deployments = [
  { provider = "live", model = "unavailable", name = "sick" },
  { provider = "live", model = "ok", name = "well" },
]

[models.reset]
deployments = [
  { provider = "resetting", model = "ok" },
  { provider = "live", model = "ok" },
]
"#,
    )
    .await;
    for model in ["gw502", "gw503", "reset"] {
        let got = statuses(&url, model, 12).await;
        assert!(got.iter().all(|s| *s == 200), "{model}: {got:?}");
    }
}

#[tokio::test]
async fn turned_off_the_defaults_leave_a_plain_proxy() {
    let url = gateway(&format!(
        "{PAIR}retry = false\nbreaker = false\nlimit = false\n"
    ))
    .await;
    let got = statuses(&url, "pair", 20).await;
    let failed = got.iter().filter(|s| **s == 502).count();
    assert!(
        failed > 2 && failed < 18,
        "about half go to the dead one: {got:?}"
    );
    assert!(got.iter().all(|s| *s == 200 || *s == 502), "{got:?}");
}

#[tokio::test]
async fn a_429_is_retried_no_more_than_any_failure() {
    // Two deployments that always answer 429 (retry-after 0); admission off, so no request
    // waits in a pause: what bounds the retries is max_attempts and the budget alone.
    let (url, live) = gateway_with(
        r#"
[models.limited]
deployments = [
  { provider = "live", model = "limited-now", name = "one" },
  { provider = "live", model = "limited-now", name = "two" },
]
limit = false
"#,
    )
    .await;
    let got = statuses(&url, "limited", 4).await;
    assert!(got.iter().all(|s| *s == 429), "{got:?}");
    assert_eq!(
        live.fake.bodies.lock().len(),
        12,
        "three attempts a request, the default max_attempts"
    );
}

#[tokio::test]
async fn a_429_whose_wait_outlasts_the_deadline_is_answered_at_once() {
    let url = gateway(
        r#"
[models.limited]
deployments = [{ provider = "live", model = "limited" }]
timeout = "1s"
"#,
    )
    .await;
    // The fake asks for 7 s: a retry would outlast the 1 s deadline, so none goes, and the
    // client hears the upstream's 429 at once.
    let client = Client::new();
    let started = tokio::time::Instant::now();
    let (status, v) = ask(&client, &url, "limited", "l-0").await;
    assert_eq!(status, 429, "{v}");
    assert!(started.elapsed() < std::time::Duration::from_millis(900));
}
