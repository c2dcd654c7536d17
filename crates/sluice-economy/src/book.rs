//! Where tenants' credits and quotas are kept: the [`AccountBook`] trait every step uses, and
//! [`Books`], the one a gateway holds. In one process the book is [`Accounts`] (a map under
//! a lock); several instances keep one book between them by another implementation (a
//! server-side script that reserves and settles atomically, in `sluice-cluster`), held the
//! same way, no step changing. Every implementation passes the same conformance suite
//! (its `conformance` module, with the `conformance` feature).
//!
//! Reserving may wait for a store; settling never makes a call wait (an implementation that
//! writes elsewhere does so in the background); limits are read from a local copy.

use std::sync::Arc;
use std::time::SystemTime;

use sluice_core::reply::{Reply, now};
use tokio::time::Instant;

use crate::accounts::{Accounts, Balance, Limits, Refusal, Reservation};
use crate::money::Micros;

/// Tenants' credits and quotas: reserve before a call, settle after.
pub trait AccountBook: Send + Sync + std::fmt::Debug {
    /// Sets `tenant`'s limits from `now`; what it has spent is kept.
    fn set_limits(&self, tenant: &str, limits: Limits, now: Instant);

    /// `tenant`'s limits, when it has any (a call of a tenant without needs no estimate).
    fn limits(&self, tenant: &str) -> Option<Limits>;

    /// Reserves a call of up to `tokens` costing up to `cost` for `tenant` at `now` (`wall`
    /// on the calendar); `None` when the tenant has no limits.
    fn reserve<'a>(
        &'a self,
        tenant: &'a Arc<str>,
        now: Instant,
        wall: SystemTime,
        tokens: u64,
        cost: Micros,
    ) -> Reply<'a, Result<Option<Reservation>, Refusal>>;

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
    fn balance<'a>(&'a self, tenant: &'a str) -> Reply<'a, Option<Balance>>;

    /// Every tenant with an account.
    fn tenants(&self) -> Vec<Arc<str>>;

    /// The name `r` is held under where instances share the book (`INSTANCE-N`), which the
    /// call's ledger row carries; `None` in a book of one process.
    fn hold_name(&self, r: &Reservation) -> Option<Arc<str>> {
        let _ = r;
        None
    }
}

/// What calls spent under each hold a ledger's rows name: tokens and cost; or why the
/// ledger could not say.
pub type SpentUnder = Result<std::collections::HashMap<String, (u64, Micros)>, String>;

/// What a ledger says calls spent under given holds: how a dead instance's holds are
/// settled (at what their rows say), never charged blind.
pub trait HoldRows: Send + Sync + std::fmt::Debug {
    /// For each of `holds` that some row names: its tokens and cost, summed.
    fn spent_under<'a>(&'a self, holds: &'a [String]) -> Reply<'a, SpentUnder>;
}

impl AccountBook for Accounts {
    fn set_limits(&self, tenant: &str, limits: Limits, at: Instant) {
        Accounts::set_limits(self, tenant, limits, at);
    }

    fn limits(&self, tenant: &str) -> Option<Limits> {
        Accounts::limits(self, tenant)
    }

    fn reserve<'a>(
        &'a self,
        tenant: &'a Arc<str>,
        at: Instant,
        wall: SystemTime,
        tokens: u64,
        cost: Micros,
    ) -> Reply<'a, Result<Option<Reservation>, Refusal>> {
        now(Accounts::reserve(self, tenant, at, wall, tokens, cost))
    }

    fn settle(&self, r: Reservation, at: Instant, wall: SystemTime, tokens: u64, cost: Micros) {
        Accounts::settle(self, r, at, wall, tokens, cost);
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

    fn balance<'a>(&'a self, tenant: &'a str) -> Reply<'a, Option<Balance>> {
        now(Accounts::balance(self, tenant))
    }

    fn tenants(&self) -> Vec<Arc<str>> {
        Accounts::tenants(self)
    }
}

/// The book a gateway holds: in this process, or kept by several instances together.
pub type Books = Arc<dyn AccountBook>;

/// A book in this process.
pub fn local() -> Books {
    Arc::new(Accounts::default())
}
