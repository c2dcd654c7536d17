//! Where tenants' credits and quotas are kept: the [`AccountBook`] trait every step uses, and
//! [`Books`], the one a gateway holds. In one process the book is [`Accounts`] (a map under
//! a lock); several instances keep one book between them by another implementation (a
//! server-side script that reserves and settles atomically), which the gateway holds as
//! another variant of [`Books`], no step changing.
//!
//! Reserving may wait for a store; settling never makes a call wait (an implementation that
//! writes elsewhere does so in the background); limits are read from a local copy.

use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::time::Instant;

use crate::accounts::{Accounts, Balance, Limits, Refusal, Reservation};
use crate::money::Micros;

/// Tenants' credits and quotas: reserve before a call, settle after.
pub trait AccountBook: Send + Sync {
    /// Sets `tenant`'s limits from `now`; what it has spent is kept.
    fn set_limits(&self, tenant: &str, limits: Limits, now: Instant);

    /// `tenant`'s limits, when it has any (a call of a tenant without needs no estimate).
    fn limits(&self, tenant: &str) -> Option<Limits>;

    /// Reserves a call of up to `tokens` costing up to `cost` for `tenant` at `now` (`wall`
    /// on the calendar); `None` when the tenant has no limits.
    fn reserve(
        &self,
        tenant: &Arc<str>,
        now: Instant,
        wall: SystemTime,
        tokens: u64,
        cost: Micros,
    ) -> impl Future<Output = Result<Option<Reservation>, Refusal>> + Send;

    /// Settles `r` at what the call used: `tokens` and `cost`.
    fn settle(&self, r: Reservation, now: Instant, wall: SystemTime, tokens: u64, cost: Micros);

    /// Restores `tenant`'s settled spend after a restart (as the ledger totals it).
    fn restore(
        &self,
        tenant: &str,
        wall: SystemTime,
        spent: Micros,
        month_spent: Micros,
        day_tokens: u64,
    );

    /// `tenant`'s account now.
    fn balance(&self, tenant: &str) -> impl Future<Output = Option<Balance>> + Send;

    /// Every tenant with an account.
    fn tenants(&self) -> Vec<Arc<str>>;
}

impl AccountBook for Accounts {
    fn set_limits(&self, tenant: &str, limits: Limits, now: Instant) {
        Accounts::set_limits(self, tenant, limits, now);
    }

    fn limits(&self, tenant: &str) -> Option<Limits> {
        Accounts::limits(self, tenant)
    }

    async fn reserve(
        &self,
        tenant: &Arc<str>,
        now: Instant,
        wall: SystemTime,
        tokens: u64,
        cost: Micros,
    ) -> Result<Option<Reservation>, Refusal> {
        Accounts::reserve(self, tenant, now, wall, tokens, cost)
    }

    fn settle(&self, r: Reservation, now: Instant, wall: SystemTime, tokens: u64, cost: Micros) {
        Accounts::settle(self, r, now, wall, tokens, cost);
    }

    fn restore(
        &self,
        tenant: &str,
        wall: SystemTime,
        spent: Micros,
        month_spent: Micros,
        day_tokens: u64,
    ) {
        Accounts::restore(self, tenant, wall, spent, month_spent, day_tokens);
    }

    async fn balance(&self, tenant: &str) -> Option<Balance> {
        Accounts::balance(self, tenant)
    }

    fn tenants(&self) -> Vec<Arc<str>> {
        Accounts::tenants(self)
    }
}

/// A book kept outside this process (shared by several instances), as [`Books`] holds it:
/// [`AccountBook`] with its waits boxed.
pub trait SharedBook: Send + Sync + std::fmt::Debug {
    /// As [`AccountBook::set_limits`].
    fn set_limits(&self, tenant: &str, limits: Limits, now: Instant);
    /// As [`AccountBook::limits`].
    fn limits(&self, tenant: &str) -> Option<Limits>;
    /// As [`AccountBook::reserve`].
    fn reserve<'a>(
        &'a self,
        tenant: &'a Arc<str>,
        now: Instant,
        wall: SystemTime,
        tokens: u64,
        cost: Micros,
    ) -> BoxFuture<'a, Result<Option<Reservation>, Refusal>>;
    /// As [`AccountBook::settle`].
    fn settle(&self, r: Reservation, now: Instant, wall: SystemTime, tokens: u64, cost: Micros);
    /// As [`AccountBook::restore`].
    fn restore(
        &self,
        tenant: &str,
        wall: SystemTime,
        spent: Micros,
        month_spent: Micros,
        day_tokens: u64,
    );
    /// As [`AccountBook::balance`].
    fn balance<'a>(&'a self, tenant: &'a str) -> BoxFuture<'a, Option<Balance>>;
    /// As [`AccountBook::tenants`].
    fn tenants(&self) -> Vec<Arc<str>>;
}

/// A boxed future a [`SharedBook`] answers with.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The book a gateway holds.
#[derive(Debug)]
pub enum Books {
    /// In this process.
    Local(Accounts),
    /// Kept by several instances together.
    Shared(Arc<dyn SharedBook>),
}

impl Default for Books {
    fn default() -> Self {
        Self::Local(Accounts::default())
    }
}

impl AccountBook for Books {
    fn set_limits(&self, tenant: &str, limits: Limits, now: Instant) {
        match self {
            Self::Local(b) => b.set_limits(tenant, limits, now),
            Self::Shared(b) => b.set_limits(tenant, limits, now),
        }
    }

    fn limits(&self, tenant: &str) -> Option<Limits> {
        match self {
            Self::Local(b) => b.limits(tenant),
            Self::Shared(b) => b.limits(tenant),
        }
    }

    async fn reserve(
        &self,
        tenant: &Arc<str>,
        now: Instant,
        wall: SystemTime,
        tokens: u64,
        cost: Micros,
    ) -> Result<Option<Reservation>, Refusal> {
        match self {
            Self::Local(b) => b.reserve(tenant, now, wall, tokens, cost),
            Self::Shared(b) => b.reserve(tenant, now, wall, tokens, cost).await,
        }
    }

    fn settle(&self, r: Reservation, now: Instant, wall: SystemTime, tokens: u64, cost: Micros) {
        match self {
            Self::Local(b) => b.settle(r, now, wall, tokens, cost),
            Self::Shared(b) => b.settle(r, now, wall, tokens, cost),
        }
    }

    fn restore(
        &self,
        tenant: &str,
        wall: SystemTime,
        spent: Micros,
        month_spent: Micros,
        day_tokens: u64,
    ) {
        match self {
            Self::Local(b) => b.restore(tenant, wall, spent, month_spent, day_tokens),
            Self::Shared(b) => b.restore(tenant, wall, spent, month_spent, day_tokens),
        }
    }

    async fn balance(&self, tenant: &str) -> Option<Balance> {
        match self {
            Self::Local(b) => b.balance(tenant),
            Self::Shared(b) => b.balance(tenant).await,
        }
    }

    fn tenants(&self) -> Vec<Arc<str>> {
        match self {
            Self::Local(b) => b.tenants(),
            Self::Shared(b) => b.tenants(),
        }
    }
}
