//! Tenants' credits and quotas at the door, through the router in-process.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::time::Duration;

use sluice_economy::{Limits, Micros, Price};
use tokio::time::sleep;

use crate::scripted::{ask_with, get_json, rig, send};

const ACME: [(&str, &str); 1] = [("x-sluice-tenant", "acme")];

#[tokio::test(start_paused = true)]
async fn over_a_per_minute_quota_a_request_gets_429_with_the_ietf_ratelimit_fields() {
    let limits = Limits {
        rpm: Some(2),
        ..Limits::default()
    };
    let r = rig(false, |b| b.tenant_limits("acme", limits));
    assert_eq!(ask_with(&r.router, &ACME, "q-0", false).await.status, 200);
    assert_eq!(ask_with(&r.router, &ACME, "q-1", false).await.status, 200);
    let refused = ask_with(&r.router, &ACME, "q-2", false).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.body["error"]["code"], "quota_exceeded");
    assert_eq!(refused.body["error"]["type"], "rate_limit_error");
    let h = |name: &str| {
        refused
            .headers
            .get(name)
            .unwrap()
            .to_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(h("retry-after"), "30");
    assert_eq!(h("ratelimit-policy"), "\"rpm\";q=2;w=60");
    assert_eq!(h("ratelimit"), "\"rpm\";r=0;t=30");
    assert_eq!(h("x-sluice-upstream"), "none");
    assert_eq!(
        r.a.calls(),
        2,
        "the refused request cost the upstream nothing"
    );
    // Other tenants are not limited; after the wait, acme is served again.
    let globex = [("x-sluice-tenant", "globex")];
    assert_eq!(ask_with(&r.router, &globex, "q-3", false).await.status, 200);
    sleep(Duration::from_secs(30)).await;
    assert_eq!(ask_with(&r.router, &ACME, "q-4", false).await.status, 200);
}

#[tokio::test(start_paused = true)]
async fn credits_cover_the_worst_case_of_calls_in_flight_and_come_back_when_they_settle() {
    // $1 per million output tokens: a request with no max_tokens reserves 256 output tokens,
    // 256 micro-units plus its prompt; credits of 600 cover two at once, not three.
    let price = Price {
        input: Micros(1_000_000),
        cached_input: Micros(1_000_000),
        cache_write: Micros(1_000_000),
        output: Micros(1_000_000),
        published: None,
    };
    let limits = Limits {
        credits: Some(Micros(600)),
        ..Limits::default()
    };
    let r = rig(false, |b| b.price("m", price).tenant_limits("acme", limits));
    for _ in 0..3 {
        r.a.push(1_000, true);
    }
    let calls: Vec<_> = (0..3)
        .map(|i| {
            let router = r.router.clone();
            tokio::spawn(async move {
                let got = ask_with(&router, &ACME, &format!("c-{i}"), false).await;
                let upstream = got.headers["x-sluice-upstream"]
                    .to_str()
                    .unwrap()
                    .to_string();
                (got.status, got.body, upstream)
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for c in calls {
        let (status, body, upstream) = c.await.unwrap();
        if status == 402 {
            assert_eq!(upstream, "none");
            assert_eq!(body["error"]["code"], "insufficient_credits");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("left, and this request may cost up to")
            );
        }
        statuses.push(status);
    }
    statuses.sort();
    assert_eq!(statuses, [200, 200, 402]);
    // The scripted upstream reports no usage: each answer is settled from the estimate (its
    // prompt's tokens and a token for every four bytes of answer), never at zero; the
    // reservations came back, and the next call fits again.
    let b = r.gw.accounts().balance("acme").await.unwrap();
    assert_eq!(b.reserved, Micros::ZERO);
    assert!(b.spent > Micros::ZERO && b.spent < Micros(100), "{b:?}");
    assert_eq!(ask_with(&r.router, &ACME, "c-3", false).await.status, 200);
    let v = get_json(&r.router, "/admin/tenants").await;
    let acme = &v["tenants"][0];
    assert_eq!(acme["tenant"], "acme");
    assert_eq!(acme["account"]["credits_micros"], 600);
    let spent = r.gw.accounts().balance("acme").await.unwrap().spent;
    assert!(
        spent > b.spent,
        "the fourth call was settled from its estimate too"
    );
    assert_eq!(acme["account"]["spent_micros"], spent.0);
    assert_eq!(acme["account"]["reserved_micros"], 0);
}

#[tokio::test(start_paused = true)]
async fn a_model_with_no_price_is_refused_to_a_tenant_who_pays_unless_it_is_declared_free() {
    // The scripted deployment's model `m` has no price.
    let credits = Limits {
        credits: Some(Micros(1_000_000)),
        ..Limits::default()
    };
    let r = rig(false, |b| b.tenant_limits("acme", credits));
    r.a.push(1_000, true);
    let refused = ask_with(&r.router, &ACME, "u-0", false).await;
    assert_eq!(refused.status, 403);
    let msg = refused.body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("has no price") && msg.contains("[prices."),
        "{msg}"
    );
    assert_eq!(r.a.calls(), 0, "nothing was sent upstream");
    // A tenant counted only in tokens is served, and the call is counted as unpriced.
    let tokens = Limits {
        rpm: Some(100),
        ..Limits::default()
    };
    let r = rig(false, |b| b.tenant_limits("acme", tokens));
    r.a.push(1_000, true);
    assert_eq!(ask_with(&r.router, &ACME, "u-1", false).await.status, 200);
    let metrics = scripted::scrape(&r.router).await;
    assert!(
        metrics.contains(r#"sluice_unpriced_calls_total{group="chat",upstream="a"} 1"#),
        "{metrics}"
    );
    // Declared free, the paying tenant is served at no charge, and it is counted.
    let r = rig(false, |b| {
        b.tenant_limits("acme", credits)
            .unpriced(sluice_economy::Unpriced::Free)
    });
    r.a.push(1_000, true);
    assert_eq!(ask_with(&r.router, &ACME, "u-2", false).await.status, 200);
    let b = r.gw.accounts().balance("acme").await.unwrap();
    assert_eq!((b.spent, b.reserved), (Micros::ZERO, Micros::ZERO));
    let metrics = scripted::scrape(&r.router).await;
    assert!(metrics.contains(r#"sluice_unpriced_calls_total{group="chat",upstream="a"} 1"#));
    // The scripted upstream reports no usage: the answer was settled from the estimate.
    assert!(
        metrics.contains(r#"sluice_usage_estimated_calls_total{group="chat",upstream="a"} 1"#),
        "{metrics}"
    );
    let record = r.records.lock().last().cloned().unwrap();
    assert!(record.usage_estimated && record.unpriced);
    assert!(record.usage.unwrap().completion_tokens > 0);
}

#[tokio::test(start_paused = true)]
async fn a_token_quota_refusal_says_what_is_left_and_when_in_utc() {
    let limits = Limits {
        tpm: Some(300),
        ..Limits::default()
    };
    let r = rig(false, |b| b.tenant_limits("acme", limits));
    let body = r#"{"model":"chat","messages":[{"role":"user","content":"hi"}],"max_tokens":290}"#;
    assert_eq!(send(&r.router, &ACME, "t-0", body).await.status, 200);
    let refused = send(&r.router, &ACME, "t-1", body).await;
    assert_eq!(refused.status, 429);
    let header = refused.headers["ratelimit"].to_str().unwrap().to_string();
    let left: u64 = header
        .split(';')
        .find_map(|p| p.strip_prefix("r="))
        .unwrap()
        .parse()
        .unwrap();
    // The header's remaining is the account's: what the first call left of the 300.
    assert!(left > 0 && left < 300, "{header}");
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&format!("{left} left")), "{message}");
    // When it is enough again, as a UTC time, beside the seconds Retry-After gives machines.
    let secs = refused.headers["retry-after"].to_str().unwrap();
    assert!(message.contains(&format!("Z (in {secs} s)")), "{message}");
    assert_eq!(refused.headers["x-sluice-upstream"], "none");
}
