//! `/admin/tenants`: every tenant with its account (`GET`), and tenants set at run time
//! (`PUT /admin/tenants/{name}`: default lane, credits, quotas; `DELETE` to remove, which
//! revokes its keys). Tenants set here are kept in the ledger's store and come back after a
//! restart; a tenant the configuration sets is changed there, not here. Setting a tenant's
//! limits keeps what it has spent (from the ledger, for a tenant that had none): credits
//! are what it may spend in all, so raising them tops it up, and credits below its spend
//! refuse its calls at once. Money is in micro-units here, read and written, as in every
//! admin answer (`*_micros`).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError};
use sluice_economy::Limits;
use sluice_ledger::{Store, StoredTenant};
use tokio::time::Instant;

use crate::Gateway;
use crate::admin::keys::{invalid, is_name};
use crate::admin::{kept, managing, refuse};
use crate::tenants::limits_of;

/// `PUT /admin/tenants/{name}` body: every field optional, absent means none. Money is in
/// micro-units (a millionth of the price catalog's currency), as every admin answer gives it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantBody {
    #[serde(default)]
    lane: Option<String>,
    #[serde(default)]
    credits_micros: Option<u64>,
    #[serde(default)]
    rpm: Option<u64>,
    #[serde(default)]
    tpm: Option<u64>,
    #[serde(default)]
    tokens_per_day: Option<u64>,
    #[serde(default)]
    spend_per_month_micros: Option<u64>,
}

/// The body read, with a clear error for money written in whole units.
fn body_of(bytes: &[u8]) -> Result<TenantBody, GatewayError> {
    let v: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| GatewayError::new(ErrorKind::InvalidJson, format!("bad tenant: {e}")))?;
    for field in [
        "credits_micros",
        "spend_per_month_micros",
        "rpm",
        "tpm",
        "tokens_per_day",
    ] {
        if v.get(field)
            .is_some_and(|n| !n.is_null() && n.as_u64().is_none())
        {
            return Err(invalid(
                format!("`{field}` must be a whole number of 0 or more"),
                field,
            ));
        }
    }
    for (field, micros) in [
        ("credits", "credits_micros"),
        ("spend_per_month", "spend_per_month_micros"),
    ] {
        if v.get(field).is_some() {
            return Err(invalid(
                format!(
                    "the admin API counts money in micro-units: send `{micros}` (2.5 units are \
                     2500000), not `{field}`"
                ),
                field,
            ));
        }
    }
    serde_json::from_value(v)
        .map_err(|e| GatewayError::new(ErrorKind::InvalidRequest, format!("bad tenant: {e}")))
}

fn checked(gw: &Gateway, name: &str, b: TenantBody) -> Result<StoredTenant, GatewayError> {
    if !is_name(name) {
        return Err(invalid(
            "a tenant's name must be 1 to 64 letters, digits, `.`, `_` or `-`".into(),
            "name",
        ));
    }
    if gw.tenants.configured.contains(name) {
        return Err(invalid(
            format!("tenant `{name}` is set in the configuration; change it there"),
            "name",
        ));
    }
    if let Some(lane) = &b.lane
        && !gw.lanes.iter().any(|l| &*l.name == lane.as_str())
    {
        return Err(invalid(format!("`{lane}` is not a lane"), "lane"));
    }
    for (field, v) in [
        ("rpm", b.rpm),
        ("tpm", b.tpm),
        ("tokens_per_day", b.tokens_per_day),
    ] {
        if v == Some(0) {
            return Err(invalid(
                format!("`{field}` must be at least 1 (leave it out for none)"),
                field,
            ));
        }
    }
    Ok(StoredTenant {
        name: name.to_string(),
        credits_micros: b.credits_micros,
        spend_per_month_micros: b.spend_per_month_micros,
        lane: b.lane,
        rpm: b.rpm,
        tpm: b.tpm,
        tokens_per_day: b.tokens_per_day,
    })
}

/// Makes `t` the tenant's settings in this gateway. A tenant that had no account (no limits
/// so far) gets its spend to date from the ledger, so that new credits count what it has
/// already spent.
async fn apply(gw: &Gateway, t: StoredTenant) -> Result<(), GatewayError> {
    let fresh = gw.tenants.accounts.balance(&t.name).await.is_none();
    gw.tenants
        .accounts
        .set_limits(&t.name, limits_of(&t), Instant::now());
    if fresh {
        crate::walk::metering::restore_tenant(gw, &t.name, std::time::SystemTime::now())
            .await
            .map_err(|e| {
                tracing::error!(error = %e, tenant = %t.name, "reading a tenant's spend failed");
                GatewayError::new(
                    ErrorKind::Internal,
                    format!("the usage ledger could not be read for the tenant's spend: {e}"),
                )
            })?;
    }
    let lane = t
        .lane
        .as_deref()
        .and_then(|l| gw.lanes.iter().position(|x| &*x.name == l));
    gw.tenants.directory.set(&t.name, lane);
    Ok(())
}

/// `PUT /admin/tenants/{name}`: sets a tenant's default lane, credits and quotas, kept in the
/// ledger's store first (a setting the store could not keep is not applied). The answer is
/// the tenant with its account, its spend to date included.
pub async fn put(
    State(gw): State<Arc<Gateway>>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let _one_change_at_a_time = gw.tenants.admin_writes.lock().await;
    let tenant = managing(&gw)
        .and_then(|()| body_of(&body))
        .and_then(|b| checked(&gw, &name, b));
    let tenant = match tenant {
        Ok(t) => t,
        Err(e) => return refuse(&e),
    };
    if let Some(store) = gw.usage_store()
        && let Err(e) = kept(store, "keep the tenant", store.save_tenant(&tenant)).await
    {
        return refuse(&e);
    }
    if let Err(e) = apply(&gw, tenant).await {
        return refuse(&e);
    }
    crate::cluster::announce(&gw).await;
    Json(describe(&gw, &name).await).into_response()
}

/// `DELETE /admin/tenants/{name}`: removes a tenant set through the API (its lane and limits;
/// its spend stays in the ledger) and revokes every key it owns, kept revoked in the
/// ledger's store. A tenant the configuration sets is refused (409): remove it there.
pub async fn delete(State(gw): State<Arc<Gateway>>, Path(name): Path<String>) -> Response {
    let _one_change_at_a_time = gw.tenants.admin_writes.lock().await;
    if let Err(e) = managing(&gw) {
        return refuse(&e);
    }
    if gw.tenants.configured.contains(name.as_str()) {
        return refuse(&GatewayError::new(
            ErrorKind::Conflict,
            format!("tenant `{name}` is set in the configuration; remove it there"),
        ));
    }
    let keys: Vec<(String, String, String)> = gw
        .tenants
        .keys
        .list()
        .iter()
        .filter(|k| *k.spec.tenant == *name)
        .filter_map(|k| gw.tenants.keys.named(&k.spec.name))
        .map(|(sha256, k)| (k.spec.name.clone(), sha256, name.clone()))
        .collect();
    let set_here = gw.tenants.directory.is_set(&name);
    if !set_here && keys.is_empty() {
        return refuse(
            &GatewayError::new(
                ErrorKind::NotFound,
                format!("no tenant `{name}` set through the admin API or owning a key"),
            )
            .with_param("name"),
        );
    }
    // The keys first: a tenant half removed must not leave a key that still works.
    let durable = match super::keys::revoke_all(&gw, &keys).await {
        Ok((d, _)) => d,
        Err(e) => return refuse(&e),
    };
    if set_here
        && let Some(store) = gw.usage_store()
        && let Err(e) = kept(store, "remove the tenant", store.remove_tenant(&name)).await
    {
        return refuse(&e);
    }
    gw.tenants
        .accounts
        .set_limits(&name, Limits::default(), Instant::now());
    gw.tenants.directory.remove(&name);
    let told = crate::cluster::announce(&gw).await;
    let revoked: Vec<&str> = keys.iter().map(|(n, _, _)| n.as_str()).collect();
    let mut v =
        json!({ "removed": name, "revoked_keys": revoked, "durable": durable, "told": told });
    if !durable && !revoked.is_empty() {
        v["note"] = json!(super::keys::NOT_DURABLE);
    }
    Json(v).into_response()
}

/// One tenant as `/admin/tenants` shows it.
async fn describe(gw: &Gateway, tenant: &str) -> Value {
    let lane = gw
        .tenants
        .directory
        .lane(tenant)
        .and_then(|i| gw.lanes.get(i))
        .map(|l| l.name.to_string());
    let keys = gw
        .tenants
        .keys
        .list()
        .iter()
        .filter(|k| &*k.spec.tenant == tenant)
        .count();
    let source = if gw.tenants.configured.contains(tenant) {
        "config"
    } else if gw.tenants.directory.is_set(tenant) {
        "api"
    } else {
        "seen"
    };
    let balance = gw.tenants.accounts.balance(tenant).await;
    let account = balance.map(|b| {
        json!({
            "credits_micros": b.limits.credits.map(|c| c.0),
            "rpm": b.limits.rpm,
            "tpm": b.limits.tpm,
            "tokens_per_day": b.limits.tokens_per_day,
            "spend_per_month_micros": b.limits.spend_per_month.map(|c| c.0),
            "spent_micros": b.spent.0,
            "reserved_micros": b.reserved.0,
            "credits_left_micros": b.limits.credits.map(|c| c.0.saturating_sub(b.spent.0 + b.reserved.0)),
            "tokens_today": b.tokens_today,
            "spent_this_month_micros": b.spent_this_month.0,
        })
    });
    let mut v =
        json!({"tenant": tenant, "source": source, "lane": lane, "keys": keys, "account": account});
    if let Some(b) = balance
        && let Some(credits) = b.limits.credits
        && b.spent >= credits
    {
        v["note"] = json!(format!(
            "tenant `{tenant}` has spent {} of its {credits} credits: its calls are refused \
             until its credits are raised",
            b.spent
        ));
    }
    v
}

/// `GET /admin/tenants`: every tenant sluice knows (configured, set through the API, owning
/// a key, or with an account), with where it is set (`config`, `api`, or `seen` for one that
/// only owns a key), its default lane, how many keys it has, and its account: limits, what it
/// spent (micro-units) and has reserved, its tokens today and spend this month.
pub async fn list(State(gw): State<Arc<Gateway>>) -> Response {
    let mut names: BTreeMap<String, ()> = BTreeMap::new();
    for t in gw.tenants.directory.names() {
        names.insert(t.to_string(), ());
    }
    for t in gw.tenants.configured.iter() {
        names.insert(t.to_string(), ());
    }
    for k in gw.tenants.keys.list() {
        names.insert(k.spec.tenant.to_string(), ());
    }
    for t in gw.tenants.accounts.tenants() {
        names.insert(t.to_string(), ());
    }
    let mut tenants: Vec<Value> = Vec::with_capacity(names.len());
    for t in names.keys() {
        tenants.push(describe(&gw, t).await);
    }
    // Credits, quotas and spend are in the billing currency.
    let currency = gw.tenants.pricing.catalog.billing();
    Json(json!({ "currency": currency.as_str(), "tenants": tenants })).into_response()
}
