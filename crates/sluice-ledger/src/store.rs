//! Where ledger rows (and the API keys and tenants set at run time, and what automatic
//! routers learnt) live: the [`Store`] trait, its embedded SQLite and PostgreSQL
//! implementations, and [`AnyStore`], the one a configuration picks at run time.

use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::balances::{self, LedgerBook};
use crate::query::{UsageQuery, UsageRow};
use crate::records::{RevokedKey, StoredBelief, StoredKey, StoredTenant};
use crate::{Entry, LedgerError, sql};

/// A ledger database.
pub trait Store: Send + Sync + 'static {
    /// Appends `entries` atomically: all of them are durable when this returns `Ok`.
    fn append(&self, entries: &[Entry]) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// Usage totals for `q`.
    fn usage(
        &self,
        q: &UsageQuery,
    ) -> impl Future<Output = Result<Vec<UsageRow>, LedgerError>> + Send;

    /// Up to `limit` entries matching `q`'s tenant and range, oldest first.
    fn entries(
        &self,
        q: &UsageQuery,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<Entry>, LedgerError>> + Send;

    /// Saves an API key made at run time (replacing one of the same name).
    fn save_key(&self, key: &StoredKey) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// Removes the key `name`; whether there was one.
    fn remove_key(&self, name: &str) -> impl Future<Output = Result<bool, LedgerError>> + Send;

    /// Every saved key, by name.
    fn keys(&self) -> impl Future<Output = Result<Vec<StoredKey>, LedgerError>> + Send;

    /// Records revocations (a revoked hash stays refused across restarts, wherever the key
    /// is defined) and removes the saved keys of those names, all at once.
    fn revoke_keys(
        &self,
        keys: &[RevokedKey],
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// Every revocation, oldest first.
    fn revoked_keys(&self) -> impl Future<Output = Result<Vec<RevokedKey>, LedgerError>> + Send;

    /// Saves a tenant set through the admin API (replacing one of the same name).
    fn save_tenant(
        &self,
        tenant: &StoredTenant,
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// Removes the tenant `name`; whether there was one.
    fn remove_tenant(&self, name: &str) -> impl Future<Output = Result<bool, LedgerError>> + Send;

    /// Every saved tenant, by name.
    fn tenants(&self) -> impl Future<Output = Result<Vec<StoredTenant>, LedgerError>> + Send;

    /// The directory's version: moved, in the same transaction, by every change of keys,
    /// tenants and revocations (0 before any), so that each instance sharing the store can
    /// tell cheaply when to read them again.
    fn directory_version(&self) -> impl Future<Output = Result<u64, LedgerError>> + Send;

    /// Replaces what is stored of automatic router `router` with `beliefs`, at once.
    fn save_beliefs(
        &self,
        router: &str,
        beliefs: &[StoredBelief],
    ) -> impl Future<Output = Result<(), LedgerError>> + Send;

    /// What is stored of automatic router `router`, by task then group.
    fn beliefs(
        &self,
        router: &str,
    ) -> impl Future<Output = Result<Vec<StoredBelief>, LedgerError>> + Send;
}

/// Implements [`Store`] for a store holding a sqlx `pool`: every method is the SQL of
/// `sql.rs`, written once for both databases.
macro_rules! sql_store {
    ($store:ty) => {
        impl Store for $store {
            async fn append(&self, entries: &[Entry]) -> Result<(), LedgerError> {
                self.append_rows(entries).await
            }

            async fn usage(&self, q: &UsageQuery) -> Result<Vec<UsageRow>, LedgerError> {
                sql::usage(&self.pool, q).await
            }

            async fn entries(&self, q: &UsageQuery, limit: u32) -> Result<Vec<Entry>, LedgerError> {
                sql::entries(&self.pool, q, limit).await
            }

            async fn save_key(&self, key: &StoredKey) -> Result<(), LedgerError> {
                sql::save_key(&self.pool, key).await
            }

            async fn remove_key(&self, name: &str) -> Result<bool, LedgerError> {
                sql::remove_named(&self.pool, sql::KEYS, name).await
            }

            async fn save_tenant(&self, tenant: &StoredTenant) -> Result<(), LedgerError> {
                sql::save_tenant(&self.pool, tenant).await
            }

            async fn remove_tenant(&self, name: &str) -> Result<bool, LedgerError> {
                sql::remove_named(&self.pool, sql::TENANTS, name).await
            }

            async fn tenants(&self) -> Result<Vec<StoredTenant>, LedgerError> {
                sql::tenants(&self.pool).await
            }

            async fn directory_version(&self) -> Result<u64, LedgerError> {
                sql::directory_version(&self.pool).await
            }

            async fn keys(&self) -> Result<Vec<StoredKey>, LedgerError> {
                sql::keys(&self.pool).await
            }

            async fn revoke_keys(&self, keys: &[RevokedKey]) -> Result<(), LedgerError> {
                sql::revoke_keys(&self.pool, keys).await
            }

            async fn revoked_keys(&self) -> Result<Vec<RevokedKey>, LedgerError> {
                sql::revoked_keys(&self.pool).await
            }

            async fn save_beliefs(
                &self,
                router: &str,
                beliefs: &[StoredBelief],
            ) -> Result<(), LedgerError> {
                sql::save_beliefs(&self.pool, router, beliefs).await
            }

            async fn beliefs(&self, router: &str) -> Result<Vec<StoredBelief>, LedgerError> {
                sql::beliefs(&self.pool, router).await
            }
        }
    };
}

mod sqlite;

pub use sqlite::{Durability, SqliteStore};

/// The shared store: a PostgreSQL database, for several gateways or a long history.
#[derive(Clone, Debug)]
pub struct PgStore {
    pool: PgPool,
    insert: Arc<sql::InsertSql>,
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`) and
    /// creates the ledger table if absent.
    pub async fn connect(url: &str) -> Result<Self, LedgerError> {
        let options = PgConnectOptions::from_str(url)?;
        // Unlike SQLite's, PostgreSQL's connections do not prepare their inserts as they open:
        // a statement prepared without the arguments' types would type its placeholders as
        // text. The first commit of each size parses it (in the server, not this process).
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
        // One transaction under the schema lock: instances started together against an
        // empty database take turns, and each finds what the one before made.
        let mut tx = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(sql::SCHEMA_LOCK)
            .execute(&mut *tx)
            .await?;
        let existing: Vec<String> = sqlx::query_scalar(
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_name = 'sluice_ledger' AND table_schema = current_schema()",
        )
        .fetch_all(&mut *tx)
        .await?;
        // A ledger written by an earlier sluice holds `cost_micros` as NOT NULL; dropping
        // the constraint again is a no-op.
        let statements = sql::creation("BIGSERIAL PRIMARY KEY", &missing(&existing))
            .into_iter()
            .chain(sql::unknown_cost_migration(false));
        for statement in statements {
            // Audited: built from the SQL module's constants only.
            sqlx::query(sqlx::AssertSqlSafe(statement))
                .execute(&mut *tx)
                .await?;
        }
        balances::create(&mut tx, balances::Today::at(std::time::SystemTime::now())).await?;
        tx.commit().await?;
        Ok(Self {
            pool,
            insert: Arc::new(sql::InsertSql::new::<sqlx::Postgres>()?),
        })
    }

    /// Writes `entries` and, in the same transaction, adds each tenant's spend to its balance
    /// row (but for calls settled there already).
    async fn append_rows(&self, entries: &[Entry]) -> Result<(), LedgerError> {
        let spend = spend_by_tenant(entries);
        if spend.is_empty() {
            return sql::insert(&self.pool, &self.insert, entries).await;
        }
        let mut tx = self.pool.begin().await?;
        sql::insert_in(&mut tx, &self.insert, entries).await?;
        for (tenant, spent) in spend {
            balances::spend(&mut tx, tenant, spent).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The book of tenants' credits and quotas kept in this database, giving this instance
    /// `share` of each tenant's request and token rates, beating every `beat` (the holds of
    /// an instance silent for three beats are released) and releasing any hold after
    /// `hold_ttl` (see [`LedgerBook`]).
    pub fn book(&self, share: f64, hold_ttl: Duration, beat: Duration) -> Arc<LedgerBook> {
        LedgerBook::new(self.pool.clone(), share, hold_ttl, beat)
    }
}

/// Each tenant's spend in `entries` not settled in the database already (its tokens on the
/// latest day among them, its month's spend in the latest month), in tenant order, so that
/// two writers lock balance rows in the same order.
fn spend_by_tenant(entries: &[Entry]) -> Vec<(&str, balances::Spend)> {
    let mut by: std::collections::BTreeMap<&str, balances::Spend> = Default::default();
    for e in entries.iter().filter(|e| !e.settled_in_ledger) {
        let Some(tenant) = e.tenant.as_deref() else {
            continue;
        };
        let cost = e.cost_micros.map_or(0, sql::int);
        let day = e.at_ms.div_euclid(86_400_000);
        let month = balances::Today::month_of_ms(e.at_ms);
        let t = by.entry(tenant).or_default();
        t.cost += cost;
        if day > t.day {
            (t.tokens, t.day) = (0, day);
        }
        if day == t.day {
            t.tokens += sql::int(e.tokens.total());
        }
        if month > t.month {
            (t.month, t.month_cost) = (month, 0);
        }
        if month == t.month {
            t.month_cost += cost;
        }
    }
    by.into_iter().collect()
}

sql_store!(PgStore);

/// The columns added since the first sluice that a ledger table with `existing` columns
/// lacks (none for a table not made yet).
pub(super) fn missing(existing: &[String]) -> Vec<&'static str> {
    if existing.is_empty() {
        return Vec::new();
    }
    sql::ADDED_COLUMNS
        .into_iter()
        .filter(|c| !existing.iter().any(|e| e == c))
        .collect()
}

/// The database a store keeps its tables in, for the records kept beside the ledger's (batch
/// jobs and their files).
#[derive(Clone, Copy, Debug)]
pub enum Database<'a> {
    /// The embedded file.
    Sqlite(&'a sqlx::SqlitePool),
    /// The shared server.
    Postgres(&'a PgPool),
}

impl AnyStore {
    /// The database this store keeps its tables in.
    pub fn database(&self) -> Database<'_> {
        match self {
            Self::Sqlite(s) => Database::Sqlite(&s.pool),
            Self::Postgres(s) => Database::Postgres(&s.pool),
        }
    }
}

/// The store a configuration chose.
#[derive(Clone, Debug)]
pub enum AnyStore {
    /// Embedded.
    Sqlite(SqliteStore),
    /// Shared.
    Postgres(PgStore),
}

impl AnyStore {
    /// The database's name, for what readiness and refusals say.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "SQLite",
            Self::Postgres(_) => "PostgreSQL",
        }
    }
}

/// Forwards a call to whichever store this is.
macro_rules! each {
    ($self:ident, $s:ident => $call:expr) => {
        match $self {
            Self::Sqlite($s) => $call,
            Self::Postgres($s) => $call,
        }
    };
}

impl Store for AnyStore {
    async fn save_key(&self, key: &StoredKey) -> Result<(), LedgerError> {
        each!(self, s => s.save_key(key).await)
    }

    async fn remove_key(&self, name: &str) -> Result<bool, LedgerError> {
        each!(self, s => s.remove_key(name).await)
    }

    async fn keys(&self) -> Result<Vec<StoredKey>, LedgerError> {
        each!(self, s => s.keys().await)
    }

    async fn revoke_keys(&self, keys: &[RevokedKey]) -> Result<(), LedgerError> {
        each!(self, s => s.revoke_keys(keys).await)
    }

    async fn revoked_keys(&self) -> Result<Vec<RevokedKey>, LedgerError> {
        each!(self, s => s.revoked_keys().await)
    }

    async fn save_tenant(&self, tenant: &StoredTenant) -> Result<(), LedgerError> {
        each!(self, s => s.save_tenant(tenant).await)
    }

    async fn remove_tenant(&self, name: &str) -> Result<bool, LedgerError> {
        each!(self, s => s.remove_tenant(name).await)
    }

    async fn tenants(&self) -> Result<Vec<StoredTenant>, LedgerError> {
        each!(self, s => s.tenants().await)
    }

    async fn directory_version(&self) -> Result<u64, LedgerError> {
        each!(self, s => s.directory_version().await)
    }

    async fn save_beliefs(
        &self,
        router: &str,
        beliefs: &[StoredBelief],
    ) -> Result<(), LedgerError> {
        each!(self, s => s.save_beliefs(router, beliefs).await)
    }

    async fn beliefs(&self, router: &str) -> Result<Vec<StoredBelief>, LedgerError> {
        each!(self, s => s.beliefs(router).await)
    }

    async fn append(&self, entries: &[Entry]) -> Result<(), LedgerError> {
        each!(self, s => s.append(entries).await)
    }

    async fn usage(&self, q: &UsageQuery) -> Result<Vec<UsageRow>, LedgerError> {
        each!(self, s => s.usage(q).await)
    }

    async fn entries(&self, q: &UsageQuery, limit: u32) -> Result<Vec<Entry>, LedgerError> {
        each!(self, s => s.entries(q, limit).await)
    }
}

#[cfg(test)]
mod tests;

impl sluice_economy::HoldRows for AnyStore {
    fn spent_under<'a>(
        &'a self,
        holds: &'a [String],
    ) -> sluice_core::reply::Reply<'a, sluice_economy::SpentUnder> {
        sluice_core::reply::later(async move {
            let rows = match self {
                Self::Sqlite(s) => sql::spent_under(&s.pool, holds).await,
                Self::Postgres(s) => sql::spent_under(&s.pool, holds).await,
            };
            rows.map(|rows| {
                rows.into_iter()
                    .map(|(h, tokens, cost)| (h, (tokens, sluice_economy::Micros(cost))))
                    .collect()
            })
            .map_err(|e| e.to_string())
        })
    }
}
