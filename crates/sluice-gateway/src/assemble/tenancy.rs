//! The builder's calls that say who may call and what they may spend: API keys (configured,
//! made at run time, revoked), tenants' lanes and limits, whether keys are required, the
//! admin token.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use sluice_economy::{KeySpec, Limits};
use sluice_ledger::{RevokedKey, StoredKey, StoredTenant};

use super::GatewayBuilder;

/// What the configuration says of tenants besides their limits: their lanes and classes.
#[derive(Debug, Default)]
pub(super) struct TenantDefaults {
    /// (tenant, lane name).
    pub lanes: Vec<(String, String)>,
    /// Each tenant's class, for client latency by kind of customer.
    pub classes: HashMap<Arc<str>, Arc<str>>,
}

impl TenantDefaults {
    /// The tenants the configuration sets: with a lane, a class or `limits`.
    pub(super) fn configured(&self, limits: &[(String, Limits)]) -> HashSet<Arc<str>> {
        self.lanes
            .iter()
            .map(|(t, _)| Arc::from(t.as_str()))
            .chain(self.classes.keys().cloned())
            .chain(limits.iter().map(|(t, _)| Arc::from(t.as_str())))
            .collect()
    }
}

impl GatewayBuilder {
    /// Sends `tenant`'s requests that name no lane to `lane` (a lane's name).
    pub fn tenant_lane(mut self, tenant: &str, lane: &str) -> Self {
        self.tenant_defaults
            .lanes
            .push((tenant.to_string(), lane.to_string()));
        self
    }

    /// Puts `tenant` in `class`: its calls' client latency is reported under that class.
    pub fn tenant_class(mut self, tenant: &str, class: &str) -> Self {
        self.tenant_defaults
            .classes
            .insert(Arc::from(tenant), Arc::from(class));
        self
    }

    /// Adds an API key known by its SHA-256 (hex).
    pub fn key(mut self, spec: KeySpec, sha256_hex: &str) -> Self {
        self.keys.push((spec, sha256_hex.to_string()));
        self
    }

    /// Adds keys made at run time and kept in the ledger's store; a configured key of the
    /// same name wins.
    pub fn stored_keys(mut self, stored: &[StoredKey]) -> Self {
        for k in stored {
            if self.keys.iter().any(|(spec, _)| spec.name == k.name) {
                tracing::warn!(key = %k.name, "a stored key has a configured key's name; the configured one is used");
                continue;
            }
            let spec = KeySpec {
                name: k.name.clone(),
                tenant: Arc::from(k.tenant.as_str()),
                lane: k.lane.clone(),
                models: k.models.clone(),
            };
            self.stored.push((spec, k.sha256.clone()));
        }
        self
    }

    /// Refuses the keys revoked through the admin API (kept in the ledger's store): a key the
    /// configuration defines with a revoked hash is left out, until the configuration gives
    /// it another hash.
    pub fn revoked_keys(mut self, revoked: &[RevokedKey]) -> Self {
        self.revoked
            .extend(revoked.iter().map(|r| r.sha256.to_ascii_lowercase()));
        self
    }

    /// Adds tenants set at run time and kept in the ledger's store; a tenant the
    /// configuration sets wins.
    pub fn stored_tenants(mut self, stored: &[StoredTenant]) -> Self {
        self.stored_tenants.extend_from_slice(stored);
        self
    }

    /// Gives `tenant` credits and quotas.
    pub fn tenant_limits(mut self, tenant: &str, limits: Limits) -> Self {
        self.limits.push((tenant.to_string(), limits));
        self
    }

    /// Whether requests need an API key (by default: when any key is configured).
    pub fn require_keys(mut self, required: bool) -> Self {
        self.require_keys = Some(required);
        self
    }

    /// Requires `token` on `/admin/*` and turns the key routes on.
    pub fn admin_token(mut self, token: &str) -> Self {
        self.admin_token = Some(token.to_string());
        self
    }

    /// Requires `token` (or the admin token) on `/metrics`.
    pub fn metrics_token(mut self, token: &str) -> Self {
        self.metrics_token = Some(token.to_string());
        self
    }
}
