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

/// The book a gateway holds.
#[derive(Debug)]
pub enum Books {
    /// In this process.
    Local(Accounts),
}

impl Default for Books {
    fn default() -> Self {
        Self::Local(Accounts::default())
    }
}

/// Forwards a call to whichever book this is.
macro_rules! each {
    ($self:ident, $b:ident => $call:expr) => {
        match $self {
            Self::Local($b) => $call,
        }
    };
}

impl AccountBook for Books {
    fn set_limits(&self, tenant: &str, limits: Limits, now: Instant) {
        each!(self, b => AccountBook::set_limits(b, tenant, limits, now));
    }

    fn limits(&self, tenant: &str) -> Option<Limits> {
        each!(self, b => AccountBook::limits(b, tenant))
    }

    async fn reserve(
        &self,
        tenant: &Arc<str>,
        now: Instant,
        wall: SystemTime,
        tokens: u64,
        cost: Micros,
    ) -> Result<Option<Reservation>, Refusal> {
        each!(self, b => AccountBook::reserve(b, tenant, now, wall, tokens, cost).await)
    }

    fn settle(&self, r: Reservation, now: Instant, wall: SystemTime, tokens: u64, cost: Micros) {
        each!(self, b => AccountBook::settle(b, r, now, wall, tokens, cost));
    }

    fn restore(
        &self,
        tenant: &str,
        wall: SystemTime,
        spent: Micros,
        month_spent: Micros,
        day_tokens: u64,
    ) {
        each!(self, b => AccountBook::restore(b, tenant, wall, spent, month_spent, day_tokens));
    }

    async fn balance(&self, tenant: &str) -> Option<Balance> {
        each!(self, b => AccountBook::balance(b, tenant).await)
    }

    fn tenants(&self) -> Vec<Arc<str>> {
        each!(self, b => AccountBook::tenants(b))
    }
}
