//! The SLO alerts end to end, with a real Prometheus (Debian's `prometheus` package, which
//! `scripts/test` installs): a sluice on a loopback port in front of simulated upstreams,
//! Prometheus scraping it every second and evaluating `sluice slo rules` at ten times speed
//! (1 h reads 6 min), and an incident replayed: the upstream's latency doubles, or, apart, a
//! batch flood saturates the provider's rate limit. Through Prometheus' API, the right alert
//! is pending or firing within 5 minutes (at ten times speed: 30 s) of the incident's start,
//! and the other never is. Prometheus runs on the wall clock: each run is bounded (about a
//! minute) and polls rather than sleeps for a result.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "shared/mod.rs"]
mod shared;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sluice_gateway::GatewayBuilder;
use sluice_sim::UpstreamSpec;
use sluice_sim::provider::SimProvider;
use sluice_sim::spec::Degradation;
use sluice_sim::upstream::SimUpstream;
use sluice_telemetry::slo::{Measure, Objective, Slo};
use tokio::time::Instant;

use crate::shared::{Serving, deployment};

/// Windows this many times shorter than the shipped rules'.
const SPEED: u32 = 10;
/// Traffic before the incident, so every window has data.
const CALM: Duration = Duration::from_secs(20);
/// Five minutes, at [`SPEED`].
const WITHIN: Duration = Duration::from_secs(30);

/// Kills Prometheus and removes its folder when the test ends, however it ends.
struct Prometheus {
    child: Child,
    dir: PathBuf,
    url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_prometheus(name: &str, target: SocketAddr, rules: &str) -> Prometheus {
    let dir = std::env::temp_dir().join(format!("sluice-prom-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("rules.yml"), rules).unwrap();
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [rules.yml]\nscrape_configs:\n  - job_name: sluice\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("prometheus could not start ({e}): scripts/test installs Debian's prometheus package")
        });
    Prometheus {
        child,
        dir,
        url: format!("http://127.0.0.1:{port}"),
    }
}

/// The alerts Prometheus has pending or firing: (name, culprit, state).
async fn alerts(client: &reqwest::Client, p: &Prometheus) -> Vec<(String, String, String)> {
    let Ok(resp) = client.get(format!("{}/api/v1/alerts", p.url)).send().await else {
        return Vec::new();
    };
    let v: Value = resp.json().await.unwrap_or(Value::Null);
    v.pointer("/data/alerts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|a| {
            let s = |k: &str| {
                a.pointer(k)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            (s("/labels/alertname"), s("/labels/culprit"), s("/state"))
        })
        .collect()
}

/// Whether Prometheus has scraped sluice and loaded the rules.
async fn ready(client: &reqwest::Client, p: &Prometheus) -> bool {
    let Ok(resp) = client
        .get(format!("{}/api/v1/query?query=up", p.url))
        .send()
        .await
    else {
        return false;
    };
    let v: Value = resp.json().await.unwrap_or(Value::Null);
    v.pointer("/data/result/0/value/1").and_then(Value::as_str) == Some("1")
}

fn slo() -> Slo {
    Slo {
        name: "interactive_ttfb".into(),
        objective: Objective::Latency {
            measure: Measure::Ttfb,
            threshold: Duration::from_secs(1),
            target: 0.999,
        },
        lanes: vec!["interactive".into()],
        groups: Vec::new(),
    }
}

/// Sends one request of `lane` every `every` until `until`.
fn load(addr: SocketAddr, lane: &'static str, every: Duration, until: Instant) {
    tokio::spawn(async move {
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let mut tick = tokio::time::interval(every);
        let mut i = 0u64;
        while Instant::now() < until {
            tick.tick().await;
            i += 1;
            let c = client.clone();
            let body = json!({"model": "chat", "messages": [{"role": "user", "content": format!("{lane} {i}")}]});
            tokio::spawn(async move {
                let _ = c
                    .post(format!("http://{addr}/v1/chat/completions"))
                    .header("x-sluice-lane", lane)
                    .json(&body)
                    .send()
                    .await
                    .map(|r| r.bytes());
            });
        }
    });
}

/// Runs sluice in front of one simulated upstream (`spec`), Prometheus on the SLO's rules,
/// interactive traffic throughout and `flood` batch traffic from the incident on; returns
/// every alert seen pending or firing from the incident's start until `expected` fires or
/// [`WITHIN`] has passed, with the time `expected` took.
async fn rehearse(
    name: &str,
    spec: UpstreamSpec,
    flood: bool,
    expected: &str,
) -> (BTreeSet<String>, Option<Duration>) {
    let start = Instant::now();
    let up = Arc::new(SimUpstream::new("east", spec, 3, start));
    // A plain proxy: the provider's 429s and slowness reach the clients as they come, which
    // is what the alerts are rehearsed on (sluice's default pacing would turn the flood's
    // 429s into time queued).
    let gw = GatewayBuilder::bare()
        .seed(3)
        .provider("east", Arc::new(SimProvider(up)))
        .model("chat", vec![deployment("east", "m")])
        .slo(slo())
        .build()
        .unwrap();
    let serving = Serving::start(gw).await;
    let addr = serving.addr;
    let rules = sluice_telemetry::slo::rules::rules_at(&[slo()], SPEED);
    let prom = start_prometheus(name, addr, &rules);
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let end = start + CALM + WITHIN + Duration::from_secs(5);
    load(addr, "interactive", Duration::from_millis(100), end);
    let mut up_at = None;
    while Instant::now() < start + CALM {
        if up_at.is_none() && ready(&client, &prom).await {
            up_at = Some(start.elapsed());
        }
        let early = alerts(&client, &prom).await;
        assert!(
            early.is_empty(),
            "{name}: alerts before the incident: {early:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(up_at.is_some(), "{name}: Prometheus never scraped sluice");
    let incident = Instant::now();
    if flood {
        load(addr, "batch", Duration::from_millis(25), end);
    }
    let mut seen = BTreeSet::new();
    let mut took = None;
    while incident.elapsed() < WITHIN {
        for (alert, culprit, state) in alerts(&client, &prom).await {
            seen.insert(format!("{alert} ({culprit}) {state}"));
            if alert == expected && took.is_none() {
                took = Some(incident.elapsed());
            }
        }
        if took.is_some_and(|t| incident.elapsed() > t + Duration::from_secs(3)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop(prom);
    serving.stop().await;
    (seen, took)
}

fn upstream(rpm: u64) -> UpstreamSpec {
    UpstreamSpec {
        ttft_median: Duration::from_millis(500),
        ttft_sigma: 0.05,
        per_token: Duration::from_millis(1),
        output_tokens_median: 8,
        output_tokens_sigma: 0.0,
        rpm,
        rpm_burst: (rpm > 0).then_some(rpm / 60),
        ..UpstreamSpec::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_slowdown_fires_only_the_upstream_alert() {
    let spec = UpstreamSpec {
        degradations: vec![Degradation {
            from: CALM,
            to: Duration::from_secs(3_600),
            latency_factor: 2.5,
            ..Degradation::default()
        }],
        ..upstream(0)
    };
    let (seen, took) = rehearse("slow", spec, false, "SluiceUpstreamSlow").await;
    println!("upstream slowdown: SluiceUpstreamSlow after {took:?}; seen {seen:?}");
    assert!(
        took.is_some(),
        "no SluiceUpstreamSlow within 5 scaled minutes: {seen:?}"
    );
    assert!(
        seen.iter().all(|s| s.starts_with("SluiceUpstreamSlow")),
        "only the upstream's alert: {seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_flood_on_the_rate_limit_fires_only_the_rate_limit_alert() {
    // 1,200 requests a minute, 20 a second: the interactive lane's 10 a second fit, a flood
    // of 40 more a second does not, and the provider's 429s reach interactive users.
    let (seen, took) = rehearse("flood", upstream(1_200), true, "SluiceUpstreamRateLimited").await;
    println!("batch flood: SluiceUpstreamRateLimited after {took:?}; seen {seen:?}");
    assert!(
        took.is_some(),
        "no SluiceUpstreamRateLimited within 5 scaled minutes: {seen:?}"
    );
    assert!(
        seen.iter()
            .all(|s| s.starts_with("SluiceUpstreamRateLimited")),
        "only the rate limit's alert: {seen:?}"
    );
}
