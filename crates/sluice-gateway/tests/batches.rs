//! Batch jobs through the gateway: files checked line by line and refused whole, jobs that
//! run every item once through the walk in the batch lane, bill each once, end each item
//! with its answer or its error, belong to their tenant, cancel, and refuse at the door
//! when the queue is full. The gateway's runner runs beside the router; the ledger is a
//! SQLite file (on the real clock, as the ledger's pool needs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::collections::HashSet;
use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use sluice_batch::Jobs;
use sluice_gateway::GatewayBuilder;
use sluice_gateway::batches::BatchSettings;
use sluice_ledger::{Store, UsageQuery};
use sluice_tail::retry::RetryPolicy;
use tower::ServiceExt;

use crate::scripted::{PLAIN_USAGE, PRICE, Rig, ledgered, rig_with};

const BOUNDARY: &str = "sluice-test-boundary";

struct Batched {
    r: Rig,
    store: std::sync::Arc<sluice_ledger::AnyStore>,
    _dir: tempfile::TempDir,
}

async fn start(
    settings: BatchSettings,
    configure: impl FnOnce(GatewayBuilder) -> GatewayBuilder,
) -> Batched {
    let dir = tempfile::tempdir().unwrap();
    let (ledger, store) = ledgered(&dir.path().join("ledger.db")).await;
    let jobs = Jobs::open(store.database()).await.unwrap();
    let kept = store.clone();
    let r = rig_with(
        |b| configure(b.price("m", PRICE).ledger(ledger, store)),
        |app| app.batches(jobs, settings, None),
    );
    *r.a.usage.lock() = Some(PLAIN_USAGE);
    tokio::spawn(r.app.clone().run_batches());
    Batched {
        r,
        store: kept,
        _dir: dir,
    }
}

fn quick() -> BatchSettings {
    BatchSettings {
        poll: Duration::from_millis(20),
        concurrency: 8,
        ..BatchSettings::default()
    }
}

fn line(id: &str, model: &str, system: &str) -> String {
    json!({
        "custom_id": id, "method": "POST", "url": "/v1/chat/completions",
        "body": {"model": model, "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": format!("review {id}")}
        ]}
    })
    .to_string()
}

fn file_of(n: usize) -> String {
    (0..n)
        .map(|i| {
            line(
                &format!("doc-{i}"),
                "chat",
                if i % 2 == 0 { "a" } else { "b" },
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn call(
    b: &Batched,
    method: &str,
    path: &str,
    tenant: &str,
    body: Option<Value>,
) -> (u16, Value, String) {
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("x-sluice-tenant", tenant);
    let body = match body {
        Some(v) => {
            req = req.header("content-type", "application/json");
            Body::from(v.to_string())
        }
        None => Body::empty(),
    };
    let resp =
        b.r.router
            .clone()
            .oneshot(req.body(body).unwrap())
            .await
            .unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::Null),
        text,
    )
}

async fn upload(b: &Batched, tenant: &str, content: &str) -> (u16, Value) {
    let body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
         --{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n\
         Content-Type: application/jsonl\r\n\r\n{content}\r\n--{BOUNDARY}--\r\n"
    );
    let req = http::Request::post("/v1/files")
        .header("x-sluice-tenant", tenant)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(Body::from(body))
        .unwrap();
    let resp = b.r.router.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn submit(b: &Batched, tenant: &str, content: &str) -> Value {
    let (status, file) = upload(b, tenant, content).await;
    assert_eq!(status, 200, "{file}");
    let (status, job, _) = call(
        b,
        "POST",
        "/v1/batches",
        tenant,
        Some(
            json!({"input_file_id": file["id"], "endpoint": "/v1/chat/completions",
            "completion_window": "24h", "metadata": {"run": "test"}}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{job}");
    job
}

/// The job's progress line says what its counts say, each item once, at every moment.
fn line_agrees(job: &Value) {
    let p = &job["sluice"];
    let n = |k: &str| p[k].as_u64().unwrap();
    let total = n("total");
    assert_eq!(
        n("queued") + n("running") + n("done") + n("failed") + n("cancelled"),
        total,
        "{p}"
    );
    let mut want = format!(
        "queued {}/{total}, running {}, done {}/{total}",
        n("queued"),
        n("running"),
        n("done")
    );
    for k in ["failed", "cancelled"] {
        if n(k) > 0 {
            want.push_str(&format!(", {k} {}", n(k)));
        }
    }
    assert_eq!(p["line"], want.as_str());
}

/// Polls the job until it has ended (at most 30 s of the real clock), its progress line
/// checked at every poll.
async fn ended(b: &Batched, tenant: &str, id: &str) -> Value {
    for _ in 0..1_500 {
        let (_, job, _) = call(b, "GET", &format!("/v1/batches/{id}"), tenant, None).await;
        line_agrees(&job);
        if ["completed", "cancelled", "expired"].contains(&job["status"].as_str().unwrap_or("")) {
            return job;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("batch {id} did not end");
}

/// Submits a job of 20 items for `acme`, cancels it once two are done; its id and the
/// cancel's answer.
async fn cancel_after_two_done(b: &Batched) -> (String, Value) {
    let job = submit(b, "acme", &file_of(20)).await;
    let id = job["id"].as_str().unwrap().to_string();
    for _ in 0..500 {
        let (_, now, _) = call(b, "GET", &format!("/v1/batches/{id}"), "acme", None).await;
        if now["request_counts"]["completed"].as_u64().unwrap_or(0) >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status, at_cancel, _) =
        call(b, "POST", &format!("/v1/batches/{id}/cancel"), "acme", None).await;
    assert_eq!(status, 200);
    (id, at_cancel)
}

fn lines_of(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_every_item_once_in_the_batch_lane_and_bills_each_once() {
    let b = start(quick(), |b| b).await;
    let job = submit(&b, "acme", &file_of(20)).await;
    assert_eq!(job["object"], "batch");
    assert_eq!(job["request_counts"]["total"], 20);
    assert_eq!(job["metadata"]["run"], "test");
    let id = job["id"].as_str().unwrap();
    let done = ended(&b, "acme", id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["request_counts"],
        json!({"total": 20, "completed": 20, "failed": 0})
    );
    assert_eq!(done["error_file_id"], Value::Null);
    assert_eq!(done["sluice"]["line"], "queued 0/20, running 0, done 20/20");
    assert_eq!(
        done["usage"]["input_tokens"].as_u64(),
        Some(20 * PLAIN_USAGE.prompt_tokens)
    );
    assert!(done["completed_at"].as_i64().is_some());

    let out = done["output_file_id"].as_str().unwrap();
    let (status, object, _) = call(&b, "GET", &format!("/v1/files/{out}"), "acme", None).await;
    assert_eq!(
        (status, object["purpose"].as_str()),
        (200, Some("batch_output"))
    );
    let (status, _, text) =
        call(&b, "GET", &format!("/v1/files/{out}/content"), "acme", None).await;
    assert_eq!(status, 200);
    assert_eq!(object["bytes"].as_u64(), Some(text.len() as u64));
    let lines = lines_of(&text);
    let ids: HashSet<&str> = lines
        .iter()
        .map(|l| l["custom_id"].as_str().unwrap())
        .collect();
    assert_eq!((lines.len(), ids.len()), (20, 20));
    assert!(
        lines
            .iter()
            .all(|l| l["response"]["status_code"] == 200 && l["error"].is_null())
    );

    // Every item went through the walk in the batch lane, as the tenant.
    let records = b.r.records.lock().clone();
    assert_eq!(records.len(), 20);
    assert!(records.iter().all(|r| r.lane.as_deref() == Some("batch")));
    assert!(records.iter().all(|r| r.tenant.as_deref() == Some("acme")));
    // One ledger row per item, each marked with its item.
    let rows = b
        .store
        .entries(&UsageQuery::default(), 1_000)
        .await
        .unwrap();
    let items: HashSet<String> = rows
        .iter()
        .filter_map(|e| e.batch_item.as_deref().map(str::to_string))
        .collect();
    assert_eq!((rows.len(), items.len()), (20, 20));
    assert!(rows.iter().all(|e| e.cost_micros.is_some_and(|c| c > 0)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_file_is_refused_whole_with_every_bad_line_named() {
    let b = start(quick(), |b| b).await;
    let content = [
        line("a", "chat", "s"),
        "{not json".into(),
        r#"{"method":"POST","url":"/v1/chat/completions","body":{"model":"chat","messages":[{"role":"user","content":"x"}]}}"#.into(),
        line("a", "chat", "s"),
        r#"{"custom_id":"e","method":"POST","url":"/v1/chat/completions","body":{"model":"chat","messages":[{"role":"wizard","content":"x"}]}}"#.into(),
    ]
    .join("\n");
    let (status, err) = upload(&b, "acme", &content).await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["error"]["type"], "invalid_request_error");
    let message = err["error"]["message"].as_str().unwrap();
    for want in [
        "4 bad lines",
        "line 2:",
        "line 3: custom_id is required",
        "line 4: custom_id `a` is already used by line 1",
        "line 5:",
    ] {
        assert!(message.contains(want), "{want}: {message}");
    }
    assert_eq!(err["error"]["param"], "file");
    // Nothing of it was kept.
    let (_, files, _) = call(&b, "GET", "/v1/files", "acme", None).await;
    assert_eq!(files["data"], json!([]));

    // One bad line: its number and field are the param.
    let (status, err) = upload(&b, "acme", &format!("{}\n{{\"custom_id\":\"x\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{{\"messages\":[]}}}}", line("a", "chat", "s"))).await;
    assert_eq!(status, 400);
    assert_eq!(err["error"]["param"], "line 2: body.model");

    // A purpose other than batch, and an upload without a file.
    let (status, err) = upload(&b, "acme", "").await;
    assert_eq!(status, 400);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no requests"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_for_an_unknown_model_fails_alone() {
    let b = start(quick(), |b| b).await;
    let content = [
        line("ok-1", "chat", "s"),
        line("bad", "no-such-model", "s"),
        line("ok-2", "chat", "s"),
    ]
    .join("\n");
    let job = submit(&b, "acme", &content).await;
    let done = ended(&b, "acme", job["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(
        done["request_counts"],
        json!({"total": 3, "completed": 2, "failed": 1})
    );
    let errors = done["error_file_id"].as_str().unwrap();
    let (_, _, text) = call(
        &b,
        "GET",
        &format!("/v1/files/{errors}/content"),
        "acme",
        None,
    )
    .await;
    let lines = lines_of(&text);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["custom_id"], "bad");
    assert_eq!(lines[0]["response"]["status_code"], 404);
    assert_eq!(
        lines[0]["response"]["body"]["error"]["code"],
        "model_not_found"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_jobs_and_files_are_not_found() {
    let b = start(quick(), |b| b).await;
    let job = submit(&b, "acme", &file_of(2)).await;
    let id = job["id"].as_str().unwrap();
    let file = job["input_file_id"].as_str().unwrap();
    for (method, path) in [
        ("GET", format!("/v1/batches/{id}")),
        ("POST", format!("/v1/batches/{id}/cancel")),
        ("GET", format!("/v1/files/{file}")),
        ("GET", format!("/v1/files/{file}/content")),
        ("DELETE", format!("/v1/files/{file}")),
    ] {
        let (status, err, _) = call(&b, method, &path, "globex", None).await;
        assert_eq!(status, 404, "{method} {path}: {err}");
    }
    let (_, list, _) = call(&b, "GET", "/v1/batches", "globex", None).await;
    assert_eq!(list["data"], json!([]));
    let (status, _, _) = call(
        &b,
        "POST",
        "/v1/batches",
        "globex",
        Some(json!({"input_file_id": file, "endpoint": "/v1/chat/completions", "completion_window": "24h"})),
    )
    .await;
    assert_eq!(status, 404);
    ended(&b, "acme", id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_is_checked_before_anything_is_kept() {
    let b = start(
        BatchSettings {
            max_queued_items: 5,
            ..quick()
        },
        |b| b,
    )
    .await;
    let (_, file) = upload(&b, "acme", &file_of(6)).await;
    let create = |endpoint: &str, window: &str| json!({"input_file_id": file["id"], "endpoint": endpoint, "completion_window": window});
    let (status, err, _) = call(
        &b,
        "POST",
        "/v1/batches",
        "acme",
        Some(create("/v1/embeddings", "24h")),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("line 1: url `/v1/chat/completions`"),
        "{err}"
    );
    let (status, err, _) = call(
        &b,
        "POST",
        "/v1/batches",
        "acme",
        Some(create("/v1/chat/completions", "1h")),
    )
    .await;
    assert_eq!(
        (status, err["error"]["param"].as_str()),
        (400, Some("completion_window"))
    );
    // Six items do not fit a queue of five: refused at the door, with when to come back.
    let req = http::Request::post("/v1/batches")
        .header("x-sluice-tenant", "acme")
        .header("content-type", "application/json")
        .body(Body::from(
            create("/v1/chat/completions", "24h").to_string(),
        ))
        .unwrap();
    let resp = b.r.router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 503);
    assert!(resp.headers().get("retry-after").is_some());
    let (_, list, _) = call(&b, "GET", "/v1/batches", "acme", None).await;
    assert_eq!(list["data"], json!([]), "nothing kept");
}

/// Items claimed and still waiting for a slot when their job is cancelled are withdrawn:
/// never sent, never billed. The one in flight finishes and is billed; the job counts each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_withdraws_claimed_items_still_waiting_for_a_slot() {
    // Eight items claimed at a time, one slot upstream: seven of them wait in admission.
    let b = start(
        BatchSettings {
            concurrency: 8,
            ..quick()
        },
        |b| b.limits(sluice_tail::limit::LimitSpec::Fixed(1)),
    )
    .await;
    for _ in 0..40 {
        b.r.a.push(200, true);
    }
    let (id, at_cancel) = cancel_after_two_done(&b).await;
    let sent_at_cancel = b.r.a.calls();
    let done = ended(&b, "acme", &id).await;
    let sent = b.r.a.calls();
    let progress = &done["sluice"];
    eprintln!("at the cancel: {sent_at_cancel} sent, {at_cancel}; at the end: {sent} sent, {done}");
    assert_eq!(done["status"], "cancelled");
    let (completed, failed, cancelled) = (
        progress["done"].as_u64().unwrap(),
        progress["failed"].as_u64().unwrap(),
        progress["cancelled"].as_u64().unwrap(),
    );
    assert_eq!(
        u64::from(sent),
        completed,
        "every item sent finished, and nothing more was sent"
    );
    // At most the one granted the slot as the cancel came was sent after it.
    assert!(
        sent <= sent_at_cancel + 1,
        "items were sent after the cancel: {sent_at_cancel} then {sent}"
    );
    assert_eq!(failed, 0);
    assert_eq!(completed + cancelled, 20, "each item counted once");
    assert!(cancelled >= 20 - 8, "{cancelled} cancelled");
    // Billed once for each item sent, nothing for the withdrawn.
    let rows = b
        .store
        .entries(&UsageQuery::default(), 1_000)
        .await
        .unwrap();
    let billed = rows.iter().filter(|e| e.batch_item.is_some()).count();
    assert_eq!(billed as u64, completed, "one row per item sent");
}

/// The same when another gateway holds the claimed items: a cancel taken by one gateway
/// withdraws the items another has claimed, once its keeper sees the cancel in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_through_one_gateway_withdraws_what_another_claimed() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger, store) = ledgered(&dir.path().join("ledger.db")).await;
    let settings = BatchSettings {
        concurrency: 8,
        ..quick()
    };
    let gateway = |ledger: sluice_ledger::Ledger, store, jobs, limit: bool| {
        let settings = settings.clone();
        rig_with(
            move |b| {
                let b = b.price("m", PRICE).ledger(ledger, store);
                if limit {
                    b.limits(sluice_tail::limit::LimitSpec::Fixed(1))
                } else {
                    b
                }
            },
            move |app| app.batches(jobs, settings, None),
        )
    };
    // The front takes the API calls and runs nothing; the back runs the items, one at a
    // time upstream.
    let front = gateway(
        ledger.clone(),
        store.clone(),
        Jobs::open(store.database()).await.unwrap(),
        false,
    );
    let back = gateway(
        ledger,
        store.clone(),
        Jobs::open(store.database()).await.unwrap(),
        true,
    );
    *back.a.usage.lock() = Some(PLAIN_USAGE);
    for _ in 0..40 {
        back.a.push(200, true);
    }
    tokio::spawn(back.app.clone().run_batches());
    let upstream = back.a.clone();
    let b = Batched {
        r: front,
        store,
        _dir: dir,
    };
    let (id, _) = cancel_after_two_done(&b).await;
    let sent_at_cancel = upstream.calls();
    let done = ended(&b, "acme", &id).await;
    let sent = upstream.calls();
    let progress = &done["sluice"];
    eprintln!("at the cancel: {sent_at_cancel} sent; at the end: {sent} sent, {progress}");
    assert_eq!(done["status"], "cancelled");
    let completed = progress["done"].as_u64().unwrap();
    assert_eq!(u64::from(sent), completed, "every item sent finished");
    // The back hears of the cancel within its keeper's poll (20 ms): an item or two may be
    // granted the slot meanwhile, where without it all eight claimed would go.
    assert!(
        sent <= sent_at_cancel + 2,
        "items were sent after the cancel: {sent_at_cancel} then {sent}"
    );
    assert_eq!(
        completed + progress["cancelled"].as_u64().unwrap(),
        20,
        "each item counted once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_mid_run_ends_what_is_queued_and_keeps_what_ran() {
    let b = start(
        BatchSettings {
            concurrency: 2,
            ..quick()
        },
        |b| b,
    )
    .await;
    for _ in 0..40 {
        b.r.a.push(300, true);
    }
    let job = submit(&b, "acme", &file_of(12)).await;
    let id = job["id"].as_str().unwrap().to_string();
    // Wait for the first items to end, then cancel.
    for _ in 0..500 {
        let (_, now, _) = call(&b, "GET", &format!("/v1/batches/{id}"), "acme", None).await;
        if now["request_counts"]["completed"].as_u64().unwrap_or(0) >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The admin view (the dashboard's) lists it, with its tenant and progress.
    let (status, open, _) = call(&b, "GET", "/admin/batches", "anyone", None).await;
    assert_eq!(status, 200);
    assert_eq!(open["data"][0]["id"], id.as_str(), "{open}");
    assert_eq!(open["data"][0]["tenant"], "acme");
    assert!(open["data"][0]["sluice"]["done"].as_u64().unwrap() >= 2);
    let (status, cancelling, _) = call(
        &b,
        "POST",
        &format!("/v1/batches/{id}/cancel"),
        "acme",
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        ["cancelling", "cancelled"].contains(&cancelling["status"].as_str().unwrap()),
        "{cancelling}"
    );
    let done = ended(&b, "acme", &id).await;
    assert_eq!(done["status"], "cancelled");
    let completed = done["request_counts"]["completed"].as_u64().unwrap();
    assert!((2..12).contains(&completed), "{done}");
    assert_eq!(
        done["request_counts"]["failed"].as_u64().unwrap() + completed,
        12
    );
    let (_, _, out) = call(
        &b,
        "GET",
        &format!(
            "/v1/files/{}/content",
            done["output_file_id"].as_str().unwrap()
        ),
        "acme",
        None,
    )
    .await;
    let (_, _, errors) = call(
        &b,
        "GET",
        &format!(
            "/v1/files/{}/content",
            done["error_file_id"].as_str().unwrap()
        ),
        "acme",
        None,
    )
    .await;
    let (out, errors) = (lines_of(&out), lines_of(&errors));
    assert!(
        errors
            .iter()
            .all(|l| l["error"]["code"] == "batch_cancelled")
    );
    let all: HashSet<&str> = out
        .iter()
        .chain(&errors)
        .map(|l| l["custom_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        (out.len() + errors.len(), all.len()),
        (12, 12),
        "each item once"
    );
    // A job that ended cannot be cancelled again.
    let (status, _, _) = call(
        &b,
        "POST",
        &format!("/v1/batches/{id}/cancel"),
        "acme",
        None,
    )
    .await;
    assert_eq!(status, 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_whose_upstream_keeps_failing_ends_failed_within_the_retry_budget() {
    let b = start(quick(), |b| {
        b.retries(RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        })
    })
    .await;
    for _ in 0..20 {
        b.r.a.push(10, false);
    }
    let job = submit(&b, "acme", &file_of(1)).await;
    let done = ended(&b, "acme", job["id"].as_str().unwrap()).await;
    assert_eq!(
        done["request_counts"],
        json!({"total": 1, "completed": 0, "failed": 1})
    );
    assert_eq!(b.r.a.calls(), 3, "three attempts, then the item ended");
    let (_, _, text) = call(
        &b,
        "GET",
        &format!(
            "/v1/files/{}/content",
            done["error_file_id"].as_str().unwrap()
        ),
        "acme",
        None,
    )
    .await;
    let lines = lines_of(&text);
    assert_eq!(lines[0]["response"]["status_code"], 502, "{lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_over_the_limit_is_refused_and_nothing_kept() {
    let b = start(
        BatchSettings {
            max_file_bytes: 1_000,
            ..quick()
        },
        |b| b,
    )
    .await;
    let (status, err) = upload(&b, "acme", &file_of(20)).await;
    assert_eq!(status, 413, "{err}");
    assert_eq!(err["error"]["param"], "file");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1000 bytes")
    );
    let (_, files, _) = call(&b, "GET", "/v1/files", "acme", None).await;
    assert_eq!(files["data"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_events_stream_reports_progress_until_the_job_ends() {
    let b = start(quick(), |b| b).await;
    let job = submit(&b, "acme", &file_of(4)).await;
    let id = job["id"].as_str().unwrap();
    // Read to its end: the stream closes once the job has ended, its last event saying so.
    let (status, _, text) =
        call(&b, "GET", &format!("/v1/batches/{id}/events"), "acme", None).await;
    assert_eq!(status, 200);
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(text.contains("event: progress"), "{text}");
    let last = events.last().unwrap();
    assert_eq!(last["status"], "completed", "{text}");
    assert_eq!(last["sluice"]["line"], "queued 0/4, running 0, done 4/4");
    let (status, _, _) = call(
        &b,
        "GET",
        &format!("/v1/batches/{id}/events"),
        "globex",
        None,
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_revoked_mid_job_runs_none_of_its_remaining_items() {
    const SECRET: &str = "sk-sluice-batch-key";
    let b = start(
        BatchSettings {
            concurrency: 1,
            ..quick()
        },
        |b| {
            b.admin_token("admin-secret").key(
                sluice_economy::KeySpec {
                    name: "acme-batch".into(),
                    tenant: std::sync::Arc::from("acme"),
                    lane: None,
                    models: vec![],
                },
                &sluice_economy::keys::hash_hex(SECRET),
            )
        },
    )
    .await;
    for _ in 0..10 {
        b.r.a.push(400, true);
    }
    let auth = format!("Bearer {SECRET}");
    let body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
         --{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n\r\n{}\r\n--{BOUNDARY}--\r\n",
        file_of(5)
    );
    let req = http::Request::post("/v1/files")
        .header("authorization", &auth)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(Body::from(body))
        .unwrap();
    let resp = b.r.router.clone().oneshot(req).await.unwrap();
    let file: Value =
        serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    let req = http::Request::post("/v1/batches")
        .header("authorization", &auth)
        .header("content-type", "application/json")
        .body(Body::from(
            json!({"input_file_id": file["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"}).to_string(),
        ))
        .unwrap();
    let resp = b.r.router.clone().oneshot(req).await.unwrap();
    let job: Value =
        serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    let id = job["id"].as_str().unwrap().to_string();
    // While its first item runs, the key is revoked.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let req = http::Request::delete("/admin/keys/acme-batch")
        .header("authorization", "Bearer admin-secret")
        .body(Body::empty())
        .unwrap();
    assert_eq!(b.r.router.clone().oneshot(req).await.unwrap().status(), 200);
    // Its tenant's only key is gone: the job is read from the store.
    let jobs = Jobs::open(b.store.database()).await.unwrap();
    let mut counts = jobs.counts(&id).await.unwrap();
    for _ in 0..1_500 {
        if counts.queued + counts.running == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        counts = jobs.counts(&id).await.unwrap();
    }
    assert!(counts.done <= 1, "{counts:?}");
    assert_eq!(counts.failed + counts.done, 5, "{counts:?}");
    let errors = jobs.results(&id, true).await.unwrap();
    let text = sluice_batch::objects::result_content(&id, &errors);
    let lines = lines_of(&text);
    assert!(
        lines.iter().all(|l| l["error"]["code"] == "invalid_api_key"
            && l["error"]["message"].as_str().unwrap().contains("revoked")),
        "{lines:?}"
    );
    assert!(b.r.a.calls() <= 1, "nothing more went upstream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_window_slo_counts_each_ended_job_once() {
    use sluice_telemetry::slo::{Objective, Slo};
    let slo = Slo {
        name: "jobs_in_window".into(),
        objective: Objective::BatchWindow { target: 0.99 },
        lanes: Vec::new(),
        groups: Vec::new(),
    };
    let b = start(quick(), |b| b.slo(slo)).await;
    // A job whose window has already closed (as if it had waited a day): none of its items
    // is sent, and the keeper ends it expired.
    let jobs = Jobs::open(b.store.database()).await.unwrap();
    let now = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    let lines = sluice_batch::input::check(&file_of(3), sluice_batch::Limits::default()).unwrap();
    let late = sluice_batch::NewBatch {
        id: "batch_late".into(),
        tenant: "acme".into(),
        api_key: None,
        key_sha256: None,
        endpoint: sluice_batch::Endpoint::Chat,
        input_file_id: "file-gone".into(),
        created_ms: now - 86_400_000,
        expires_ms: now - 1,
        metadata: None,
    };
    jobs.add_batch(&late, &lines).await.unwrap();
    let on_time = submit(&b, "acme", &file_of(3)).await;
    let expired = ended(&b, "acme", "batch_late").await;
    assert_eq!(expired["status"], "expired", "{expired}");
    assert_eq!(
        expired["request_counts"],
        json!({"total": 3, "completed": 0, "failed": 3})
    );
    let (_, _, text) = call(
        &b,
        "GET",
        "/v1/files/file-batch_late-errors/content",
        "acme",
        None,
    )
    .await;
    assert!(
        lines_of(&text)
            .iter()
            .all(|l| l["error"]["code"] == "batch_expired")
    );
    ended(&b, "acme", on_time["id"].as_str().unwrap()).await;
    // Read again and again: each job is counted once, by whoever ended it.
    for _ in 0..3 {
        call(&b, "GET", "/v1/batches", "acme", None).await;
    }
    assert_eq!(b.r.a.calls(), 3, "nothing of the late job went upstream");
    let (_, slos, _) = call(&b, "GET", "/admin/slo", "acme", None).await;
    let s = &slos["slos"][0];
    assert_eq!(
        (
            s["name"].as_str(),
            s["kind"].as_str(),
            s["good"].as_u64(),
            s["bad"].as_u64()
        ),
        (
            Some("jobs_in_window"),
            Some("batch_window"),
            Some(1),
            Some(1)
        ),
        "{slos}"
    );
    let metrics = crate::scripted::scrape(&b.r.router).await;
    assert!(
        metrics.lines().any(|l| l.starts_with(
            "sluice_slo_events_total{slo=\"jobs_in_window\",outcome=\"bad\",culprit=\"sluice_queueing\"} 1"
        )),
        "{metrics}"
    );
}
