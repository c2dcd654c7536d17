//! Reading the ledger back: usage totals grouped by the columns asked for, and entries.

use std::sync::Arc;

use sqlx::query_builder::QueryBuilder;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Type};

use super::{TABLE, column_list, narrow};
use crate::LedgerError;
use crate::entry::{CacheOutcome, Entry, Tokens};
use crate::query::{UsageQuery, UsageRow};

/// `WHERE` clauses for `q`'s tenant and time range.
fn push_filter<DB>(b: &mut QueryBuilder<DB>, q: &UsageQuery)
where
    DB: Database,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    b.push(" WHERE 1 = 1");
    if let Some(t) = &q.tenant {
        b.push(" AND tenant = ").push_bind(t.clone());
    }
    if let Some(f) = q.from_ms {
        b.push(" AND at_ms >= ").push_bind(f);
    }
    if let Some(t) = q.to_ms {
        b.push(" AND at_ms < ").push_bind(t);
    }
}

/// The totals `q` asks for, ordered by its grouped columns.
pub(crate) async fn usage<DB>(pool: &Pool<DB>, q: &UsageQuery) -> Result<Vec<UsageRow>, LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB> + for<'r> Decode<'r, DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
    Option<String>: for<'r> Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let keys: Vec<&str> = q.group_by.iter().map(|g| g.column()).collect();
    let sum = |expr: &str| format!("CAST(COALESCE(SUM({expr}), 0) AS BIGINT)");
    let mut select: Vec<String> = keys.iter().map(|k| (*k).to_string()).collect();
    select.push("CAST(COUNT(*) AS BIGINT)".into());
    select.push(sum(
        "CASE WHEN error IS NULL AND status < 400 THEN 0 ELSE 1 END",
    ));
    for c in [
        "prompt_tokens",
        "cached_tokens",
        "cache_write_tokens",
        "completion_tokens",
        "reasoning_tokens",
        "cost_micros",
        "saved_micros",
        "extra_micros",
        "hedges",
        "retries",
    ] {
        select.push(sum(c));
    }
    select.push(sum(
        "CASE WHEN cache IN ('miss', 'semantic_verify') THEN 0 ELSE 1 END",
    ));
    select.push(sum("CASE WHEN cache = 'semantic_verify' THEN 1 ELSE 0 END"));
    select.push(sum(
        "CASE WHEN cache = 'semantic_verify' THEN cost_micros ELSE 0 END",
    ));
    select.push(sum(
        "CASE WHEN cache IN ('exact', 'semantic') THEN 0 ELSE saved_micros END",
    ));
    select.push(sum("CASE WHEN cost_micros IS NULL THEN 1 ELSE 0 END"));
    select.push(sum("CASE WHEN cache = 'semantic' THEN 1 ELSE 0 END"));
    select.push(sum(
        "CASE WHEN cache = 'semantic' THEN saved_micros ELSE 0 END",
    ));
    let mut b = QueryBuilder::<DB>::new(format!("SELECT {} FROM {TABLE}", select.join(", ")));
    push_filter(&mut b, q);
    if !keys.is_empty() {
        let list = keys.join(", ");
        b.push(format!(" GROUP BY {list} ORDER BY {list}"));
    }
    let rows = b.build().fetch_all(pool).await?;
    let n = keys.len();
    let mut out = rows
        .iter()
        .map(|row| {
            let u = |i: usize| -> Result<u64, sqlx::Error> {
                narrow(row.try_get::<i64, usize>(n + i)?, n + i)
            };
            Ok(UsageRow {
                keys: (0..n)
                    .map(|i| row.try_get::<Option<String>, usize>(i))
                    .collect::<Result<_, _>>()?,
                requests: u(0)?,
                errors: u(1)?,
                prompt_tokens: u(2)?,
                cached_tokens: u(3)?,
                cache_write_tokens: u(4)?,
                completion_tokens: u(5)?,
                reasoning_tokens: u(6)?,
                cost_micros: u(7)?,
                saved_micros: row.try_get::<i64, usize>(n + 8)?,
                extra_micros: u(9)?,
                hedges: u(10)?,
                retries: u(11)?,
                cache_hits: u(12)?,
                verifications: u(13)?,
                verification_micros: u(14)?,
                prompt_cache_saved_micros: row.try_get::<i64, usize>(n + 15)?,
                unpriced_calls: u(16)?,
                semantic_hits: u(17)?,
                semantic_saved_micros: row.try_get::<i64, usize>(n + 18)?,
                native: Vec::new(),
            })
        })
        .collect::<Result<Vec<UsageRow>, sqlx::Error>>()?;
    native(pool, q, &keys, &mut out).await?;
    Ok(out)
}

/// Adds to each of `rows` (grouped by `keys`) what its answers priced in another currency
/// cost in that currency, by currency.
async fn native<DB>(
    pool: &Pool<DB>,
    q: &UsageQuery,
    keys: &[&str],
    rows: &mut [UsageRow],
) -> Result<(), LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB> + for<'r> Decode<'r, DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
    Option<String>: for<'r> Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let mut by: Vec<&str> = keys.to_vec();
    by.push("currency");
    let list = by.join(", ");
    let mut b = QueryBuilder::<DB>::new(format!(
        "SELECT {list}, CAST(COALESCE(SUM(native_micros), 0) AS BIGINT) FROM {TABLE}"
    ));
    push_filter(&mut b, q);
    b.push(format!(
        " AND currency IS NOT NULL GROUP BY {list} ORDER BY {list}"
    ));
    let n = keys.len();
    for row in b.build().fetch_all(pool).await? {
        let at: Vec<Option<String>> = (0..n)
            .map(|i| row.try_get::<Option<String>, usize>(i))
            .collect::<Result<_, _>>()?;
        let currency = row.try_get::<Option<String>, usize>(n)?.unwrap_or_default();
        let micros: u64 = narrow(row.try_get::<i64, usize>(n + 1)?, n + 1)?;
        if let Some(r) = rows.iter_mut().find(|r| r.keys == at) {
            r.native.push((currency, micros));
        }
    }
    Ok(())
}

/// Up to `limit` entries matching `q`'s tenant and range, oldest first.
pub(crate) async fn entries<DB>(
    pool: &Pool<DB>,
    q: &UsageQuery,
    limit: u32,
) -> Result<Vec<Entry>, LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB> + for<'r> Decode<'r, DB>,
    String: for<'q> Encode<'q, DB> + Type<DB> + for<'r> Decode<'r, DB>,
    Option<String>: for<'r> Decode<'r, DB> + Type<DB>,
    Option<i64>: for<'r> Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let mut b = QueryBuilder::<DB>::new(format!("SELECT {} FROM {TABLE}", column_list()));
    push_filter(&mut b, q);
    // Through a `CAST`: SQLite prepares a bare `LIMIT ?` again at each run (see the batch
    // store's claim).
    b.push(" ORDER BY seq LIMIT CAST(")
        .push_bind(i64::from(limit))
        .push(" AS BIGINT)");
    let rows = b.build().fetch_all(pool).await?;
    rows.iter()
        .map(|r| {
            let s = |i: usize| {
                r.try_get::<Option<String>, usize>(i)
                    .map(|v| v.map(Arc::from))
            };
            let i = |i: usize| r.try_get::<i64, usize>(i);
            let u = |k: usize| -> Result<u64, sqlx::Error> { narrow(i(k)?, k) };
            Ok(Entry {
                request_id: r.try_get::<String, usize>(0)?.into(),
                at_ms: i(1)?,
                tenant: s(3)?,
                api_key: s(4)?,
                model_group: s(5)?,
                upstream: s(6)?,
                model: s(7)?,
                status: narrow(i(8)?, 8)?,
                error: s(9)?,
                stream: i(10)? != 0,
                tokens: Tokens {
                    prompt: u(11)?,
                    cached: u(12)?,
                    cache_write: u(13)?,
                    completion: u(14)?,
                    reasoning: u(15)?,
                },
                cost_micros: r
                    .try_get::<Option<i64>, usize>(16)?
                    .map(|v| narrow(v, 16))
                    .transpose()?,
                saved_micros: i(17)?,
                extra_micros: u(18)?,
                cache: CacheOutcome::parse(&r.try_get::<String, usize>(19)?),
                ttfb_ms: r
                    .try_get::<Option<i64>, usize>(20)?
                    .map(|v| narrow(v, 20))
                    .transpose()?,
                total_ms: u(21)?,
                attempts: narrow(i(22)?, 22)?,
                hedges: narrow(i(23)?, 23)?,
                retries: narrow(i(24)?, 24)?,
                batch_item: s(25)?,
                currency: s(26)?,
                native_micros: r
                    .try_get::<Option<i64>, usize>(27)?
                    .map(|v| narrow(v, 27))
                    .transpose()?,
                hold: s(28)?,
                settled_in_ledger: false,
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(LedgerError::from)
}

/// What the rows naming each of `holds` used: tokens (input plus output) and cost, summed by
/// hold (rows of unknown cost count 0 for money, as the ledger's totals do).
pub(crate) async fn spent_under<DB>(
    pool: &Pool<DB>,
    holds: &[String],
) -> Result<Vec<(String, u64, u64)>, LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    i64: for<'r> Decode<'r, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB> + for<'r> Decode<'r, DB>,
    usize: ColumnIndex<DB::Row>,
{
    if holds.is_empty() {
        return Ok(Vec::new());
    }
    let mut b = QueryBuilder::<DB>::new(format!(
        "SELECT hold, CAST(COALESCE(SUM(prompt_tokens + completion_tokens), 0) AS BIGINT), \
         CAST(COALESCE(SUM(cost_micros), 0) AS BIGINT) FROM {TABLE} WHERE hold IN ("
    ));
    let mut list = b.separated(", ");
    for h in holds {
        list.push_bind(h.clone());
    }
    b.push(") GROUP BY hold");
    let rows = b.build().fetch_all(pool).await?;
    rows.iter()
        .map(|r| {
            let tokens: i64 = r.try_get(1)?;
            let cost: i64 = r.try_get(2)?;
            Ok((r.try_get(0)?, narrow(tokens, 1)?, narrow(cost, 2)?))
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(LedgerError::from)
}
