//! What each kind of shared state does while Redis cannot answer, and whether it is so now.
//! The decision is stated here, once: budgets fail closed (or keep a local share, as
//! configured), pacing keeps a local share of each limit, the directory keeps what it holds (and follows PostgreSQL when the ledger is there),
//! the caches are skipped, hints (affinity, breakers, routers' observations) stay each
//! instance's own, and the moment Redis answers again every kind is whole. Entering and leaving is logged;
//! failures are counted per kind.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::SystemTime;

use parking_lot::Mutex;

use crate::ClusterError;

/// What budgets (credits and quotas) do while Redis cannot answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetPolicy {
    /// Calls of tenants with credits or quotas are refused (503) until Redis is back.
    FailClosed,
    /// Each instance keeps `per_instance_share` of each limit (of the credits left when Redis
    /// last answered) and spends it alone; what it spent is told to Redis once it is back.
    LocalShare,
}

/// A kind of shared state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Credits and quotas.
    Budgets,
    /// Deployments' pacing and 429 pauses.
    Pacing,
    /// Keys and tenants made through the admin API, and peers' configurations.
    Directory,
    /// The exact answer cache and the semantic cache's entries.
    Caches,
    /// Prefix affinity, breaker hints and automatic routers' observations.
    Hints,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 5] = [
        Kind::Budgets,
        Kind::Pacing,
        Kind::Directory,
        Kind::Caches,
        Kind::Hints,
    ];

    /// Its name in metrics and `/readyz`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Budgets => "budgets",
            Kind::Pacing => "pacing",
            Kind::Directory => "directory",
            Kind::Caches => "caches",
            Kind::Hints => "hints",
        }
    }
}

/// One degraded kind and what it does instead.
#[derive(Clone, Debug, PartialEq)]
pub struct Degraded {
    /// The kind.
    pub kind: Kind,
    /// What it does while Redis cannot answer.
    pub behaviour: String,
}

/// Whether Redis answers, and the failures of each kind.
#[derive(Debug)]
pub struct Health {
    down: AtomicBool,
    since: Mutex<Option<(SystemTime, String)>>,
    errors: [AtomicU64; 5],
    budgets: BudgetPolicy,
    share: f64,
    /// Whether keys and tenants are also followed through a shared store (PostgreSQL).
    directory_in_store: AtomicBool,
    /// Whether budgets are kept in the ledger's PostgreSQL database while Redis is down.
    budgets_behind: AtomicBool,
    /// Peers whose configuration differs from this one's, as the last comparison found.
    pub(crate) disagreement: Mutex<Option<String>>,
}

impl Health {
    /// Healthy, with these behaviours for when it is not.
    pub fn new(budgets: BudgetPolicy, share: f64) -> Self {
        Self {
            down: AtomicBool::new(false),
            since: Mutex::new(None),
            errors: Default::default(),
            budgets,
            share,
            directory_in_store: AtomicBool::new(false),
            budgets_behind: AtomicBool::new(false),
            disagreement: Mutex::new(None),
        }
    }

    /// Says that keys and tenants are also followed through a shared store, so that the
    /// directory stays shared while Redis cannot answer (only slower).
    pub fn directory_followed_in_store(&self) {
        self.directory_in_store.store(true, Ordering::Relaxed);
    }

    /// Says that budgets are kept in the ledger's PostgreSQL database while Redis cannot
    /// answer (the policy applies only when that cannot answer either).
    pub fn budgets_kept_behind(&self) {
        self.budgets_behind.store(true, Ordering::Relaxed);
    }

    /// Whether Redis is taken as down (every kind degraded).
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// A command of `kind` failed with `e`: Redis is taken as down until a probe answers.
    pub fn failed(&self, kind: Kind, e: &ClusterError) {
        self.errors[kind as usize].fetch_add(1, Ordering::Relaxed);
        if !self.down.swap(true, Ordering::AcqRel) {
            *self.since.lock() = Some((SystemTime::now(), e.to_string()));
            let said: Vec<String> = self
                .degraded()
                .iter()
                .map(|d| format!("{}: {}", d.kind.name(), d.behaviour))
                .collect();
            tracing::error!(error = %e, kind = kind.name(), "the cluster's Redis cannot answer; {}", said.join("; "));
        }
    }

    /// A probe answered: every kind is whole again. Whether Redis was down until now.
    pub fn recovered(&self) -> bool {
        let was_down = self.down.swap(false, Ordering::AcqRel);
        if was_down {
            let since = self.since.lock().take();
            let for_s = since
                .and_then(|(t, _)| t.elapsed().ok())
                .map_or(0.0, |d| d.as_secs_f64());
            tracing::warn!(
                down_seconds = for_s,
                "the cluster's Redis answers again; budgets, pacing and the directory are shared again"
            );
        }
        was_down
    }

    /// Failures of `kind` so far.
    pub fn errors(&self, kind: Kind) -> u64 {
        self.errors[kind as usize].load(Ordering::Relaxed)
    }

    /// Why Redis was taken as down, when it is.
    pub fn cause(&self) -> Option<String> {
        self.since.lock().as_ref().map(|(_, c)| c.clone())
    }

    /// Peers whose configuration's shared sections differ from this one's, when some do.
    pub fn disagreement(&self) -> Option<String> {
        self.disagreement.lock().clone()
    }

    /// The kinds degraded now, with what each does instead (none while Redis answers).
    pub fn degraded(&self) -> Vec<Degraded> {
        if !self.is_down() {
            return Vec::new();
        }
        let pct = self.share * 100.0;
        let policy = match self.budgets {
            BudgetPolicy::FailClosed => {
                "fail closed: calls of tenants with credits or quotas get 503".to_string()
            }
            BudgetPolicy::LocalShare => format!(
                "each instance spends {pct:.0}% of each limit alone (of the credits left when \
                 Redis last answered); Redis hears it once back"
            ),
        };
        let budgets = if self.budgets_behind.load(Ordering::Relaxed) {
            format!(
                "reserved and settled in PostgreSQL, exact across instances (each keeps \
                 {pct:.0}% of each rpm and tpm); Redis hears the spend once back; if \
                 PostgreSQL cannot answer either: {policy}"
            )
        } else {
            policy
        };
        Kind::ALL
            .into_iter()
            .map(|kind| Degraded {
                kind,
                behaviour: match kind {
                    Kind::Budgets => budgets.clone(),
                    Kind::Pacing => {
                        format!("each instance paces at {pct:.0}% of each deployment's limit")
                    }
                    Kind::Directory if self.directory_in_store.load(Ordering::Relaxed) => {
                        "keys and tenants made elsewhere are read from PostgreSQL every second"
                            .to_string()
                    }
                    Kind::Directory => {
                        "keys and tenants made elsewhere are not seen until Redis is back"
                            .to_string()
                    }
                    Kind::Caches => "the answer cache and the semantic cache are skipped: every \
                                     request goes to the upstream"
                        .to_string(),
                    Kind::Hints => "prefix affinity, breaker hints and routers' beliefs are this \
                                    instance's own: what it learns is not told to the others"
                        .to_string(),
                },
            })
            .collect()
    }
}
