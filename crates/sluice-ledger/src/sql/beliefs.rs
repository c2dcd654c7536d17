//! The SQL of what automatic routers learnt: one row per router, task and candidate, the
//! whole of a router's rows replaced at once.

use sqlx::query_builder::QueryBuilder;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Type};

use super::BELIEFS;
use crate::LedgerError;
use crate::records::StoredBelief;

/// Rows bound per insert (seven values each, far below either database's limit).
const ROWS_PER_INSERT: usize = 500;

/// Replaces everything stored for `router` with `beliefs`, in one transaction.
pub(crate) async fn save_beliefs<DB>(
    pool: &Pool<DB>,
    router: &str,
    beliefs: &[StoredBelief],
) -> Result<(), LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
    f64: for<'q> Encode<'q, DB> + Type<DB>,
    Option<f64>: for<'q> Encode<'q, DB> + Type<DB>,
{
    let mut tx = pool.begin().await?;
    let mut b = QueryBuilder::<DB>::new(format!("DELETE FROM {BELIEFS} WHERE router = "));
    b.push_bind(router.to_string());
    b.build().execute(&mut *tx).await?;
    for chunk in beliefs.chunks(ROWS_PER_INSERT) {
        let mut b = QueryBuilder::<DB>::new(format!(
            "INSERT INTO {BELIEFS} (router, task, grp, alpha, beta, output_tokens, cached_share) "
        ));
        b.push_values(chunk, |mut v, s| {
            v.push_bind(router.to_string())
                .push_bind(s.task.clone())
                .push_bind(s.group.clone())
                .push_bind(s.alpha)
                .push_bind(s.beta)
                .push_bind(s.output_tokens)
                .push_bind(s.cached_share);
        });
        b.build().execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Everything stored for `router`, by task then group.
pub(crate) async fn beliefs<DB>(
    pool: &Pool<DB>,
    router: &str,
) -> Result<Vec<StoredBelief>, LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    String: for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB> + Type<DB>,
    f64: for<'r> Decode<'r, DB> + Type<DB>,
    Option<f64>: for<'r> Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let mut b = QueryBuilder::<DB>::new(format!(
        "SELECT task, grp, alpha, beta, output_tokens, cached_share FROM {BELIEFS} WHERE router = "
    ));
    b.push_bind(router.to_string()).push(" ORDER BY task, grp");
    let rows = b.build().fetch_all(pool).await?;
    rows.iter()
        .map(|r| {
            Ok(StoredBelief {
                task: r.try_get(0usize)?,
                group: r.try_get(1usize)?,
                alpha: r.try_get(2usize)?,
                beta: r.try_get(3usize)?,
                output_tokens: r.try_get(4usize)?,
                cached_share: r.try_get(5usize)?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(LedgerError::from)
}
