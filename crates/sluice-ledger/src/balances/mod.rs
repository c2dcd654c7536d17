//! Tenants' credits and quotas kept in the ledger's PostgreSQL database: the book the
//! cluster's Redis book falls back to while Redis cannot answer. The database holds the truth
//! (every tenant's settled spend, moved by the ledger's writer in the same transaction as its
//! rows, and by each settlement made here), so credits and quotas stay exact across
//! instances: a reservation is one statement that checks every cap and holds the call's worst
//! case under the row's lock, a settlement one that releases the hold and adds the spend.
//! Request and token rates (`rpm`, `tpm`) are per minute and kept by each instance at its
//! share of them. A hold whose instance died is released, unspent, once the others have not
//! heard it beat for three beats ([`instances`]); one whose settlement never comes otherwise,
//! after `hold_ttl`.

mod instances;
mod statements;

pub(crate) use statements::{Spend, Today, create, spend};

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use sluice_core::reply::{Reply, later};
use sluice_economy::Standing;
use sluice_economy::{AccountBook, Accounts, Balance, Limits, Micros, Refusal, Reservation};
use sqlx::PgPool;
use tokio::time::Instant;

use crate::LedgerError;
use statements::Caps;

/// How many times a reservation is tried while settlements keep freeing what the one before
/// found taken.
const TRIES: usize = 10;

/// How long a settlement the database did not take is tried again before it is given up
/// (logged and counted): its hold then stays until `hold_ttl` releases it.
const SETTLE_FOR: Duration = Duration::from_secs(60);

/// The book in PostgreSQL.
pub struct LedgerBook {
    me: Weak<LedgerBook>,
    pool: PgPool,
    /// Each tenant's limits, as the configuration and admin API set them.
    limits: Mutex<HashMap<Arc<str>, Limits>>,
    /// This instance's share of each tenant's `rpm` and `tpm`.
    rates: Accounts,
    share: f64,
    hold_ttl: Duration,
    /// This book's name in the holds it makes and the beats it gives.
    instance: Arc<str>,
    /// How often it beats (and looks for holds past their time or of silent instances).
    beat: Duration,
    unsettled: AtomicU64,
}

impl std::fmt::Debug for LedgerBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerBook")
            .field("share", &self.share)
            .field("hold_ttl", &self.hold_ttl)
            .finish()
    }
}

fn ms(wall: SystemTime) -> i64 {
    wall.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn cap(n: Option<u64>) -> i64 {
    n.map_or(-1, int)
}

fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A hold's id: random, so that instances never pick the same one.
fn hold_id() -> i64 {
    let n = uuid::Uuid::new_v4().as_u128() as u64 >> 1;
    int(n).max(1)
}

impl LedgerBook {
    /// A book on `pool` (whose tables the store made), giving this instance `share` of each
    /// tenant's request and token rates; every `beat` in the background it beats, releases
    /// the holds of instances silent for three beats, and those older than `hold_ttl`.
    pub(crate) fn new(pool: PgPool, share: f64, hold_ttl: Duration, beat: Duration) -> Arc<Self> {
        let book = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            pool,
            limits: Mutex::new(HashMap::new()),
            rates: Accounts::default(),
            share,
            hold_ttl,
            instance: Arc::from(uuid::Uuid::new_v4().simple().to_string()),
            beat,
            unsettled: AtomicU64::new(0),
        });
        let me = Arc::downgrade(&book);
        tokio::spawn(async move {
            let mut watch = instances::Watch::default();
            loop {
                let Some(book) = me.upgrade() else {
                    return;
                };
                book.look_after(&mut watch).await;
                let beat = book.beat;
                drop(book);
                tokio::time::sleep(beat).await;
            }
        });
        book
    }

    /// One round of the background work: a beat, the holds of silent instances, the holds
    /// past their time.
    async fn look_after(&self, watch: &mut instances::Watch) {
        let now = ms(SystemTime::now());
        let beat = instances::beat(&self.pool, &self.instance, now).await;
        if let Err(e) = &beat {
            tracing::debug!(error = %e, "no beat in PostgreSQL");
        }
        if watch.beat(beat.is_ok()) {
            let before = instances::silent_before(now, self.beat.as_millis() as i64);
            match instances::release_silent(&self.pool, before).await {
                Ok(0) => {}
                Ok(n) => tracing::warn!(
                    holds = n,
                    "holds in PostgreSQL of instances silent for three beats were released unspent"
                ),
                Err(e) => tracing::debug!(error = %e, "silent instances' holds not released yet"),
            }
        }
        match statements::expire(&self.pool, now).await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(
                tenants = n,
                "holds in PostgreSQL whose settlement never came were released unspent"
            ),
            Err(e) => tracing::debug!(error = %e, "holds past their time not released yet"),
        }
    }

    /// Settlements given up after the database refused them for [`SETTLE_FOR`].
    pub fn unsettled(&self) -> u64 {
        self.unsettled.load(Ordering::Relaxed)
    }

    /// Holds `tokens` and `cost` for `tenant` with `limits` in the database.
    async fn hold(
        &self,
        tenant: &Arc<str>,
        limits: &Limits,
        wall: SystemTime,
        (tokens, cost): (u64, Micros),
    ) -> Result<Reservation, Refusal> {
        let today = Today::at(wall);
        let caps = Caps {
            credits: cap(limits.credits.map(|c| c.0)),
            spend_per_month: cap(limits.spend_per_month.map(|m| m.0)),
            tokens_per_day: cap(limits.tokens_per_day),
        };
        let unavailable = |e: LedgerError| Refusal::Unavailable {
            tenant: tenant.clone(),
            cause: format!("PostgreSQL cannot answer either: {e}"),
        };
        let expires = ms(wall) + int(self.hold_ttl.as_millis() as u64);
        // A refusal read after a failed hold may find the row freed meanwhile (a settlement
        // landed between the two statements): try again.
        for _ in 0..TRIES {
            let id = hold_id();
            let held = statements::reserve(
                &self.pool,
                (tenant, id, &self.instance),
                (int(cost.0), int(tokens)),
                caps,
                today,
                expires,
            )
            .await
            .map_err(unavailable)?;
            if held {
                return Ok(Reservation::in_ledger(
                    tenant.clone(),
                    tokens,
                    cost,
                    unsigned(id),
                ));
            }
            let Some(row) = statements::read(&self.pool, tenant, today)
                .await
                .map_err(unavailable)?
            else {
                // No row: the tenant has spent nothing the ledger knows of yet.
                statements::open(&self.pool, tenant, today, (0, 0, 0))
                    .await
                    .map_err(unavailable)?;
                continue;
            };
            let (spent, reserved, reserved_tokens, day_tokens, month_spent) = row;
            let standing = Standing {
                spent: Micros(unsigned(spent)),
                reserved: Micros(unsigned(reserved)),
                day_tokens: unsigned(day_tokens),
                day_reserved: unsigned(reserved_tokens),
                month_spent: Micros(unsigned(month_spent)),
            };
            if let Some(refusal) = standing.refusal(tenant, limits, wall, tokens, cost) {
                return Err(refusal);
            }
        }
        Err(Refusal::Unavailable {
            tenant: tenant.clone(),
            cause: format!("PostgreSQL's balance moved under {TRIES} reservations in a row"),
        })
    }

    /// Settles hold `id` in the database, trying again for [`SETTLE_FOR`] while it cannot
    /// answer; spend whose hold is gone (released after its time) is added all the same.
    async fn settle_hold(&self, (tenant, id): (Arc<str>, i64), (cost, tokens): (i64, i64)) {
        let spent = Spend::on(Today::at(SystemTime::now()), cost, tokens);
        let started = Instant::now();
        let mut wait = Duration::from_millis(50);
        loop {
            let done = async {
                let mut conn = self.pool.acquire().await?;
                if !statements::settle(&mut conn, id, spent).await? {
                    statements::spend(&mut conn, &tenant, spent).await?;
                }
                Ok::<(), LedgerError>(())
            }
            .await;
            let Err(e) = done else {
                return;
            };
            if started.elapsed() >= SETTLE_FOR {
                self.unsettled.fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %e, %tenant, "a settlement PostgreSQL did not take for a minute is given up; its hold is released at its time and the ledger's row keeps the call");
                return;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(2));
        }
    }
}

impl AccountBook for LedgerBook {
    fn set_limits(&self, tenant: &str, limits: Limits, now: Instant) {
        let part = |n: u64| ((n as f64 * self.share).floor() as u64).max(1);
        let rates = Limits {
            rpm: limits.rpm.map(part),
            tpm: limits.tpm.map(part),
            ..Limits::default()
        };
        self.rates.set_limits(tenant, rates, now);
        self.limits.lock().insert(Arc::from(tenant), limits);
    }

    fn limits(&self, tenant: &str) -> Option<Limits> {
        self.limits.lock().get(tenant).copied().filter(Limits::any)
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
            let Some(limits) = self.limits(tenant) else {
                return Ok(None);
            };
            let rated = self
                .rates
                .reserve(tenant, now, wall, tokens, Micros::ZERO)?;
            match self.hold(tenant, &limits, wall, (tokens, cost)).await {
                Ok(r) => Ok(Some(r)),
                Err(refusal) => {
                    if let Some(r) = rated {
                        self.rates.settle(r, now, wall, 0, Micros::ZERO);
                    }
                    Err(refusal)
                }
            }
        })
    }

    fn settle(&self, r: Reservation, now: Instant, wall: SystemTime, tokens: u64, cost: Micros) {
        let tenant = r.tenant().clone();
        // The rates' share was taken at the reservation; settle it at what was used.
        let rated = Reservation::shared(tenant.clone(), r.tokens(), Micros::ZERO, 0);
        self.rates.settle(rated, now, wall, tokens, Micros::ZERO);
        let (Some(id), Some(me)) = (r.hold(), self.me.upgrade()) else {
            return;
        };
        tokio::spawn(async move {
            me.settle_hold((tenant, int(id)), (int(cost.0), int(tokens)))
                .await;
        });
    }

    fn restore(
        &self,
        tenant: &str,
        wall: SystemTime,
        spent: Micros,
        month_spent: Micros,
        day_tokens: u64,
    ) {
        // The database's row is the truth once it has one; a tenant without a row starts
        // at what the ledger says.
        let (Some(me), tenant) = (self.me.upgrade(), tenant.to_string()) else {
            return;
        };
        tokio::spawn(async move {
            let spent = (int(spent.0), int(month_spent.0), int(day_tokens));
            if let Err(e) = statements::open(&me.pool, &tenant, Today::at(wall), spent).await {
                tracing::warn!(error = %e, %tenant, "a tenant's balance row was not made in PostgreSQL");
            }
        });
    }

    fn balance<'a>(&'a self, tenant: &'a str) -> Reply<'a, Option<Balance>> {
        later(async move {
            let limits = self.limits(tenant)?;
            let row = statements::read(&self.pool, tenant, Today::at(SystemTime::now()))
                .await
                .inspect_err(|e| tracing::warn!(error = %e, tenant, "a balance was not read from PostgreSQL"))
                .ok()?
                .unwrap_or_default();
            let (spent, reserved, _, day_tokens, month_spent) = row;
            Some(Balance {
                spent: Micros(unsigned(spent)),
                reserved: Micros(unsigned(reserved)),
                tokens_today: unsigned(day_tokens),
                spent_this_month: Micros(unsigned(month_spent)),
                limits,
            })
        })
    }

    fn tenants(&self) -> Vec<Arc<str>> {
        self.limits
            .lock()
            .iter()
            .filter(|(_, l)| l.any())
            .map(|(t, _)| t.clone())
            .collect()
    }
}
