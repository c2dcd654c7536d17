//! The SQL of what the admin API saves: keys and tenants, by name; each change moves the
//! directory's version in the same transaction.

use sqlx::query_builder::QueryBuilder;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Type};

use super::{DIRECTORY, KEYS, REVOKED, TENANTS, int, narrow};
use crate::LedgerError;
use crate::records::{RevokedKey, StoredKey, StoredTenant};

/// Saves `k`, replacing a key of the same name.
pub(crate) async fn save_key<DB>(pool: &Pool<DB>, k: &StoredKey) -> Result<(), LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
    Option<String>: for<'q> Encode<'q, DB> + Type<DB>,
{
    let mut b = QueryBuilder::<DB>::new(format!(
        "INSERT INTO {KEYS} (name, tenant, sha256, lane, models) VALUES ("
    ));
    b.push_bind(k.name.clone())
        .push(", ")
        .push_bind(k.tenant.clone())
        .push(", ")
        .push_bind(k.sha256.clone())
        .push(", ")
        .push_bind(k.lane.clone())
        .push(", ")
        .push_bind(k.models.join("\n"))
        .push(
            ") ON CONFLICT (name) DO UPDATE SET tenant = excluded.tenant, \
             sha256 = excluded.sha256, lane = excluded.lane, models = excluded.models",
        );
    let mut tx = pool.begin().await?;
    b.build().execute(&mut *tx).await?;
    bump::<DB>(&mut tx).await?;
    tx.commit().await?;
    Ok(())
}

/// Every saved key, by name.
pub(crate) async fn keys<DB>(pool: &Pool<DB>) -> Result<Vec<StoredKey>, LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    String: for<'r> Decode<'r, DB> + Type<DB>,
    Option<String>: for<'r> Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let mut b = QueryBuilder::<DB>::new(format!(
        "SELECT name, tenant, sha256, lane, models FROM {KEYS} ORDER BY name"
    ));
    let rows = b.build().fetch_all(pool).await?;
    rows.iter()
        .map(|r| {
            let models: String = r.try_get(4usize)?;
            Ok(StoredKey {
                name: r.try_get(0usize)?,
                tenant: r.try_get(1usize)?,
                sha256: r.try_get(2usize)?,
                lane: r.try_get(3usize)?,
                models: models
                    .split('\n')
                    .filter(|m| !m.is_empty())
                    .map(str::to_string)
                    .collect(),
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(LedgerError::from)
}

/// Saves `t`, replacing a tenant of the same name.
pub(crate) async fn save_tenant<DB>(pool: &Pool<DB>, t: &StoredTenant) -> Result<(), LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
    Option<String>: for<'q> Encode<'q, DB> + Type<DB>,
    Option<i64>: for<'q> Encode<'q, DB> + Type<DB>,
{
    let mut b = QueryBuilder::<DB>::new(format!(
        "INSERT INTO {TENANTS} (name, lane, credits_micros, rpm, tpm, tokens_per_day, \
         spend_per_month_micros) "
    ));
    b.push_values([t], |mut v, t| {
        v.push_bind(t.name.clone())
            .push_bind(t.lane.clone())
            .push_bind(t.credits_micros.map(int))
            .push_bind(t.rpm.map(int))
            .push_bind(t.tpm.map(int))
            .push_bind(t.tokens_per_day.map(int))
            .push_bind(t.spend_per_month_micros.map(int));
    });
    b.push(
        " ON CONFLICT (name) DO UPDATE SET lane = excluded.lane, \
         credits_micros = excluded.credits_micros, rpm = excluded.rpm, tpm = excluded.tpm, \
         tokens_per_day = excluded.tokens_per_day, \
         spend_per_month_micros = excluded.spend_per_month_micros",
    );
    let mut tx = pool.begin().await?;
    b.build().execute(&mut *tx).await?;
    bump::<DB>(&mut tx).await?;
    tx.commit().await?;
    Ok(())
}

/// Removes the row `name` of `table`; whether there was one.
pub(crate) async fn remove_named<DB>(
    pool: &Pool<DB>,
    table: &str,
    name: &str,
) -> Result<bool, LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    let mut b = QueryBuilder::<DB>::new(format!("DELETE FROM {table} WHERE name = "));
    b.push_bind(name.to_string()).push(" RETURNING name");
    let mut tx = pool.begin().await?;
    let removed = !b.build().fetch_all(&mut *tx).await?.is_empty();
    if removed {
        bump::<DB>(&mut tx).await?;
    }
    tx.commit().await?;
    Ok(removed)
}

/// Every saved tenant, by name.
pub(crate) async fn tenants<DB>(pool: &Pool<DB>) -> Result<Vec<StoredTenant>, LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    String: for<'r> Decode<'r, DB> + Type<DB>,
    Option<String>: for<'r> Decode<'r, DB> + Type<DB>,
    Option<i64>: for<'r> Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let mut b = QueryBuilder::<DB>::new(format!(
        "SELECT name, lane, credits_micros, rpm, tpm, tokens_per_day, spend_per_month_micros \
         FROM {TENANTS} ORDER BY name"
    ));
    let rows = b.build().fetch_all(pool).await?;
    rows.iter()
        .map(|r| {
            let n = |i: usize| -> Result<Option<u64>, sqlx::Error> {
                r.try_get::<Option<i64>, usize>(i)?
                    .map(|v| narrow(v, i))
                    .transpose()
            };
            Ok(StoredTenant {
                name: r.try_get(0usize)?,
                lane: r.try_get(1usize)?,
                credits_micros: n(2)?,
                rpm: n(3)?,
                tpm: n(4)?,
                tokens_per_day: n(5)?,
                spend_per_month_micros: n(6)?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(LedgerError::from)
}

/// Records each of `keys` as revoked, and forgets the keys of their names made at run time,
/// in one transaction: a revocation is never half written.
pub(crate) async fn revoke_keys<DB>(pool: &Pool<DB>, keys: &[RevokedKey]) -> Result<(), LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
{
    let mut tx = pool.begin().await?;
    for k in keys {
        let mut b = QueryBuilder::<DB>::new(format!(
            "INSERT INTO {REVOKED} (sha256, name, tenant, revoked_ms) "
        ));
        b.push_values([k], |mut v, k| {
            v.push_bind(k.sha256.clone())
                .push_bind(k.name.clone())
                .push_bind(k.tenant.clone())
                .push_bind(k.revoked_ms);
        });
        b.push(" ON CONFLICT (sha256) DO NOTHING");
        b.build().execute(&mut *tx).await?;
        let mut b = QueryBuilder::<DB>::new(format!("DELETE FROM {KEYS} WHERE name = "));
        b.push_bind(k.name.clone());
        b.build().execute(&mut *tx).await?;
    }
    bump::<DB>(&mut tx).await?;
    tx.commit().await?;
    Ok(())
}

/// Every revoked key, oldest revocation first.
pub(crate) async fn revoked_keys<DB>(pool: &Pool<DB>) -> Result<Vec<RevokedKey>, LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    String: for<'r> Decode<'r, DB> + Type<DB>,
    i64: for<'r> Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let mut b = QueryBuilder::<DB>::new(format!(
        "SELECT sha256, name, tenant, revoked_ms FROM {REVOKED} ORDER BY revoked_ms, sha256"
    ));
    let rows = b.build().fetch_all(pool).await?;
    rows.iter()
        .map(|r| {
            Ok(RevokedKey {
                sha256: r.try_get(0usize)?,
                name: r.try_get(1usize)?,
                tenant: r.try_get(2usize)?,
                revoked_ms: r.try_get(3usize)?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(LedgerError::from)
}

/// Moves the directory's version by one, within `tx`.
async fn bump<DB>(tx: &mut sqlx::Transaction<'_, DB>) -> Result<(), LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    let mut b = QueryBuilder::<DB>::new(format!(
        "INSERT INTO {DIRECTORY} (id, version) VALUES (1, 1) \
         ON CONFLICT (id) DO UPDATE SET version = {DIRECTORY}.version + 1"
    ));
    b.build().execute(&mut **tx).await?;
    Ok(())
}

/// The directory's version: 0 before any change.
pub(crate) async fn directory_version<DB>(pool: &Pool<DB>) -> Result<u64, LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    i64: for<'r> Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let mut b = QueryBuilder::<DB>::new(format!("SELECT version FROM {DIRECTORY} WHERE id = 1"));
    let Some(row) = b.build().fetch_optional(pool).await? else {
        return Ok(0);
    };
    let v: i64 = row.try_get(0usize)?;
    Ok(narrow(v, 0)?)
}
