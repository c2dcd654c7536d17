//! Tenants' credits and quotas kept in Redis for every instance: a reservation is one script
//! that checks every limit and holds the call's worst case atomically (one round trip before
//! dispatch), and its settlement is another, sent in the background (one after). Limits are
//! read from each instance's copy of the configuration; the ledger still records every call.
//!
//! While Redis cannot answer, reservations and settlements go to the book behind it (the
//! ledger's PostgreSQL database, which holds the truth) when there is one; when that cannot
//! answer either, budgets do what [`BudgetPolicy`] says. Spend made elsewhere, and
//! settlements Redis did not hear, are kept and told to it once it is back.

mod owed;
mod reap;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use redis::Script;
use sluice_core::calendar;
use sluice_core::reply::{Reply, later};
use sluice_economy::{AccountBook, Accounts, Balance, Limits, Micros, Refusal, Reservation};
use tokio::time::Instant;

use crate::Settings;
use crate::health::{BudgetPolicy, Health, Kind};
use crate::store::Redis;
use owed::Owed;

/// The book every instance shares.
pub struct RedisAccounts {
    me: std::sync::Weak<RedisAccounts>,
    redis: Arc<Redis>,
    health: Arc<Health>,
    /// Each tenant's limits, as this instance's configuration and admin API set them.
    limits: Accounts,
    /// The local shares spent while Redis cannot answer (policy `LocalShare`).
    fallback: Mutex<Arc<Accounts>>,
    /// Tenants given a local share in this outage.
    shared_out: Mutex<HashSet<Arc<str>>>,
    /// Each tenant's credits left when Redis last answered.
    left: Mutex<HashMap<Arc<str>, Micros>>,
    owed: Arc<Mutex<VecDeque<Owed>>>,
    dropped: AtomicU64,
    policy: BudgetPolicy,
    share: f64,
    hold_ttl: Duration,
    instance: Arc<str>,
    next_hold: AtomicU64,
    /// The book that keeps accounts while Redis cannot answer.
    behind: std::sync::OnceLock<sluice_economy::Books>,
    /// The ledger's rows, which settle a dead instance's holds.
    rows: std::sync::OnceLock<Arc<dyn sluice_economy::HoldRows>>,
    reserve: Script,
    settle: Script,
    adjust: Script,
}

impl std::fmt::Debug for RedisAccounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisAccounts")
            .field("policy", &self.policy)
            .field("owed", &self.owed.lock().len())
            .finish()
    }
}

fn day(wall: SystemTime) -> i64 {
    calendar::day_of(wall).0
}

fn month(wall: SystemTime) -> String {
    let ((y, m), _) = calendar::month_of(wall);
    format!("{y}-{m:02}")
}

fn opt(v: Option<u64>) -> i64 {
    v.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX))
}

/// The refusal a reservation script's answer `a` gives (code, then its facts).
fn refusal(tenant: &Arc<str>, limits: &Limits, cost: Micros, a: &[i64]) -> Refusal {
    let n = |i: usize| u64::try_from(a.get(i).copied().unwrap_or(0)).unwrap_or(0);
    if a.first() == Some(&1) {
        let (spent, reserved) = (Micros(n(1)), Micros(n(2)));
        let credits = limits.credits.unwrap_or(Micros::ZERO);
        return Refusal::OutOfCredits {
            tenant: tenant.clone(),
            credits,
            spent,
            reserved,
            left: Micros(credits.0.saturating_sub(spent.0 + reserved.0)),
            needed: cost,
        };
    }
    let (policy, window_secs) = match n(1) {
        0 => ("rpm", 60),
        1 => ("tpm", 60),
        2 => ("tokens_per_day", 86_400),
        _ => ("spend_per_month", 31 * 86_400),
    };
    let wall = SystemTime::now();
    let retry_after = match (policy, a.get(4).copied().unwrap_or(-1)) {
        ("tokens_per_day", _) => calendar::day_of(wall).1,
        ("spend_per_month", _) => calendar::month_of(wall).1,
        (_, ms) => Duration::from_millis(u64::try_from(ms).unwrap_or(0)),
    };
    Refusal::OverQuota {
        tenant: tenant.clone(),
        policy,
        limit: n(2),
        window_secs,
        remaining: n(3),
        retry_after,
    }
}

/// `limits` scaled to `share`, credits to `share` of `left`.
fn scaled(limits: Limits, share: f64, left: Option<Micros>) -> Limits {
    let part = |n: u64| ((n as f64 * share).floor() as u64).max(1);
    Limits {
        credits: left.map(|l| Micros((l.0 as f64 * share).floor() as u64)),
        rpm: limits.rpm.map(part),
        tpm: limits.tpm.map(part),
        tokens_per_day: limits.tokens_per_day.map(part),
        spend_per_month: limits.spend_per_month.map(|m| Micros(part(m.0))),
    }
}

impl RedisAccounts {
    pub(crate) fn new(
        redis: Arc<Redis>,
        health: Arc<Health>,
        settings: &Settings,
        instance: &Arc<str>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            redis,
            health,
            limits: Accounts::default(),
            fallback: Mutex::new(Arc::new(Accounts::default())),
            shared_out: Mutex::new(HashSet::new()),
            left: Mutex::new(HashMap::new()),
            owed: Arc::new(Mutex::new(VecDeque::new())),
            dropped: AtomicU64::new(0),
            policy: settings.budgets,
            share: settings.per_instance_share,
            hold_ttl: settings.hold_ttl,
            instance: instance.clone(),
            next_hold: AtomicU64::new(1),
            behind: std::sync::OnceLock::new(),
            rows: std::sync::OnceLock::new(),
            reserve: Script::new(include_str!("book/reserve.lua")),
            settle: Script::new(include_str!("book/settle.lua")),
            adjust: Script::new(include_str!("book/adjust.lua")),
        })
    }

    fn weak(&self) -> Option<Arc<Self>> {
        self.me.upgrade()
    }

    fn keys(&self, tenant: &str) -> (String, String) {
        (
            self.redis.key(&format!("acct:{{{tenant}}}")),
            self.redis.key(&format!("holds:{{{tenant}}}")),
        )
    }

    fn hold_id(&self, hold: u64) -> String {
        format!("{}-{hold}", self.instance)
    }

    /// Has `book` keep accounts while Redis cannot answer (once; later calls are ignored):
    /// it is given every tenant's limits from now on.
    pub fn back_with(&self, book: sluice_economy::Books) {
        let now = Instant::now();
        for tenant in self.limits.tenants() {
            if let Some(limits) = self.limits.limits(&tenant) {
                book.set_limits(&tenant, limits, now);
            }
        }
        if self.behind.set(book).is_ok() {
            self.health.budgets_kept_behind();
        }
    }

    /// A reservation made without Redis: by the book behind it, else by the policy.
    async fn degraded(
        &self,
        tenant: &Arc<str>,
        limits: Limits,
        cause: String,
        call: (Instant, SystemTime, u64, Micros),
    ) -> Result<Option<Reservation>, Refusal> {
        let (now, wall, tokens, cost) = call;
        let cause = match self.behind.get() {
            Some(behind) => match behind.reserve(tenant, now, wall, tokens, cost).await {
                Err(Refusal::Unavailable { cause: also, .. }) => format!("{cause}; {also}"),
                kept => return kept,
            },
            None => cause,
        };
        self.by_policy(tenant, limits, cause, call)
    }

    /// A reservation made without Redis or the book behind it, by the policy.
    fn by_policy(
        &self,
        tenant: &Arc<str>,
        limits: Limits,
        cause: String,
        (now, wall, tokens, cost): (Instant, SystemTime, u64, Micros),
    ) -> Result<Option<Reservation>, Refusal> {
        if self.policy == BudgetPolicy::FailClosed {
            return Err(Refusal::Unavailable {
                tenant: tenant.clone(),
                cause,
            });
        }
        let fallback = self.fallback.lock().clone();
        if !self.shared_out.lock().contains(tenant) {
            let left = self.left.lock().get(tenant).copied();
            if limits.credits.is_some() && left.is_none() {
                return Err(Refusal::Unavailable {
                    tenant: tenant.clone(),
                    cause: format!(
                        "{cause}; no balance was read before it went away, so no local share can be given"
                    ),
                });
            }
            fallback.set_limits(tenant, scaled(limits, self.share, left), now);
            self.shared_out.lock().insert(tenant.clone());
        }
        fallback.reserve(tenant, now, wall, tokens, cost)
    }
}

impl AccountBook for RedisAccounts {
    fn set_limits(&self, tenant: &str, limits: Limits, now: Instant) {
        self.limits.set_limits(tenant, limits, now);
        if let Some(behind) = self.behind.get() {
            behind.set_limits(tenant, limits, now);
        }
    }

    fn limits(&self, tenant: &str) -> Option<Limits> {
        self.limits.limits(tenant)
    }

    fn reserve<'a>(
        &'a self,
        tenant: &'a Arc<str>,
        now: Instant,
        wall: SystemTime,
        tokens: u64,
        cost: Micros,
    ) -> Reply<'a, Result<Option<Reservation>, Refusal>> {
        later(async move {
            let Some(limits) = self.limits.limits(tenant) else {
                return Ok(None);
            };
            let call = (now, wall, tokens, cost);
            if self.health.is_down() {
                let cause = self
                    .health
                    .cause()
                    .unwrap_or_else(|| "Redis is down".into());
                return self.degraded(tenant, limits, cause, call).await;
            }
            let hold = self.next_hold.fetch_add(1, Ordering::Relaxed);
            let (acct, holds) = self.keys(tenant);
            let id = self.hold_id(hold);
            let answer = self
                .redis
                .eval::<Vec<i64>>(&self.reserve, |i| {
                    i.key(&acct)
                        .key(&holds)
                        .arg(&id)
                        .arg(tokens)
                        .arg(cost.0)
                        .arg(opt(limits.credits.map(|c| c.0)))
                        .arg(limits.rpm.unwrap_or(0))
                        .arg(limits.tpm.unwrap_or(0))
                        .arg(opt(limits.tokens_per_day))
                        .arg(opt(limits.spend_per_month.map(|m| m.0)))
                        .arg(day(wall))
                        .arg(month(wall))
                        .arg(self.hold_ttl.as_millis() as u64);
                })
                .await;
            match answer {
                Ok(a) if a.first() == Some(&0) => {
                    if let Some(left) = a.get(1).and_then(|l| u64::try_from(*l).ok()) {
                        self.left.lock().insert(tenant.clone(), Micros(left));
                    }
                    Ok(Some(Reservation::shared(
                        tenant.clone(),
                        tokens,
                        cost,
                        hold,
                    )))
                }
                Ok(a) => Err(refusal(tenant, &limits, cost, &a)),
                Err(e) => {
                    self.health.failed(Kind::Budgets, &e);
                    self.degraded(tenant, limits, e.to_string(), call).await
                }
            }
        })
    }

    fn settle(&self, r: Reservation, now: Instant, wall: SystemTime, tokens: u64, cost: Micros) {
        let tenant = r.tenant().clone();
        if r.is_in_ledger() {
            // Held by the book behind Redis: settled there, and told to Redis (now, or once
            // it is back) as spend without a hold.
            if let Some(behind) = self.behind.get() {
                behind.settle(r, now, wall, tokens, cost);
            }
            if tokens > 0 || cost > Micros::ZERO {
                self.tell(Owed::Spend {
                    tenant,
                    tokens,
                    cost,
                    wall,
                });
            }
            return;
        }
        let Some(hold) = r.hold() else {
            // Spent of a local share: counted here, and told to Redis once it is back.
            self.fallback.lock().settle(r, now, wall, tokens, cost);
            Self::owe(
                &self.owed,
                &self.dropped,
                Owed::Spend {
                    tenant,
                    tokens,
                    cost,
                    wall,
                },
            );
            return;
        };
        let tpm = self.limits.limits(&tenant).and_then(|l| l.tpm).unwrap_or(0);
        let o = Owed::Settle {
            tenant,
            hold,
            tokens,
            cost,
            tpm,
            wall,
        };
        self.tell(o);
    }

    fn restore(
        &self,
        tenant: &str,
        wall: SystemTime,
        spent: Micros,
        month_spent: Micros,
        day_tokens: u64,
    ) {
        let Some(me) = self.weak() else {
            return;
        };
        let (acct, _) = self.keys(tenant);
        tokio::spawn(async move {
            let r = me
                .redis
                .eval::<i64>(&me.adjust, |i| {
                    i.key(&acct)
                        .arg(day_tokens)
                        .arg(spent.0)
                        .arg(day(wall))
                        .arg(month(wall))
                        .arg(1)
                        .arg(month_spent.0)
                        .arg(day_tokens);
                })
                .await;
            if let Err(e) = r {
                me.health.failed(Kind::Budgets, &e);
            }
        });
    }

    fn balance<'a>(&'a self, tenant: &'a str) -> Reply<'a, Option<Balance>> {
        later(async move {
            let limits = self.limits.limits(tenant)?;
            let (acct, _) = self.keys(tenant);
            if self.health.is_down()
                && let Some(behind) = self.behind.get()
            {
                return behind.balance(tenant).await;
            }
            let f: Vec<Option<String>> = self
                .redis
                .query(
                    redis::cmd("HMGET")
                        .arg(&acct)
                        .arg("spent")
                        .arg("reserved")
                        .arg("day")
                        .arg("day_tokens")
                        .arg("month")
                        .arg("month_spent"),
                )
                .await
                .ok()?;
            let n = |i: usize| {
                f.get(i)
                    .and_then(|v| v.as_deref())
                    .and_then(|v| v.parse::<i64>().ok())
                    .map_or(0, |v| u64::try_from(v).unwrap_or(0))
            };
            let wall = SystemTime::now();
            let today = f.get(2).and_then(|v| v.as_deref()) == Some(&day(wall).to_string());
            let this_month = f.get(4).and_then(|v| v.as_deref()) == Some(month(wall).as_str());
            Some(Balance {
                spent: Micros(n(0)),
                reserved: Micros(n(1)),
                tokens_today: if today { n(3) } else { 0 },
                spent_this_month: Micros(if this_month { n(5) } else { 0 }),
                limits,
            })
        })
    }

    fn tenants(&self) -> Vec<Arc<str>> {
        self.limits.tenants()
    }

    fn hold_name(&self, r: &Reservation) -> Option<Arc<str>> {
        if r.is_in_ledger() {
            return None;
        }
        r.hold().map(|h| Arc::from(self.hold_id(h).as_str()))
    }
}
