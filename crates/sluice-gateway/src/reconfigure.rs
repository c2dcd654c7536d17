//! A changed configuration taken while serving (on SIGHUP), so that a fleet is reconfigured
//! without a restart and without dropping a request. What can change in place is applied:
//! tenants' credits and quotas, and keys (made, removed, or given another hash; a key
//! revoked through the admin API stays revoked). Every other section that differs is named as
//! needing a restart, and keeps running as it was.

use std::collections::HashSet;

use sluice_config::gateway::GatewayConfig;
use sluice_economy::Limits;
use sluice_ledger::{LedgerError, Store};
use tokio::time::Instant;

use crate::Gateway;

/// What taking a configuration did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Tenants whose credits and quotas were set (anew or to none).
    pub tenants: usize,
    /// Keys made or given another hash.
    pub keys_added: usize,
    /// Keys removed.
    pub keys_removed: usize,
    /// Sections that differ and take effect only at a restart.
    pub restart_needed: Vec<&'static str>,
}

/// The sections of `old` and `new` that differ and cannot change in place.
pub fn restart_needed(old: &GatewayConfig, new: &GatewayConfig) -> Vec<&'static str> {
    // A tenant's lane and class are read at start; credits and quotas are not. A tenant added
    // or removed with neither needs no restart.
    let placed = |c: &GatewayConfig, name: &str| -> (Option<String>, Option<String>) {
        c.tenants
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| (t.lane.clone(), t.class.clone()))
            .unwrap_or_default()
    };
    let placement_changed = old
        .tenants
        .iter()
        .chain(&new.tenants)
        .any(|(name, _)| placed(old, name) != placed(new, name));
    let differs = [
        (
            "[server]",
            old.server != new.server || old.listen != new.listen,
        ),
        ("[telemetry]", old.telemetry != new.telemetry),
        ("[ledger]", old.ledger != new.ledger),
        ("[cache]", old.cache != new.cache),
        ("[prefixes]", old.prefixes != new.prefixes),
        ("[billing]", old.billing != new.billing),
        ("[lanes]", old.lanes != new.lanes),
        ("[tenants] lane or class", placement_changed),
        ("[prices]", old.prices != new.prices),
        ("[providers]", old.providers != new.providers),
        ("[models]", old.models != new.models),
        ("[catalog]", old.catalog != new.catalog),
        ("[routes]", old.routes != new.routes),
        ("[routers]", old.routers != new.routers),
        ("[slo]", old.slos != new.slos),
        ("[diagnose]", old.diagnose != new.diagnose),
        ("[traces]", old.traces != new.traces),
        ("[batches]", old.batches != new.batches),
        ("[cluster]", old.cluster != new.cluster),
    ];
    differs
        .into_iter()
        .filter_map(|(name, d)| d.then_some(name))
        .collect()
}

/// Takes `new` in place of `old` in `gw`: tenants' limits and keys now, the rest named.
pub async fn apply(
    gw: &Gateway,
    old: &GatewayConfig,
    new: &GatewayConfig,
) -> Result<Applied, LedgerError> {
    let _one_change_at_a_time = gw.tenants.admin_writes.lock().await;
    let revoked: HashSet<String> = match gw.usage_store() {
        Some(store) => store
            .revoked_keys()
            .await?
            .into_iter()
            .map(|r| r.sha256.to_ascii_lowercase())
            .collect(),
        None => HashSet::new(),
    };
    let mut applied = Applied {
        restart_needed: restart_needed(old, new),
        ..Applied::default()
    };
    let now = Instant::now();
    for (name, t) in &new.tenants {
        if old.tenants.iter().all(|(n, o)| n != name || o != t) {
            gw.tenants.accounts.set_limits(name, t.limits, now);
            applied.tenants += 1;
        }
    }
    for (name, _) in &old.tenants {
        if new.tenants.iter().all(|(n, _)| n != name) && !gw.tenants.directory.is_set(name) {
            gw.tenants.accounts.set_limits(name, Limits::default(), now);
            applied.tenants += 1;
        }
    }
    let keys = &gw.tenants.keys;
    for (name, k) in &old.keys {
        let kept = new.keys.iter().any(|(n, nk)| n == name && nk == k);
        if !kept && keys.revoke(name) {
            applied.keys_removed += 1;
        }
    }
    for (name, k) in &new.keys {
        let sha = k.sha256.trim().to_ascii_lowercase();
        if keys.named(name).is_some() || revoked.contains(&sha) {
            continue;
        }
        match keys.insert_hashed(k.spec.clone(), &sha) {
            Ok(()) => applied.keys_added += 1,
            Err(e) => {
                tracing::warn!(key = %name, error = %e, "a key of the new configuration could not be taken")
            }
        }
    }
    Ok(applied)
}

#[cfg(test)]
mod tests;
