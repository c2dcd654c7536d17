//! Money without Redis: three `sluice serve` processes on one Redis and one PostgreSQL
//! ledger, in front of a fast simulated provider. With Redis stopped, credits are reserved
//! and settled in PostgreSQL: every paying call is served, 400 requests at once over the
//! three pass a tenant's credits by at most one reservation, and Redis hears the spend on
//! its return. The run prints requests a second and latency with Redis and through
//! PostgreSQL, side by side (the figures in docs/cluster.md). An instance killed with calls in flight
//! (the defaults: a heartbeat each 5 s) has its holds released by the others within 30 s.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;

use std::time::Duration;

use harness::{Fleet, Redis, Sim};
use sluice_economy::keys::hash_hex;
use tokio::time::Instant;

const RICH: &str = "sk-money-rich";
const TIGHT: &str = "sk-money-tight";
/// The tight tenant's credits: about 30 calls at 35,000 micro-units each.
const TIGHT_CREDITS: f64 = 1.0;
/// The worst case one call reserves (see `cluster.rs`): the most spend may pass credits by.
const ONE_RESERVATION_MICROS: i64 = 80_000;

fn config(sim: u16) -> String {
    config_probing(sim, "probe_every = \"250ms\"\n")
}

/// The configuration, with `probe` in `[cluster]` (empty: the default).
fn config_probing(sim: u16, probe: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:1\"\nshutdown_grace = \"1s\"\n\
         [ledger]\nstore = \"postgres\"\nurl_env = \"SLUICE_LEDGER_URL\"\n\
         [cluster]\nredis_url_env = \"SLUICE_REDIS_URL\"\ncommand_timeout = \"500ms\"\n{probe}\
         [providers.up]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{sim}/up/v1\"\n\
         [prices.sim-model]\ninput = 1000.0\noutput = 2000.0\n\
         [models.chat]\ndeployments = [{{ provider = \"up\", model = \"sim-model\" }}]\n\
         [tenants.rich]\ncredits = 100000.0\n\
         [tenants.tight]\ncredits = {TIGHT_CREDITS}\n\
         [keys.rich]\ntenant = \"rich\"\nsha256 = \"{}\"\n\
         [keys.tight]\ntenant = \"tight\"\nsha256 = \"{}\"\n",
        hash_hex(RICH),
        hash_hex(TIGHT)
    )
}

/// `n` calls as `key`, `workers` at a time over `urls`: their statuses and latencies, and
/// the calls a second.
async fn load(
    urls: &[String],
    key: &'static str,
    n: usize,
    workers: usize,
    from: usize,
) -> (Vec<(u16, Duration)>, f64) {
    let client = reqwest::Client::new();
    let started = Instant::now();
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let (client, urls) = (client.clone(), urls.to_vec());
            tokio::spawn(async move {
                let mut out = Vec::new();
                for i in (w..n).step_by(workers) {
                    let url = &urls[i % urls.len()];
                    out.push(harness::chat(&client, url, key, from + i).await);
                }
                out
            })
        })
        .collect();
    let mut all = Vec::with_capacity(n);
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    (all, rate)
}

fn summary(what: &str, answers: &[(u16, Duration)], rate: f64) {
    let took: Vec<Duration> = answers.iter().map(|(_, d)| *d).collect();
    eprintln!(
        "{what}: {rate:.0} calls a second, P50 {:?}, P99 {:?}",
        harness::p50(took.clone()),
        harness::p99(took)
    );
}

/// What `url`'s `/admin/tenants` says of `tenant`'s account: its `field` (`spent_micros`,
/// `reserved_micros`).
async fn account(url: &str, tenant: &str, field: &str) -> i64 {
    let all: serde_json::Value = reqwest::get(format!("{url}/admin/tenants"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    all["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tenant"] == tenant)
        .and_then(|t| t["account"][field].as_i64())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_redis_down_credits_stay_exact_through_postgresql() {
    let dir = tempfile::tempdir().unwrap();
    let mut redis = Redis::start().await;
    let sim = Sim::start(
        dir.path(),
        "ttft_median = \"20ms\"\noutput_tokens_median = 10\nper_token = \"1ms\"\n",
    );
    let ledger = harness::postgres_database().await;
    let env = vec![
        ("SLUICE_LEDGER_URL".to_string(), ledger.clone()),
        ("SLUICE_REDIS_URL".to_string(), redis.url()),
    ];
    let mut fleet = Fleet::start(dir.path(), &config(sim.port), env).await;

    let (warm, _) = load(&fleet.urls, RICH, 60, 6, 0).await;
    assert!(warm.iter().all(|(s, _)| *s == 200));
    let (with_redis, rate_redis) = load(&fleet.urls, RICH, 600, 24, 100).await;
    assert!(with_redis.iter().all(|(s, _)| *s == 200));

    redis.stop();
    // Each instance finds Redis gone by a command's timeout, then goes to PostgreSQL.
    let client = reqwest::Client::new();
    for (i, url) in fleet.urls.iter().enumerate() {
        let (s, _) = harness::chat(&client, url, RICH, 5_000 + i).await;
        assert_eq!(
            s, 200,
            "instance {i} serves a paying tenant with Redis down"
        );
    }
    let (through_pg, rate_pg) = load(&fleet.urls, RICH, 600, 24, 10_000).await;
    let statuses: Vec<u16> = through_pg
        .iter()
        .map(|(s, _)| *s)
        .filter(|s| *s != 200)
        .collect();
    assert!(
        statuses.is_empty(),
        "paying calls not served with Redis down: {statuses:?}"
    );
    summary(
        "with Redis (3 instances, 24 at a time)",
        &with_redis,
        rate_redis,
    );
    summary("through PostgreSQL, Redis down", &through_pg, rate_pg);

    // 400 requests at once over the three against credits for about 30.
    let (tight, _) = load(&fleet.urls, TIGHT, 400, 400, 20_000).await;
    let served = tight.iter().filter(|(s, _)| *s == 200).count();
    let refused = tight.iter().filter(|(s, _)| *s == 402).count();
    let other: Vec<u16> = tight
        .iter()
        .map(|(s, _)| *s)
        .filter(|s| *s != 200 && *s != 402)
        .collect();
    eprintln!(
        "400 at once with Redis down: {served} served, {refused} refused for credits, others {other:?}"
    );
    assert_eq!(
        served + refused,
        400,
        "served or refused for credits, nothing else"
    );
    assert!(served >= 10, "the credits were spent: {served}");
    let spend = harness::ledger_spend(&ledger, "tight", served).await;
    let credits = (TIGHT_CREDITS * 1e6) as i64;
    assert!(
        spend <= credits + ONE_RESERVATION_MICROS,
        "spend {spend} passes credits {credits} by more than one reservation"
    );

    // Back: Redis hears what was spent through PostgreSQL (it came back empty: the ledger's
    // restore and the instances' owed spend fill it).
    redis.resume().await;
    let rich = harness::ledger_spend(&ledger, "rich", 60 + 600 + 3 + 600).await;
    let back = Instant::now();
    loop {
        let told = account(&fleet.urls[0], "tight", "spent_micros").await;
        if told >= spend {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "Redis was told {told} of the tight tenant's {spend}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let told = account(&fleet.urls[1], "rich", "spent_micros").await;
    eprintln!("after Redis returned: rich spent {told} told, {rich} in the ledger");
    assert!(fleet.all_alive(), "no instance died");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_instances_holds_are_released_within_thirty_seconds() {
    killed_with_calls_in_flight(false).await;
}

/// The same with Redis stopped first, so that the calls are held in PostgreSQL: there too
/// the others release them once the instance has been silent for three beats.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_instances_holds_in_postgresql_are_released_within_thirty_seconds() {
    killed_with_calls_in_flight(true).await;
}

/// Ten calls in flight on one instance, holding their worst case, when it is killed: the
/// holds are released, unspent, within 30 s (with Redis stopped first when `redis_down`).
async fn killed_with_calls_in_flight(redis_down: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut redis = Redis::start().await;
    let sim = Sim::start(
        dir.path(),
        "ttft_median = \"4s\"\noutput_tokens_median = 10\nper_token = \"1ms\"\n",
    );
    let env = vec![
        (
            "SLUICE_LEDGER_URL".to_string(),
            harness::postgres_database().await,
        ),
        ("SLUICE_REDIS_URL".to_string(), redis.url()),
    ];
    let mut fleet = Fleet::start(dir.path(), &config_probing(sim.port, ""), env).await;
    if redis_down {
        redis.stop();
        // Every instance finds it gone (its command timeout) before the calls.
        for (i, url) in fleet.urls.iter().enumerate() {
            let (status, _) = harness::chat(&reqwest::Client::new(), url, TIGHT, i).await;
            assert_eq!(status, 200, "a paying tenant served through PostgreSQL");
        }
    }
    // Ten calls in flight on instance 1, each holding its worst case.
    let victim = vec![fleet.urls[1].clone()];
    let calls = tokio::spawn(async move { load(&victim, RICH, 10, 10, 0).await });
    let started = Instant::now();
    while account(&fleet.urls[0], "rich", "reserved_micros").await == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "no call was held"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    fleet.kill(1);
    let killed = Instant::now();
    let held = account(&fleet.urls[0], "rich", "reserved_micros").await;
    eprintln!(
        "instance 1 killed with {held} micro-units held for its calls in flight (Redis down: \
         {redis_down})"
    );
    let _ = calls.await;
    loop {
        let left = account(&fleet.urls[2], "rich", "reserved_micros").await;
        if left == 0 {
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "{left} micro-units still held 30 s after the instance died"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!("its holds were released after {:?}", killed.elapsed());
    // Released unspent: none of those calls finished, and nothing was charged for them.
    assert_eq!(account(&fleet.urls[0], "rich", "spent_micros").await, 0);
}
