//! Document analysis through a gateway served on loopback, its reviews answered by the
//! simulated reviewer: one document analysed while the caller waits (JSON and Markdown),
//! a document that cannot be read refused with its own reason in the API's error shape, and
//! a batch of documents kept as a batch job in the batch store, run in the batch lane and
//! followed to its end, every review a call through the walk.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod shared;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use sluice_gateway::GatewayBuilder;
use sluice_sim::server::SimServer;
use sluice_sim::spec::UpstreamSpec;

const BOUNDARY: &str = "sluice-analysis-boundary";
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-documents/fixtures");

/// A served gateway and the folder of its ledger (a SQLite file).
struct Served {
    url: String,
    _dir: tempfile::TempDir,
}

async fn gateway() -> Served {
    served("").await
}

/// A gateway on loopback in front of a simulated reviewer, with `extra` configuration, its
/// ledger and batch jobs in a SQLite file, its batch runner running.
async fn served(extra: &str) -> Served {
    let fast = UpstreamSpec {
        ttft_median: Duration::from_millis(5),
        per_token: Duration::from_micros(200),
        ..UpstreamSpec::default()
    };
    let sim = SimServer::new(&[("openai".to_string(), fast)], 1);
    let sim_addr = shared::simulator(sim).await;
    let text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
[ledger]
store = "off"
[providers.sim]
kind = "openai"
base_url = "http://{sim_addr}/openai/v1"
[models.reviewer]
deployments = [{{ provider = "sim", model = "gpt-4o-mini" }}]
[analysis]
deadline = "20s"
concurrency = 2
{extra}
"#
    );
    let env = BTreeMap::new();
    let cfg = sluice_config::gateway::load(&text, &env, &[]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(sluice_ledger::AnyStore::Sqlite(
        sluice_ledger::SqliteStore::open(
            &dir.path().join("ledger.db"),
            sluice_ledger::Durability::Process,
        )
        .await
        .unwrap(),
    ));
    let jobs = sluice_batch::Jobs::open(store.database()).await.unwrap();
    let (ledger, _writer) = sluice_ledger::Ledger::start(store.clone());
    let settings = sluice_gateway::batches::BatchSettings {
        poll: Duration::from_millis(20),
        ..sluice_gateway::batches::BatchSettings::default()
    };
    let gw = GatewayBuilder::from_config(&cfg, &env)
        .unwrap()
        .ledger(ledger, store)
        .build()
        .unwrap();
    let app = sluice_gateway::App::new(gw)
        .batches(jobs, settings, None)
        .analysis_from_config(
            &cfg,
            std::path::Path::new("."),
            sluice_gateway::app::Reviews::Simulated,
        )
        .unwrap();
    tokio::spawn(app.clone().run_batches());
    let url = shared::gateway_url(app).await;
    Served { url, _dir: dir }
}

fn fixture(name: &str) -> (String, Vec<u8>) {
    (
        name.to_string(),
        std::fs::read(format!("{FIXTURES}/{name}")).unwrap(),
    )
}

fn licence(name: &str) -> (String, Vec<u8>) {
    (
        format!("{name}.txt"),
        std::fs::read(format!("/usr/share/common-licenses/{name}")).unwrap(),
    )
}

async fn upload(url: &str, query: &str, docs: &[(String, Vec<u8>)]) -> reqwest::Response {
    upload_as(url, query, docs, None).await
}

async fn upload_as(
    url: &str,
    query: &str,
    docs: &[(String, Vec<u8>)],
    key: Option<&str>,
) -> reqwest::Response {
    let mut body = Vec::new();
    for (name, bytes) in docs {
        body.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    let mut req = reqwest::Client::new()
        .post(format!("{url}/v1/analyses{query}"))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        );
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    req.body(body).send().await.unwrap()
}

/// The sum of `sluice_requests_total` samples whose labels include `label`.
async fn requests(url: &str, label: &str) -> f64 {
    let text = reqwest::get(format!("{url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with("sluice_requests_total{") && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn one_document_is_analysed_while_the_caller_waits() {
    let served = gateway().await;
    let url = served.url.as_str();
    let resp = upload(url, "", &[fixture("contract-zh.docx")]).await;
    assert_eq!(resp.status(), 200);
    let r: Value = resp.json().await.unwrap();
    assert_eq!(r["object"], "analysis.report");
    assert_eq!(r["format"], "docx");
    let findings = r["findings"].as_array().unwrap();
    let rules: Vec<&str> = findings
        .iter()
        .flat_map(|f| {
            f["rules"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["id"].as_str().unwrap())
        })
        .collect();
    for id in [
        "zh-renew-auto",
        "zh-data-crossborder",
        "zh-term-convenience",
        "zh-liab-cap",
    ] {
        assert!(rules.contains(&id), "{id}: {rules:?}");
    }
    // Every review answered by the simulated reviewer, its verdict read and quoting the clause.
    for f in findings {
        assert_eq!(f["review"]["status"], "reviewed", "{f}");
        let risk = f["review"]["verdict"]["risk"].as_str().unwrap();
        assert!(["high", "medium", "low", "none"].contains(&risk));
        assert!(!f["review"]["verdict"]["quote"].as_str().unwrap().is_empty());
    }
    let sent = r["calls"]["sent"].as_u64().unwrap();
    assert!(sent > 0 && sent as usize <= findings.len());
    assert_eq!(
        r["calls"]["answered"].as_u64().unwrap() as usize,
        findings.len()
    );
    assert!(r["on_time"].as_bool().unwrap());
    assert!(
        r["timings"]["total_ms"].as_f64().unwrap() >= r["timings"]["waiting_ms"].as_f64().unwrap()
    );
    assert_eq!(
        requests(url, "").await,
        sent as f64,
        "every review was a call through the walk"
    );

    let md = upload(url, "?format=markdown", &[licence("Apache-2.0")]).await;
    assert_eq!(md.headers()["content-type"], "text/markdown; charset=utf-8");
    let text = md.text().await.unwrap();
    assert!(text.starts_with("# Apache-2.0.txt\n"), "{text}");
    assert!(
        text.contains("| Apache-2.0.txt#7@"),
        "the warranty disclaimer's clause: {text}"
    );
}

#[tokio::test]
async fn a_document_that_cannot_be_read_is_refused_with_its_reason() {
    let served = gateway().await;
    let url = served.url.as_str();
    for (name, says) in [
        (
            "encrypted.pdf",
            "encrypted.pdf: the PDF is encrypted; decrypt it first",
        ),
        ("image-only.pdf", "image-only.pdf: there is no text in it"),
        (
            "not-a-zip.docx",
            "not-a-zip.docx: not a readable DOCX file: not a zip archive",
        ),
    ] {
        let resp = upload(url, "", &[fixture(name)]).await;
        assert_eq!(resp.status(), 400, "{name}");
        let e: Value = resp.json().await.unwrap();
        assert_eq!(e["error"]["param"], "file");
        assert_eq!(e["error"]["type"], "invalid_request_error");
        assert!(
            e["error"]["message"].as_str().unwrap().starts_with(says),
            "{e}"
        );
    }
    let none = upload(url, "", &[]).await;
    assert_eq!(none.status(), 400);
    let bad = upload(url, "?format=pdf", &[licence("MPL-2.0")]).await;
    assert_eq!(bad.status(), 400);
    assert_eq!(
        bad.json::<Value>().await.unwrap()["error"]["param"],
        "format"
    );
}

#[tokio::test]
async fn a_batch_of_documents_is_a_job_in_the_batch_lane() {
    let served = gateway().await;
    let url = served.url.as_str();
    let mut docs: Vec<(String, Vec<u8>)> = ["Apache-2.0", "MPL-2.0", "GPL-3", "LGPL-2.1"]
        .iter()
        .map(|n| licence(n))
        .collect();
    docs.push(fixture("contract-zh.pdf"));
    docs.push(fixture("truncated.docx"));
    docs.push(licence("Apache-2.0"));
    let resp = upload(url, "", &docs).await;
    assert_eq!(resp.status(), 202);
    let job: Value = resp.json().await.unwrap();
    assert_eq!(job["object"], "analysis");
    assert_eq!(job["counts"]["total"], 7);
    let id = job["id"].as_str().unwrap().to_string();
    let mut seen_queued = job["progress"].as_str().unwrap().starts_with("queued ");
    let mut done = Value::Null;
    for _ in 0..600 {
        let j: Value = reqwest::get(format!("{url}/v1/analyses/{id}"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        seen_queued |= j["counts"]["queued"].as_u64().unwrap() > 0;
        if j["status"] == "completed" {
            done = j;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen_queued, "documents waited their turn (concurrency 2)");
    assert_eq!(done["progress"], "queued 0/7, running 0, done 7/7");
    let summary = &done["summary"];
    assert_eq!(summary["documents"], 6);
    assert_eq!(summary["refused"][0]["document"], "truncated.docx");
    assert!(
        summary["refused"][0]["error"]
            .as_str()
            .unwrap()
            .contains("not a readable DOCX file")
    );
    let sent = summary["calls"]["sent"].as_u64().unwrap();
    let merged = summary["calls"]["merged"].as_u64().unwrap();
    let second = done["reports"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["document"] == "Apache-2.0.txt")
        .nth(1)
        .unwrap();
    assert_eq!(
        second["calls"]["sent"], 0,
        "the second copy's reviews all merged into the first's"
    );
    assert!(merged >= second["findings"].as_array().unwrap().len() as u64);
    assert_eq!(
        requests(url, "lane=\"batch\"").await,
        sent as f64,
        "reviews ran in the batch lane"
    );
    let md = reqwest::get(format!("{url}/v1/analyses/{id}?format=markdown"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        md.contains("# Batch summary") && md.contains("# MPL-2.0.txt"),
        "{md}"
    );
    // The job is a batch job like any: its output file holds each document's report.
    let batch: Value = reqwest::get(format!("{url}/v1/batches/{id}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(batch["endpoint"], "/v1/analyses");
    assert_eq!(
        batch["request_counts"],
        serde_json::json!({"total": 7, "completed": 6, "failed": 1})
    );
    let out = reqwest::get(format!(
        "{url}/v1/files/{}/content",
        batch["output_file_id"].as_str().unwrap()
    ))
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    let names: Vec<String> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["custom_id"].to_string())
        .collect();
    assert_eq!(names.len(), 6, "{names:?}");
    assert!(
        names.contains(&"\"Apache-2.0.txt (2)\"".to_string()),
        "{names:?}"
    );
    let other = reqwest::get(format!("{url}/v1/analyses/batch_nope"))
        .await
        .unwrap();
    assert_eq!(other.status(), 404);
}

#[tokio::test]
async fn reviews_are_billed_to_the_callers_tenant() {
    let secret = "sk-analysis-test-key";
    let sha = sluice_economy::keys::hash_hex(secret);
    let served = served(&format!(
        "[keys.reviewer]\ntenant = \"acme\"\nsha256 = \"{sha}\"\n"
    ))
    .await;
    let url = served.url.as_str();
    let anonymous = upload(url, "", &[licence("Apache-2.0")]).await;
    assert_eq!(anonymous.status(), 401, "keys exist: analyses need one");
    let r: Value = upload_as(url, "", &[licence("Apache-2.0")], Some(secret))
        .await
        .json()
        .await
        .unwrap();
    let sent = r["calls"]["sent"].as_u64().unwrap();
    assert!(sent > 0, "{r}");
    // The ledger's writer commits in the background: its rows appear within moments.
    let mut row = Value::Null;
    for _ in 0..100 {
        let v: Value = reqwest::get(format!("{url}/admin/usage?group_by=tenant"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        row = v["rows"][0].clone();
        if row["requests"].as_u64() == Some(sent) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(row["tenant"], "acme", "{row}");
    assert_eq!(row["requests"].as_u64(), Some(sent), "{row}");
    assert!(
        row["cost_micros"].as_i64().unwrap() > 0,
        "priced at the model's price: {row}"
    );
    assert_eq!(
        row["tokens"]["prompt"].as_u64(),
        Some(r["calls"]["prompt_tokens"].as_u64().unwrap()),
        "{row} {r}"
    );
}
