//! The live dashboard in a real browser (Debian's `chromium`, headless, which `scripts/test`
//! installs): sluice on a loopback port in front of simulated upstreams, a few hundred
//! requests through it, then the page loaded. It loads with no script error, polls, and its
//! numbers are those of `/admin/latency` (what clients waited, and apart from it what the
//! upstreams' attempts took), `/admin/slo` and `/metrics`, its trend (a chart per lane)
//! starts from the history the server holds, its heatmap has labelled axes, a feature that
//! is off says so, a batch job that runs meanwhile has its bar; at 1,280, 1,400, 1,600 and
//! 2,560 px no panel overflows, even with a long deployment name, and a screenshot is taken
//! at the narrowest and the widest.
//! On the wall clock (a browser cannot run in virtual time): every wait is bounded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "shared/mod.rs"]
mod shared;

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sluice_economy::{Micros, Price};
use sluice_gateway::GatewayBuilder;
use sluice_sim::UpstreamSpec;
use sluice_sim::provider::SimProvider;
use sluice_sim::upstream::SimUpstream;
use sluice_telemetry::slo::{Measure, Objective, Slo};
use tokio::time::Instant;

use crate::shared::{Serving, deployment};

/// Runs headless Chromium on `url` with `args` for `budget` ms of page time, killed after a
/// minute; (stdout, stderr).
async fn chromium(url: &str, budget: u32, args: &[&str]) -> (String, String) {
    let child = tokio::process::Command::new("chromium")
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--virtual-time-budget={budget}"))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "chromium could not start ({e}): scripts/test installs Debian's chromium package"
            )
        });
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("chromium did not finish within a minute")
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Uploads `n` small requests as a batch job of tenant `docs`; its id.
async fn submit_job(client: &reqwest::Client, addr: std::net::SocketAddr, n: usize) -> String {
    let lines: Vec<String> = (0..n)
        .map(|i| {
            json!({"custom_id": format!("doc-{i}"), "method": "POST", "url": "/v1/chat/completions",
                "body": {"model": "slow", "messages": [{"role": "user", "content": format!("document {i}")}]}})
            .to_string()
        })
        .collect();
    let boundary = "sluice-dashboard-boundary";
    let body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"docs.jsonl\"\r\n\r\n\
         {}\r\n--{boundary}--\r\n",
        lines.join("\n")
    );
    let file: Value = client
        .post(format!("http://{addr}/v1/files"))
        .header("x-sluice-tenant", "docs")
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let job: Value = client
        .post(format!("http://{addr}/v1/batches"))
        .header("x-sluice-tenant", "docs")
        .json(&json!({"input_file_id": file["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"}))
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

/// The `data-key` cells of the page: (key, text).
fn cells(dom: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = dom;
    while let Some(at) = rest.find("data-key=\"") {
        rest = &rest[at + "data-key=\"".len()..];
        let key = &rest[..rest.find('"').unwrap()];
        let text_at = rest.find('>').unwrap() + 1;
        let text = &rest[text_at..text_at + rest[text_at..].find('<').unwrap()];
        out.push((key.to_string(), text.to_string()));
    }
    out
}

/// Checks each percentile cell of `windows` (key prefix, `/admin/latency` entry) against the
/// page's, within 5% (the window rotates between the two reads); how many it compared.
fn same_cells(cells: &[(String, String)], windows: &[(String, Value)]) -> usize {
    let mut compared = 0;
    for (prefix, w) in windows {
        for phase in ["ttfb", "total"] {
            for p in ["p50", "p95", "p99", "p999"] {
                let k = format!("{prefix}|{phase}|{p}");
                let shown: f64 = cells
                    .iter()
                    .find(|(key, _)| *key == k)
                    .unwrap_or_else(|| panic!("no cell {k}"))
                    .1
                    .parse()
                    .unwrap();
                let want = w[phase][p].as_f64().unwrap();
                assert!(
                    (shown - want).abs() <= 1.0 + want * 0.05,
                    "{k}: page {shown}, /admin/latency {want}"
                );
                compared += 1;
            }
        }
    }
    compared
}

/// The text of the row whose first cell is `first`: its cells after the first.
fn row(dom: &str, first: &str) -> Vec<String> {
    let at = dom
        .find(&format!("<td>{first}</td>"))
        .unwrap_or_else(|| panic!("no row {first}"));
    let end = at + dom[at..].find("</tr>").unwrap();
    dom[at..end]
        .split("<td")
        .skip(2)
        .map(|c| {
            let t = &c[c.find('>').unwrap() + 1..];
            t[..t.find('<').unwrap()].to_string()
        })
        .collect()
}

/// The sum of `name`'s samples in a Prometheus text page whose labels hold every `with`
/// (comma-separated pairs).
fn metric(text: &str, name: &str, with: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| with.split(',').all(|w| l.contains(w)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A model group and an upstream named as long as real ones are.
const LONG_GROUP: &str = "contract-review-long-context";
const LONG_UPSTREAM: &str = "azure-openai-sweden-central-ptu";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_loads_in_a_browser_and_shows_what_the_gateway_reports() {
    let now = Instant::now();
    // No breakers (a plain proxy with an admission limit): the page says they are off.
    let mut b = GatewayBuilder::bare().seed(4);
    // `slowpoke` answers in minutes: the batch job's one item in flight never ends while
    // the page is compared with the gateway's figures.
    // A long group and upstream name, as real deployments have: every column of the queue
    // panel must still show at every width.
    for (name, ms) in [
        ("east", 30),
        ("west", 60),
        ("slowpoke", 300_000),
        (LONG_UPSTREAM, 40),
    ] {
        let spec = UpstreamSpec {
            ttft_median: Duration::from_millis(ms),
            ttft_sigma: 0.4,
            per_token: Duration::from_millis(1),
            output_tokens_median: 20,
            ..UpstreamSpec::default()
        };
        let up = Arc::new(SimUpstream::new(name, spec, 4, now));
        b = b.provider(name, Arc::new(SimProvider(up)));
    }
    let price = Price {
        input: Micros(2_000_000),
        cached_input: Micros(200_000),
        cache_write: Micros(2_000_000),
        output: Micros(8_000_000),
        published: None,
    };
    // A ledger, and batch jobs in it: one job runs slowly (an item at a time) while the page
    // is loaded, so it shows with its bar.
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(sluice_ledger::AnyStore::Sqlite(
        sluice_ledger::SqliteStore::open(
            &dir.path().join("ledger.db"),
            sluice_ledger::Durability::Process,
        )
        .await
        .unwrap(),
    ));
    let (ledger, _writer) = sluice_ledger::Ledger::start(store.clone());
    let jobs = sluice_batch::Jobs::open(store.database()).await.unwrap();
    let settings = sluice_gateway::batches::BatchSettings {
        concurrency: 1,
        poll: Duration::from_millis(50),
        ..Default::default()
    };
    let gw = b
        .ledger(ledger, store)
        .model("slow", vec![deployment("slowpoke", "m")])
        .model(LONG_GROUP, vec![deployment(LONG_UPSTREAM, "m")])
        .model(
            "chat",
            vec![deployment("east", "m"), deployment("west", "m")],
        )
        .price("m", price)
        .limits(sluice_tail::limit::LimitSpec::Fixed(32))
        .slo(Slo {
            name: "chat_ttfb".into(),
            objective: Objective::Latency {
                measure: Measure::Ttfb,
                threshold: Duration::from_millis(120),
                target: 0.9,
            },
            lanes: Vec::new(),
            groups: Vec::new(),
        })
        .build()
        .unwrap();
    let app = sluice_gateway::App::new(gw).batches(jobs, settings, None);
    let runner = tokio::spawn(app.clone().run_batches());
    let serving = Serving::start(app).await;
    let addr = serving.addr;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let job = submit_job(&client, addr, 2_000).await;
    let system = "You review contracts against the rule book. ".repeat(120);
    // Every fifth request in the batch lane, every tenth to the long-named group.
    let calls: Vec<_> = (0..300)
        .map(|i| {
            let c = client.clone();
            let model = if i % 10 == 3 { LONG_GROUP } else { "chat" };
            let lane = if i % 5 == 1 { "batch" } else { "interactive" };
            let body = json!({"model": model, "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": format!("question {i}")}
            ]});
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(10 * i)).await;
                let r = c
                    .post(format!("http://{addr}/v1/chat/completions"))
                    .header("x-sluice-lane", lane)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                r.bytes().await.unwrap();
            })
        })
        .collect();
    for c in calls {
        c.await.unwrap();
    }

    let url = format!("http://{addr}/dashboard");
    let (dom, log) = chromium(&url, 6_000, &["--dump-dom", "--window-size=1280,1000"]).await;
    let mut pages = vec![(1280, dom.clone(), log.clone())];
    for w in [1400, 1600, 2560] {
        let size = format!("--window-size={w},1400");
        let (page, log) = chromium(&url, 6_000, &["--dump-dom", &size]).await;
        pages.push((w, page, log));
    }
    let get = |path: &str| {
        let c = client.clone();
        let u = format!("http://{addr}{path}");
        async move { c.get(u).send().await.unwrap().text().await.unwrap() }
    };
    let latency: Value = serde_json::from_str(&get("/admin/latency").await).unwrap();
    let slos: Value = serde_json::from_str(&get("/admin/slo").await).unwrap();
    let metrics = get("/metrics").await;
    // The screenshot under load: requests keep coming while the page polls.
    let loading = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let load = tokio::spawn({
        let (c, on, body) = (
            client.clone(),
            loading.clone(),
            json!({"model": "chat", "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": "more"}
            ]}),
        );
        async move {
            let mut i = 0u64;
            while on.load(std::sync::atomic::Ordering::Relaxed) {
                i += 1;
                let (c, mut b) = (c.clone(), body.clone());
                b["messages"][1]["content"] = json!(format!("more {i}"));
                tokio::spawn(async move {
                    let _ = c
                        .post(format!("http://{addr}/v1/chat/completions"))
                        .json(&b)
                        .send()
                        .await;
                });
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
        }
    });
    let shot = |w: u32| {
        std::env::temp_dir().join(format!("sluice-dashboard-{}-{w}.png", std::process::id()))
    };
    let mut shot_log = String::new();
    for (w, h) in [(1280, 1600), (2560, 1400)] {
        let arg = format!("--screenshot={}", shot(w).display());
        let size = format!("--window-size={w},{h}");
        let (_, log) = chromium(&url, 30_000, &[&arg, &size, "--hide-scrollbars"]).await;
        shot_log.push_str(&log);
    }
    loading.store(false, std::sync::atomic::Ordering::Relaxed);
    load.await.unwrap();
    serving.stop().await;

    // Loaded, polled, and no script error (the page counts them; Chromium logs them), at
    // every width from 1,280 to 2,560 px, with no panel wider than it shows.
    for (w, page, log) in &pages {
        assert!(
            page.contains("data-errors=\"0\""),
            "{w} px: script errors: {log}"
        );
        assert!(
            !page.contains("data-updates=\"0\""),
            "{w} px: the page never polled: {log}"
        );
        assert!(
            page.contains("data-overflow=\"0\""),
            "{w} px: a panel overflows: {}",
            &page[page.find("data-overflowing").unwrap_or(0)..][..200]
        );
        // The queue panel shows the long-named deployment's row, its limit included.
        let lanes = row(&page[page.find("id=\"lanes\"").unwrap()..], LONG_GROUP);
        assert_eq!(
            lanes.last().map(String::as_str),
            Some("32"),
            "{w} px: {lanes:?}"
        );
    }
    let all_logs = pages.iter().map(|(_, _, l)| l.as_str()).collect::<String>();
    for line in all_logs.lines().chain(shot_log.lines()) {
        assert!(
            !(line.contains("CONSOLE") && (line.contains("Uncaught") || line.contains("rror"))),
            "console error: {line}"
        );
    }
    // Its latency tables are /admin/latency's, within a few percent (the window rotates):
    // first what clients waited, from arrival; then the upstreams' attempts.
    let cells = cells(&dom);
    let keyed = |list: &str, key: &dyn Fn(&Value) -> String| -> Vec<(String, Value)> {
        latency[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| (key(w), w.clone()))
            .collect()
    };
    let s = |v: &Value, k: &str| v[k].as_str().unwrap().to_string();
    let upstreams = keyed("upstreams", &|u| {
        format!("{}|{}|{}", s(u, "group"), s(u, "upstream"), s(u, "mode"))
    });
    let clients = keyed("clients", &|c| {
        format!(
            "client|{}|{}|{}",
            s(c, "lane"),
            s(c, "group"),
            s(c, "class")
        )
    });
    assert_eq!(
        same_cells(&cells, &upstreams),
        24,
        "three upstreams answered, two phases, four percentiles"
    );
    let clients = same_cells(&cells, &clients);
    assert!(clients >= 8, "{clients} client cells");
    let first_table = dom.find("id=\"clients\"").unwrap();
    assert!(
        first_table < dom.find("id=\"latency\"").unwrap(),
        "clients come first"
    );
    // The trend starts from what the server held when the page opened: its lines have a
    // point per step of the traffic before (about 3 s of it, in steps of 10 s: one or more).
    assert!(
        dom.contains("interactive lane, clients"),
        "trend legend: {}",
        &dom[dom.find("trend-legend").unwrap()..][..300]
    );
    // Every lane has its own chart.
    assert!(
        dom.contains("batch lane, clients"),
        "trend legend: {}",
        &dom[dom.find("id=\"trend\"").unwrap()..][..300]
    );
    for lane in ["interactive", "batch"] {
        let chart = &dom[dom
            .find(&format!("data-lane=\"{lane}\""))
            .unwrap_or_else(|| panic!("no {lane} chart"))..];
        let chart = &chart[..chart.find("</svg>").unwrap()];
        assert!(chart.matches("<polyline").count() >= 5, "{lane}: {chart}");
        assert!(chart.contains(">now<"), "the {lane} trend's time axis");
    }
    // The heatmap's axes name latencies.
    let axis = &dom[dom.find("data-y-axis=\"").expect("the heatmap's axis") + 13..];
    let axis = &axis[..axis.find('"').unwrap()];
    assert!(
        axis.contains("ms") && axis.contains(" s"),
        "heatmap axis {axis}"
    );
    // A feature that is off says so.
    assert!(
        dom.contains("off: no group has a breaker"),
        "breakers: {}",
        &dom[dom.find("id=\"breakers\"").unwrap()..][..300]
    );
    // Its SLO row is /admin/slo's.
    let s = &slos["slos"][0];
    let slo_row = row(&dom, "chat_ttfb");
    assert_eq!(slo_row[1], s["good"].to_string(), "{slo_row:?} {s}");
    assert_eq!(slo_row[2], s["bad"].to_string(), "{slo_row:?} {s}");
    // Its spend and provider prompt-cache share are /metrics'.
    let spend: f64 = row(&dom, "group chat")[0].parse().unwrap();
    let want = metric(&metrics, "sluice_cost_micros_total", "group=\"chat\"") / 1e6;
    assert!(
        want > 0.0 && (spend - want).abs() < 1e-3,
        "spend {spend}, /metrics {want}"
    );
    let shown: f64 = row(&dom, "provider prompt cache chat")[0]
        .trim_end_matches('%')
        .parse()
        .unwrap();
    let tokens = "sluice_prompt_cache_tokens_total";
    let want = 100.0 * metric(&metrics, tokens, "group=\"chat\",kind=\"cached\"")
        / metric(&metrics, tokens, "group=\"chat\",kind=\"prompt\"");
    assert!(
        want > 50.0 && (shown - want).abs() < 0.1,
        "page {shown}%, /metrics {want:.2}%"
    );
    // The running job has its row, its tenant and its bar.
    let job_row = row(&dom, &job);
    assert_eq!(job_row[0], "docs", "{job_row:?}");
    assert_eq!(job_row[1], "in_progress", "{job_row:?}");
    assert!(dom.contains("<progress value=\""), "no bar");
    runner.abort();
    // A screenshot was taken at each width.
    for w in [1280, 2560] {
        let size = std::fs::metadata(shot(w)).map(|m| m.len()).unwrap_or(0);
        assert!(
            size > 20_000,
            "screenshot {} is {size} bytes: {shot_log}",
            shot(w).display()
        );
        if let Ok(keep) = std::env::var("SLUICE_DASHBOARD_SCREENSHOT") {
            std::fs::copy(shot(w), Path::new(&keep).with_extension(format!("{w}.png"))).unwrap();
        }
        std::fs::remove_file(shot(w)).unwrap();
    }
}
