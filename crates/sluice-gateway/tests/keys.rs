//! API keys and the admin API that manages them, through the router in-process.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::sync::Arc;

use serde_json::{Value, json};
use sluice_economy::KeySpec;
use sluice_economy::keys::hash_hex;

use crate::scripted::{admin, ask_with, rig, scrape_with};

const SECRET: &str = "sk-sluice-test-key-for-acme";
const ADMIN: &str = "admin-token-for-tests";

fn acme(lane: Option<&str>, models: &[&str]) -> KeySpec {
    KeySpec {
        name: "acme-ci".into(),
        tenant: Arc::from("acme"),
        lane: lane.map(str::to_string),
        models: models.iter().map(|m| m.to_string()).collect(),
    }
}

#[tokio::test(start_paused = true)]
async fn with_keys_configured_a_request_needs_a_valid_one() {
    let r = rig(false, |b| b.key(acme(None, &[]), &hash_hex(SECRET)));
    let none = ask_with(&r.router, &[], "k-0", false).await;
    assert_eq!(none.status, 401);
    assert_eq!(none.headers["x-sluice-upstream"], "none");
    assert_eq!(none.body["error"]["code"], "invalid_api_key");
    assert_eq!(none.body["error"]["type"], "invalid_request_error");
    let wrong = format!("Bearer {SECRET}-not");
    let bad = ask_with(&r.router, &[("authorization", &wrong)], "k-1", false).await;
    assert_eq!(bad.status, 401);
    assert!(!bad.text.contains(SECRET), "the key is never echoed");
    assert_eq!(r.a.calls(), 0, "nothing reached the upstream");

    let good = format!("Bearer {SECRET}");
    // The key decides the tenant, whatever the request claims.
    let headers = [
        ("authorization", good.as_str()),
        ("x-sluice-tenant", "globex"),
    ];
    let ok = ask_with(&r.router, &headers, "k-2", false).await;
    assert_eq!(ok.status, 200);
    let rec = r.record("k-2");
    assert_eq!(rec.tenant.as_deref(), Some("acme"));
    assert_eq!(rec.api_key.as_deref(), Some("acme-ci"));
}

#[tokio::test(start_paused = true)]
async fn a_key_sets_the_default_lane_and_the_models_it_may_use() {
    let r = rig(false, |b| {
        b.key(acme(Some("batch"), &["chat"]), &hash_hex(SECRET))
    });
    let good = format!("Bearer {SECRET}");
    ask_with(&r.router, &[("authorization", &good)], "l-0", false).await;
    assert_eq!(r.record("l-0").lane.as_deref(), Some("batch"));

    let r = rig(false, |b| {
        b.model("other", vec![scripted::dep("a", 1)])
            .key(acme(None, &["other"]), &hash_hex(SECRET))
    });
    let refused = ask_with(&r.router, &[("authorization", &good)], "l-1", false).await;
    assert_eq!(refused.status, 403);
    assert_eq!(refused.body["error"]["param"], "model");
    assert_eq!(refused.body["error"]["code"], "model_not_allowed");
    assert_eq!(r.a.calls(), 0);

    // An unknown model's 404 names only what the key may use, not every group.
    let body = r#"{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}"#;
    let missing = scripted::send(&r.router, &[("authorization", &good)], "l-2", body).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.body["error"]["code"], "model_not_found");
    let message = missing.body["error"]["message"].as_str().unwrap();
    assert!(message.ends_with("models you may use: other"), "{message}");
    assert!(!message.contains("chat"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn without_an_admin_token_keys_cannot_be_managed() {
    let r = rig(false, |b| b);
    let body = json!({"name": "x", "tenant": "acme"});
    let (status, v) = admin(&r.router, "POST", "/admin/keys", None, body).await;
    assert_eq!(status, 403, "{v}");
    // Read-only admin routes stay open, and requests need no key.
    let (status, _) = admin(&r.router, "GET", "/admin/upstreams", None, Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(ask_with(&r.router, &[], "o-0", false).await.status, 200);
}

#[tokio::test(start_paused = true)]
async fn the_admin_api_makes_a_key_shown_once_that_works_until_revoked() {
    let r = rig(false, |b| b.admin_token(ADMIN).require_keys(true));
    // Every admin route needs the token.
    for path in [
        "/admin/keys",
        "/admin/upstreams",
        "/admin/latency",
        "/admin/tenants",
    ] {
        let (status, v) = admin(&r.router, "GET", path, None, Value::Null).await;
        assert_eq!(status, 401, "{path}");
        assert_eq!(v["error"]["code"], "invalid_api_key");
        let (status, _) = admin(&r.router, "GET", path, Some("wrong"), Value::Null).await;
        assert_eq!(status, 401, "{path}");
    }
    let body = json!({"name": "ci", "tenant": "acme", "lane": "batch", "models": ["chat"]});
    let (status, made) = admin(&r.router, "POST", "/admin/keys", Some(ADMIN), body).await;
    assert_eq!(status, 201, "{made}");
    let key = made["key"].as_str().unwrap().to_string();
    assert!(key.starts_with("sk-sluice-"));

    let bearer = format!("Bearer {key}");
    let ok = ask_with(&r.router, &[("authorization", &bearer)], "m-0", false).await;
    assert_eq!(ok.status, 200);
    assert_eq!(r.record("m-0").tenant.as_deref(), Some("acme"));

    let (_, listed) = admin(&r.router, "GET", "/admin/keys", Some(ADMIN), Value::Null).await;
    assert_eq!(listed["keys"][0]["name"], "ci");
    assert_eq!(listed["keys"][0]["fingerprint"], hash_hex(&key)[..8]);
    assert!(
        !listed.to_string().contains(&key[10..]),
        "listings never show a key"
    );
    let (_, tenants) = admin(&r.router, "GET", "/admin/tenants", Some(ADMIN), Value::Null).await;
    assert_eq!(
        tenants["tenants"][0],
        json!({"tenant": "acme", "source": "seen", "lane": null, "keys": 1, "account": null})
    );

    // Bad requests name the field and change nothing.
    for (body, param) in [
        (json!({"name": "ci", "tenant": "acme"}), "name"),
        (json!({"name": "x y", "tenant": "acme"}), "name"),
        (
            json!({"name": "y", "tenant": "acme", "lane": "vip"}),
            "lane",
        ),
        (
            json!({"name": "y", "tenant": "acme", "models": ["nope"]}),
            "models",
        ),
    ] {
        let (status, v) = admin(&r.router, "POST", "/admin/keys", Some(ADMIN), body).await;
        assert_eq!(
            (status, v["error"]["param"].as_str()),
            (400, Some(param)),
            "{v}"
        );
    }
    let (_, listed) = admin(&r.router, "GET", "/admin/keys", Some(ADMIN), Value::Null).await;
    assert_eq!(listed["keys"].as_array().unwrap().len(), 1);

    let (status, _) = admin(
        &r.router,
        "DELETE",
        "/admin/keys/ci",
        Some(ADMIN),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200);
    let gone = ask_with(&r.router, &[("authorization", &bearer)], "m-1", false).await;
    assert_eq!(gone.status, 401);
    let (status, _) = admin(
        &r.router,
        "DELETE",
        "/admin/keys/ci",
        Some(ADMIN),
        Value::Null,
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test(start_paused = true)]
async fn a_key_made_through_the_admin_api_switches_key_checks_on() {
    // No `[keys]` in the configuration and `require_keys` left out.
    let r = rig(false, |b| b.admin_token(ADMIN));
    let bogus = [("authorization", "Bearer sk-bogus")];
    assert_eq!(ask_with(&r.router, &bogus, "s-0", false).await.status, 200);
    let body = json!({"name": "ci", "tenant": "acme"});
    let (status, made) = admin(&r.router, "POST", "/admin/keys", Some(ADMIN), body).await;
    assert_eq!(status, 201, "{made}");
    let calls = r.a.calls();
    // From now on a request needs a valid key.
    let refused = ask_with(&r.router, &bogus, "s-1", false).await;
    assert_eq!(refused.status, 401, "{}", refused.text);
    assert_eq!(ask_with(&r.router, &[], "s-2", false).await.status, 401);
    assert_eq!(r.a.calls(), calls, "nothing refused reached the upstream");
    let bearer = format!("Bearer {}", made["key"].as_str().unwrap());
    let ok = ask_with(&r.router, &[("authorization", &bearer)], "s-3", false).await;
    assert_eq!(ok.status, 200);
    // Revoking every key does not open the gateway again.
    let (status, _) = admin(
        &r.router,
        "DELETE",
        "/admin/keys/ci",
        Some(ADMIN),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(ask_with(&r.router, &[], "s-4", false).await.status, 401);
}

#[tokio::test(start_paused = true)]
async fn require_keys_false_serves_requests_without_a_key_even_when_keys_exist() {
    let r = rig(false, |b| {
        b.key(acme(None, &[]), &hash_hex(SECRET))
            .require_keys(false)
    });
    let bogus = [("authorization", "Bearer sk-bogus")];
    assert_eq!(ask_with(&r.router, &bogus, "f-0", false).await.status, 200);
    let good = format!("Bearer {SECRET}");
    ask_with(&r.router, &[("authorization", &good)], "f-1", false).await;
    assert_eq!(
        r.record("f-1").tenant.as_deref(),
        Some("acme"),
        "a key sent is honoured"
    );
}

#[tokio::test(start_paused = true)]
async fn the_model_list_needs_a_key_where_keys_are_required_and_shows_what_it_may_use() {
    let r = rig(false, |b| {
        b.model("other", vec![scripted::dep("a", 1)])
            .key(acme(None, &["chat"]), &hash_hex(SECRET))
    });
    let (status, v) = admin(&r.router, "GET", "/v1/models", None, Value::Null).await;
    assert_eq!(status, 401, "{v}");
    assert_eq!(v["error"]["code"], "invalid_api_key");
    let (status, v) = admin(&r.router, "GET", "/v1/models", Some(SECRET), Value::Null).await;
    assert_eq!(status, 200, "{v}");
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["chat"], "the key may use `chat` only");
    assert_eq!(v["data"][0]["sluice_kind"], "group");
}

/// `/metrics` may need a token (the admin token is taken too), and tenants may be named in
/// labels by a stable hash instead of their names.
#[tokio::test(start_paused = true)]
async fn metrics_may_need_a_token_and_label_tenants_by_hash() {
    let r = rig(false, |b| {
        b.admin_token(ADMIN)
            .metrics_token("scrape-token")
            .tenant_labels(sluice_telemetry::TenantLabels::Hashed)
            .key(acme(None, &[]), &hash_hex(SECRET))
    });
    let good = format!("Bearer {SECRET}");
    let ok = ask_with(&r.router, &[("authorization", &good)], "m-0", false).await;
    assert_eq!(ok.status, 200);
    for token in [None, Some("wrong"), Some(SECRET)] {
        let (status, text) = scrape_with(&r.router, token).await;
        assert_eq!(status, 401, "{token:?}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["code"], "invalid_api_key", "{text}");
    }
    for token in ["scrape-token", ADMIN] {
        let (status, text) = scrape_with(&r.router, Some(token)).await;
        assert_eq!(status, 200, "{token}");
        let hashed = sluice_telemetry::TenantLabels::Hashed.value(Some("acme"));
        assert!(
            text.contains(&format!("tenant=\"{hashed}\"")),
            "the tenant's series carry its hash: {text}"
        );
        assert!(!text.contains("tenant=\"acme\""), "{text}");
    }
}
