//! Three `sluice serve` processes from one configuration, sharing Redis (Debian's
//! `redis-server`, started by the test on a private port) and a PostgreSQL ledger, in front
//! of a simulated provider, with a client spreading requests across them:
//!
//! - the seed's exercise: a rate-limited provider, interactive traffic and batch jobs on every
//!   instance: under 0.5% of calls meet a 429, interactive P99 stays within 1.5x of its
//!   unloaded P99, every item ends; without `[cluster]` the three pace to three times the
//!   limit and the provider refuses most of the excess;
//! - a tenant with credits for about 30 calls sends 1,000 requests at once over the three:
//!   spend passes its credits by at most one reservation; a tenant's quota of requests a
//!   minute holds within 2%;
//! - `kill -9` of one instance during a batch job: every item ends once, billed once;
//! - Redis stopped for 20 s mid-run: credits and quotas are reserved and settled in the
//!   PostgreSQL ledger instead, so the tenant with credits is served, and 300 requests at once
//!   over the instances still pass its credits by at most one reservation; tenants without
//!   limits are served, no request hangs, no process dies; Redis hears the spend on its
//!   return.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;

use std::time::Duration;

use harness::{Fleet, Redis, Sim};
use sluice_economy::keys::hash_hex;

/// One test at a time: each measures latencies and rates on a small machine.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const FREE: &str = "sk-cluster-free";
const METERED: &str = "sk-cluster-metered";
const QUOTA: &str = "sk-cluster-quota";
const PAYER: &str = "sk-cluster-payer";
/// The paying tenant's credits: about 200 calls, spent while Redis is down.
const PAYER_CREDITS: f64 = 7.0;
/// The metered tenant's credits: about 30 calls at 35,000 micro-units each.
const CREDITS: f64 = 1.0;
/// The worst case one call of the metered tenant reserves (15 prompt tokens at 1,000 and 20
/// output tokens at 2,000 micro-units, with the estimate's margin): the most spend may pass
/// the credits by.
const ONE_RESERVATION_MICROS: i64 = 80_000;
/// The quota tenant's requests per minute.
const QUOTA_RPM: u64 = 300;

fn config(sim: u16, rpm: u64, cluster: bool) -> String {
    let cluster = if cluster {
        "[cluster]\nredis_url_env = \"SLUICE_REDIS_URL\"\ncommand_timeout = \"1s\"\nprobe_every = \"250ms\"\n"
    } else {
        ""
    };
    let pace = if rpm > 0 {
        format!(", rpm = {rpm}")
    } else {
        String::new()
    };
    format!(
        "[server]\nlisten = \"127.0.0.1:1\"\nshutdown_grace = \"1s\"\n\
         [ledger]\nstore = \"postgres\"\nurl_env = \"SLUICE_LEDGER_URL\"\n{cluster}\
         [batches]\nlease = \"2s\"\nconcurrency = 16\n\
         [providers.up]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{sim}/up/v1\"\n\
         [prices.sim-model]\ninput = 1000.0\noutput = 2000.0\n\
         [models.chat]\ndeployments = [{{ provider = \"up\", model = \"sim-model\"{pace} }}]\n\
         [tenants.metered]\ncredits = {CREDITS}\n\
         [tenants.quota]\nrpm = {QUOTA_RPM}\n\
         [tenants.payer]\ncredits = {PAYER_CREDITS}\n\
         [keys.payer]\ntenant = \"payer\"\nsha256 = \"{}\"\n\
         [keys.free]\ntenant = \"free\"\nsha256 = \"{}\"\n\
         [keys.metered]\ntenant = \"metered\"\nsha256 = \"{}\"\n\
         [keys.quota]\ntenant = \"quota\"\nsha256 = \"{}\"\n",
        hash_hex(PAYER),
        hash_hex(FREE),
        hash_hex(METERED),
        hash_hex(QUOTA)
    )
}

async fn start_fleet(dir: &std::path::Path, sim: u16, rpm: u64, redis: Option<&Redis>) -> Fleet {
    let mut env = vec![(
        "SLUICE_LEDGER_URL".to_string(),
        harness::postgres_database().await,
    )];
    if let Some(r) = redis {
        env.push(("SLUICE_REDIS_URL".into(), r.url()));
    }
    Fleet::start(dir, &config(sim, rpm, redis.is_some()), env).await
}

/// Sends `n` calls at once as `key`, spread round-robin over the fleet.
async fn burst(urls: &[String], key: &'static str, n: usize) -> Vec<(u16, Duration)> {
    let client = reqwest::Client::new();
    let calls = (0..n).map(|i| {
        let (client, url) = (client.clone(), urls[i % urls.len()].clone());
        tokio::spawn(async move { harness::chat(&client, &url, key, i).await })
    });
    let mut out = Vec::with_capacity(n);
    for c in calls.collect::<Vec<_>>() {
        out.push(c.await.unwrap());
    }
    out
}

/// The latencies of `n` calls of the paying tenant, one at a time over `urls`, each served.
async fn paid_latencies(client: &reqwest::Client, urls: &[String], n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (s, took) = harness::chat(client, &urls[i % urls.len()], PAYER, 1_000 + i).await;
        assert_eq!(s, 200, "a paid call within its credits");
        out.push(took);
    }
    out
}

fn fast_upstream() -> &'static str {
    "ttft_median = \"20ms\"\noutput_tokens_median = 10\nper_token = \"1ms\"\n"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn credits_and_quotas_hold_across_three_instances() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let redis = Redis::start().await;
    let sim = Sim::start(dir.path(), fast_upstream());
    let fleet = start_fleet(dir.path(), sim.port, 0, Some(&redis)).await;
    let ledger = fleet_ledger(&fleet);

    // Credits: 1,000 requests at once over the three.
    let answers = burst(&fleet.urls, METERED, 1_000).await;
    let ok = answers.iter().filter(|(s, _)| *s == 200).count();
    let refused = answers.iter().filter(|(s, _)| *s == 402).count();
    let mut statuses: Vec<u16> = answers.iter().map(|(s, _)| *s).collect();
    statuses.sort_unstable();
    statuses.dedup();
    eprintln!("credits: {ok} served, {refused} refused; statuses {statuses:?}");
    assert_eq!(
        ok + refused,
        1_000,
        "every call is served or refused for credits"
    );
    // About 30 calls fit the credits at what they cost; how many are served depends on how
    // many settle while the burst still arrives. At the least, the calls whose worst case
    // fits at once (1,000,000 / 80,000 = 12) are served.
    let fit_at_worst = (CREDITS * 1e6) as usize / ONE_RESERVATION_MICROS as usize;
    assert!(
        (fit_at_worst..=40).contains(&ok),
        "between {fit_at_worst} and about 30 calls fit the credits: {ok}"
    );
    let spend = harness::ledger_spend(&ledger, "metered", ok).await;
    let credits = (CREDITS * 1e6) as i64;
    assert!(
        spend <= credits + ONE_RESERVATION_MICROS,
        "spend {spend} passes credits {credits} by more than one reservation"
    );

    // Quota: 450 requests a minute's quota of 300 cannot all pass, on any instance.
    let start = tokio::time::Instant::now();
    let answers = burst(&fleet.urls, QUOTA, 450).await;
    let elapsed = start.elapsed().as_secs_f64();
    let ok = answers.iter().filter(|(s, _)| *s == 200).count() as f64;
    let over = answers.iter().filter(|(s, _)| *s == 429).count() as f64;
    assert_eq!(ok + over, 450.0);
    // A minute's burst, plus what refilled while the burst was sent.
    let expected = QUOTA_RPM as f64 * (1.0 + elapsed / 60.0);
    assert!(
        (ok - expected).abs() <= 0.02 * QUOTA_RPM as f64 + 1.0,
        "{ok} passed; the quota allows {expected:.1} in {elapsed:.2} s"
    );
}

/// The ledger URL the fleet was started with.
fn fleet_ledger(fleet: &Fleet) -> String {
    fleet.env_var("SLUICE_LEDGER_URL")
}

/// The seed's exercise, on `rpm`: interactive calls over the fleet while a job runs on each
/// instance. (share of calls the provider refused, interactive P99, items done, interactive
/// calls not served).
async fn exercise(
    fleet: &Fleet,
    sim: &Sim,
    items: usize,
    for_at_most: Duration,
) -> (f64, Duration, u64, usize) {
    let jobs: Vec<(usize, String)> = {
        let mut v = Vec::new();
        for (i, url) in fleet.urls.iter().enumerate() {
            v.push((
                i,
                harness::submit(url, FREE, items, &format!("job{i}")).await,
            ));
        }
        v
    };
    let client = reqwest::Client::new();
    let mut interactive = Vec::new();
    let start = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut i = 0;
    let mut pending = Vec::new();
    let mut done = 0;
    while start.elapsed() < for_at_most {
        tick.tick().await;
        let (client, url) = (client.clone(), fleet.urls[i % 3].clone());
        pending.push(tokio::spawn(async move {
            harness::chat(&client, &url, FREE, i).await
        }));
        i += 1;
        if i % 8 == 0 {
            done = 0;
            for (g, id) in &jobs {
                if let Some(j) = harness::job(&fleet.urls[*g], FREE, id).await {
                    done += j["request_counts"]["completed"].as_u64().unwrap_or(0)
                        + j["request_counts"]["failed"].as_u64().unwrap_or(0);
                }
            }
            if done as usize == 3 * items {
                break;
            }
        }
    }
    let mut failed = 0;
    for p in pending {
        let (status, took) = p.await.unwrap();
        failed += usize::from(status != 200);
        interactive.push(took);
    }
    let s = sim.stats().await;
    let refused = s["rate_limited"].as_f64().unwrap() / s["requests"].as_f64().unwrap().max(1.0);
    (refused, harness::p99(interactive), done, failed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_seeds_exercise_keeps_one_provider_limit_across_three_instances() {
    let _one = SERIAL.lock().await;
    let rpm = 1_200;
    let upstream = format!(
        "ttft_median = \"150ms\"\nttft_sigma = 0.2\noutput_tokens_median = 20\nper_token = \"3ms\"\n\
         rpm = {rpm}\nrpm_burst = 20\nrate_headers = false\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let redis = Redis::start().await;
    let sim = Sim::start(dir.path(), &upstream);
    let fleet = start_fleet(dir.path(), sim.port, rpm, Some(&redis)).await;
    // Unloaded: interactive calls one after another.
    let client = reqwest::Client::new();
    let mut alone = Vec::new();
    for i in 0..30 {
        let (s, took) = harness::chat(&client, &fleet.urls[i % 3], FREE, i).await;
        assert_eq!(s, 200);
        alone.push(took);
    }
    let unloaded = harness::p99(alone);
    let (refused, loaded, done, failed) =
        exercise(&fleet, &sim, 100, Duration::from_secs(60)).await;
    assert_eq!(failed, 0, "every interactive call is served");
    eprintln!(
        "cluster on: {:.3}% refused, interactive p99 {loaded:?} (unloaded {unloaded:?}), {done} items",
        refused * 100.0
    );
    assert_eq!(done, 300, "every batch item ends");
    assert!(
        refused < 0.005,
        "{:.2}% of calls met a 429",
        refused * 100.0
    );
    assert!(
        loaded.as_secs_f64() <= 1.5 * unloaded.as_secs_f64(),
        "interactive P99 {loaded:?} against {unloaded:?} unloaded"
    );
    drop(fleet);
    drop(sim);

    // The same without [cluster]: each instance paces to the whole limit.
    let sim = Sim::start(dir.path(), &upstream);
    let fleet = start_fleet(dir.path(), sim.port, rpm, None).await;
    let (refused, _, _, _) = exercise(&fleet, &sim, 100, Duration::from_secs(8)).await;
    eprintln!("cluster off: {:.1}% refused", refused * 100.0);
    assert!(
        refused > 0.2,
        "without a cluster the provider refuses the excess: {:.1}%",
        refused * 100.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_instance_killed_mid_batch_and_redis_stopped_lose_nothing() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut redis = Redis::start().await;
    let sim = Sim::start(
        dir.path(),
        "ttft_median = \"300ms\"\noutput_tokens_median = 10\nper_token = \"5ms\"\n",
    );
    let mut fleet = start_fleet(dir.path(), sim.port, 0, Some(&redis)).await;
    let ledger = fleet_ledger(&fleet);

    // kill -9 of one instance while every instance runs items of the job.
    let id = harness::submit(&fleet.urls[0], FREE, 90, "doc").await;
    harness::until_done(&fleet.urls[0], FREE, &id, 20).await;
    fleet.kill(1);
    let j = harness::until_ended(&fleet.urls[0], FREE, &id, Duration::from_secs(90)).await;
    assert_eq!(j["status"], "completed", "{j}");
    assert_eq!(j["request_counts"]["completed"], 90, "{j}");
    let pool = sqlx::PgPool::connect(&ledger).await.unwrap();
    let (rows, items): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), COUNT(DISTINCT batch_item) FROM sluice_ledger WHERE batch_item IS NOT NULL",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((rows, items), (90, 90), "each item billed once");

    // Redis stopped for 20 s while both kinds of tenant call.
    let live: Vec<String> = vec![fleet.urls[0].clone(), fleet.urls[2].clone()];
    let client = reqwest::Client::new();
    // Some spend first: a Redis that comes back empty must not give it back.
    for i in 0..5 {
        let (s, _) = harness::chat(&client, &live[i % 2], METERED, i).await;
        assert_eq!(s, 200);
    }
    let spent_before = harness::ledger_spend(&ledger, "metered", 5).await;
    assert!(spent_before > 0);
    let up = paid_latencies(&client, &live, 20).await;
    redis.stop();
    // The first calls find Redis gone by its command timeout; then the PostgreSQL path.
    for i in 0..4 {
        let (s, _) = harness::chat(&client, &live[i % 2], PAYER, i).await;
        assert_eq!(s, 200, "a paying tenant is served while only Redis is down");
    }
    let down = paid_latencies(&client, &live, 20).await;
    eprintln!(
        "a paid call, one at a time: P50 {:?} P99 {:?} with Redis; P50 {:?} P99 {:?} \
         through PostgreSQL",
        harness::p50(up.clone()),
        harness::p99(up),
        harness::p50(down.clone()),
        harness::p99(down)
    );
    // What is left of the credits, by 300 requests at once over both live instances.
    let started = tokio::time::Instant::now();
    let answers = burst(&live, PAYER, 300).await;
    let took = started.elapsed().as_secs_f64();
    let ok = answers.iter().filter(|(s, _)| *s == 200).count();
    let refused = answers.iter().filter(|(s, _)| *s == 402).count();
    eprintln!(
        "with Redis down, 300 paid requests at once: {ok} served, {refused} refused for \
         credits, in {took:.2} s ({:.0} a second)",
        300.0 / took
    );
    assert_eq!(
        ok + refused,
        300,
        "served or refused for credits, nothing else"
    );
    let served = 4 + 40 + ok;
    let spend = harness::ledger_spend(&ledger, "payer", served).await;
    let credits = (PAYER_CREDITS * 1e6) as i64;
    assert!(
        spend <= credits + ONE_RESERVATION_MICROS,
        "spend {spend} passes credits {credits} by more than one reservation with Redis down"
    );
    let start = tokio::time::Instant::now();
    let (mut free_ok, mut metered_ok, mut i) = (0, 0, 0);
    while start.elapsed() < Duration::from_secs(20) {
        let url = &live[i % 2];
        let (s, took) = harness::chat(&client, url, FREE, i).await;
        assert!(
            took < Duration::from_secs(5),
            "a call hung {took:?} with Redis down"
        );
        free_ok += usize::from(s == 200);
        let (s, took) = harness::chat(&client, url, METERED, i).await;
        assert!(
            took < Duration::from_secs(5),
            "a call hung {took:?} with Redis down"
        );
        // Served through PostgreSQL until its credits are spent, then refused for them.
        assert!(s == 402 || s == 200, "metered call with Redis down: {s}");
        metered_ok += usize::from(s == 200);
        i += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Each turn is two calls of a 300 ms upstream and a 200 ms pause: about 20 in 20 s now
    // that the paying tenant is served through PostgreSQL (503 at once before).
    assert!(i >= 10, "calls kept being answered: {i}");
    assert_eq!(
        free_ok, i,
        "tenants without limits are served at the local share"
    );
    let metered_spend = harness::ledger_spend(&ledger, "metered", 5 + metered_ok).await;
    assert!(
        metered_spend <= (CREDITS * 1e6) as i64 + ONE_RESERVATION_MICROS,
        "{metered_spend}"
    );
    let ready: serde_json::Value = reqwest::get(format!("{}/readyz", live[0]))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["cluster"]["redis"], "unreachable", "{ready}");
    let metrics = reqwest::get(format!("{}/metrics", live[0]))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("sluice_cluster_degraded{state=\"budgets\"} 1"),
        "{metrics}"
    );
    redis.resume().await;
    let back = tokio::time::Instant::now();
    loop {
        let (s, _) = harness::chat(&client, &live[0], METERED, 0).await;
        let ready: serde_json::Value = reqwest::get(format!("{}/readyz", live[0]))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        // Its credits are spent: served means refused for them, by Redis again.
        if s == 402 && ready["cluster"]["redis"] != "unreachable" {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "no full service 10 s after Redis returned"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The restarted Redis lost every account; its spend came back from the ledger, and what
    // was spent through PostgreSQL was told to it.
    let spent: i64 = loop {
        let all: serde_json::Value = reqwest::get(format!("{}/admin/tenants", live[1]))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let t = all["tenants"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["tenant"] == "metered")
            .unwrap()
            .clone();
        let spent = t["account"]["spent_micros"].as_i64().unwrap_or(0);
        if back.elapsed() > Duration::from_secs(10) {
            eprintln!("last seen: {t}");
        }
        if spent >= metered_spend || back.elapsed() > Duration::from_secs(10) {
            break spent;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        spent >= metered_spend,
        "spend {spent} after Redis came back empty; the ledger says {metered_spend}"
    );
    assert!(fleet.all_alive(), "no instance died");
}

/// The cache header of one call to `url` asking `question`.
async fn cached(client: &reqwest::Client, url: &str, question: &str) -> String {
    let r = client
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(FREE)
        .json(&serde_json::json!({"model": "chat", "max_tokens": 20,
            "messages": [{"role": "user", "content": question}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.headers()
        .get("x-sluice-cache")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_answer_bought_by_one_instance_is_served_by_all() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let redis = Redis::start().await;
    let sim = Sim::start(dir.path(), fast_upstream());
    let config = format!("{}[cache]\nenabled = true\n", config(sim.port, 0, true)).replacen(
        "[server]\n",
        "[server]\nadmin_token_env = \"SLUICE_ADMIN_TOKEN\"\n",
        1,
    );
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
    let fleet = Fleet::start(dir.path(), &config, env).await;
    let client = reqwest::Client::new();
    assert_eq!(
        cached(&client, &fleet.urls[0], "What is a lien?").await,
        "miss"
    );
    // Written in the background: the others see it within moments.
    for url in &fleet.urls[1..] {
        let mut hit = String::new();
        for _ in 0..50 {
            hit = cached(&client, url, "What is a lien?").await;
            if hit == "hit" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            hit, "hit",
            "{url} did not serve the answer another instance bought"
        );
    }
    // A purge through one instance empties the cache for all, within a probe.
    let r = client
        .delete(format!("{}/admin/cache", fleet.urls[2]))
        .bearer_auth("admin-secret-for-tests")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        cached(&client, &fleet.urls[0], "What is a lien?").await,
        "miss"
    );
}
