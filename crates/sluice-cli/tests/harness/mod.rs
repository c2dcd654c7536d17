//! The pieces of the cluster tests: a Redis server of the test's own (Debian's
//! `redis-server`, which `scripts/test` installs and names in `SLUICE_REDIS_SERVER`), a
//! PostgreSQL database of its own (on the server `SLUICE_TEST_POSTGRES` names, or on a server
//! of its own that it can stop: [`postgres::OwnPostgres`]), a simulated
//! provider, and three `sluice serve` processes sharing one configuration.

#![allow(dead_code)]

pub mod postgres;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Redis server on a private port, which can be stopped and started again on it.
pub struct Redis {
    pub port: u16,
    child: Option<Child>,
}

impl Redis {
    pub async fn start() -> Self {
        let mut r = Self {
            port: free_port(),
            child: None,
        };
        r.resume().await;
        r
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) and waits until it answers.
    pub async fn resume(&mut self) {
        let bin = std::env::var("SLUICE_REDIS_SERVER").unwrap_or_else(|_| {
            panic!(
                "SLUICE_REDIS_SERVER is not set: run ./scripts/test, which installs Debian's \
                 redis-server, or point it at a redis-server binary"
            )
        });
        let child = Command::new(bin)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("redis-server did not start");
    }

    /// Pauses the server (SIGSTOP): connections stay open and commands go unanswered, as
    /// with a server stalled or a network partition; [`Redis::unpause`] lets it go on with
    /// its data.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a paused server go on (SIGCONT).
    pub fn unpause(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("redis-server is not running");
        let ok = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success(), "kill {signal} redis-server");
    }

    /// Stops the server (its data goes with it, as after a crash without persistence).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A fresh database on the test PostgreSQL server: its URL.
pub async fn postgres_database() -> String {
    let server = std::env::var("SLUICE_TEST_POSTGRES").unwrap_or_else(|_| {
        panic!(
            "SLUICE_TEST_POSTGRES is not set: run ./scripts/test, which starts PostgreSQL, or \
             point it at a server (postgres://user@host:port)"
        )
    });
    let name = format!("sluice_cluster_{}", uuid_like());
    let admin = sqlx::PgPool::connect(&format!("{server}/postgres"))
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&admin)
        .await
        .unwrap();
    format!("{server}/{name}")
}

fn uuid_like() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{n:x}{}", std::process::id())
}

/// A simulated provider.
pub struct Sim {
    pub port: u16,
    child: Child,
}

impl Sim {
    /// `upstream` is the body of its `[upstreams.up]` section.
    pub fn start(dir: &Path, upstream: &str) -> Self {
        let port = free_port();
        let child = Self::spawn(dir, port, upstream);
        Self { port, child }
    }

    /// Replaces the provider on the same port by one of `upstream` (as a provider that
    /// changes how it answers): calls in flight to the old one fail.
    pub async fn replace(&mut self, dir: &Path, upstream: &str) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = Self::spawn(dir, self.port, upstream);
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the simulator did not start again");
    }

    fn spawn(dir: &Path, port: u16, upstream: &str) -> Child {
        let path = dir.join(format!("sim-{}.toml", free_port()));
        std::fs::write(
            &path,
            format!(
                "[sim]\nlisten = \"127.0.0.1:{port}\"\nseed = 11\n[upstreams.up]\napi = \"openai\"\n{upstream}\n"
            ),
        )
        .unwrap();
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["sim", "--config"])
            .arg(&path)
            .env("SLUICE_LOG", "error")
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    }

    pub async fn stats(&self) -> serde_json::Value {
        reqwest::get(format!("http://127.0.0.1:{}/stats", self.port))
            .await
            .unwrap()
            .json::<serde_json::Value>()
            .await
            .unwrap()["upstreams"]["up"]
            .clone()
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Gateways started together from one configuration (only their listen address differs, by
/// `SLUICE_LISTEN`): three, unless said.
pub struct Fleet {
    pub urls: Vec<String>,
    pub children: Vec<Option<Child>>,
    config: PathBuf,
    env: Vec<(String, String)>,
    ports: Vec<u16>,
}

impl Fleet {
    pub async fn start(dir: &Path, config: &str, env: Vec<(String, String)>) -> Self {
        Self::start_n(dir, config, env, 3).await
    }

    /// `n` gateways.
    pub async fn start_n(dir: &Path, config: &str, env: Vec<(String, String)>, n: usize) -> Self {
        let path = dir.join("gw.toml");
        std::fs::write(&path, config).unwrap();
        let ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let mut fleet = Self {
            urls: ports
                .iter()
                .map(|p| format!("http://127.0.0.1:{p}"))
                .collect(),
            children: Vec::new(),
            config: path,
            env,
            ports,
        };
        // All processes first, then their readiness: as a Deployment starts its replicas, so
        // they open the stores (and make PostgreSQL's schema) at the same moment.
        let started: Vec<Child> = (0..n).map(|i| fleet.launch(i)).collect();
        for (i, c) in started.into_iter().enumerate() {
            let c = fleet.ready(i, c).await;
            fleet.children.push(Some(c));
        }
        fleet
    }

    fn launch(&self, i: usize) -> Child {
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--config"])
            .arg(&self.config)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("SLUICE_LISTEN", format!("127.0.0.1:{}", self.ports[i]))
            .env("SLUICE_LOG", "error")
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Waits for gateway `i` to answer `/readyz`; panics if it exits or never does.
    async fn ready(&self, i: usize, mut child: Child) -> Child {
        let client = reqwest::Client::new();
        for _ in 0..400 {
            if client
                .get(format!("{}/readyz", self.urls[i]))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return child;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("gateway {i} exited at start: {status}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = child.kill();
        panic!("gateway {i} did not start");
    }

    /// The value of `name` the fleet was started with.
    pub fn env_var(&self, name: &str) -> String {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap()
    }

    /// SIGKILL of gateway `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.children[i].take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// Whether every gateway still runs (none panicked or exited).
    pub fn all_alive(&mut self) -> bool {
        self.children
            .iter_mut()
            .flatten()
            .all(|c| matches!(c.try_wait(), Ok(None)))
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub const BOUNDARY: &str = "sluice-cluster-boundary";

/// Submits a chat job of `n` items to `url` as `key`; its id.
pub async fn submit(url: &str, key: &str, n: usize, tag: &str) -> String {
    let content: Vec<String> = (0..n)
        .map(|i| {
            serde_json::json!({"custom_id": format!("{tag}-{i}"), "method": "POST", "url": "/v1/chat/completions",
                "body": {"model": "chat", "max_tokens": 20, "messages": [
                    {"role": "system", "content": "You review contracts."},
                    {"role": "user", "content": format!("Review clause {i} of {tag}.")}]}})
            .to_string()
        })
        .collect();
    let body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
         --{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n\r\n\
         {}\r\n--{BOUNDARY}--\r\n",
        content.join("\n")
    );
    let client = reqwest::Client::new();
    let file: serde_json::Value = client
        .post(format!("{url}/v1/files"))
        .bearer_auth(key)
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
    let job: serde_json::Value = client
        .post(format!("{url}/v1/batches"))
        .bearer_auth(key)
        .json(&serde_json::json!({"input_file_id": file["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"}))
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

/// The job `id` as `url` shows it.
pub async fn job(url: &str, key: &str, id: &str) -> Option<serde_json::Value> {
    let r = reqwest::Client::new()
        .get(format!("{url}/v1/batches/{id}"))
        .bearer_auth(key)
        .send()
        .await
        .ok()?;
    r.json().await.ok()
}

/// Waits until job `id` has ended (at most `limit`); its last state.
pub async fn until_ended(url: &str, key: &str, id: &str, limit: Duration) -> serde_json::Value {
    let start = tokio::time::Instant::now();
    loop {
        if let Some(j) = job(url, key, id).await
            && matches!(
                j["status"].as_str(),
                Some("completed" | "failed" | "cancelled" | "expired")
            )
        {
            return j;
        }
        assert!(
            start.elapsed() < limit,
            "job {id} did not end within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A fleet's configuration with the defaults: only where the ledger's PostgreSQL and Redis
/// are (by `SLUICE_LEDGER_URL` and `SLUICE_REDIS_URL`), the simulated provider at `sim`, a
/// price, and key `key` of tenant `t`.
pub fn defaults_config(sim: u16, key: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:1\"\nshutdown_grace = \"1s\"\n\
         [ledger]\nstore = \"postgres\"\nurl_env = \"SLUICE_LEDGER_URL\"\n\
         [cluster]\nredis_url_env = \"SLUICE_REDIS_URL\"\n\
         [providers.up]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{sim}/up/v1\"\n\
         [prices.sim-model]\ninput = 1000.0\noutput = 2000.0\n\
         [models.chat]\ndeployments = [{{ provider = \"up\", model = \"sim-model\" }}]\n\
         [keys.k]\ntenant = \"t\"\nsha256 = \"{}\"\n",
        sluice_economy::keys::hash_hex(key)
    )
}

/// The `/readyz` of the instance at `url`.
pub async fn ready(client: &reqwest::Client, url: &str) -> serde_json::Value {
    client
        .get(format!("{url}/readyz"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Waits (up to 30 s) until `done` items of job `id` are completed.
pub async fn until_done(url: &str, key: &str, id: &str, done: u64) {
    let start = tokio::time::Instant::now();
    loop {
        let now = job(url, key, id).await.map_or(0, |j| {
            j["request_counts"]["completed"].as_u64().unwrap_or(0)
        });
        if now >= done {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "job {id}: {now} done"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One chat call to `url` as `key`: its status and how long it took.
pub async fn chat(client: &reqwest::Client, url: &str, key: &str, i: usize) -> (u16, Duration) {
    chat_in(client, url, key, None, i).await
}

/// One chat call to `url` as `key`, in `lane` when named (`x-sluice-lane`): its status and
/// how long it took.
pub async fn chat_in(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    lane: Option<&str>,
    i: usize,
) -> (u16, Duration) {
    let start = tokio::time::Instant::now();
    let mut req = client
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(key);
    if let Some(lane) = lane {
        req = req.header("x-sluice-lane", lane);
    }
    // Calls of different lanes never share a prompt (nor an answer cache entry).
    let content = match lane {
        Some(lane) => format!("Question {i} in {lane}: is this clause fair?"),
        None => format!("Question {i}: is this clause fair?"),
    };
    let status = req
        .json(
            &serde_json::json!({"model": "chat", "max_tokens": 20, "messages": [
            {"role": "user", "content": content}]}),
        )
        .send()
        .await
        .map_or(0, |r| r.status().as_u16());
    (status, start.elapsed())
}

pub fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[((v.len() as f64 * 0.99).ceil() as usize)
        .saturating_sub(1)
        .min(v.len() - 1)]
}

#[allow(dead_code)]
pub fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// `tenant`'s spend in the ledger at `url` (answered calls), once `rows` of them are in.
pub async fn ledger_spend(url: &str, tenant: &str, rows: usize) -> i64 {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    for _ in 0..100 {
        let (n, spend): (i64, Option<i64>) = sqlx::query_as(
            "SELECT COUNT(*), SUM(cost_micros)::BIGINT FROM sluice_ledger WHERE tenant = $1 AND status = 200",
        )
        .bind(tenant)
        .fetch_one(&pool)
        .await
        .unwrap();
        if n as usize >= rows {
            return spend.unwrap_or(0);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the ledger never held {rows} rows of {tenant}");
}
