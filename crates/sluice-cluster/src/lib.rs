//! What several sluice instances keep between them, in Redis (or Valkey): tenants' credits and
//! quotas ([`book`]), each rate-limited deployment's pacing and 429 pauses ([`pace`]), a
//! change counter for keys and tenants made through the admin API, and each instance's
//! configuration hash ([`peers`]). Every kind sits behind the trait the gateway already walks
//! through, so without a cluster nothing here runs.
//!
//! When Redis cannot answer, each kind does what [`health`] states, never nothing: budgets
//! fail closed (or keep a stated local share), pacing keeps a local share of each limit, and
//! `/readyz`, a metric and a log line say which state is degraded until Redis is back.

pub mod answers;
pub mod book;
pub mod health;
pub mod pace;
pub mod peers;
mod store;

use std::sync::Arc;
use std::time::Duration;

pub use answers::RedisAnswers;
pub use book::SharedAccounts;
pub use health::{BudgetPolicy, Degraded, Health, Kind};
pub use pace::SharedPace;
pub use store::ClusterError;

use sluice_tail::pace::{Pace, PaceSpec};
use store::Redis;

/// How to reach Redis and what to do without it.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// The Redis URL (`redis://`, or `rediss://` for TLS).
    pub url: String,
    /// Where the URL came from, for errors (the environment variable's name).
    pub url_from: String,
    /// Prefixed to every key, so several clusters can share one Redis.
    pub key_prefix: String,
    /// The longest a connection may take.
    pub connect_timeout: Duration,
    /// The longest a command may take before its state counts as degraded.
    pub command_timeout: Duration,
    /// Connections kept open (each multiplexed).
    pub connections: usize,
    /// What budgets do while Redis cannot answer.
    pub budgets: BudgetPolicy,
    /// The share of each limit one instance keeps alone while Redis cannot answer.
    pub per_instance_share: f64,
    /// How long a reservation is held before it is charged in full (its instance died).
    pub hold_ttl: Duration,
    /// How often Redis is probed, the change counter read and peers compared.
    pub probe_every: Duration,
}

/// A connection to the cluster's Redis and everything kept there.
#[derive(Debug, Clone)]
pub struct Cluster {
    redis: Arc<Redis>,
    health: Arc<Health>,
    book: Arc<SharedAccounts>,
    settings: Arc<Settings>,
    instance: Arc<str>,
    /// The answer cache's generation (moved on by a purge anywhere).
    answers: Arc<std::sync::atomic::AtomicU64>,
}

impl Cluster {
    /// Connects to Redis by `settings`: a URL that does not parse or a Redis that does not
    /// answer within the connect timeout is an error naming it.
    pub async fn connect(settings: Settings) -> Result<Self, ClusterError> {
        let redis = Arc::new(Redis::connect(&settings).await?);
        let health = Arc::new(Health::new(settings.budgets, settings.per_instance_share));
        let instance: Arc<str> = Arc::from(uuid::Uuid::new_v4().simple().to_string().as_str());
        let book = SharedAccounts::new(redis.clone(), health.clone(), &settings, &instance);
        Ok(Self {
            redis,
            health,
            book,
            settings: Arc::new(settings),
            instance,
            answers: Arc::default(),
        })
    }

    /// The book of credits and quotas every instance shares.
    pub fn book(&self) -> Arc<SharedAccounts> {
        self.book.clone()
    }

    /// A pacer for `deployment` with `spec`'s limits that every instance shares (a local
    /// share of them while Redis cannot answer). Must be called inside a Tokio runtime.
    pub fn pacer(&self, deployment: &str, spec: PaceSpec) -> Box<dyn Pace> {
        Box::new(SharedPace::start(
            self.redis.clone(),
            self.health.clone(),
            deployment,
            spec,
            self.settings.per_instance_share,
        ))
    }

    /// The exact answer cache every instance shares, its answers living `ttl`; this
    /// instance's own writes are counted up to `max_bytes`.
    pub fn answers(&self, ttl: Duration, max_bytes: u64) -> Arc<RedisAnswers> {
        Arc::new(RedisAnswers::new(
            self.redis.clone(),
            self.health.clone(),
            self.answers.clone(),
            ttl,
            max_bytes,
        ))
    }

    /// What Redis's absence degrades now, and what each kind does instead.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// This instance's id among its peers.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// Tells every instance that keys or tenants changed (they reload within a probe).
    pub async fn changed(&self) -> Result<(), ClusterError> {
        self.redis
            .incr(&self.redis.key("directory"))
            .await
            .map(|_| ())
    }

    /// Probes Redis every `probe_every`: marks it back when it answers (flushing what the
    /// book owes it), publishes this instance's `config_hash` (the latest the receiver holds:
    /// a configuration taken on SIGHUP changes it) and compares its peers', and
    /// sends to `changes` the change counter of keys and tenants with the times Redis came
    /// back (after which accounts a restarted Redis lost are filled again from the ledger).
    /// Runs until dropped.
    pub async fn watch(
        self,
        config_hash: tokio::sync::watch::Receiver<String>,
        changes: tokio::sync::watch::Sender<(u64, u64)>,
    ) {
        let mut tick = tokio::time::interval(self.settings.probe_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut n: u64 = 0;
        loop {
            tick.tick().await;
            let counters = [self.redis.key("directory"), self.redis.key("answers")];
            match self.redis.get_u64s(&counters).await {
                Ok([v, generation]) => {
                    self.answers
                        .store(generation, std::sync::atomic::Ordering::Relaxed);
                    let back = u64::from(self.health.recovered());
                    changes.send_if_modified(|old| {
                        let new = (v, old.1 + back);
                        std::mem::replace(old, new) != new
                    });
                    self.book.flush().await;
                }
                Err(e) => {
                    self.health.failed(Kind::Directory, &e);
                    continue;
                }
            }
            // Peers compare configurations every tenth probe (and at the first).
            if n.is_multiple_of(10) {
                let hash = config_hash.borrow().clone();
                peers::publish_and_compare(&self.redis, &self.health, &self.instance, &hash).await;
            }
            n += 1;
        }
    }
}
