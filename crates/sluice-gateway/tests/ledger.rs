//! The usage ledger behind the gateway: every call leaves a row in the embedded store, and
//! `/admin/usage` totals them by the columns asked for, as JSON or CSV; bad questions get
//! 400 naming the parameter.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::sync::Arc;

use axum::body::Body;
use http_body_util::BodyExt;
use serde_json::Value;
use sluice_core::Usage;
use sluice_economy::Micros;
use sluice_ledger::{Store, UsageQuery};
use tower::ServiceExt;

use crate::scripted::{End, PRICE, ask_with, get_json, ledgered, rig, scrape};

const USAGE: Usage = Usage {
    prompt_tokens: 1_000,
    completion_tokens: 100,
    cached_tokens: 800,
    cache_write_tokens: 0,
    reasoning_tokens: 40,
    cache_write_long_tokens: 0,
};

async fn get(router: &axum::Router, path: &str) -> (u16, String) {
    let req = http::Request::get(path).body(Body::empty()).unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

#[tokio::test]
async fn every_call_leaves_a_row_and_usage_totals_them_by_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger, store) = ledgered(&dir.path().join("ledger.db")).await;
    let r = rig(false, |b| b.price("m", PRICE).ledger(ledger, store.clone()));
    *r.a.usage.lock() = Some(USAGE);
    let acme = [("x-sluice-tenant", "acme")];
    let globex = [("x-sluice-tenant", "globex")];
    for i in 0..3 {
        assert_eq!(
            ask_with(&r.router, &acme, &format!("a-{i}"), false)
                .await
                .status,
            200
        );
    }
    assert_eq!(ask_with(&r.router, &globex, "g-0", false).await.status, 200);
    r.a.push_end(10, End::Reject(400));
    assert_eq!(ask_with(&r.router, &globex, "g-1", false).await.status, 400);

    let v = get_json(&r.router, "/admin/usage?group_by=tenant").await;
    let one = PRICE.cost(&USAGE).0;
    let saved = u64::try_from(PRICE.cache_saving(&USAGE)).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{v}");
    assert_eq!(rows[0]["tenant"], "acme");
    assert_eq!(rows[0]["requests"], 3);
    assert_eq!(rows[0]["errors"], 0);
    assert_eq!(rows[0]["tokens"]["prompt"], 3_000);
    assert_eq!(rows[0]["tokens"]["cached"], 2_400);
    assert_eq!(rows[0]["tokens"]["reasoning"], 120);
    assert_eq!(rows[0]["cost_micros"], 3 * one);
    assert_eq!(rows[0]["cache_saved_micros"], 3 * saved);
    // The provider prompt-cache hit rate, and what it saved, as an SLI of its own.
    assert_eq!(rows[0]["cached_share"], 0.8);
    assert_eq!(rows[0]["prompt_cache_saved_micros"], 3 * saved);
    assert_eq!(rows[0]["cache_hits"], 3);
    assert_eq!(rows[1]["tenant"], "globex");
    assert_eq!(
        (rows[1]["requests"].as_u64(), rows[1]["errors"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(v["total"]["requests"], 5);
    assert_eq!(v["total"]["cost_micros"], 4 * one);

    // The same figures in /metrics: cost, and the ledger's rows (flushed by the usage call).
    let metrics = scrape(&r.router).await;
    assert!(
        metrics.contains(&format!(
            "sluice_cost_micros_total{{group=\"chat\",upstream=\"a\"}} {}",
            4 * one
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains("sluice_ledger_rows_committed_total 5"),
        "{metrics}"
    );
    for (line, n) in [
        (
            r#"sluice_prompt_cache_tokens_total{tenant="acme",group="chat",upstream="a",kind="prompt"}"#,
            3_000,
        ),
        (
            r#"sluice_prompt_cache_tokens_total{tenant="acme",group="chat",upstream="a",kind="cached"}"#,
            2_400,
        ),
        (
            r#"sluice_prompt_cache_tokens_total{tenant="globex",group="chat",upstream="a",kind="cached"}"#,
            800,
        ),
        (
            r#"sluice_prompt_cache_micros_total{tenant="acme",group="chat",upstream="a",kind="saved"}"#,
            3 * saved,
        ),
        (
            r#"sluice_prompt_cache_micros_total{tenant="acme",group="chat",upstream="a",kind="write_premium"}"#,
            0,
        ),
    ] {
        assert!(
            metrics.contains(&format!("{line} {n}")),
            "{line} {n}\n{metrics}"
        );
    }
    assert!(
        metrics.contains("sluice_ledger_rows_pending 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("sluice_ledger_write_failures_total 0"),
        "{metrics}"
    );

    // One tenant, by model, as CSV.
    let (status, csv) = get(
        &r.router,
        "/admin/usage?tenant=acme&group_by=model&format=csv",
    )
    .await;
    assert_eq!(status, 200);
    let lines: Vec<&str> = csv.lines().collect();
    assert!(
        lines[0].starts_with("model,requests,errors,prompt_tokens,"),
        "{csv}"
    );
    assert!(
        lines[1].starts_with("m,3,0,3000,2400,0.800,0,300,120,"),
        "{csv}"
    );
    assert_eq!(lines.len(), 2);

    // The rows themselves, with the request ids the clients saw.
    let rows = store.entries(&UsageQuery::default(), 100).await.unwrap();
    let ids: Vec<&str> = rows.iter().map(|e| &*e.request_id).collect();
    assert_eq!(ids, vec!["a-0", "a-1", "a-2", "g-0", "g-1"]);
    assert_eq!(rows[4].error.as_deref(), Some("upstream_rejected"));
    assert_eq!(rows[0].model.as_deref(), Some("m"));
    assert_eq!(rows[0].upstream.as_deref(), Some("a"));
}

#[tokio::test]
async fn bad_usage_questions_name_the_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger, store) = ledgered(&dir.path().join("ledger.db")).await;
    let r = rig(false, |b| b.ledger(ledger, store));
    for (query, param) in [
        ("group_by=tenant,colour", "group_by"),
        ("from=yesterday", "from"),
        ("from=2026-02-01&to=2026-01-01", "from"),
        ("format=xml", "format"),
        ("tenantt=acme", "tenantt"),
    ] {
        let (status, body) = get(&r.router, &format!("/admin/usage?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["error"]["param"], param, "{query}: {body}");
        assert_eq!(v["error"]["type"], "invalid_request_error");
    }
    // Without a ledger the route says so.
    let plain = rig(false, |b| b);
    let (status, body) = get(&plain.router, "/admin/usage").await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("ledger is off"), "{body}");
}

async fn send(
    router: &axum::Router,
    method: &str,
    path: &str,
    auth: &str,
    body: &str,
) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", auth)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn keys_made_through_the_admin_api_outlive_a_restart_until_revoked() {
    const ADMIN: &str = "Bearer admin-secret";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let (ledger, store) = ledgered(&path).await;
    let first = rig(false, |b| {
        b.admin_token("admin-secret")
            .require_keys(true)
            .ledger(ledger, store.clone())
    });
    let (status, made) = send(
        &first.router,
        "POST",
        "/admin/keys",
        ADMIN,
        r#"{"name":"ci","tenant":"acme","models":["chat"]}"#,
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let secret = made["key"].as_str().unwrap().to_string();
    let kept = store.keys().await.unwrap();
    assert_eq!(kept.len(), 1);
    assert_ne!(kept[0].sha256, secret, "only the hash is kept");
    drop(first);

    // A new gateway over the same file knows the key.
    let (ledger, store) = ledgered(&path).await;
    let kept = store.keys().await.unwrap();
    let second = rig(false, |b| {
        b.admin_token("admin-secret")
            .require_keys(true)
            .stored_keys(&kept)
            .ledger(ledger, store.clone())
    });
    let bearer = format!("Bearer {secret}");
    let got = ask_with(
        &second.router,
        &[("authorization", bearer.as_str())],
        "k-1",
        false,
    )
    .await;
    assert_eq!(got.status, 200, "{}", got.text);
    assert_eq!(second.record("k-1").tenant.as_deref(), Some("acme"));

    // Revoked: gone from the gateway and from the store.
    let (status, _) = send(&second.router, "DELETE", "/admin/keys/ci", ADMIN, "").await;
    assert_eq!(status, 200);
    assert!(store.keys().await.unwrap().is_empty());
    let got = ask_with(
        &second.router,
        &[("authorization", bearer.as_str())],
        "k-2",
        false,
    )
    .await;
    assert_eq!(got.status, 401);
}

/// Credits survive a restart: the new gateway reads what each tenant spent from the ledger,
/// so a tenant that used its credits before the restart is still refused after it.
#[tokio::test]
async fn a_restart_gives_no_one_their_credits_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let one = PRICE.cost(&USAGE).0;
    // Room for three calls' reservations one after another, not a fourth after three spent.
    let limits = sluice_economy::Limits {
        credits: Some(Micros(3 * one + 1_000)),
        ..sluice_economy::Limits::default()
    };
    let gateway = || async {
        let (ledger, store) = ledgered(&path).await;
        let r = rig(false, |b| {
            b.price("m", PRICE)
                .tenant_limits("acme", limits)
                .ledger(ledger, store)
        });
        *r.a.usage.lock() = Some(USAGE);
        let restored =
            sluice_gateway::walk::metering::restore_accounts(&r.gw, std::time::SystemTime::now())
                .await
                .unwrap();
        (r, restored)
    };
    let acme = [("x-sluice-tenant", "acme")];
    let (first, _) = gateway().await;
    for i in 0..3 {
        assert_eq!(
            ask_with(&first.router, &acme, &format!("c-{i}"), false)
                .await
                .status,
            200
        );
    }
    let refused = ask_with(&first.router, &acme, "c-3", false).await;
    assert_eq!(refused.status, 402, "{}", refused.text);
    first.gw.ledger().unwrap().flush().await.unwrap();
    drop(first);

    let (second, restored) = gateway().await;
    assert_eq!(restored, 1);
    let tenants = get_json(&second.router, "/admin/tenants").await;
    let account = &tenants["tenants"][0]["account"];
    assert_eq!(account["spent_micros"], 3 * one, "{tenants}");
    assert_eq!(account["spent_this_month_micros"], 3 * one);
    assert_eq!(account["tokens_today"], 3 * USAGE.total_tokens());
    let refused = ask_with(&second.router, &acme, "c-4", false).await;
    assert_eq!(refused.status, 402, "{}", refused.text);
    assert_eq!(second.a.calls(), 0);
}

/// Tenants set through the admin API: their limits apply at once, they are kept in the store
/// and come back after a restart, a configured tenant cannot be changed there, and bad
/// settings are refused naming the field.
#[tokio::test]
async fn tenants_set_through_the_admin_api_apply_at_once_and_outlive_a_restart() {
    const ADMIN: &str = "Bearer admin-secret";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let configured = sluice_economy::Limits {
        rpm: Some(100),
        ..sluice_economy::Limits::default()
    };
    let (ledger, store) = ledgered(&path).await;
    let first = rig(false, |b| {
        b.admin_token("admin-secret")
            .price("m", PRICE)
            .tenant_limits("fixed", configured)
            .ledger(ledger, store.clone())
    });
    *first.a.usage.lock() = Some(USAGE);
    // Credits for one call's worst case, not two.
    let (status, v) = send(
        &first.router,
        "PUT",
        "/admin/tenants/trial",
        ADMIN,
        r#"{"credits_micros": 3000, "lane": "batch", "rpm": 10}"#,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["source"], "api");
    assert_eq!(v["lane"], "batch");
    assert_eq!(v["account"]["credits_micros"], 3_000);
    let trial = [("x-sluice-tenant", "trial")];
    assert_eq!(
        ask_with(&first.router, &trial, "t-0", false).await.status,
        200
    );
    assert_eq!(first.record("t-0").lane.as_deref(), Some("batch"));
    assert_eq!(
        ask_with(&first.router, &trial, "t-1", false).await.status,
        402
    );

    for (path, body, param) in [
        ("/admin/tenants/fixed", r#"{"credits_micros": 5}"#, "name"),
        (
            "/admin/tenants/trial",
            r#"{"credits_micros": -1}"#,
            "credits_micros",
        ),
        (
            "/admin/tenants/trial",
            r#"{"credits_micros": 1.5}"#,
            "credits_micros",
        ),
        ("/admin/tenants/trial", r#"{"credits": 2}"#, "credits"),
        ("/admin/tenants/trial", r#"{"rpm": 0}"#, "rpm"),
        ("/admin/tenants/trial", r#"{"lane": "vip"}"#, "lane"),
        ("/admin/tenants/bad%20name", "{}", "name"),
    ] {
        let (status, v) = send(&first.router, "PUT", path, ADMIN, body).await;
        assert_eq!(status, 400, "{path} {body}: {v}");
        assert_eq!(v["error"]["param"], param, "{path} {body}: {v}");
    }
    let (status, v) = send(
        &first.router,
        "PUT",
        "/admin/tenants/trial",
        ADMIN,
        r#"{"credit": 5}"#,
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("credit"),
        "{v}"
    );
    // As `sluice serve` does at shutdown: every finished call is in the ledger.
    first.gw.ledger().unwrap().flush().await.unwrap();
    drop(first);

    // After a restart the tenant is back, with its spend restored: still out of credits
    // until topped up.
    let (ledger, store) = ledgered(&path).await;
    let stored = store.tenants().await.unwrap();
    let second = rig(false, |b| {
        b.admin_token("admin-secret")
            .price("m", PRICE)
            .stored_tenants(&stored)
            .ledger(ledger, store.clone())
    });
    *second.a.usage.lock() = Some(USAGE);
    sluice_gateway::walk::metering::restore_accounts(&second.gw, std::time::SystemTime::now())
        .await
        .unwrap();
    assert_eq!(
        ask_with(&second.router, &trial, "t-2", false).await.status,
        402
    );
    let (status, v) = send(
        &second.router,
        "PUT",
        "/admin/tenants/trial",
        ADMIN,
        r#"{"credits_micros": 1000000}"#,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["account"]["spent_micros"], PRICE.cost(&USAGE).0);
    assert_eq!(v["lane"], Value::Null);
    assert_eq!(
        ask_with(&second.router, &trial, "t-3", false).await.status,
        200
    );

    let (status, _) = send(&second.router, "DELETE", "/admin/tenants/trial", ADMIN, "").await;
    assert_eq!(status, 200);
    assert!(store.tenants().await.unwrap().is_empty());
    let (status, _) = send(&second.router, "DELETE", "/admin/tenants/trial", ADMIN, "").await;
    assert_eq!(status, 404);
}

/// An output the test reads back.
#[derive(Clone, Default)]
struct Lines(Arc<parking_lot::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn the_access_log_writes_one_line_per_request_with_what_it_cost() {
    let out = Lines::default();
    let sink = out.clone();
    let r = rig(false, |b| {
        b.price("m", PRICE)
            .access_log(sluice_telemetry::AccessFormat::Json, Box::new(sink))
    });
    *r.a.usage.lock() = Some(USAGE);
    let acme = [("x-sluice-tenant", "acme")];
    assert_eq!(ask_with(&r.router, &acme, "log-0", false).await.status, 200);
    r.a.push_end(10, End::Reject(400));
    assert_eq!(ask_with(&r.router, &acme, "log-1", false).await.status, 400);
    let bad = [("x-sluice-lane", "nowhere")];
    assert_eq!(ask_with(&r.router, &bad, "log-2", false).await.status, 400);
    r.gw.sync_access_log();
    let text = String::from_utf8(out.0.lock().clone()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    let ok = &lines[0];
    assert_eq!(ok["request_id"], "log-0");
    assert_eq!(ok["tenant"], "acme");
    assert_eq!(ok["group"], "chat");
    assert_eq!(ok["upstream"], "a");
    assert_eq!(ok["status"], 200);
    assert_eq!(ok["prompt_tokens"], USAGE.prompt_tokens);
    assert_eq!(ok["cached_tokens"], USAGE.cached_tokens);
    assert_eq!(ok["cost_micros"], PRICE.cost(&USAGE).0);
    assert_eq!(ok["attempts"], 1);
    assert!(ok["total_ms"].as_f64().unwrap() >= 100.0, "{ok}");
    assert_eq!(lines[1]["status"], 400);
    assert_eq!(lines[1]["error"], "upstream_rejected");
    assert_eq!(lines[2]["error"], "invalid_request");
    assert_eq!(lines[2]["upstream"], Value::Null);
}
