//! Three `sluice serve` processes sharing Redis (Debian's `redis-server` on a private port),
//! in front of a simulated provider, for the state each instance reads on every request and
//! learns from what it sends:
//!
//! - the semantic cache: an answer bought through one instance is served by meaning through
//!   the others;
//! - prefix affinity: a document's later questions, sent to other instances, go to the
//!   deployment its first question went to;
//! - breakers' hints: once one instance's breaker of a failing deployment opens, the others
//!   pass it over without paying for their own failures first;
//! - cool-downs: a deployment that answered one instance 429 gets no hedge from the others
//!   for its quiet period;
//! - automatic routers: feedback for an answer one instance routed is taken by another, and
//!   every instance's beliefs count it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;

use std::time::Duration;

use harness::{Fleet, Redis, Sim};
use serde_json::{Value, json};
use sluice_economy::keys::hash_hex;

const KEY: &str = "sk-cluster-hints";

fn config(sim: u16, embedder: &str) -> String {
    let up = |name: &str| {
        format!(
            "[providers.{name}]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{sim}/{name}/v1\"\n"
        )
    };
    format!(
        "[server]\nlisten = \"127.0.0.1:1\"\nshutdown_grace = \"1s\"\nadmin_token_env = \"SLUICE_ADMIN_TOKEN\"\n\
         [ledger]\nstore = \"postgres\"\nurl_env = \"SLUICE_LEDGER_URL\"\n\
         [cluster]\nredis_url_env = \"SLUICE_REDIS_URL\"\ncommand_timeout = \"1s\"\nprobe_every = \"250ms\"\n\
         {}{}{}\
         [prices.sim-model]\ninput = 1.0\noutput = 2.0\n\
         [cache]\nenabled = true\n[cache.semantic]\nenabled = true\nmodel = \"{embedder}\"\n\
         [cache.semantic.groups.pair]\nenabled = false\n\
         [cache.semantic.groups.docs]\nenabled = false\n[cache.semantic.groups.tight]\nenabled = false\n\
         [models.chat]\ndeployments = [{{ provider = \"up\", model = \"sim-model\" }}]\n\
         [models.pair]\ndeployments = [{{ provider = \"up\", model = \"sim-model\" }}, {{ provider = \"down\", model = \"sim-model\" }}]\n\
         [models.docs]\ndeployments = [{{ provider = \"up\", model = \"sim-model\" }}, {{ provider = \"also\", model = \"sim-model\" }}]\n\
         affinity = {{ min_share = 0.5 }}\n\
         [models.tight]\ndeployments = [{{ provider = \"tight\", model = \"sim-model\" }}]\n\
         [routers.auto]\ncandidates = [\"pair\", \"docs\"]\n\
         [keys.k]\ntenant = \"acme\"\nsha256 = \"{}\"\n",
        up("up"),
        up("down"),
        up("also") + &up("tight"),
        hash_hex(KEY)
    )
}

/// One call: (status, the response's headers, its body).
async fn call(
    client: &reqwest::Client,
    url: &str,
    model: &str,
    content: &str,
    id: Option<&str>,
) -> (u16, reqwest::header::HeaderMap) {
    let mut req = client
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(KEY)
        .json(&json!({"model": model, "max_tokens": 20,
            "messages": [{"role": "user", "content": content}]}));
    if let Some(id) = id {
        req = req.header("x-request-id", id);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let _ = r.bytes().await;
    (status, headers)
}

fn header(h: &reqwest::header::HeaderMap, name: &str) -> String {
    h.get(name)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

/// What the simulator counts of its upstream `name`: `field` (`requests`, `rate_limited`).
async fn upstream_count(sim: u16, name: &str, field: &str) -> u64 {
    let v: Value = reqwest::get(format!("http://127.0.0.1:{sim}/stats"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["upstreams"][name][field].as_u64().unwrap()
}

/// Whether `url` keeps hedges off group `group`'s deployment after a 429.
async fn cooling(client: &reqwest::Client, url: &str, group: &str) -> bool {
    let v: Value = client
        .get(format!("{url}/admin/upstreams"))
        .bearer_auth("admin-secret-for-tests")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == group)
        .unwrap()["deployments"][0]["cooling_after_429"]
        .as_bool()
        .unwrap()
}

/// Router `auto`'s evidence summed over tasks and candidates, as `url` believes it.
async fn evidence(client: &reqwest::Client, url: &str) -> f64 {
    let v: Value = client
        .get(format!("{url}/admin/router"))
        .bearer_auth("admin-secret-for-tests")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["routers"][0]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["candidates"].as_array().unwrap().clone())
        .map(|c| c["alpha"].as_f64().unwrap() + c["beta"].as_f64().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn what_one_instance_learns_every_instance_uses() {
    let dir = tempfile::tempdir().unwrap();
    let redis = Redis::start().await;
    let fast = "ttft_median = \"20ms\"\noutput_tokens_median = 5\nper_token = \"1ms\"\n";
    let sim = Sim::start(
        dir.path(),
        &format!(
            "{fast}[upstreams.down]\napi = \"openai\"\n{fast}[upstreams.down.faults]\nerror_500 = 1.0\n\
             error_delay = \"5ms\"\n[upstreams.also]\napi = \"openai\"\n{fast}\
             [upstreams.tight]\napi = \"openai\"\n{fast}rpm = 1\nrpm_burst = 1\nrate_headers = false\n"
        ),
    );
    let embedder = std::env::var("SLUICE_EMBEDDER_DIR")
        .expect("SLUICE_EMBEDDER_DIR names the embedding model (scripts/test installs it)");
    let env = vec![
        (
            "SLUICE_LEDGER_URL".to_string(),
            harness::postgres_database().await,
        ),
        ("SLUICE_REDIS_URL".to_string(), redis.url()),
        (
            "SLUICE_ADMIN_TOKEN".to_string(),
            "admin-secret-for-tests".to_string(),
        ),
    ];
    let fleet = Fleet::start(dir.path(), &config(sim.port, &embedder), env).await;
    let client = reqwest::Client::new();
    let settle = || tokio::time::sleep(Duration::from_millis(400));

    // The semantic cache: bought through instance 0, served by meaning through 1 and 2.
    let (s, h) = call(
        &client,
        &fleet.urls[0],
        "chat",
        "What is a lien on a house?",
        None,
    )
    .await;
    assert_eq!((s, header(&h, "x-sluice-cache").as_str()), (200, "miss"));
    settle().await;
    let mut entries = Vec::new();
    for url in &fleet.urls[1..] {
        let (s, h) = call(&client, url, "chat", "what is a lien on a house", None).await;
        let served = header(&h, "x-sluice-cache");
        assert!(
            s == 200 && served.starts_with("semantic; entry="),
            "{url} did not serve by meaning the answer another instance bought: {s} {served}"
        );
        entries.push(served.split(';').nth(1).unwrap().to_string());
    }
    assert_eq!(
        entries[0], entries[1],
        "one entry, one id on every instance"
    );

    // Prefix affinity: each document's first question goes through instance 0; its later
    // questions, through 1 and 2, go where the first went.
    for doc in 0..6 {
        let body = format!("Document {doc}. ") + &"The parties agree to the terms. ".repeat(160);
        let (s, h) = call(
            &client,
            &fleet.urls[0],
            "docs",
            &format!("{body}Q: first?"),
            None,
        )
        .await;
        assert_eq!(s, 200);
        let first = header(&h, "x-sluice-upstream");
        settle().await;
        for (i, url) in fleet.urls[1..].iter().enumerate() {
            let (s, h) = call(&client, url, "docs", &format!("{body}Q: number {i}?"), None).await;
            assert_eq!(s, 200);
            assert_eq!(
                header(&h, "x-sluice-upstream"),
                first,
                "document {doc}'s question through {url} left the deployment holding its prefix"
            );
        }
    }

    // Breakers' hints: instance 0 opens its breaker of the failing deployment (five failures
    // in a row); then the others send it nothing.
    for i in 0..40 {
        call(&client, &fleet.urls[0], "pair", &format!("warm {i}"), None).await;
        if upstream_count(sim.port, "down", "requests").await >= 5 {
            break;
        }
    }
    assert!(upstream_count(sim.port, "down", "requests").await >= 5);
    settle().await;
    let before = upstream_count(sim.port, "down", "requests").await;
    for i in 0..40 {
        let (s, _) = call(
            &client,
            &fleet.urls[1 + i % 2],
            "pair",
            &format!("after {i}"),
            None,
        )
        .await;
        assert_eq!(s, 200);
    }
    assert_eq!(
        upstream_count(sim.port, "down", "requests").await,
        before,
        "instances 1 and 2 sent calls to a deployment instance 0 found broken"
    );

    // Cool-downs: the rate-limited deployment refuses instance 0's second call; every
    // instance then keeps hedges off it.
    let quick = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    for i in 0..2 {
        let _ = quick
            .post(format!("{}/v1/chat/completions", fleet.urls[0]))
            .bearer_auth(KEY)
            .json(&json!({"model": "tight", "max_tokens": 5,
                "messages": [{"role": "user", "content": format!("tight {i}")}]}))
            .send()
            .await;
    }
    assert!(
        upstream_count(sim.port, "tight", "rate_limited").await >= 1,
        "the provider refused a call"
    );
    settle().await;
    for url in &fleet.urls {
        assert!(
            cooling(&client, url, "tight").await,
            "{url} does not keep hedges off it"
        );
    }

    // Routers: an answer routed by instance 0 is scored through instance 1, and every
    // instance's beliefs count the score.
    let (s, _) = call(
        &client,
        &fleet.urls[0],
        "auto",
        "Route me",
        Some("routed-1"),
    )
    .await;
    assert_eq!(s, 200);
    settle().await;
    let before: Vec<f64> = {
        let mut v = Vec::new();
        for url in &fleet.urls {
            v.push(evidence(&client, url).await);
        }
        v
    };
    let r = client
        .post(format!("{}/v1/feedback", fleet.urls[1]))
        .bearer_auth(KEY)
        .json(&json!({"request_id": "routed-1", "score": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "feedback for another instance's answer");
    settle().await;
    for (url, b) in fleet.urls.iter().zip(before) {
        let after = evidence(&client, url).await;
        assert!(
            after > b + 0.5,
            "{url}'s router did not learn the score: evidence {b} -> {after}"
        );
    }
    // A second score, through yet another instance, is refused as a second score.
    let r = client
        .post(format!("{}/v1/feedback", fleet.urls[2]))
        .bearer_auth(KEY)
        .json(&json!({"request_id": "routed-1", "score": 0}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
}
