//! Keys through the shared store: three `sluice serve` processes on one Redis and one
//! PostgreSQL ledger. With Redis stopped, a key revoked through one instance is refused by
//! the other two within 2 s (each reads the store's directory version every second), and
//! the admin answer says how far the revocation was told. With PostgreSQL stopped (a server
//! of the test's own), readiness and a metric name it and admin writes fail within a second.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;

use std::time::Duration;

use harness::{Fleet, Redis, Sim};
use sluice_economy::keys::hash_hex;
use tokio::time::Instant;

const KEY: &str = "sk-cluster-keys";
const ADMIN: &str = "admin-secret-for-tests";

fn config(sim: u16) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:1\"\nshutdown_grace = \"1s\"\nadmin_token_env = \"SLUICE_ADMIN_TOKEN\"\n\
         [ledger]\nstore = \"postgres\"\nurl_env = \"SLUICE_LEDGER_URL\"\n\
         [cluster]\nredis_url_env = \"SLUICE_REDIS_URL\"\ncommand_timeout = \"500ms\"\nprobe_every = \"250ms\"\n\
         [providers.up]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{sim}/up/v1\"\n\
         [prices.sim-model]\ninput = 1.0\noutput = 2.0\n\
         [models.chat]\ndeployments = [{{ provider = \"up\", model = \"sim-model\" }}]\n\
         [keys.k]\ntenant = \"acme\"\nsha256 = \"{}\"\n",
        hash_hex(KEY)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_revoked_while_redis_is_down_is_refused_everywhere_within_two_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let mut redis = Redis::start().await;
    let sim = Sim::start(
        dir.path(),
        "ttft_median = \"20ms\"\noutput_tokens_median = 5\nper_token = \"1ms\"\n",
    );
    let env = vec![
        (
            "SLUICE_LEDGER_URL".to_string(),
            harness::postgres_database().await,
        ),
        ("SLUICE_REDIS_URL".to_string(), redis.url()),
        ("SLUICE_ADMIN_TOKEN".to_string(), ADMIN.to_string()),
    ];
    let fleet = Fleet::start(dir.path(), &config(sim.port), env).await;
    let client = reqwest::Client::new();
    for url in &fleet.urls {
        assert_eq!(harness::chat(&client, url, KEY, 0).await.0, 200);
    }
    redis.stop();
    let revoked = client
        .delete(format!("{}/admin/keys/k", fleet.urls[0]))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status().as_u16(), 200);
    let answer: serde_json::Value = revoked.json().await.unwrap();
    let at = Instant::now();
    eprintln!("revoked with Redis down: {answer}");
    assert_eq!(answer["durable"], true);
    assert!(
        answer["told"]["redis"]
            .as_str()
            .is_some_and(|s| s.starts_with("not told")),
        "{answer}"
    );
    assert!(answer["told"]["postgres"].is_string(), "{answer}");
    assert_eq!(
        harness::chat(&client, &fleet.urls[0], KEY, 1).await.0,
        401,
        "refused at once where it was revoked"
    );
    for (i, url) in fleet.urls.iter().enumerate().skip(1) {
        let mut i_call = 2;
        let took = loop {
            let (status, _) = harness::chat(&client, url, KEY, i_call).await;
            i_call += 1;
            if status == 401 {
                break at.elapsed();
            }
            assert_eq!(status, 200, "instance {i}");
            assert!(
                at.elapsed() < Duration::from_secs(5),
                "instance {i} still serves the revoked key"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        eprintln!("instance {i} refused the revoked key after {took:?}");
        assert!(
            took <= Duration::from_secs(2),
            "instance {i} served the revoked key for {took:?}"
        );
    }
    // What readiness says of the directory while Redis is down: it still follows PostgreSQL.
    let started = Instant::now();
    loop {
        let ready = harness::ready(&client, &fleet.urls[1]).await;
        let said = ready["cluster"]["degraded"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|d| d["state"] == "directory")
            .map(|d| d["behaviour"].to_string());
        if let Some(said) = said {
            assert!(
                said.contains("read from PostgreSQL every second"),
                "{ready}"
            );
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "readiness never named Redis down: {ready}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether the instance at `url` counts rows in its journal (`sluice_ledger_journal` > 0).
async fn journal_gauge(client: &reqwest::Client, url: &str) -> bool {
    let metrics = client
        .get(format!("{url}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    metrics.lines().any(|l| {
        l.strip_prefix("sluice_ledger_journal ")
            .and_then(|v| v.trim().parse::<f64>().ok())
            .is_some_and(|v| v > 0.0)
    })
}

/// Waits (up to 5 s) until every instance's readiness says the ledger's store is `state`.
async fn ledger_becomes(client: &reqwest::Client, fleet: &Fleet, state: &str) -> Duration {
    let at = Instant::now();
    for url in &fleet.urls {
        loop {
            let r = harness::ready(client, url).await;
            if r["ledger"]["state"] == state {
                assert_eq!(r["ledger"]["store"], "PostgreSQL", "{r}");
                break;
            }
            assert!(
                at.elapsed() < Duration::from_secs(5),
                "{url} never said the store is {state}: {r}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    at.elapsed()
}

/// Makes key `name` through `url`: the status, the answer and how long it took.
async fn make_key(
    client: &reqwest::Client,
    url: &str,
    name: &str,
) -> (u16, serde_json::Value, Duration) {
    let at = Instant::now();
    let r = client
        .post(format!("{url}/admin/keys"))
        .bearer_auth(ADMIN)
        .json(&serde_json::json!({"name": name, "tenant": "acme"}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap(), at.elapsed())
}

/// PostgreSQL stopped mid-run (Redis up): every instance's `/readyz` names it unreachable
/// and `sluice_store_degraded{store="postgresql"}` is 1 within 2 s; an admin write fails
/// within about a second with 503 `store_unavailable` naming PostgreSQL, and makes nothing;
/// calls go on being served. Once it is back, readiness says so and admin writes work.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_postgresql_is_named_and_admin_writes_fail_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let redis = Redis::start().await;
    let mut pg = harness::postgres::OwnPostgres::start().await;
    let sim = Sim::start(
        dir.path(),
        "ttft_median = \"20ms\"\noutput_tokens_median = 5\nper_token = \"1ms\"\n",
    );
    let env = vec![
        ("SLUICE_LEDGER_URL".to_string(), pg.url()),
        ("SLUICE_REDIS_URL".to_string(), redis.url()),
        ("SLUICE_ADMIN_TOKEN".to_string(), ADMIN.to_string()),
    ];
    let fleet = Fleet::start(dir.path(), &config(sim.port), env).await;
    let client = reqwest::Client::new();
    ledger_becomes(&client, &fleet, "ok").await;
    pg.stop();
    let named = ledger_becomes(&client, &fleet, "unreachable").await;
    eprintln!("every instance named PostgreSQL unreachable within {named:?}");
    assert!(named <= Duration::from_secs(3), "{named:?}");
    let metrics = client
        .get(format!("{}/metrics", fleet.urls[1]))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("sluice_store_degraded{store=\"postgresql\"} 1")),
        "no degraded store in the metrics"
    );
    let (status, answer, took) = make_key(&client, &fleet.urls[0], "while-down").await;
    eprintln!("an admin write with PostgreSQL down: {status} after {took:?}: {answer}");
    assert_eq!(status, 503, "{answer}");
    assert_eq!(answer["error"]["code"], "store_unavailable", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("PostgreSQL")),
        "{answer}"
    );
    assert!(took < Duration::from_millis(1_500), "{took:?}");
    for (i, url) in fleet.urls.iter().enumerate() {
        assert_eq!(
            harness::chat(&client, url, KEY, i).await.0,
            200,
            "instance {i} serves while the ledger's store is down"
        );
    }
    // Rows of calls made meanwhile wait in each instance's journal on the disk.
    for i in 0..30 {
        let url = &fleet.urls[i % 3];
        assert_eq!(harness::chat(&client, url, KEY, 100 + i).await.0, 200);
    }
    let started = Instant::now();
    let journaled = loop {
        let mut n = 0;
        for url in &fleet.urls {
            n += harness::ready(&client, url).await["ledger"]["journal"]
                .as_u64()
                .unwrap_or(0);
        }
        if n >= 33 {
            break n;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "rows never reached the journals: {n}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    eprintln!("{journaled} rows in the instances' journals while PostgreSQL was down");
    let started = Instant::now();
    while !journal_gauge(&client, &fleet.urls[0]).await {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "sluice_ledger_journal never counted the rows"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    pg.resume().await;
    ledger_becomes(&client, &fleet, "ok").await;
    // Replayed once it answers: every call has its row, and the journals are empty.
    let pool = sqlx::PgPool::connect(&pg.url()).await.unwrap();
    let started = Instant::now();
    loop {
        let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sluice_ledger")
            .fetch_one(&pool)
            .await
            .unwrap();
        let mut left = 0;
        for url in &fleet.urls {
            left += harness::ready(&client, url).await["ledger"]["journal"]
                .as_u64()
                .unwrap_or(0);
        }
        if rows >= 33 && left == 0 {
            assert_eq!(rows, 33, "each call's row once");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{rows} rows in the ledger, {left} still in the journals"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, answer, _) = make_key(&client, &fleet.urls[0], "after").await;
    assert_eq!(status, 201, "{answer}");
    let listed: serde_json::Value = client
        .get(format!("{}/admin/keys", fleet.urls[0]))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = listed["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k["name"].as_str())
        .collect();
    assert!(
        !names.contains(&"while-down"),
        "a refused key was made: {names:?}"
    );
}
