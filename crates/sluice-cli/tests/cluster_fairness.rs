//! One shared limit, served fairly between instances: three `sluice serve` processes with
//! the default configuration on one Redis, in front of a simulated provider of 10 requests a
//! second that announces its limit. Each instance gets a burst of batch calls at once; while
//! every instance still has calls waiting, each is granted within 20% of its share of the
//! demand (the share a single gateway, taking the same calls in one queue, would give it);
//! also when the provider answers bare 429s and the limit is one the cluster learnt.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;

use std::time::Duration;

use harness::{Fleet, Redis, Sim};
use tokio::time::Instant;

const KEY: &str = "sk-fairness";
/// The provider's limit, requests a second.
const LIMIT: u64 = 10;

/// `demand[i]` batch calls at once at instance `i`: when each answer came, per instance.
async fn bursts(fleet: &Fleet, demand: &[usize]) -> Vec<Vec<Duration>> {
    let client = reqwest::Client::new();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (i, n) in demand.iter().enumerate() {
        for j in 0..*n {
            let (client, url) = (client.clone(), fleet.urls[i].clone());
            tasks.push(tokio::spawn(async move {
                let (status, _) =
                    harness::chat_in(&client, &url, KEY, Some("batch"), i * 1_000 + j).await;
                assert_eq!(status, 200, "a batch call at instance {i}");
                (i, start.elapsed())
            }));
        }
    }
    let mut answered = vec![Vec::new(); demand.len()];
    for t in tasks {
        let (i, at) = t.await.unwrap();
        answered[i].push(at);
    }
    answered
}

/// Each instance's share of what was granted while every one still had calls waiting,
/// against its share of the demand.
fn shares(demand: &[usize], answered: &[Vec<Duration>]) -> Vec<(f64, f64)> {
    // Until the first instance ran out of calls.
    let until = answered
        .iter()
        .map(|a| a.iter().copied().max().unwrap())
        .min()
        .unwrap();
    let granted: Vec<usize> = answered
        .iter()
        .map(|a| a.iter().filter(|t| **t < until).count())
        .collect();
    let (all_granted, all_demand) = (
        granted.iter().sum::<usize>() as f64,
        demand.iter().sum::<usize>() as f64,
    );
    eprintln!(
        "demand {demand:?}: granted {granted:?} in the {until:?} every instance had calls waiting"
    );
    granted
        .iter()
        .zip(demand)
        .map(|(g, d)| (*g as f64 / all_granted, *d as f64 / all_demand))
        .collect()
}

/// Three instances from the defaults in front of a provider configured by `sim`: after a
/// few calls that tell the provider's limit (or bare 429s that make the cluster learn it),
/// bursts of uneven demand. The worst instance's distance from its share, as a fraction.
async fn worst_share(sim: &str) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let redis = Redis::start().await;
    let sim = Sim::start(dir.path(), sim);
    let env = vec![
        (
            "SLUICE_LEDGER_URL".to_string(),
            harness::postgres_database().await,
        ),
        ("SLUICE_REDIS_URL".to_string(), redis.url()),
    ];
    let fleet = Fleet::start(dir.path(), &harness::defaults_config(sim.port, KEY), env).await;
    // The provider's limit first heard of, as in steady traffic.
    let client = reqwest::Client::new();
    for i in 0..6 {
        harness::chat(&client, &fleet.urls[i % 3], KEY, 100_000 + i).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut worst: f64 = 0.0;
    for demand in [[40, 40, 40], [60, 30, 30]] {
        let answered = bursts(&fleet, &demand).await;
        for (i, (got, asked)) in shares(&demand, &answered).into_iter().enumerate() {
            eprintln!("  instance {i}: {got:.2} of the grants, {asked:.2} of the demand");
            worst = worst.max((got / asked - 1.0).abs());
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    worst
}

/// The simulated provider's limit, with or without telling it.
fn provider(tells: bool) -> String {
    format!(
        "ttft_median = \"100ms\"\noutput_tokens_median = 10\nper_token = \"2ms\"\n\
         rpm = {}\nrpm_burst = {LIMIT}\nrate_headers = {tells}\nretry_after = {tells}\n",
        LIMIT * 60
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instances_under_one_limit_are_granted_their_share_of_the_demand() {
    let worst = worst_share(&provider(true)).await;
    assert!(
        worst <= 0.2,
        "an instance was granted {:.0}% away from its share of the demand",
        worst * 100.0
    );
}

/// The same against a provider that answers 429 with no header at all: the limit the cluster
/// learnt from its 429s is shared as fairly as one the provider announces.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_limit_learnt_from_bare_429s_is_shared_by_demand_too() {
    let worst = worst_share(&provider(false)).await;
    assert!(
        worst <= 0.2,
        "under a learnt limit an instance was granted {:.0}% away from its share of the demand",
        worst * 100.0
    );
}
