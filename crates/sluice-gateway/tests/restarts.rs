//! What the admin API says of keys, tenants and money holds after a restart: a revoked key
//! stays revoked (even one the configuration defines, until the configuration gives it
//! another hash), deleting a tenant revokes its keys for good, and credits set on a tenant
//! count what it had already spent. Each test restarts the gateway over the same ledger.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use sluice_core::Usage;
use sluice_economy::KeySpec;
use sluice_economy::keys::hash_hex;
use sluice_gateway::GatewayBuilder;
use sluice_ledger::Store;

use crate::scripted::{PRICE, Rig, admin, ask_with, ledgered, post, rig};

const ADMIN: &str = "admin-secret";
const SECRET: &str = "sk-sluice-configured-key-of-acme";

const USAGE: Usage = crate::scripted::PLAIN_USAGE;

fn configured(hash: &str) -> impl FnOnce(GatewayBuilder) -> GatewayBuilder + '_ {
    move |b| {
        b.key(
            KeySpec {
                name: "acme-app".into(),
                tenant: Arc::from("acme"),
                lane: None,
                models: vec![],
            },
            hash,
        )
    }
}

/// A gateway over the ledger at `path`, with the admin token, what the store keeps (keys,
/// revocations, tenants) and `configure`'s settings, its accounts restored: as `sluice
/// serve` starts.
async fn start(path: &Path, configure: impl FnOnce(GatewayBuilder) -> GatewayBuilder) -> Rig {
    let (ledger, store) = ledgered(path).await;
    let (keys, revoked, tenants) = (
        store.keys().await.unwrap(),
        store.revoked_keys().await.unwrap(),
        store.tenants().await.unwrap(),
    );
    let r = rig(false, |b| {
        configure(
            b.admin_token(ADMIN)
                .price("m", PRICE)
                .stored_keys(&keys)
                .revoked_keys(&revoked)
                .stored_tenants(&tenants)
                .ledger(ledger, store),
        )
    });
    *r.a.usage.lock() = Some(USAGE);
    sluice_gateway::walk::metering::restore_accounts(&r.gw, std::time::SystemTime::now())
        .await
        .unwrap();
    r
}

/// As `sluice serve` does at shutdown: every finished call is in the ledger.
async fn stop(r: Rig) {
    r.gw.ledger().unwrap().flush().await.unwrap();
}

/// `DELETE path` on the admin API with the admin token: the status and the answer.
async fn delete(r: &Rig, path: &str) -> (u16, Value) {
    admin(&r.router, "DELETE", path, Some(ADMIN), Value::Null).await
}

/// Every route a key opens, with `secret`: the statuses.
async fn everywhere(r: &Rig, secret: &str, id: &str) -> Vec<(&'static str, u16)> {
    let bearer = format!("Bearer {secret}");
    let auth = [("authorization", bearer.as_str())];
    let chat = ask_with(&r.router, &auth, id, false).await.status;
    let (models, _) = admin(&r.router, "GET", "/v1/models", Some(secret), Value::Null).await;
    let feedback = json!({"request_id": "anything", "score": 1});
    let (fed, _) = post(&r.router, "/v1/feedback", &auth, feedback).await;
    let (admin_api, _) = admin(
        &r.router,
        "GET",
        "/admin/tenants",
        Some(secret),
        Value::Null,
    )
    .await;
    let (batches, _) = admin(&r.router, "GET", "/v1/batches", Some(secret), Value::Null).await;
    vec![
        ("chat", chat),
        ("models", models),
        ("feedback", fed),
        ("admin", admin_api),
        ("batches", batches),
    ]
}

fn all_refused(got: &[(&str, u16)]) {
    assert!(got.iter().all(|(_, s)| *s == 401), "{got:?}");
}

#[tokio::test]
async fn a_revoked_configured_key_stays_revoked_until_the_configuration_changes_its_hash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let first = start(&path, configured(&hash_hex(SECRET))).await;
    let bearer = format!("Bearer {SECRET}");
    let ok = ask_with(&first.router, &[("authorization", &bearer)], "k-0", false).await;
    assert_eq!(ok.status, 200);
    let (status, v) = delete(&first, "/admin/keys/acme-app").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (&v["revoked"], &v["durable"]),
        (&json!("acme-app"), &json!(true))
    );
    all_refused(&everywhere(&first, SECRET, "k-1").await);
    let (status, v) = delete(&first, "/admin/keys/acme-app").await;
    assert_eq!(status, 404, "{v}");
    assert_eq!(v["error"]["code"], "not_found");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no key named `acme-app`")
    );
    stop(first).await;

    // The configuration still defines the key: the revocation wins.
    let second = start(&path, configured(&hash_hex(SECRET))).await;
    all_refused(&everywhere(&second, SECRET, "k-2").await);
    stop(second).await;

    // The configuration gives the key another hash: that key works, the old one does not.
    let rotated = "sk-sluice-rotated-key-of-acme";
    let third = start(&path, configured(&hash_hex(rotated))).await;
    let got = everywhere(&third, rotated, "k-3").await;
    assert_eq!(got[0], ("chat", 200), "{got:?}");
    assert_eq!(got[1], ("models", 200), "{got:?}");
    all_refused(&everywhere(&third, SECRET, "k-4").await[..1]);
}

#[tokio::test]
async fn deleting_a_tenant_revokes_its_keys_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let first = start(&path, |b| b.require_keys(true)).await;
    let (status, made) = admin(
        &first.router,
        "POST",
        "/admin/keys",
        Some(ADMIN),
        json!({"name": "docs-app", "tenant": "docs"}),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let secret = made["key"].as_str().unwrap().to_string();
    let (status, v) = admin(
        &first.router,
        "PUT",
        "/admin/tenants/docs",
        Some(ADMIN),
        json!({"rpm": 100}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(everywhere(&first, &secret, "d-0").await[0], ("chat", 200));
    let (status, v) = delete(&first, "/admin/tenants/docs").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["revoked_keys"], json!(["docs-app"]));
    all_refused(&everywhere(&first, &secret, "d-1").await);
    let (status, v) = delete(&first, "/admin/tenants/docs").await;
    assert_eq!(status, 404, "{v}");
    assert_eq!(v["error"]["code"], "not_found");
    stop(first).await;

    let second = start(&path, |b| b.require_keys(true)).await;
    all_refused(&everywhere(&second, &secret, "d-2").await);
    let tenants = admin(
        &second.router,
        "GET",
        "/admin/tenants",
        Some(ADMIN),
        Value::Null,
    )
    .await
    .1;
    assert!(
        !tenants.to_string().contains("\"docs\""),
        "the tenant is gone: {tenants}"
    );
}

#[tokio::test]
async fn credits_set_on_a_tenant_count_what_it_already_spent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let one = PRICE.cost(&USAGE).0;
    let docs = [("x-sluice-tenant", "docs")];
    let first = start(&path, |b| b).await;
    // No limits yet: three calls are spent and written to the ledger only.
    for i in 0..3 {
        assert_eq!(
            ask_with(&first.router, &docs, &format!("s-{i}"), false)
                .await
                .status,
            200
        );
    }
    // Credits below what it spent: the answer says so, and its next call is refused at once.
    let (status, v) = admin(
        &first.router,
        "PUT",
        "/admin/tenants/docs",
        Some(ADMIN),
        json!({"credits_micros": 2 * one}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["account"]["spent_micros"], 3 * one, "{v}");
    assert_eq!(v["account"]["credits_left_micros"], 0, "{v}");
    assert!(
        v["note"]
            .as_str()
            .unwrap()
            .contains("its calls are refused"),
        "{v}"
    );
    let refused = ask_with(&first.router, &docs, "s-3", false).await;
    assert_eq!(refused.status, 402, "{}", refused.text);
    let message = refused.body["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    let (spent, credits) = (
        sluice_economy::Micros(3 * one).to_string(),
        sluice_economy::Micros(2 * one).to_string(),
    );
    assert!(
        message.contains(&format!("has spent {spent} of its {credits} credits")),
        "{message}"
    );
    stop(first).await;

    // After a restart the spend is the same, not counted twice, and still over the credits.
    let second = start(&path, |b| b).await;
    let tenants = admin(
        &second.router,
        "GET",
        "/admin/tenants",
        Some(ADMIN),
        Value::Null,
    )
    .await
    .1;
    let account = tenants["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tenant"] == "docs")
        .map(|t| t["account"].clone())
        .unwrap();
    assert_eq!(account["spent_micros"], 3 * one, "{tenants}");
    assert_eq!(
        ask_with(&second.router, &docs, "s-4", false).await.status,
        402
    );
    // Raised: room for more, on top of what it spent.
    let (status, v) = admin(
        &second.router,
        "PUT",
        "/admin/tenants/docs",
        Some(ADMIN),
        json!({"credits_micros": 10 * one}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["account"]["spent_micros"], 3 * one);
    assert_eq!(
        ask_with(&second.router, &docs, "s-5", false).await.status,
        200
    );
}
