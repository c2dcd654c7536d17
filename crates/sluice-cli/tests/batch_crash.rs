//! Batch jobs through the real binary: `sluice serve` in front of `sluice sim`, its ledger
//! on SQLite or on PostgreSQL (the server `SLUICE_TEST_POSTGRES` names, which `scripts/test`
//! starts). The gateway is killed with SIGKILL at moments drawn from a seeded RNG while a
//! job runs, and started again each time: every item ends exactly once (one output line
//! each), none is billed twice (one ledger row per item), and items in flight at a kill are
//! sent again. The official `openai` Python SDK's file and batch calls run against it too
//! (`tests/batch_check.py`, in the environment `scripts/install-clients` makes).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use serde_json::{Value, json};

const BOUNDARY: &str = "sluice-crash-boundary";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A simulated provider and a gateway's config in `dir`; `ledger` is the config's
/// `[ledger]` section.
struct Stack {
    dir: PathBuf,
    sim: Child,
    url: String,
    env: Vec<(String, String)>,
}

impl Stack {
    fn new(dir: &Path, ledger: &str, env: Vec<(String, String)>) -> Self {
        let (sim_port, gw_port) = (free_port(), free_port());
        std::fs::write(
            dir.join("sim.toml"),
            format!(
                "[sim]\nlisten = \"127.0.0.1:{sim_port}\"\nseed = 7\n\
                 [upstreams.up]\napi = \"openai\"\nttft_median = \"60ms\"\n\
                 output_tokens_median = 20\nper_token = \"5ms\"\n"
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("gw.toml"),
            format!(
                "[server]\nlisten = \"127.0.0.1:{gw_port}\"\nshutdown_grace = \"1s\"\n{ledger}\n\
                 [batches]\nlease = \"2s\"\nconcurrency = 16\n\
                 [providers.up]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{sim_port}/up/v1\"\n\
                 [prices.sim-model]\ninput = 1.0\noutput = 2.0\n\
                 [models.chat]\ndeployments = [{{ provider = \"up\", model = \"sim-model\" }}]\n"
            ),
        )
        .unwrap();
        let sim = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["sim", "--config"])
            .arg(dir.join("sim.toml"))
            .env("SLUICE_LOG", "error")
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        Self {
            dir: dir.to_path_buf(),
            sim,
            url: format!("http://127.0.0.1:{gw_port}"),
            env,
        }
    }

    /// Starts the gateway and waits until it answers.
    async fn gateway(&self) -> Child {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--config"])
            .arg(self.dir.join("gw.toml"))
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("SLUICE_LOG", "error")
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let client = reqwest::Client::new();
        for _ in 0..300 {
            if client
                .get(format!("{}/readyz", self.url))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return child;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("the gateway did not start");
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        let _ = self.sim.kill();
        let _ = self.sim.wait();
    }
}

fn kill(mut child: Child) {
    // SIGKILL: no chance to drain, flush or release anything.
    child.kill().unwrap();
    child.wait().unwrap();
}

fn lines(n: usize) -> String {
    (0..n)
        .map(|i| {
            json!({"custom_id": format!("doc-{i}"), "method": "POST", "url": "/v1/chat/completions",
                "body": {"model": "chat", "max_tokens": 30, "messages": [
                    {"role": "system", "content": "You review contracts."},
                    {"role": "user", "content": format!("Review clause {i}.")}]}})
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn submit(url: &str, content: &str, endpoint: &str) -> String {
    let client = reqwest::Client::new();
    let body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
         --{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n\r\n\
         {content}\r\n--{BOUNDARY}--\r\n"
    );
    let file: Value = client
        .post(format!("{url}/v1/files"))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let job: Value = client
        .post(format!("{url}/v1/batches"))
        .json(
            &json!({"input_file_id": file["id"], "endpoint": endpoint, "completion_window": "24h"}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    job["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{job}"))
        .to_string()
}

async fn job(url: &str, id: &str) -> Option<Value> {
    let r = reqwest::get(format!("{url}/v1/batches/{id}")).await.ok()?;
    r.json().await.ok()
}

async fn text(url: &str, file: &str) -> String {
    reqwest::get(format!("{url}/v1/files/{file}/content"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Runs a job of `n` items, killing the gateway `kills` times at seeded moments and
/// starting it again; checks every item ended once, with one output line each. The output
/// lines.
async fn crash_and_finish(stack: &Stack, n: usize, kills: usize, seed: u64) -> Vec<Value> {
    crash_and_finish_file(stack, &lines(n), "/v1/chat/completions", n, kills, seed).await
}

/// As [`crash_and_finish`], for the `n` lines of `content`, calling `endpoint`.
async fn crash_and_finish_file(
    stack: &Stack,
    content: &str,
    endpoint: &str,
    n: usize,
    kills: usize,
    seed: u64,
) -> Vec<Value> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut gw = stack.gateway().await;
    let id = submit(&stack.url, content, endpoint).await;
    let mut last_done = 0;
    for k in 0..kills {
        // Let some items end (at least one more than at the last kill), then wait a random
        // part of a second more: the kill lands with items in flight.
        for _ in 0..600 {
            let done = job(&stack.url, &id).await.map_or(0, |j| {
                j["request_counts"]["completed"].as_u64().unwrap_or(0)
            });
            if done > last_done {
                last_done = done;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..400))).await;
        eprintln!("kill {k} after {last_done} items done");
        kill(gw);
        gw = stack.gateway().await;
    }
    let mut last = Value::Null;
    for _ in 0..3_000 {
        if let Some(j) = job(&stack.url, &id).await
            && j["status"] == "completed"
        {
            last = j;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(last["status"], "completed", "{last}");
    assert_eq!(
        last["request_counts"],
        json!({"total": n, "completed": n, "failed": 0}),
        "{last}"
    );
    let out = text(&stack.url, last["output_file_id"].as_str().unwrap()).await;
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect();
    let unique: HashSet<&str> = lines
        .iter()
        .map(|l| l["custom_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        (lines.len(), unique.len()),
        (n, n),
        "one output line per item"
    );
    kill(gw);
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_batch_on_sqlite_loses_and_doubles_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let stack = Stack::new(
        dir.path(),
        "[ledger]\nstore = \"sqlite\"\npath = \"ledger.db\"",
        vec![],
    );
    let n = 120;
    crash_and_finish(&stack, n, 3, 35).await;
    let pool = sqlx::SqlitePool::connect(&format!(
        "sqlite://{}",
        dir.path().join("ledger.db").display()
    ))
    .await
    .unwrap();
    let (rows, items): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), COUNT(DISTINCT batch_item) FROM sluice_ledger WHERE batch_item IS NOT NULL",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (rows, items),
        (n as i64, n as i64),
        "one ledger row per item"
    );
    let again: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sluice_batch_items WHERE tries > 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    eprintln!("{again} items sent again after a kill");
    assert!(again > 0, "the kills landed with items in flight");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_batch_of_documents_bills_each_review_once() {
    let dir = tempfile::tempdir().unwrap();
    let stack = Stack::new(
        dir.path(),
        "[ledger]\nstore = \"sqlite\"\npath = \"ledger.db\"",
        vec![],
    );
    let n = 12;
    let content: Vec<String> = (0..n)
        .map(|i| {
            let text = sluice_analysis::synth::contract(40 + i as u64, 10, 0.0).join("\u{c}");
            let body: Value = serde_json::from_str(&sluice_batch::input::document::write(
                &format!("contract-{i}.txt"),
                text.as_bytes(),
            ))
            .unwrap();
            json!({"custom_id": format!("doc-{i}"), "method": "POST", "url": "/v1/analyses", "body": body})
                .to_string()
        })
        .collect();
    let out = crash_and_finish_file(&stack, &content.join("\n"), "/v1/analyses", n, 2, 37).await;
    // Each document's clauses the rules flagged, and those whose review it sent itself.
    let mut flagged: HashSet<(u64, String)> = HashSet::new();
    let mut own: Vec<(u64, String)> = Vec::new();
    for line in &out {
        let report = &line["response"]["body"];
        assert_eq!(report["object"], "analysis.report", "{line}");
        let number: u64 = line["custom_id"].as_str().unwrap()["doc-".len()..]
            .parse::<u64>()
            .unwrap()
            + 1;
        for f in report["findings"].as_array().unwrap() {
            assert_eq!(f["review"]["status"], "reviewed", "{f}");
            let clause = f["clause"].as_str().unwrap().to_string();
            if f["review"]["merged"] == false {
                own.push((number, clause.clone()));
            }
            flagged.insert((number, clause));
        }
    }
    let pool = sqlx::SqlitePool::connect(&format!(
        "sqlite://{}",
        dir.path().join("ledger.db").display()
    ))
    .await
    .unwrap();
    let keys: Vec<String> =
        sqlx::query_scalar("SELECT batch_item FROM sluice_ledger WHERE batch_item IS NOT NULL")
            .fetch_all(&pool)
            .await
            .unwrap();
    let billed: HashSet<(u64, String)> = keys
        .iter()
        .map(|k| {
            let mut parts = k.splitn(3, '/');
            let (_, line, clause) = (parts.next(), parts.next().unwrap(), parts.next().unwrap());
            (line.parse().unwrap(), clause.to_string())
        })
        .collect();
    // Every review a report counts was billed, under its document and clause; nothing else
    // was (a clause merged into another document's review in one run may have been sent for
    // itself in a run a kill cut short); and the key is unique, so a review sent again after
    // a kill is billed once.
    for k in &own {
        assert!(billed.contains(k), "{k:?} was reviewed but not billed");
    }
    for k in &billed {
        assert!(flagged.contains(k), "{k:?} was billed but is no finding");
    }
    let unkeyed: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM sluice_ledger WHERE batch_item IS NULL AND error IS NULL",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(unkeyed, 0, "every answered review carries its item's key");
    let (rows, sent) = (keys.len(), own.len());
    assert!(sent > 3 * n, "{sent} reviews: the documents were reviewed");
    let again: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sluice_batch_items WHERE tries > 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    eprintln!("{again} documents analysed again after a kill; {rows} review rows, {sent} sent");
    assert!(again > 0, "the kills landed with documents in flight");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_batch_on_postgres_loses_and_doubles_nothing() {
    let Ok(server) = std::env::var("SLUICE_TEST_POSTGRES") else {
        panic!("SLUICE_TEST_POSTGRES is not set: run ./scripts/test, which starts PostgreSQL");
    };
    let name = format!("sluice_crash_{}", std::process::id());
    let admin = sqlx::PgPool::connect(&format!("{server}/postgres"))
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name}"
    )))
    .execute(&admin)
    .await
    .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&admin)
        .await
        .unwrap();
    let url = format!("{server}/{name}");
    let dir = tempfile::tempdir().unwrap();
    let stack = Stack::new(
        dir.path(),
        "[ledger]\nstore = \"postgres\"\nurl_env = \"SLUICE_CRASH_LEDGER\"",
        vec![("SLUICE_CRASH_LEDGER".into(), url.clone())],
    );
    let n = 120;
    crash_and_finish(&stack, n, 3, 36).await;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let (rows, items): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), COUNT(DISTINCT batch_item) FROM sluice_ledger WHERE batch_item IS NOT NULL",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (rows, items),
        (n as i64, n as i64),
        "one ledger row per item"
    );
    let again: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sluice_batch_items WHERE tries > 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    eprintln!("{again} items sent again after a kill");
    assert!(again > 0, "the kills landed with items in flight");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdks_file_and_batch_calls_work_unchanged() {
    let env = PathBuf::from(std::env::var("SLUICE_CLIENTS").expect(
        "SLUICE_CLIENTS names the client SDKs' environment; scripts/test installs it (scripts/install-clients)",
    ));
    let dir = tempfile::tempdir().unwrap();
    let stack = Stack::new(
        dir.path(),
        "[ledger]\nstore = \"sqlite\"\npath = \"ledger.db\"",
        vec![],
    );
    let gw = stack.gateway().await;
    let script = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/batch_check.py"));
    let url = stack.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env.join("bin/python"))
            .arg(script)
            .env("SLUICE_URL", url)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    kill(gw);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("checks passed"), "{stdout}");
    println!("{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_command_submits_follows_and_reads_results() {
    let dir = tempfile::tempdir().unwrap();
    let stack = Stack::new(
        dir.path(),
        "[ledger]\nstore = \"sqlite\"\npath = \"ledger.db\"",
        vec![],
    );
    let gw = stack.gateway().await;
    let file = dir.path().join("in.jsonl");
    std::fs::write(&file, lines(10)).unwrap();
    let url = stack.url.clone();
    let sluice = move |args: Vec<String>| {
        let url = url.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                Command::new(env!("CARGO_BIN_EXE_sluice"))
                    .arg("batch")
                    .args(&args)
                    .args(["--url", &url])
                    .output()
                    .unwrap()
            })
            .await
            .unwrap()
        }
    };
    let out = sluice(vec![
        "submit".into(),
        file.display().to_string(),
        "--watch".into(),
    ])
    .await;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = text.lines().next().unwrap().to_string();
    assert!(id.starts_with("batch_"), "{text}");
    let last = text.lines().last().unwrap();
    assert!(
        last.contains("completed: queued 0/10, running 0, done 10/10"),
        "{text}"
    );
    let out = sluice(vec!["status".into(), id.clone()]).await;
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&format!("{id} completed")));
    let out = sluice(vec!["results".into(), id.clone()]).await;
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 10);
    // No item failed: no error file, and the command says so.
    let out = sluice(vec!["results".into(), id.clone(), "--errors".into()]).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no error file"));
    // An ended job cannot be cancelled: the gateway's reason is printed.
    let out = sluice(vec!["cancel".into(), id.clone()]).await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("409"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    kill(gw);
}
