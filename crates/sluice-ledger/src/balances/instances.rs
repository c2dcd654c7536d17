//! A dead instance's holds in PostgreSQL. Each book beats in [`INSTANCES`] at its heartbeat;
//! the holds of an instance silent for [`SILENT_BEATS`] beats are released unspent by the
//! others. Nothing is charged blind, and nothing spent is lost: a call whose row reached the
//! ledger settled its hold with it (the writer moves the balance in the same transaction),
//! so a hold still there when its instance died is one whose call never finished here; a
//! row that waits in the dead instance's journal adds its spend when it is replayed, hold or
//! no hold. `hold_ttl` stays the last resort, for holds of a sluice that never beat.
//!
//! Who may judge: right after the database was away nobody could beat, so a book judges
//! others silent only once it has itself beaten [`SILENT_BEATS`] + 1 times in a row
//! ([`Watch`]), every live instance having had its chance.

use sqlx::PgPool;

use super::statements::{BALANCES, HOLDS};
use crate::LedgerError;

/// One row per instance: when it last beat.
pub(crate) const INSTANCES: &str = "sluice_instances";

/// Beats missed before an instance is taken as dead.
pub(crate) const SILENT_BEATS: u32 = 3;

/// The table, and the holds' column naming their instance.
pub(crate) fn tables() -> [String; 2] {
    [
        format!(
            "CREATE TABLE IF NOT EXISTS {INSTANCES} (instance TEXT PRIMARY KEY, \
             beat_ms BIGINT NOT NULL)"
        ),
        format!("ALTER TABLE {HOLDS} ADD COLUMN IF NOT EXISTS instance TEXT"),
    ]
}

/// Whether this book may judge others silent: it counts its own beats in a row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Watch {
    in_a_row: u32,
}

impl Watch {
    /// This book's beat went through (`ok`) or not; whether it may release the holds of the
    /// instances silent now.
    pub(crate) fn beat(&mut self, ok: bool) -> bool {
        self.in_a_row = if ok {
            self.in_a_row.saturating_add(1)
        } else {
            0
        };
        self.in_a_row > SILENT_BEATS
    }
}

/// The last beat of an instance alive at `now_ms`, at a heartbeat of `beat_ms`: those that
/// beat before it are dead.
pub(crate) fn silent_before(now_ms: i64, beat_ms: i64) -> i64 {
    now_ms - i64::from(SILENT_BEATS) * beat_ms
}

/// Notes that `instance` is alive at `now_ms`.
pub(crate) async fn beat(pool: &PgPool, instance: &str, now_ms: i64) -> Result<(), LedgerError> {
    let text = format!(
        "INSERT INTO {INSTANCES} (instance, beat_ms) VALUES ($1, $2) \
         ON CONFLICT (instance) DO UPDATE SET beat_ms = EXCLUDED.beat_ms"
    );
    // Audited: built from this module's constants only.
    sqlx::query(sqlx::AssertSqlSafe(text))
        .bind(instance)
        .bind(now_ms)
        .execute(pool)
        .await?;
    Ok(())
}

/// Forgets the instances whose last beat was before `before_ms` and releases their holds,
/// unspent, in one statement; how many holds.
pub(crate) async fn release_silent(pool: &PgPool, before_ms: i64) -> Result<i64, LedgerError> {
    let text = format!(
        "WITH dead AS (DELETE FROM {INSTANCES} WHERE beat_ms < $1 RETURNING instance), \
         h AS (DELETE FROM {HOLDS} WHERE instance IN (SELECT instance FROM dead) \
         RETURNING tenant, cost, tokens), \
         s AS (SELECT tenant, SUM(cost)::BIGINT AS cost, SUM(tokens)::BIGINT AS tokens, \
         COUNT(*) AS n FROM h GROUP BY tenant), \
         u AS (UPDATE {BALANCES} b SET reserved = b.reserved - s.cost, \
         reserved_tokens = b.reserved_tokens - s.tokens FROM s WHERE b.tenant = s.tenant) \
         SELECT COALESCE(SUM(n), 0)::BIGINT FROM s"
    );
    // Audited: built from this module's constants only.
    let released: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(text))
        .bind(before_ms)
        .fetch_one(pool)
        .await?;
    Ok(released)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_book_judges_only_after_beating_long_enough_in_a_row() {
        let mut w = Watch::default();
        assert!(!w.beat(true) && !w.beat(true) && !w.beat(true));
        assert!(w.beat(true), "a fourth beat in a row");
        assert!(!w.beat(false), "the database went away");
        assert!(!w.beat(true) && !w.beat(true) && !w.beat(true));
        assert!(w.beat(true));
        assert_eq!(silent_before(100_000, 5_000), 85_000);
    }
}
