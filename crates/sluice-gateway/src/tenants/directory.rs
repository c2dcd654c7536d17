//! Tenants set at run time, and every tenant's default lane: the [`TenantDirectory`] trait
//! the admin API and the walk go through. One process keeps a [`LocalTenants`]; several
//! instances keep one directory between them by another implementation (the store's rows,
//! with a change feed), no step changing. Tenants the configuration sets are the same on
//! every instance and are put in at assembly.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use sluice_ledger::StoredTenant;

/// Tenants' default lanes and the tenants set through the admin API.
pub trait TenantDirectory: Send + Sync + std::fmt::Debug {
    /// The lane (an index into the gateway's lanes) of `tenant`'s requests that name none,
    /// when it has one.
    fn lane(&self, tenant: &str) -> Option<usize>;
    /// Sets `tenant` as the admin API set it, with its lane (`None`: the first).
    fn set(&self, tenant: StoredTenant, lane: Option<usize>);
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
    set: Mutex<BTreeMap<Arc<str>, StoredTenant>>,
}

impl LocalTenants {
    /// A directory with the configured tenants' `lanes` and the tenants `set` before (from
    /// the store), with theirs.
    pub fn new(lanes: HashMap<Arc<str>, usize>, set: BTreeMap<Arc<str>, StoredTenant>) -> Self {
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

    fn set(&self, tenant: StoredTenant, lane: Option<usize>) {
        let name: Arc<str> = Arc::from(tenant.name.as_str());
        let mut lanes = self.lanes.write();
        match lane {
            Some(i) => lanes.insert(name.clone(), i),
            None => lanes.remove(&name),
        };
        drop(lanes);
        self.set.lock().insert(name, tenant);
    }

    fn is_set(&self, tenant: &str) -> bool {
        self.set.lock().contains_key(tenant)
    }

    fn remove(&self, tenant: &str) {
        self.lanes.write().remove(tenant);
        self.set.lock().remove(tenant);
    }

    fn names(&self) -> Vec<Arc<str>> {
        let mut v: Vec<Arc<str>> = self.lanes.read().keys().cloned().collect();
        v.extend(self.set.lock().keys().cloned());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(name: &str) -> StoredTenant {
        StoredTenant {
            name: name.into(),
            ..StoredTenant::default()
        }
    }

    #[test]
    fn a_tenant_set_and_removed_leaves_no_lane_behind() {
        let d = LocalTenants::new(HashMap::from([(Arc::from("cfg"), 1)]), BTreeMap::new());
        d.set(tenant("a"), Some(2));
        assert_eq!(d.lane("a"), Some(2));
        assert!(d.is_set("a") && !d.is_set("cfg"));
        d.set(tenant("a"), None);
        assert_eq!(
            d.lane("a"),
            None,
            "set again without a lane: the first lane"
        );
        d.remove("a");
        assert!(!d.is_set("a"));
        let mut names = d.names();
        names.sort();
        assert_eq!(names, vec![Arc::<str>::from("cfg")]);
    }
}
