//! The fault acceptance: three `sluice serve` processes started together from one
//! configuration that sets nothing but where Redis and the PostgreSQL ledger are (a server
//! of the test's own, which it stops), in front of a simulated provider, under steady load
//! from a paying tenant and a tenant with credits for about 30 calls, with a batch job
//! running. In one run: Redis paused 20 s (SIGSTOP: connections open, nothing answered),
//! PostgreSQL stopped 20 s, one instance killed with `kill -9` mid-job, and the provider
//! replaced by one that answers bare 429s past half its limit as the job goes on. Asserted:
//!
//! - paying tenants are served while only Redis is down;
//! - a key revoked while Redis is down is refused by every instance within 2 s;
//! - readiness names each degraded store while it is degraded, and recovers;
//! - every call is answered, or refused with a status and an error code that name why
//!   (credits, quota, overload), never dropped; none hangs;
//! - the tight tenant's spend passes its credits by at most one reservation;
//! - every batch item ends, and is billed once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use harness::postgres::OwnPostgres;
use harness::{Fleet, Redis, Sim};
use parking_lot::Mutex;
use sluice_economy::keys::hash_hex;
use tokio::time::Instant;

const PAYER: &str = "sk-faults-payer";
const TIGHT: &str = "sk-faults-tight";
const DOOMED: &str = "sk-faults-doomed";
const FREE: &str = "sk-faults-free";
const ADMIN: &str = "admin-faults-for-tests";
/// The tight tenant's credits: about 30 calls at 35,000 micro-units each.
const TIGHT_CREDITS: f64 = 1.0;
/// The worst case one call of the tight tenant reserves (see `cluster.rs`).
const ONE_RESERVATION_MICROS: i64 = 80_000;
/// Items of the batch job.
const ITEMS: i64 = 60;
/// Items of the job running when an instance is killed and the provider changes.
const SECOND_ITEMS: i64 = 150;
/// How long each store stays down.
const OUTAGE: Duration = Duration::from_secs(20);

fn config(sim: u16) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:1\"\nadmin_token_env = \"SLUICE_ADMIN_TOKEN\"\n\
         [ledger]\nstore = \"postgres\"\nurl_env = \"SLUICE_LEDGER_URL\"\n\
         [cluster]\nredis_url_env = \"SLUICE_REDIS_URL\"\n\
         [providers.up]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{sim}/up/v1\"\n\
         [prices.sim-model]\ninput = 1000.0\noutput = 2000.0\n\
         [models.chat]\ndeployments = [{{ provider = \"up\", model = \"sim-model\" }}]\n\
         [tenants.payer]\ncredits = 100000.0\n\
         [tenants.tight]\ncredits = {TIGHT_CREDITS}\n\
         [keys.payer]\ntenant = \"payer\"\nsha256 = \"{}\"\n\
         [keys.tight]\ntenant = \"tight\"\nsha256 = \"{}\"\n\
         [keys.doomed]\ntenant = \"payer\"\nsha256 = \"{}\"\n\
         [keys.free]\ntenant = \"free\"\nsha256 = \"{}\"\n",
        hash_hex(PAYER),
        hash_hex(TIGHT),
        hash_hex(DOOMED),
        hash_hex(FREE)
    )
}

/// A provider of 20 calls a second that announces its limit, as the run begins.
const ANNOUNCING: &str = "ttft_median = \"100ms\"\noutput_tokens_median = 10\nper_token = \"2ms\"\n\
     rpm = 1200\nrpm_burst = 20\nrate_headers = true\nretry_after = true\n";
/// The same provider at 10 a second, answering bare 429s past it (no headers, no wait).
const BARE: &str = "ttft_median = \"100ms\"\noutput_tokens_median = 10\nper_token = \"2ms\"\n\
     rpm = 600\nrpm_burst = 10\nrate_headers = false\nretry_after = false\n";

/// One answer a driver saw: which phase, which key, its status and error code, how long.
#[derive(Clone, Debug)]
struct Seen {
    phase: &'static str,
    key: &'static str,
    status: u16,
    code: String,
    took: Duration,
}

/// The load: callers sending as `key` every `every` to the instances `live` names, noting
/// each answer under the phase of the moment.
struct Load {
    stop: Arc<AtomicBool>,
    phase: Arc<Mutex<&'static str>>,
    live: Arc<Mutex<Vec<String>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(urls: &[String], callers: &[(&'static str, Duration, usize)]) -> Self {
        let mut load = Self {
            stop: Arc::new(AtomicBool::new(false)),
            phase: Arc::new(Mutex::new("steady")),
            live: Arc::new(Mutex::new(urls.to_vec())),
            seen: Arc::new(Mutex::new(Vec::new())),
            tasks: Vec::new(),
        };
        for &(key, every, on) in callers {
            let (stop, phase, live, seen) = (
                load.stop.clone(),
                load.phase.clone(),
                load.live.clone(),
                load.seen.clone(),
            );
            load.tasks.push(tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let url = {
                        let live = live.lock();
                        // `on` instances at most: a tenant's calls can stay off one that dies.
                        live[i % live.len().min(on)].clone()
                    };
                    let now = *phase.lock();
                    let (status, code, took) = call(&client, &url, key, i).await;
                    seen.lock().push(Seen {
                        phase: now,
                        key,
                        status,
                        code,
                        took,
                    });
                    i += 1;
                    tokio::time::sleep(every).await;
                }
            }));
        }
        load
    }

    fn phase(&self, name: &'static str) {
        *self.phase.lock() = name;
    }

    async fn finish(self) -> Vec<Seen> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await.unwrap();
        }
        Arc::try_unwrap(self.seen).unwrap().into_inner()
    }
}

/// One chat call: its status, its error code (empty when served) and how long it took.
async fn call(client: &reqwest::Client, url: &str, key: &str, i: usize) -> (u16, String, Duration) {
    let start = Instant::now();
    let r = client
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(key)
        .timeout(Duration::from_secs(60))
        .json(
            &serde_json::json!({"model": "chat", "max_tokens": 20, "messages": [
            {"role": "user", "content": format!("Fault {i}: is this clause fair?")}]}),
        )
        .send()
        .await;
    let Ok(r) = r else {
        return (0, "no answer".to_string(), start.elapsed());
    };
    let status = r.status().as_u16();
    let body: serde_json::Value = r.json().await.unwrap_or_default();
    let code = body["error"]["code"].as_str().unwrap_or("").to_string();
    (status, code, start.elapsed())
}

/// Waits (up to `within`) until `holds` is true of every live instance's readiness; how
/// long that took.
async fn readiness_until(
    client: &reqwest::Client,
    urls: &[String],
    within: Duration,
    what: &str,
    holds: impl Fn(&serde_json::Value) -> bool,
) -> Duration {
    let at = Instant::now();
    for url in urls {
        loop {
            let r = harness::ready(client, url).await;
            if holds(&r) {
                break;
            }
            assert!(at.elapsed() < within, "{url} never said {what}: {r}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    at.elapsed()
}

/// Revokes `doomed` through `url` while Redis is paused; then how long each instance went on
/// serving it.
async fn revoke_everywhere(client: &reqwest::Client, urls: &[String]) -> Vec<Duration> {
    let answer = client
        .delete(format!("{}/admin/keys/doomed", urls[1]))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    let at = Instant::now();
    let answer: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(answer["durable"], true, "{answer}");
    let mut took = Vec::new();
    for url in urls {
        let mut i = 0;
        took.push(loop {
            let (status, _, _) = call(client, url, DOOMED, i).await;
            i += 1;
            if status == 401 {
                break at.elapsed();
            }
            assert!(
                at.elapsed() < Duration::from_secs(5),
                "{url} still serves the revoked key ({status})"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        });
    }
    took
}

/// What the callers saw, by (phase, key, status, code).
fn tally(seen: &[Seen]) -> BTreeMap<(&'static str, &'static str, u16, String), usize> {
    let mut t = BTreeMap::new();
    for s in seen {
        *t.entry((s.phase, s.key, s.status, s.code.clone()))
            .or_insert(0) += 1;
    }
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_instances_keep_their_promises_through_store_outages_a_kill_and_bare_429s() {
    let dir = tempfile::tempdir().unwrap();
    let redis = Redis::start().await;
    let mut pg = OwnPostgres::start().await;
    let mut sim = Sim::start(dir.path(), ANNOUNCING);
    let env = vec![
        ("SLUICE_LEDGER_URL".to_string(), pg.url()),
        ("SLUICE_REDIS_URL".to_string(), redis.url()),
        ("SLUICE_ADMIN_TOKEN".to_string(), ADMIN.to_string()),
    ];
    let mut fleet = Fleet::start(dir.path(), &config(sim.port), env).await;
    let client = reqwest::Client::new();
    let urls = fleet.urls.clone();
    // The paying tenant over all three; the tight one over the two that live to the end,
    // so that every call it was served is in the ledger to count.
    let load = Load::start(
        &urls,
        &[
            (PAYER, Duration::from_millis(100), 3),
            (TIGHT, Duration::from_millis(250), 2),
        ],
    );
    let job = harness::submit(&urls[0], FREE, ITEMS as usize, "faults").await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Redis paused.
    load.phase("redis paused");
    redis.pause();
    let named = readiness_until(&client, &urls, Duration::from_secs(5), "Redis down", |r| {
        r["cluster"]["redis"] == "unreachable"
    })
    .await;
    eprintln!("Redis paused: every instance named it within {named:?}");
    let revoked = revoke_everywhere(&client, &urls).await;
    eprintln!("a key revoked with Redis paused was refused after {revoked:?}");
    for (i, took) in revoked.iter().enumerate() {
        assert!(
            *took <= Duration::from_secs(2),
            "instance {i} served the revoked key for {took:?}"
        );
    }
    tokio::time::sleep(OUTAGE.saturating_sub(named)).await;
    redis.unpause();
    load.phase("redis back");
    readiness_until(&client, &urls, Duration::from_secs(10), "Redis ok", |r| {
        r["cluster"]["redis"] == "ok"
    })
    .await;

    // PostgreSQL stopped.
    load.phase("postgres stopped");
    pg.stop();
    let named = readiness_until(&client, &urls, Duration::from_secs(5), "ledger down", |r| {
        r["ledger"]["state"] == "unreachable"
    })
    .await;
    eprintln!("PostgreSQL stopped: every instance named it within {named:?}");
    tokio::time::sleep(OUTAGE.saturating_sub(named)).await;
    pg.resume().await;
    load.phase("postgres back");
    readiness_until(&client, &urls, Duration::from_secs(15), "ledger ok", |r| {
        r["ledger"]["state"] == "ok"
    })
    .await;

    // A second job; kill -9 of an instance while it runs on every one (the paying tenant's
    // calls move off it first: a process killed mid-call cannot answer, whatever it does).
    let second = harness::submit(&urls[0], FREE, SECOND_ITEMS as usize, "after").await;
    harness::until_done(&urls[0], FREE, &second, 10).await;
    load.live.lock().truncate(2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    fleet.kill(2);
    load.phase("killed");
    let survivors = &urls[..2];

    // The provider now answers bare 429s past 10 a second, while the second job goes on.
    sim.replace(dir.path(), BARE).await;
    load.phase("bare 429s");
    tokio::time::sleep(Duration::from_secs(20)).await;
    let seen = load.finish().await;

    let ended = [
        harness::until_ended(&survivors[0], FREE, &job, Duration::from_secs(120)).await,
        harness::until_ended(&survivors[0], FREE, &second, Duration::from_secs(120)).await,
    ];
    let sim_stats = sim.stats().await;
    for ((phase, key, status, code), n) in &tally(&seen) {
        eprintln!("{phase:>16} {key:>16} {status} {code:<24} {n}");
    }
    eprintln!(
        "jobs: {} and {}; the provider since the switch: {} calls, {} answered 429",
        ended[0]["request_counts"],
        ended[1]["request_counts"],
        sim_stats["requests"],
        sim_stats["rate_limited"]
    );

    // Every call answered, or refused with a reason; none hangs.
    for s in &seen {
        assert!(
            s.took < Duration::from_secs(30),
            "a call took {:?}: {s:?}",
            s.took
        );
        match (s.key, s.status) {
            (_, 200) => {}
            (PAYER, 503 | 429) | (TIGHT, 402 | 503 | 429) => {
                assert!(!s.code.is_empty(), "a refusal without a reason: {s:?}")
            }
            _ => panic!("an answer outside the promises: {s:?}"),
        }
    }
    // Paying tenants are served while only Redis is down.
    let paused: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.phase == "redis paused" && s.key == PAYER)
        .collect();
    let served = paused.iter().filter(|s| s.status == 200).count();
    assert!(paused.len() >= 50, "{} paying calls", paused.len());
    assert_eq!(
        served,
        paused.len(),
        "the paying tenant refused with only Redis down"
    );

    // The batch jobs ended, every item once and billed once.
    let mut completed = 0;
    for (job, items) in ended.iter().zip([ITEMS, SECOND_ITEMS]) {
        assert_eq!(job["status"], "completed", "{job}");
        let counts = &job["request_counts"];
        assert_eq!(counts["total"], items, "{job}");
        let done = counts["completed"].as_i64().unwrap();
        assert_eq!(done + counts["failed"].as_i64().unwrap(), items, "{job}");
        completed += done;
    }
    let pool = sqlx::PgPool::connect(&pg.url()).await.unwrap();
    let (rows, items): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), COUNT(DISTINCT batch_item) FROM sluice_ledger WHERE batch_item IS NOT NULL",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(rows, items, "an item billed twice");
    assert!(
        items >= completed,
        "{items} rows for {completed} items done"
    );

    // Credits: the tight tenant's spend, once every call it was served is in the ledger.
    let tight_served = seen
        .iter()
        .filter(|s| s.key == TIGHT && s.status == 200)
        .count();
    let spend = harness::ledger_spend(&pg.url(), "tight", tight_served).await;
    let credits = (TIGHT_CREDITS * 1e6) as i64;
    eprintln!("tight tenant: {tight_served} calls served, {spend} spent of {credits}");
    assert!(
        spend <= credits + ONE_RESERVATION_MICROS,
        "spend {spend} passes credits {credits} by more than one reservation"
    );
    assert!(fleet.children[..2].iter().all(Option::is_some));
    assert!(fleet.all_alive(), "a surviving instance died");
}
