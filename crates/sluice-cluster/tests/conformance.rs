//! The Redis implementations of shared state pass the same conformance suites as the
//! in-process ones: the account book (credits held and settled, concurrent reservations,
//! quotas, restored spend), the answer store (kept, removed, purged, forgotten after its
//! time), semantic entries (served by another instance under one id), pacing (three instances send what one would), 429 cool-downs, prefix affinity and routers' learning (each told from one instance to another and
//! ended by its time). Each test starts a Redis server of its own (Debian's `redis-server`, which
//! `scripts/test` installs and names in `SLUICE_REDIS_SERVER`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sluice_cluster::{BudgetPolicy, Cluster, Settings};

/// A Redis server on a private port, stopped when dropped.
struct Redis {
    port: u16,
    child: Child,
}

impl Redis {
    async fn start() -> Self {
        let bin = std::env::var("SLUICE_REDIS_SERVER").unwrap_or_else(|_| {
            panic!(
                "SLUICE_REDIS_SERVER is not set: run ./scripts/test, which installs Debian's \
                 redis-server, or point it at a redis-server binary"
            )
        });
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = Self {
            port,
            child: Command::new(bin)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("redis-server did not start");
    }

    async fn cluster(&self) -> Cluster {
        self.cluster_holding_for(Duration::from_secs(60)).await
    }

    /// An instance whose holds expire after `hold_ttl`.
    async fn cluster_holding_for(&self, hold_ttl: Duration) -> Cluster {
        Cluster::connect(Settings {
            url: format!("redis://127.0.0.1:{}", self.port),
            url_from: "SLUICE_REDIS_URL".into(),
            key_prefix: "conformance:".into(),
            connect_timeout: Duration::from_secs(2),
            command_timeout: Duration::from_secs(2),
            connections: 2,
            budgets: BudgetPolicy::FailClosed,
            per_instance_share: 0.25,
            hold_ttl,
            probe_every: Duration::from_millis(500),
        })
        .await
        .unwrap()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_book_conforms() {
    let redis = Redis::start().await;
    let cluster = redis.cluster().await;
    sluice_economy::conformance::run(&*cluster.book(), "redis").await;
}

/// A hold whose instance never settles it, and that no ledger's rows settled first, is
/// charged in full after `hold_ttl`: the last resort never gives back what may have been
/// spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_books_unsettled_holds_end_after_their_time() {
    use sluice_economy::conformance::{AtExpiry, an_unsettled_hold_ends_after_its_ttl};
    let redis = Redis::start().await;
    let ttl = Duration::from_secs(1);
    let cluster = redis.cluster_holding_for(ttl).await;
    let book = cluster.book();
    an_unsettled_hold_ends_after_its_ttl(
        &*book,
        "redis",
        ttl,
        Duration::from_secs(2),
        AtExpiry::ChargedInFull,
    )
    .await;
}

/// Two instances on one Redis are one book: what one holds, the other cannot spend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_redis_are_one_book() {
    use std::sync::Arc;
    use std::time::SystemTime;

    use sluice_economy::{AccountBook, Limits, Micros};
    use tokio::time::Instant;

    let redis = Redis::start().await;
    let (a, b) = (redis.cluster().await, redis.cluster().await);
    let t: Arc<str> = Arc::from("shared");
    let limits = Limits {
        credits: Some(Micros(1_000)),
        ..Limits::default()
    };
    let (a, b) = (a.book(), b.book());
    a.set_limits(&t, limits, Instant::now());
    b.set_limits(&t, limits, Instant::now());
    let calls = (0..20).map(|i| {
        let book: &dyn AccountBook = if i % 2 == 0 { &*a } else { &*b };
        book.reserve(&t, Instant::now(), SystemTime::now(), 1, Micros(100))
    });
    let got = futures::future::join_all(calls).await;
    let held = got.iter().filter(|r| matches!(r, Ok(Some(_)))).count();
    assert_eq!(
        held, 10,
        "20 calls of 100 against 1,000, from two instances"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_answer_store_conforms() {
    let redis = Redis::start().await;
    let cluster = redis.cluster().await;
    sluice_cache::conformance::run(|ttl| cluster.answers(ttl, 1 << 20)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cooldowns_conform() {
    let redis = Redis::start().await;
    let (a, b) = (redis.cluster().await, redis.cluster().await);
    sluice_tail::pace::conformance::run(&a.cooling(), &b.cooling(), "redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_prefix_memory_conforms() {
    use sluice_routing::affinity::AffinityPolicy;
    let redis = Redis::start().await;
    let (a, b) = (redis.cluster().await, redis.cluster().await);
    let policy = AffinityPolicy::default();
    sluice_routing::affinity::conformance::run(
        &a.prefixes("chat", policy),
        &b.prefixes("chat", policy),
        11,
    )
    .await;
}

/// Three instances pacing one deployment through Redis send what one would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_pacing_conforms() {
    use sluice_tail::pace::PaceSpec;
    let redis = Redis::start().await;
    let spec = PaceSpec {
        rpm: Some(600),
        tpm: None,
    };
    let mut instances = Vec::new();
    for _ in 0..3 {
        instances.push(redis.cluster().await.pacer("paced", spec));
    }
    sluice_tail::pace::conformance::pacing(instances, 600).await;
}

/// Three instances with no limit configured, against an upstream that announces none, learn
/// one limit between them from its 429s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_pacing_learns_one_limit_for_three_instances() {
    let redis = Redis::start().await;
    let mut instances = Vec::new();
    for _ in 0..3 {
        instances.push(redis.cluster().await.pacer("learnt", Default::default()));
    }
    sluice_tail::pace::conformance::learning(instances, 600).await;
}

/// Routers' learning told by one instance reaches another typed, whole and once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_router_log_conforms() {
    use std::sync::Arc;

    use parking_lot::Mutex;
    use sluice_routing::auto::Told;

    let redis = Redis::start().await;
    let (a, b) = (redis.cluster().await, redis.cluster().await);
    let heard = |into: &Arc<Mutex<Vec<Told>>>| {
        let into = into.clone();
        Arc::new(move |t: Told| into.lock().push(t))
    };
    let (by_a, by_b) = (
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(Mutex::new(Vec::new())),
    );
    let log_a = a.router_log(heard(&by_a));
    let _log_b = b.router_log(heard(&by_b));
    sluice_routing::auto::told::conformance::run(
        &log_a,
        || by_a.lock().clone(),
        || by_b.lock().clone(),
    )
    .await;
}

/// Semantic entries stored by one instance are served by another under the same id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_semantic_entries_conform() {
    use sluice_cache::semantic::Policy;
    let redis = Redis::start().await;
    let (a, b) = (redis.cluster().await, redis.cluster().await);
    let policy = Policy {
        mode: sluice_cache::conformance::SEMANTIC_MODE,
        ttl: Duration::from_secs(60),
        max_bytes: 1 << 20,
    };
    sluice_cache::conformance::semantic(
        &a.semantic_entries(policy),
        &b.semantic_entries(policy),
        1,
    )
    .await;
}

/// What a ledger's rows say, for the holds named here.
#[derive(Debug)]
struct Rows(std::collections::HashMap<String, (u64, sluice_economy::Micros)>);

impl sluice_economy::HoldRows for Rows {
    fn spent_under<'a>(
        &'a self,
        holds: &'a [String],
    ) -> sluice_core::reply::Reply<'a, sluice_economy::SpentUnder> {
        sluice_core::reply::now(Ok(self
            .0
            .iter()
            .filter(|(k, _)| holds.contains(k))
            .map(|(k, v)| (k.clone(), *v))
            .collect()))
    }
}

/// A dead instance's holds are settled by another from the ledger's rows: at what a row says
/// where one names the hold, released unspent where none does; never charged blind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_instances_holds_are_settled_from_the_ledgers_rows() {
    use std::sync::Arc;
    use std::time::SystemTime;

    use sluice_economy::{AccountBook, Limits, Micros};
    use tokio::time::Instant;

    let redis = Redis::start().await;
    let (dead, alive) = (redis.cluster().await, redis.cluster().await);
    let t: Arc<str> = Arc::from("reaped");
    let limits = Limits {
        credits: Some(Micros(1_000)),
        ..Limits::default()
    };
    for c in [&dead, &alive] {
        c.book().set_limits(&t, limits, Instant::now());
    }
    let book = dead.book();
    let hold = |cost| book.reserve(&t, Instant::now(), SystemTime::now(), 10, Micros(cost));
    let finished = hold(300).await.unwrap().unwrap();
    let unfinished = hold(300).await.unwrap().unwrap();
    let named = book.hold_name(&finished).unwrap();
    assert!(named.starts_with(dead.instance()), "{named}");
    assert_ne!(book.hold_name(&unfinished), Some(named.clone()));
    alive.book().settle_dead_from(Arc::new(Rows(
        [(named.to_string(), (7, Micros(120)))]
            .into_iter()
            .collect(),
    )));
    // Another instance's holds, or none dead, are left alone.
    assert_eq!(alive.book().reap(&["someone-else".to_string()]).await, 0);
    assert_eq!(alive.book().reap(&[dead.instance().to_string()]).await, 2);
    let b = alive.book().balance(&t).await.unwrap();
    assert_eq!((b.spent, b.reserved), (Micros(120), Micros::ZERO), "{b:?}");
    // The dead instance's late settlement (it was only paused) counts nothing more.
    book.settle(finished, Instant::now(), SystemTime::now(), 7, Micros(120));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let b = alive.book().balance(&t).await.unwrap();
    assert_eq!(b.spent, Micros(120), "{b:?}");
}
