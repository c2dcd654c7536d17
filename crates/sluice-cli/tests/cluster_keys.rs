//! Keys through the shared store: three `sluice serve` processes on one Redis and one
//! PostgreSQL ledger. With Redis stopped, a key revoked through one instance is refused by
//! the other two within 2 s (each reads the store's directory version every second), and
//! the admin answer says how far the revocation was told.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;

use std::time::Duration;

use harness::{Fleet, Redis, Sim};
use sluice_economy::keys::hash_hex;
use tokio::time::Instant;

const KEY: &str = "sk-cluster-keys";
const ADMIN: &str = "admin-secret";

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
        let ready: serde_json::Value = client
            .get(format!("{}/readyz", fleet.urls[1]))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
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
