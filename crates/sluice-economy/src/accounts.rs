//! Tenants' credits and quotas, enforced by reserve and settle. Before a call, its worst case
//! (the prompt's tokens plus `max_tokens`, at the full price) is reserved against the
//! tenant's credits and its quotas (requests and tokens per minute, tokens per UTC day, spend
//! per UTC month), under one lock, so no two
//! calls can both spend the last of a budget. After the call, what it really used is settled
//! and the difference refunded. Spend can pass the credits only by what one call used beyond
//! its reservation.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use sluice_core::calendar;
use sluice_tail::MinuteBucket;
use tokio::time::Instant;

use crate::money::Micros;

/// A tenant's limits; `None` is no limit. Configuration writes them in a `[tenants.NAME]`
/// table, money in whole units; that table holds other keys too, so this type takes its own
/// and leaves the rest for the reader to account for (it denies none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Money it may spend in all.
    #[serde(deserialize_with = "crate::money::units::option")]
    pub credits: Option<Micros>,
    /// Requests per minute.
    pub rpm: Option<u64>,
    /// Tokens per minute (prompt and output).
    pub tpm: Option<u64>,
    /// Tokens per UTC day.
    pub tokens_per_day: Option<u64>,
    /// Money per UTC month.
    #[serde(deserialize_with = "crate::money::units::option")]
    pub spend_per_month: Option<Micros>,
}

impl Limits {
    /// What is wrong with them, as (field, problem): a count of 0 (left out is none).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        [
            ("rpm", self.rpm),
            ("tpm", self.tpm),
            ("tokens_per_day", self.tokens_per_day),
        ]
        .into_iter()
        .filter(|(_, v)| *v == Some(0))
        .map(|(field, _)| {
            (
                field,
                "must be at least 1 (leave it out for none)".to_string(),
            )
        })
        .collect()
    }

    /// Whether anything is limited.
    pub fn any(&self) -> bool {
        self.credits.is_some()
            || self.rpm.is_some()
            || self.tpm.is_some()
            || self.tokens_per_day.is_some()
            || self.spend_per_month.is_some()
    }
}

/// Why a call was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Its worst case does not fit in what is left of the credits.
    #[error(
        "tenant `{tenant}` has spent {spent} of its {credits} credits ({reserved} more held by \
         calls in flight): {left} left, and this request may cost up to {needed}"
    )]
    OutOfCredits {
        /// The tenant.
        tenant: Arc<str>,
        /// Its credits.
        credits: Micros,
        /// What it has spent (settled).
        spent: Micros,
        /// What calls in flight hold.
        reserved: Micros,
        /// Credits left, reservations in flight deducted.
        left: Micros,
        /// The call's worst case.
        needed: Micros,
    },
    /// A quota is spent.
    #[error("tenant `{tenant}` is over its {policy} quota of {limit} per {window_secs} s")]
    OverQuota {
        /// The tenant.
        tenant: Arc<str>,
        /// `rpm`, `tpm`, `tokens_per_day` or `spend_per_month`.
        policy: &'static str,
        /// The quota per window (micro-units for spend).
        limit: u64,
        /// The window's length in seconds (a month's is this month's).
        window_secs: u64,
        /// What is left of the quota now, reservations in flight deducted (the same units as
        /// `limit`): the request needs more than this.
        remaining: u64,
        /// When enough will have refilled.
        retry_after: Duration,
    },
    /// The store that keeps the tenant's account across instances cannot be reached, and
    /// budgets fail closed.
    #[error(
        "tenant `{tenant}`'s credits and quotas are kept in a shared store that cannot be \
         reached now ({cause}); its calls are refused until it is back"
    )]
    Unavailable {
        /// The tenant.
        tenant: Arc<str>,
        /// Why the store cannot answer.
        cause: String,
    },
}

/// What a call holds until it settles.
#[derive(Debug, PartialEq, Eq)]
pub struct Reservation {
    tenant: Arc<str>,
    tokens: u64,
    cost: Micros,
    /// The hold's id in a shared book (0: held in this process).
    hold: u64,
    /// Whether the ledger's database holds it (and settles it, spend included, so that the
    /// ledger's writer does not count its row's spend again).
    in_ledger: bool,
}

impl Reservation {
    /// A hold `hold` (not 0) that a shared book keeps for `tenant`: up to `tokens` costing up
    /// to `cost`.
    pub fn shared(tenant: Arc<str>, tokens: u64, cost: Micros, hold: u64) -> Self {
        Self {
            tenant,
            tokens,
            cost,
            hold,
            in_ledger: false,
        }
    }

    /// A hold `hold` (not 0) that the ledger's database keeps for `tenant` (while the shared
    /// book in Redis cannot answer): it settles there, spend and all.
    pub fn in_ledger(tenant: Arc<str>, tokens: u64, cost: Micros, hold: u64) -> Self {
        Self {
            tenant,
            tokens,
            cost,
            hold,
            in_ledger: true,
        }
    }

    /// Whether the ledger's database holds it (see [`Reservation::in_ledger`]).
    pub fn is_in_ledger(&self) -> bool {
        self.in_ledger
    }

    /// The tenant it holds for.
    pub fn tenant(&self) -> &Arc<str> {
        &self.tenant
    }

    /// The tokens it holds.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// The money it holds.
    pub fn cost(&self) -> Micros {
        self.cost
    }

    /// Its id in a shared book; `None` when this process holds it.
    pub fn hold(&self) -> Option<u64> {
        (self.hold != 0).then_some(self.hold)
    }
}

#[derive(Debug)]
struct Account {
    limits: Limits,
    spent: Micros,
    reserved: Micros,
    rpm: Option<MinuteBucket>,
    tpm: Option<MinuteBucket>,
    /// The UTC day counted, its settled tokens and those reserved.
    day: i64,
    day_tokens: u64,
    day_reserved: u64,
    /// The UTC month counted and its settled spend.
    month: (i64, u32),
    month_spent: Micros,
}

impl Account {
    /// Starts a new day's and month's count when `wall` has moved into them.
    fn roll(&mut self, wall: SystemTime) {
        let (day, _) = calendar::day_of(wall);
        if day != self.day {
            self.day = day;
            self.day_tokens = 0;
        }
        let (month, _) = calendar::month_of(wall);
        if month != self.month {
            self.month = month;
            self.month_spent = Micros::ZERO;
        }
    }
}

/// What one tenant's account holds now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Balance {
    /// Settled spend.
    pub spent: Micros,
    /// Reserved by calls in flight.
    pub reserved: Micros,
    /// Tokens settled in the UTC day of the last call.
    pub tokens_today: u64,
    /// Spend settled in the UTC month of the last call.
    pub spent_this_month: Micros,
    /// Its limits.
    pub limits: Limits,
}

/// What a tenant has spent and holds, against which its credits, its daily tokens and its
/// monthly spend are checked (by whichever book keeps it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Standing {
    /// Settled spend, in all.
    pub spent: Micros,
    /// Money held by calls in flight.
    pub reserved: Micros,
    /// Tokens settled today (UTC).
    pub day_tokens: u64,
    /// Tokens held by calls in flight.
    pub day_reserved: u64,
    /// Spend settled this month (UTC).
    pub month_spent: Micros,
}

impl Standing {
    /// The refusal of a call of up to `tokens` costing up to `cost` at `wall` for `tenant`
    /// with `limits`, when its daily tokens, monthly spend or credits cannot take it.
    pub fn refusal(
        &self,
        tenant: &Arc<str>,
        limits: &Limits,
        wall: SystemTime,
        tokens: u64,
        cost: Micros,
    ) -> Option<Refusal> {
        if let Some(limit) = limits.tokens_per_day
            && self.day_tokens + self.day_reserved + tokens > limit
        {
            return Some(Refusal::OverQuota {
                tenant: tenant.clone(),
                policy: "tokens_per_day",
                limit,
                window_secs: 86_400,
                remaining: limit.saturating_sub(self.day_tokens + self.day_reserved),
                retry_after: calendar::day_of(wall).1,
            });
        }
        if let Some(limit) = limits.spend_per_month
            && (self.month_spent + self.reserved + cost).0 > limit.0
        {
            let ((y, m), left) = calendar::month_of(wall);
            let first = calendar::days_from_civil(y, m, 1);
            let next = if m == 12 {
                calendar::days_from_civil(y + 1, 1, 1)
            } else {
                calendar::days_from_civil(y, m + 1, 1)
            };
            return Some(Refusal::OverQuota {
                tenant: tenant.clone(),
                policy: "spend_per_month",
                limit: limit.0,
                window_secs: u64::try_from(next - first).unwrap_or(31) * 86_400,
                remaining: limit.0.saturating_sub((self.month_spent + self.reserved).0),
                retry_after: left,
            });
        }
        let credits = limits.credits?;
        let committed = self.spent + self.reserved;
        (committed.0.saturating_add(cost.0) > credits.0).then(|| Refusal::OutOfCredits {
            tenant: tenant.clone(),
            credits,
            spent: self.spent,
            reserved: self.reserved,
            left: Micros(credits.0.saturating_sub(committed.0)),
            needed: cost,
        })
    }
}

/// Every tenant's account.
#[derive(Debug, Default)]
pub struct Accounts {
    accounts: Mutex<HashMap<Arc<str>, Account>>,
}

impl Accounts {
    /// Sets `tenant`'s limits from `now` (its spend so far is kept).
    pub fn set_limits(&self, tenant: &str, limits: Limits, now: Instant) {
        let bucket = |per_minute: Option<u64>| {
            per_minute
                .filter(|n| *n > 0)
                .map(|n| MinuteBucket::new(n, None, now))
        };
        let mut all = self.accounts.lock();
        let a = all.entry(Arc::from(tenant)).or_insert_with(|| Account {
            limits,
            spent: Micros::ZERO,
            reserved: Micros::ZERO,
            rpm: None,
            tpm: None,
            day: 0,
            day_tokens: 0,
            day_reserved: 0,
            month: (0, 0),
            month_spent: Micros::ZERO,
        });
        a.limits = limits;
        a.rpm = bucket(limits.rpm);
        a.tpm = bucket(limits.tpm);
    }

    /// Whether `tenant` has any limit (a call of a tenant without one needs no estimate).
    pub fn limits(&self, tenant: &str) -> Option<Limits> {
        self.accounts
            .lock()
            .get(tenant)
            .map(|a| a.limits)
            .filter(Limits::any)
    }

    /// Reserves a call of up to `tokens` costing up to `cost` for `tenant` at `now` (`wall`
    /// on the calendar); `None` when the tenant has no limits (nothing to hold).
    pub fn reserve(
        &self,
        tenant: &Arc<str>,
        now: Instant,
        wall: SystemTime,
        tokens: u64,
        cost: Micros,
    ) -> Result<Option<Reservation>, Refusal> {
        let mut all = self.accounts.lock();
        let Some(a) = all.get_mut(tenant).filter(|a| a.limits.any()) else {
            return Ok(None);
        };
        a.roll(wall);
        let standing = Standing {
            spent: a.spent,
            reserved: a.reserved,
            day_tokens: a.day_tokens,
            day_reserved: a.day_reserved,
            month_spent: a.month_spent,
        };
        if let Some(refusal) = standing.refusal(tenant, &a.limits, wall, tokens, cost) {
            return Err(refusal);
        }
        let over = |policy: &'static str, b: &mut MinuteBucket, n: u64| Refusal::OverQuota {
            tenant: tenant.clone(),
            policy,
            limit: b.limit(),
            window_secs: 60,
            remaining: b.remaining(now),
            retry_after: b.wait_for(now, n),
        };
        if let Some(b) = a.rpm.as_mut()
            && !b.try_take(now, 1)
        {
            return Err(over("rpm", b, 1));
        }
        if let Some(b) = a.tpm.as_mut() {
            // A call larger than a minute's quota waits for a full bucket, then goes.
            let n = tokens.min(b.capacity());
            if !b.try_take(now, n) {
                let refusal = over("tpm", b, n);
                if let Some(r) = a.rpm.as_mut() {
                    r.refund(1);
                }
                return Err(refusal);
            }
            b.take(now, tokens - n);
        }
        a.reserved += cost;
        a.day_reserved += tokens;
        Ok(Some(Reservation {
            tenant: tenant.clone(),
            tokens,
            cost,
            hold: 0,
            in_ledger: false,
        }))
    }

    /// Settles `r` with what the call really used (`tokens`, `cost`; zero when it failed
    /// before the upstream answered): the reservation is released, the spend recorded, the
    /// tokens quota refunded or charged the difference.
    pub fn settle(
        &self,
        r: Reservation,
        now: Instant,
        wall: SystemTime,
        tokens: u64,
        cost: Micros,
    ) {
        let mut all = self.accounts.lock();
        let Some(a) = all.get_mut(&r.tenant) else {
            return;
        };
        a.reserved = Micros(a.reserved.0.saturating_sub(r.cost.0));
        a.day_reserved = a.day_reserved.saturating_sub(r.tokens);
        a.spent += cost;
        a.roll(wall);
        a.day_tokens += tokens;
        a.month_spent += cost;
        if let Some(b) = a.tpm.as_mut() {
            if tokens < r.tokens {
                b.refund(r.tokens - tokens);
            } else {
                b.take(now, tokens - r.tokens);
            }
        }
    }

    /// Restores `tenant`'s settled spend after a restart: `spent` in all, `month_spent` in the
    /// UTC month of `wall` and `day_tokens` in its UTC day (as the ledger totals them). No-op
    /// for a tenant without an account.
    pub fn restore(
        &self,
        tenant: &str,
        wall: SystemTime,
        spent: Micros,
        month_spent: Micros,
        day_tokens: u64,
    ) {
        let mut all = self.accounts.lock();
        let Some(a) = all.get_mut(tenant) else {
            return;
        };
        a.roll(wall);
        a.spent = spent;
        a.month_spent = month_spent;
        a.day_tokens = day_tokens;
    }

    /// `tenant`'s account now.
    pub fn balance(&self, tenant: &str) -> Option<Balance> {
        self.accounts.lock().get(tenant).map(|a| Balance {
            spent: a.spent,
            reserved: a.reserved,
            tokens_today: a.day_tokens,
            spent_this_month: a.month_spent,
            limits: a.limits,
        })
    }

    /// Every tenant with an account.
    pub fn tenants(&self) -> Vec<Arc<str>> {
        self.accounts.lock().keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests;
