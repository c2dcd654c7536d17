//! The gateway as one instance of several: telling the others that keys or tenants changed
//! through its admin API, taking the changes they made (from the shared store, within a probe
//! of Redis), and saying what Redis's absence degrades (`/readyz`, metrics).

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Value, json};
use sluice_economy::{KeySpec, Limits};
use sluice_ledger::{LedgerError, Store};
use tokio::time::Instant;

use crate::Gateway;
use crate::tenants::limits_of;

mod store;

pub(crate) use store::readiness as store_readiness;
pub use store::{StoreHealth, follow_store};

/// Tells the other instances that keys or tenants changed here; a failure is logged (they
/// see the change within [`store::FOLLOW_STORE_EVERY`] when the ledger's store is shared, else once
/// Redis answers and the counter moves again, or at their restart). What an admin answer
/// says of how far the change was told.
pub(crate) async fn announce(gw: &Gateway) -> Value {
    let redis = match &gw.cluster {
        None => Value::Null,
        Some(c) => match c.changed().await {
            Ok(()) => json!("told at once"),
            Err(e) => {
                c.health().failed(sluice_cluster::Kind::Directory, &e);
                tracing::error!(error = %e, "other instances could not be told of a key or tenant change");
                json!(format!("not told: {e}"))
            }
        },
    };
    let store = if store::shared(gw) {
        json!(format!(
            "kept; every instance reads it within {} s",
            store::FOLLOW_STORE_EVERY.as_secs()
        ))
    } else {
        Value::Null
    };
    json!({ "redis": redis, "postgres": store })
}

/// Takes the keys and tenants other instances made, each time the change counter moves;
/// each time Redis comes back, gives accounts a restarted Redis lost their spend from the
/// ledger again (an account Redis kept is left alone).
pub async fn follow(gw: Arc<Gateway>, mut changes: tokio::sync::watch::Receiver<(u64, u64)>) {
    let mut returns = 0;
    while changes.changed().await.is_ok() {
        let (_, back) = *changes.borrow_and_update();
        if let Err(e) = reload(&gw).await {
            tracing::error!(error = %e, "reading keys and tenants made by other instances failed; retried at the next change");
        }
        if back != returns {
            returns = back;
            if let Err(e) =
                crate::walk::metering::restore_accounts(&gw, std::time::SystemTime::now()).await
            {
                tracing::error!(error = %e, "restoring accounts from the ledger after Redis came back failed");
            }
        }
    }
}

/// Makes this instance's keys and tenants set at run time the store's.
pub(crate) async fn reload(gw: &Gateway) -> Result<(), LedgerError> {
    let Some(store) = gw.usage_store() else {
        return Ok(());
    };
    let _one_change_at_a_time = gw.tenants.admin_writes.lock().await;
    let revoked: HashSet<String> = store
        .revoked_keys()
        .await?
        .into_iter()
        .map(|r| r.sha256.to_ascii_lowercase())
        .collect();
    let keys = &gw.tenants.keys;
    for k in store.keys().await? {
        let sha = k.sha256.to_ascii_lowercase();
        if revoked.contains(&sha) {
            continue;
        }
        let spec = KeySpec {
            name: k.name.clone(),
            tenant: Arc::from(k.tenant.as_str()),
            lane: k.lane.clone(),
            models: k.models.clone(),
        };
        // A key of that name already held (this instance's configured one, or the same key)
        // wins.
        if keys.named(&k.name).is_none()
            && let Err(e) = keys.insert_hashed(spec, &sha)
        {
            tracing::warn!(key = %k.name, error = %e, "a key made by another instance could not be taken");
        }
    }
    for k in keys.list() {
        if let Some((sha, _)) = keys.named(&k.spec.name)
            && revoked.contains(&sha.to_ascii_lowercase())
        {
            keys.revoke(&k.spec.name);
            tracing::info!(key = %k.spec.name, "revoked by another instance");
        }
    }
    let stored = store.tenants().await?;
    let names: HashSet<&str> = stored.iter().map(|t| t.name.as_str()).collect();
    for t in gw.tenants.directory.names() {
        if gw.tenants.directory.is_set(&t) && !names.contains(&*t) {
            gw.tenants
                .accounts
                .set_limits(&t, Limits::default(), Instant::now());
            gw.tenants.directory.remove(&t);
        }
    }
    for t in stored {
        if gw.tenants.configured.contains(t.name.as_str()) {
            continue;
        }
        gw.tenants
            .accounts
            .set_limits(&t.name, limits_of(&t), Instant::now());
        let lane = t
            .lane
            .as_deref()
            .and_then(|l| gw.lanes.iter().position(|x| &*x.name == l));
        gw.tenants.directory.set(&t.name, lane);
    }
    Ok(())
}

/// What `/readyz` says of the cluster: whether Redis answers, what is degraded and how, and
/// peers that disagree on the configuration.
pub(crate) fn readiness(gw: &Gateway) -> Option<Value> {
    let c = gw.cluster.as_ref()?;
    let h = c.health();
    let degraded: Vec<Value> = h
        .degraded()
        .iter()
        .map(|d| json!({"state": d.kind.name(), "behaviour": d.behaviour}))
        .collect();
    Some(json!({
        "instance": c.instance(),
        "redis": if h.is_down() { "unreachable" } else { "ok" },
        "cause": h.cause(),
        "degraded": degraded,
        "peers_disagree": h.disagreement(),
    }))
}
