//! Prices in the currency each provider bills: a yuan price is billed to tenants in the
//! billing currency at the configured rate, the ledger keeps what the provider bills in
//! yuan, and with no rate the model is refused to a paying tenant, naming the fix.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use sluice_core::Usage;
use sluice_economy::{Catalog, Currency, Limits, Micros, Price, Rate};

use crate::scripted::{ask_with, get_json, ledgered, rig};

const ACME: [(&str, &str); 1] = [("x-sluice-tenant", "acme")];

const USAGE: Usage = Usage {
    prompt_tokens: 10_000,
    completion_tokens: 1_000,
    cached_tokens: 4_000,
    cache_write_tokens: 0,
    reasoning_tokens: 0,
    cache_write_long_tokens: 0,
};

/// glm-5.3 as bigmodel.cn bills it: 8 yuan a million input tokens, 2 cached, 28 output.
const YUAN: Price = Price {
    input: Micros(8_000_000),
    cached_input: Micros(2_000_000),
    cache_write: Micros(8_000_000),
    output: Micros(28_000_000),
    published: None,
};

fn credits() -> Limits {
    Limits {
        credits: Some(Micros(1_000_000)),
        ..Limits::default()
    }
}

#[tokio::test]
async fn a_yuan_price_is_billed_in_dollars_at_the_rate_and_reported_in_both() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger, store) = ledgered(&dir.path().join("ledger.db")).await;
    let rate = Rate::from_units(0.14).unwrap();
    let mut catalog = Catalog::billed_in(Currency::USD, &[(Currency::CNY, rate)]);
    assert!(catalog.set_in("m", Currency::CNY, YUAN));
    let r = rig(false, |b| {
        b.catalog(catalog)
            .tenant_limits("acme", credits())
            .ledger(ledger, store)
    });
    *r.a.usage.lock() = Some(USAGE);
    assert_eq!(ask_with(&r.router, &ACME, "y-0", false).await.status, 200);

    // In yuan: 6,000 input at 8, 4,000 cached at 2, 1,000 out at 28 = 0.048 + 0.008 + 0.028.
    let yuan = 84_000;
    // In dollars, each price at 0.14: 1.12, 0.28 and 3.92 a million.
    let dollars = (6_000 * 1_120_000 + 4_000 * 280_000 + 1_000 * 3_920_000) / 1_000_000;
    assert_eq!(dollars, 11_760);
    let spent = r.gw.accounts().balance("acme").await.unwrap().spent;
    assert_eq!(spent, Micros(dollars), "credits are spent in dollars");

    let v = get_json(&r.router, "/admin/usage?group_by=model").await;
    assert_eq!(v["currency"], "USD", "{v}");
    let row = &v["rows"][0];
    assert_eq!(row["model"], "m");
    assert_eq!(row["cost_micros"], dollars);
    assert_eq!(row["native_cost_micros"]["CNY"], yuan, "{v}");
    assert_eq!(v["total"]["native_cost_micros"]["CNY"], yuan);
    let t = get_json(&r.router, "/admin/tenants").await;
    assert_eq!(t["currency"], "USD");
    assert_eq!(t["tenants"][0]["account"]["spent_micros"], dollars);
}

#[tokio::test]
async fn with_no_rate_a_yuan_price_is_never_taken_one_for_one() {
    let mut catalog = Catalog::billed_in(Currency::USD, &[]);
    assert!(!catalog.set_in("m", Currency::CNY, YUAN));
    let r = rig(false, |b| {
        b.catalog(catalog).tenant_limits("acme", credits())
    });
    r.a.push(10, true);
    let refused = ask_with(&r.router, &ACME, "n-0", false).await;
    assert_eq!(refused.status, 403);
    let msg = refused.body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("priced in CNY") && msg.contains("rates = { CNY = N }"),
        "{msg}"
    );
    assert_eq!(r.a.calls(), 0, "nothing was sent upstream");
}
