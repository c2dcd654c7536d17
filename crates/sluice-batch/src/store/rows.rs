//! Stored rows read back into records, for either database.

use sqlx::Row;

use super::records::{StoredBatch, StoredFile};
use crate::input::Endpoint;
use crate::state::Status;

pub(super) fn stored_file<R: Row>(r: &R) -> Result<StoredFile, sqlx::Error>
where
    usize: sqlx::ColumnIndex<R>,
    String: for<'a> sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    i64: for<'a> sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
{
    Ok(StoredFile {
        id: r.try_get(0)?,
        tenant: r.try_get(1)?,
        filename: r.try_get(2)?,
        purpose: r.try_get(3)?,
        bytes: r.try_get::<i64, _>(4)?.max(0) as u64,
        created_ms: r.try_get(5)?,
        expires_ms: r.try_get(6)?,
    })
}

pub(super) fn stored_batch<R: Row>(r: &R) -> Result<StoredBatch, sqlx::Error>
where
    usize: sqlx::ColumnIndex<R>,
    String: for<'a> sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    Option<String>: for<'a> sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    i64: for<'a> sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    Option<i64>: for<'a> sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
{
    let corrupt = |what: String| sqlx::Error::Decode(what.into());
    let endpoint: String = r.try_get(4)?;
    let ended_status: Option<String> = r.try_get(11)?;
    let ended_ms: Option<i64> = r.try_get(12)?;
    let ended = match (ended_status, ended_ms) {
        (Some(s), Some(at)) => Some((
            Status::parse(&s).ok_or_else(|| corrupt(format!("batch status `{s}`")))?,
            at,
        )),
        _ => None,
    };
    Ok(StoredBatch {
        id: r.try_get(0)?,
        tenant: r.try_get(1)?,
        api_key: r.try_get(2)?,
        key_sha256: r.try_get(3)?,
        endpoint: Endpoint::parse(&endpoint)
            .ok_or_else(|| corrupt(format!("batch endpoint `{endpoint}`")))?,
        input_file_id: r.try_get(5)?,
        created_ms: r.try_get(6)?,
        expires_ms: r.try_get(7)?,
        metadata: r.try_get(8)?,
        total: r.try_get::<i64, _>(9)?.max(0) as u64,
        cancel_ms: r.try_get(10)?,
        ended,
    })
}
