//! Tenants set at run time, and every tenant's default lane: the [`TenantDirectory`] trait
//! the admin API and the walk go through, beside the key directory ([`crate::keys`]). One
//! process keeps a [`LocalTenants`]; instances of a cluster each keep theirs and follow the
//! changes made anywhere (from the ledger's rows, on a change counter), no step changing.
//! Tenants the configuration sets are the same on every instance and are put in at
//! assembly.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

/// Tenants' default lanes and the tenants set through the admin API.
pub trait TenantDirectory: Send + Sync + std::fmt::Debug {
    /// The lane (an index into the gateway's lanes) of `tenant`'s requests that name none,
    /// when it has one.
    fn lane(&self, tenant: &str) -> Option<usize>;
    /// Sets `tenant` as the admin API set it, with its lane (`None`: the first).
    fn set(&self, tenant: &str, lane: Option<usize>);
    /// Whether `tenant` was set through the admin API.
    fn is_set(&self, tenant: &str) -> bool;
    /// Forgets `tenant` and its lane.
    fn remove(&self, tenant: &str);
    /// Every tenant with a lane or set through the admin API.
    fn names(&self) -> Vec<Arc<str>>;
}

/// The directory in this process.
#[derive(Debug, Default)]
pub struct LocalTenants {
    lanes: RwLock<HashMap<Arc<str>, usize>>,
    set: Mutex<BTreeSet<Arc<str>>>,
}

impl LocalTenants {
    /// A directory with the configured tenants' `lanes` and the tenants `set` before (from
    /// the store).
    pub fn new(lanes: HashMap<Arc<str>, usize>, set: BTreeSet<Arc<str>>) -> Self {
        Self {
            lanes: RwLock::new(lanes),
            set: Mutex::new(set),
        }
    }
}

impl TenantDirectory for LocalTenants {
    fn lane(&self, tenant: &str) -> Option<usize> {
        self.lanes.read().get(tenant).copied()
    }

    fn set(&self, tenant: &str, lane: Option<usize>) {
        let name: Arc<str> = Arc::from(tenant);
        let mut lanes = self.lanes.write();
        match lane {
            Some(i) => lanes.insert(name.clone(), i),
            None => lanes.remove(&name),
        };
        drop(lanes);
        self.set.lock().insert(name);
    }

    fn is_set(&self, tenant: &str) -> bool {
        self.set.lock().contains(tenant)
    }

    fn remove(&self, tenant: &str) {
        self.lanes.write().remove(tenant);
        self.set.lock().remove(tenant);
    }

    fn names(&self) -> Vec<Arc<str>> {
        let mut v: Vec<Arc<str>> = self.lanes.read().keys().cloned().collect();
        v.extend(self.set.lock().iter().cloned());
        v.sort();
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_set_and_removed_leaves_no_lane_behind() {
        let d = LocalTenants::new(HashMap::from([(Arc::from("cfg"), 1)]), BTreeSet::new());
        d.set("a", Some(2));
        assert_eq!(d.lane("a"), Some(2));
        assert!(d.is_set("a") && !d.is_set("cfg"));
        assert_eq!(d.names(), vec![Arc::<str>::from("a"), Arc::from("cfg")]);
        d.set("a", None);
        assert_eq!(
            d.lane("a"),
            None,
            "set again without a lane: the first lane"
        );
        d.remove("a");
        assert!(!d.is_set("a"));
        assert_eq!(d.names(), vec![Arc::<str>::from("cfg")]);
    }
}
