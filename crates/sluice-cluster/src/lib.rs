//! What several sluice instances keep between them, in Redis (or Valkey): tenants' credits and
//! quotas ([`book`]), each rate-limited deployment's pacing and 429 pauses ([`pace`]), the
//! exact answer cache ([`answers`]), a change counter for keys and tenants made through the
//! admin API, and each instance's configuration hash ([`peers`]). State read on every request
//! and written seldom is replicated through shared logs ([`log`]): the semantic cache's
//! entries ([`semantic`]), prefix affinity ([`affinity`]), breakers' hints ([`hints`]) and
//! routers' observations ([`routers`]). Every kind sits behind the trait the gateway already walks
//! through, so without a cluster nothing here runs.
//!
//! When Redis cannot answer, each kind does what [`health`] states, never nothing: budgets
//! fail closed (or keep a stated local share), pacing keeps a local share of each limit, and
//! `/readyz`, a metric and a log line say which state is degraded until Redis is back.

pub mod affinity;
pub mod answers;
pub mod book;
pub mod health;
pub mod hints;
pub mod log;
pub mod pace;
pub mod peers;
pub mod routers;
pub mod semantic;
mod store;
mod wall;

use std::sync::Arc;
use std::time::Duration;

pub use affinity::RedisPrefixes;
pub use answers::RedisAnswers;
pub use book::RedisAccounts;
pub use health::{BudgetPolicy, Degraded, Health, Kind};
pub use hints::{RedisCooling, RedisHints};
pub use log::{Apply, Start, Writer};
pub use pace::RedisPace;
pub use routers::RedisRouterLog;
pub use semantic::RedisEntries;
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

/// Probes between two heartbeats (each instance's publication of its configuration's hash);
/// an instance silent for three heartbeats is taken as dead.
const HEARTBEAT_PROBES: u64 = 10;

/// A connection to the cluster's Redis and everything kept there.
#[derive(Debug, Clone)]
pub struct Cluster {
    redis: Arc<Redis>,
    health: Arc<Health>,
    book: Arc<RedisAccounts>,
    settings: Arc<Settings>,
    instance: Arc<str>,
    /// The answer cache's generation (moved on by a purge anywhere).
    answers: Arc<std::sync::atomic::AtomicU64>,
    logs: Arc<log::Logs>,
    hints: Arc<RedisHints>,
}

impl Cluster {
    /// Connects to Redis by `settings`: a URL that does not parse or a Redis that does not
    /// answer within the connect timeout is an error naming it.
    pub async fn connect(settings: Settings) -> Result<Self, ClusterError> {
        let redis = Arc::new(Redis::connect(&settings).await?);
        let health = Arc::new(Health::new(settings.budgets, settings.per_instance_share));
        let instance: Arc<str> = Arc::from(uuid::Uuid::new_v4().simple().to_string().as_str());
        let book = RedisAccounts::new(redis.clone(), health.clone(), &settings, &instance);
        let logs = log::Logs::new(redis.clone(), health.clone(), instance.clone());
        tokio::spawn(logs.clone().run());
        let hints = Arc::new(RedisHints::new(&logs));
        Ok(Self {
            redis,
            health,
            book,
            settings: Arc::new(settings),
            instance,
            answers: Arc::default(),
            logs,
            hints,
        })
    }

    /// What the cluster was connected with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// How often each instance beats (every tenth probe): one silent for three beats is
    /// taken as dead.
    pub fn heartbeat(&self) -> std::time::Duration {
        self.settings.probe_every * HEARTBEAT_PROBES as u32
    }

    /// The book of credits and quotas every instance shares.
    pub fn book(&self) -> Arc<RedisAccounts> {
        self.book.clone()
    }

    /// A pacer for `deployment` that every instance shares: `spec`'s limits, those the
    /// upstream announces, or one learnt from its 429s (a local share of them while Redis
    /// cannot answer). Must be called inside a Tokio runtime.
    pub fn pacer(&self, deployment: &str, spec: PaceSpec) -> Box<dyn Pace> {
        Box::new(RedisPace::start(
            self.redis.clone(),
            self.health.clone(),
            (deployment, self.instance.clone()),
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

    /// The semantic cache's entries under `policy`, kept by every instance.
    pub fn semantic_entries(&self, policy: sluice_cache::semantic::Policy) -> RedisEntries {
        // This instance's entry ids count from its own base, so an id names one entry
        // everywhere.
        let tag = u32::from_str_radix(self.instance.get(..8).unwrap_or("1"), 16).unwrap_or(1);
        let base = (u64::from(tag.max(1)) << 32) | 1;
        RedisEntries::new(&self.logs, self.health.clone(), policy, base)
    }

    /// Group `group`'s prefix affinity memory by `policy`, kept by every instance.
    pub fn prefixes(
        &self,
        group: &str,
        policy: sluice_routing::affinity::AffinityPolicy,
    ) -> RedisPrefixes {
        RedisPrefixes::new(&self.logs, group, policy)
    }

    /// The deployments cooling after a 429 on any instance (hedges keep away from them).
    pub fn cooling(&self) -> RedisCooling {
        RedisCooling::new(&self.logs)
    }

    /// The log of routers' learning every instance tells; `apply` is handed what the others
    /// tell, from now on.
    pub fn router_log(
        &self,
        apply: Arc<dyn Fn(sluice_routing::auto::Told) + Send + Sync>,
    ) -> RedisRouterLog {
        RedisRouterLog::new(&self.logs, apply)
    }

    /// The breakers' hints every instance tells and hears.
    pub fn breaker_hints(&self) -> Arc<RedisHints> {
        self.hints.clone()
    }

    /// A log of `name` (state of `kind`) every instance appends to and follows: the newest
    /// `keep` records are kept, others' records are given to `apply` from `start`.
    pub fn log(&self, name: &str, kind: Kind, keep: usize, start: Start, apply: Apply) -> Writer {
        self.logs.topic(name, kind, keep, start, apply)
    }

    /// (records applied from other instances, records dropped while Redis could not take
    /// them, records that could not be read) so far.
    pub fn log_counts(&self) -> (u64, u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.logs.applied.load(Relaxed),
            self.logs.dropped.load(Relaxed),
            self.logs.unreadable.load(Relaxed),
        )
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
            // Peers compare configurations, and beat, every tenth probe (and at the first).
            if n.is_multiple_of(HEARTBEAT_PROBES) {
                let hash = config_hash.borrow().clone();
                let silent_ms = 3 * HEARTBEAT_PROBES * self.settings.probe_every.as_millis() as u64;
                let dead = peers::publish_and_compare(
                    &self.redis,
                    &self.health,
                    (&self.instance, &hash),
                    silent_ms,
                )
                .await;
                if !dead.is_empty() {
                    self.book.reap(&dead).await;
                }
            }
            n += 1;
        }
    }
}
