//! `/admin/tenants`: every tenant with its account (`GET`), and tenants set at run time
//! (`PUT /admin/tenants/{name}`: default lane, credits, quotas; `DELETE` to remove). Tenants
//! set here are kept in the ledger's store and come back after a restart; a tenant the
//! configuration sets is changed there, not here. Changing a tenant's limits keeps what it
//! has spent: raising `credits` tops it up.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError};
use sluice_economy::{Limits, Micros};
use sluice_ledger::{Store, StoredTenant};
use tokio::time::Instant;

use crate::Gateway;
use crate::admin::keys::{invalid, is_name};
use crate::admin::{managing, refuse, store_failed};

/// A stored tenant's limits.
pub(crate) fn limits_of(t: &StoredTenant) -> Limits {
    Limits {
        credits: t.credits_micros.map(Micros),
        rpm: t.rpm,
        tpm: t.tpm,
        tokens_per_day: t.tokens_per_day,
        spend_per_month: t.spend_per_month_micros.map(Micros),
    }
}

/// `PUT /admin/tenants/{name}` body: every field optional, absent means none. Money is in
/// whole units with up to six decimals, as in the configuration.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantBody {
    #[serde(default)]
    lane: Option<String>,
    #[serde(default)]
    credits: Option<f64>,
    #[serde(default)]
    rpm: Option<u64>,
    #[serde(default)]
    tpm: Option<u64>,
    #[serde(default)]
    tokens_per_day: Option<u64>,
    #[serde(default)]
    spend_per_month: Option<f64>,
}

fn checked(gw: &Gateway, name: &str, b: TenantBody) -> Result<StoredTenant, GatewayError> {
    if !is_name(name) {
        return Err(invalid(
            "a tenant's name must be 1 to 64 letters, digits, `.`, `_` or `-`".into(),
            "name",
        ));
    }
    if gw.configured_tenants.contains(name) {
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
    let money = |v: Option<f64>, field: &'static str| {
        v.map(|v| {
            Micros::from_units(v)
                .map(|m| m.0)
                .ok_or_else(|| invalid(format!("`{field}` must be an amount of 0 or more"), field))
        })
        .transpose()
    };
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
        credits_micros: money(b.credits, "credits")?,
        spend_per_month_micros: money(b.spend_per_month, "spend_per_month")?,
        lane: b.lane,
        rpm: b.rpm,
        tpm: b.tpm,
        tokens_per_day: b.tokens_per_day,
    })
}

/// Makes `t` the tenant's settings in this gateway.
fn apply(gw: &Gateway, t: StoredTenant) {
    let name: Arc<str> = Arc::from(t.name.as_str());
    gw.accounts
        .set_limits(&t.name, limits_of(&t), Instant::now());
    let lane = t
        .lane
        .as_deref()
        .and_then(|l| gw.lanes.iter().position(|x| &*x.name == l));
    let mut lanes = gw.tenant_lanes.write();
    match lane {
        Some(i) => lanes.insert(name.clone(), i),
        None => lanes.remove(&name),
    };
    drop(lanes);
    gw.api_tenants.lock().insert(name, t);
}

/// `PUT /admin/tenants/{name}`: sets a tenant's default lane, credits and quotas, kept in the
/// ledger's store first (a setting the store could not keep is not applied).
pub async fn put(
    State(gw): State<Arc<Gateway>>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let _one_change_at_a_time = gw.admin_writes.lock().await;
    let tenant = managing(&gw)
        .and_then(|()| {
            serde_json::from_slice::<TenantBody>(&body).map_err(|e| {
                GatewayError::new(ErrorKind::InvalidRequest, format!("bad tenant: {e}"))
            })
        })
        .and_then(|b| checked(&gw, &name, b));
    let tenant = match tenant {
        Ok(t) => t,
        Err(e) => return refuse(&e),
    };
    if let Some(store) = gw.usage_store()
        && let Err(e) = store.save_tenant(&tenant).await
    {
        return refuse(&store_failed(&e));
    }
    apply(&gw, tenant);
    Json(describe(&gw, &name)).into_response()
}

/// `DELETE /admin/tenants/{name}`: removes a tenant set through the API (its lane and limits;
/// its spend stays in the ledger).
pub async fn delete(State(gw): State<Arc<Gateway>>, Path(name): Path<String>) -> Response {
    let _one_change_at_a_time = gw.admin_writes.lock().await;
    if let Err(e) = managing(&gw) {
        return refuse(&e);
    }
    if !gw.api_tenants.lock().contains_key(name.as_str()) {
        return refuse(&GatewayError::new(
            ErrorKind::RouteNotFound,
            format!("no tenant `{name}` set through the admin API"),
        ));
    }
    if let Some(store) = gw.usage_store()
        && let Err(e) = store.remove_tenant(&name).await
    {
        return refuse(&store_failed(&e));
    }
    gw.accounts
        .set_limits(&name, Limits::default(), Instant::now());
    gw.tenant_lanes.write().remove(name.as_str());
    gw.api_tenants.lock().remove(name.as_str());
    Json(json!({ "removed": name })).into_response()
}

/// One tenant as `/admin/tenants` shows it.
fn describe(gw: &Gateway, tenant: &str) -> Value {
    let lane = gw
        .tenant_lanes
        .read()
        .get(tenant)
        .and_then(|i| gw.lanes.get(*i))
        .map(|l| l.name.to_string());
    let keys = gw
        .keys
        .list()
        .iter()
        .filter(|k| &*k.spec.tenant == tenant)
        .count();
    let source = if gw.configured_tenants.contains(tenant) {
        "config"
    } else if gw.api_tenants.lock().contains_key(tenant) {
        "api"
    } else {
        "seen"
    };
    let account = gw.accounts.balance(tenant).map(|b| {
        json!({
            "credits_micros": b.limits.credits.map(|c| c.0),
            "rpm": b.limits.rpm,
            "tpm": b.limits.tpm,
            "tokens_per_day": b.limits.tokens_per_day,
            "spend_per_month_micros": b.limits.spend_per_month.map(|c| c.0),
            "spent_micros": b.spent.0,
            "reserved_micros": b.reserved.0,
            "tokens_today": b.tokens_today,
            "spent_this_month_micros": b.spent_this_month.0,
        })
    });
    json!({"tenant": tenant, "source": source, "lane": lane, "keys": keys, "account": account})
}

/// `GET /admin/tenants`: every tenant sluice knows (configured, set through the API, owning
/// a key, or with an account), with where it is set (`config`, `api`, or `seen` for one that
/// only owns a key), its default lane, how many keys it has, and its account: limits, what it
/// spent (micro-units) and has reserved, its tokens today and spend this month.
pub async fn list(State(gw): State<Arc<Gateway>>) -> Response {
    let mut names: BTreeMap<String, ()> = BTreeMap::new();
    for t in gw.tenant_lanes.read().keys() {
        names.insert(t.to_string(), ());
    }
    for t in gw.configured_tenants.iter() {
        names.insert(t.to_string(), ());
    }
    for t in gw.api_tenants.lock().keys() {
        names.insert(t.to_string(), ());
    }
    for k in gw.keys.list() {
        names.insert(k.spec.tenant.to_string(), ());
    }
    for t in gw.accounts.tenants() {
        names.insert(t.to_string(), ());
    }
    let tenants: Vec<Value> = names.keys().map(|t| describe(&gw, t)).collect();
    Json(json!({ "tenants": tenants })).into_response()
}
