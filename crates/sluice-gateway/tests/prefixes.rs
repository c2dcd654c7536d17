//! The prefix watch through the gateway: a system prompt carrying a per-request timestamp is
//! reported as churn (in `/admin/prefixes` and a metric) with its offset and the token's
//! shape and never its text; a stable prompt is reported as shared.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use serde_json::{Value, json};

use crate::scripted::{admin, rig, scrape, send};

const RULES: &str = "You review supplier contracts for a procurement team. Flag automatic renewals, unlimited liability and missing termination clauses.";

fn body(system: &str, question: &str) -> String {
    json!({"model": "chat", "messages": [
        {"role": "system", "content": system},
        {"role": "user", "content": question},
    ]})
    .to_string()
}

#[tokio::test(start_paused = true)]
async fn a_timestamp_in_the_system_prompt_is_reported_as_churn_and_a_stable_one_as_shared() {
    let r = rig(false, |b| b.admin_token("t0k").watch_prefixes(1.0));
    let acme = [("x-sluice-tenant", "acme")];
    let globex = [("x-sluice-tenant", "globex")];
    for i in 0..5 {
        let system = format!("{RULES} Current time: 2026-12-01T10:00:{:02}Z.", i * 7);
        let got = send(
            &r.router,
            &acme,
            &format!("a-{i}"),
            &body(&system, "Is clause 4 fair?"),
        )
        .await;
        assert_eq!(got.status, 200);
        let got = send(
            &r.router,
            &globex,
            &format!("g-{i}"),
            &body(RULES, &format!("Question {i}?")),
        )
        .await;
        assert_eq!(got.status, 200);
    }
    let (status, v) = admin(
        &r.router,
        "GET",
        "/admin/prefixes",
        Some("t0k"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["sampled_share"], 1.0);
    let watched = v["watched"].as_array().unwrap();
    let acme_row = &watched[0];
    assert_eq!(
        (&acme_row["tenant"], &acme_row["group"]),
        (&json!("acme"), &json!("chat"))
    );
    assert_eq!(acme_row["sampled"], 5);
    let ts = &acme_row["churn"]["timestamp"];
    assert_eq!(ts["count"], 4, "{v}");
    assert_eq!(ts["shape"], "9999-99-99a99:99:99a");
    let offset = ts["example_offset"].as_u64().unwrap() as usize;
    // Inside the seconds, where the latest two timestamps part.
    let seconds = 1 + RULES.len() + " Current time: 2026-12-01T10:00:".len();
    assert!((seconds..seconds + 2).contains(&offset), "{offset}");
    assert!(
        !v.to_string().contains("procurement"),
        "no prompt text: {v}"
    );
    let globex_row = &watched[1];
    assert_eq!(
        (&globex_row["shared"], &globex_row["churn"]),
        (&json!(4), &json!({}))
    );
    let metrics = scrape(&r.router).await;
    assert!(
        metrics.contains(
            r#"sluice_prefix_churn_total{tenant="acme",group="chat",cause="timestamp"} 4"#
        ),
        "{metrics}"
    );
    assert!(!metrics.contains(r#"tenant="globex",group="chat",cause"#));
}

#[tokio::test(start_paused = true)]
async fn the_watch_can_be_off() {
    let r = rig(false, |b| b.admin_token("t0k").watch_prefixes(0.0));
    let (_, v) = admin(
        &r.router,
        "GET",
        "/admin/prefixes",
        Some("t0k"),
        Value::Null,
    )
    .await;
    assert_eq!(v, json!({"enabled": false}));
}

#[tokio::test(start_paused = true)]
async fn with_normalisation_the_timestamp_moves_out_of_the_prefix_and_requests_share_it() {
    let shape = sluice_context::normalise::Normalise {
        tools: true,
        volatile: true,
    };
    let r = rig(false, |b| {
        b.admin_token("t0k")
            .watch_prefixes(1.0)
            .normalise("chat", shape)
    });
    let acme = [("x-sluice-tenant", "acme")];
    for i in 0..5 {
        let system = format!("{RULES}\nCurrent time: 2026-12-01T10:00:{:02}Z.", i * 7);
        let id = format!("n-{i}");
        let got = send(&r.router, &acme, &id, &body(&system, "Is clause 4 fair?")).await;
        assert_eq!(got.status, 200);
        assert_eq!(r.record(&id).normalised, Some((false, 1)), "one line moved");
    }
    let (_, v) = admin(
        &r.router,
        "GET",
        "/admin/prefixes",
        Some("t0k"),
        Value::Null,
    )
    .await;
    let row = &v["watched"][0];
    assert_eq!(
        (&row["shared"], &row["churn"]),
        (&json!(4), &json!({})),
        "{v}"
    );
    // A stable prompt is not rewritten.
    send(&r.router, &acme, "n-s", &body(RULES, "Is clause 4 fair?")).await;
    assert_eq!(r.record("n-s").normalised, None);
}
