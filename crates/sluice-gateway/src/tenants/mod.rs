//! Who may call and what they may spend: API keys and when a request needs one, tenants'
//! default lanes and accounts (credits and quotas, held before a call and settled after it),
//! tenants set through the admin API, the admin token, and what a call to a model with no
//! price gets. One handle: the steps that identify a caller and hold its money, and the
//! admin API that changes keys and tenants, take it.

pub use sluice_economy::{LocalTenants, TenantDirectory};

use std::collections::HashSet;
use std::sync::Arc;

use sluice_economy::estimate::Tokenizer;
use sluice_economy::{Books, Catalog, KeyDirectory, Limits, Micros, Unpriced};
use sluice_ledger::StoredTenant;

/// Everything about callers and their money.
#[derive(Debug)]
pub struct Tenants {
    /// API keys.
    pub(crate) keys: Arc<dyn KeyDirectory>,
    /// When requests need a key.
    pub(crate) key_check: KeyCheck,
    /// The token `/admin/*` requires, if any.
    pub(crate) admin_token: Option<String>,
    /// The token `/metrics` requires besides the admin token, if any.
    pub(crate) metrics_token: Option<String>,
    /// Tenants' credits and quotas.
    pub(crate) accounts: Books,
    /// Counts the prompts of tenants with credits or quotas; loaded before the gateway is.
    pub(crate) tokenizer: Tokenizer,
    /// What a call to a model with no price gets, and the currency calls are billed in.
    pub(crate) pricing: Pricing,
    /// Each tenant's default lane, and the tenants set through the admin API.
    pub(crate) directory: Box<dyn TenantDirectory>,
    /// Each configured tenant's class (`[tenants.NAME] class`).
    pub(crate) classes: std::collections::HashMap<Arc<str>, Arc<str>>,
    /// Tenants the configuration sets (the admin API may not change them).
    pub(crate) configured: HashSet<Arc<str>>,
    /// Held by each admin change (keys, tenants) across its write to the store and to
    /// memory, so that two changes cannot land in one order in the store and the other in
    /// memory.
    pub(crate) admin_writes: tokio::sync::Mutex<()>,
}

/// How calls are charged: what a model with no price gets, and the catalog that says
/// which currency bills are in and why a model has no price (one in a currency with no
/// rate).
#[derive(Debug)]
pub struct Pricing {
    /// What a call to a model with no price gets.
    pub unpriced: Unpriced,
    /// The prices, in the billing currency, and as published.
    pub catalog: Catalog,
}

/// A stored tenant's limits.
pub fn limits_of(t: &StoredTenant) -> Limits {
    Limits {
        credits: t.credits_micros.map(Micros),
        rpm: t.rpm,
        tpm: t.tpm,
        tokens_per_day: t.tokens_per_day,
        spend_per_month: t.spend_per_month_micros.map(Micros),
    }
}

impl Tenants {
    /// The lane of `tenant`'s requests that name none: its configured lane, else the first.
    pub fn lane_of(&self, tenant: &str) -> usize {
        self.directory.lane(tenant).unwrap_or(0)
    }

    /// `tenant`'s class, when the configuration gives it one.
    pub fn class_of(&self, tenant: &str) -> Option<Arc<str>> {
        self.classes.get(tenant).cloned()
    }
}

/// When requests must carry a valid key (`[server] require_keys`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyCheck {
    /// `require_keys = true`: always, even before any key exists.
    Always,
    /// `require_keys = false`: never; a key sent is still honoured.
    Never,
    /// Left out: from the moment any key exists, and from then on (revoking every key does
    /// not open the gateway again).
    OnceAnyKey,
}

impl KeyCheck {
    /// The check `require_keys` asks for.
    pub fn from_setting(require_keys: Option<bool>) -> Self {
        match require_keys {
            Some(true) => Self::Always,
            Some(false) => Self::Never,
            None => Self::OnceAnyKey,
        }
    }

    /// Whether a request without a valid key is refused, given the keys there are.
    pub fn required(self, keys: &dyn KeyDirectory) -> bool {
        match self {
            Self::Always => true,
            Self::Never => false,
            Self::OnceAnyKey => keys.ever_held(),
        }
    }
}

#[cfg(test)]
mod tests {
    use sluice_economy::{KeyRing, KeySpec};

    use super::*;

    #[test]
    fn keys_are_required_once_any_exists_unless_turned_off() {
        let ring = KeyRing::default();
        assert!(KeyCheck::Always.required(&ring));
        assert!(!KeyCheck::Never.required(&ring));
        assert!(!KeyCheck::OnceAnyKey.required(&ring));
        let spec = KeySpec {
            name: "k".into(),
            tenant: "t".into(),
            lane: None,
            models: vec![],
        };
        ring.create(spec).unwrap();
        assert!(KeyCheck::OnceAnyKey.required(&ring));
        assert!(!KeyCheck::Never.required(&ring));
        ring.revoke("k");
        assert!(
            KeyCheck::OnceAnyKey.required(&ring),
            "revoking all keys must not open it"
        );
    }
}
