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

/// An SLO the incidents never breach: no bad event, its budget whole.
fn available() -> Slo {
    Slo {
        name: "interactive_available".into(),
        objective: Objective::Availability { target: 0.99 },
        lanes: vec!["interactive".into()],
        groups: Vec::new(),
    }
}

/// The shipped Grafana dashboard's "SLO error budget left" query.
fn budget_query() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/grafana/sluice.json"
    );
    let d: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let panel = d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["title"]
                .as_str()
                .unwrap()
                .starts_with("SLO error budget left")
        })
        .unwrap();
    panel["targets"][0]["expr"].as_str().unwrap().to_string()
}

/// What `req` answers, as JSON.
async fn json(req: reqwest::RequestBuilder) -> Value {
    req.send().await.unwrap().json().await.unwrap()
}

/// `text` with every byte but letters and digits percent-encoded.
fn form_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The budget panel's query through Prometheus, against `/admin/slo`: each SLO measured
/// against its own objective, and one with no bad event whole.
async fn budget_panel_agrees(client: &reqwest::Client, p: &Prometheus, gateway: SocketAddr) {
    // Every query at one instant, so that all three read the same samples.
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        - 2.0;
    let query = |q: String| async move {
        let v = json(
            client
                .post(format!("{}/api/v1/query", p.url))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("query={}&time={at:.3}", form_encoded(&q))),
        )
        .await;
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let value: f64 = r["value"][1].as_str().unwrap().parse().unwrap();
                (r["metric"]["slo"].as_str().unwrap().to_string(), value)
            })
            .collect::<Vec<(String, f64)>>()
    };
    let panel = query(budget_query()).await;
    let bad =
        query("sum by (slo) (increase(sluice_slo_events_total{outcome=\"bad\"}[30d]))".into())
            .await;
    let all = query("sum by (slo) (increase(sluice_slo_events_total[30d]))".into()).await;
    let admin = json(client.get(format!("http://{gateway}/admin/slo"))).await;
    let left = |name: &str| {
        admin["slos"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .and_then(|s| s["budget_left"].as_f64())
            .unwrap()
    };
    let of = |v: &[(String, f64)], name: &str| v.iter().find(|(n, _)| n == name).map(|(_, x)| *x);
    println!(
        "budget panel: {panel:?}; /admin/slo interactive_ttfb {}",
        left("interactive_ttfb")
    );
    // No bad event: the budget is whole, not missing.
    assert_eq!(of(&panel, "interactive_available"), Some(1.0), "{panel:?}");
    assert_eq!(left("interactive_available"), 1.0);
    // The spent one, against its own objective (0.999): what the same counters give.
    let (b, a) = (
        of(&bad, "interactive_ttfb").unwrap(),
        of(&all, "interactive_ttfb").unwrap(),
    );
    let expected = 1.0 - (b / a) / (1.0 - 0.999);
    let shown = of(&panel, "interactive_ttfb").unwrap();
    assert!(
        (shown - expected).abs() <= 1e-6 * expected.abs().max(1.0),
        "{shown} != {expected}"
    );
    // And about what /admin/slo says (Prometheus counts from its first scrape).
    let truth = left("interactive_ttfb");
    assert!(
        truth < -10.0 && shown < -10.0,
        "the incident spent the budget: {truth}, {shown}"
    );
    assert!(
        (shown / truth - 1.0).abs() < 0.5,
        "the panel shows {shown}, /admin/slo {truth}"
    );
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
        .slo(available())
        .build()
        .unwrap();
    let serving = Serving::start(gw).await;
    let addr = serving.addr;
    let rules = sluice_telemetry::slo::rules::rules_at(&[slo(), available()], SPEED);
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
    if !flood {
        budget_panel_agrees(&client, &prom, addr).await;
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
