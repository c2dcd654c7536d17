//! The SQL of tenants' balances in PostgreSQL: the tables, their first fill from the ledger,
//! a reservation and a settlement (one atomic statement each), the spend the ledger's writer
//! moves with its rows, and the release of holds past their time.

use sqlx::{PgConnection, PgPool, Postgres, Transaction};

use crate::LedgerError;

/// One row per tenant: settled spend (in all, today's tokens, this month's spend) and what
/// holds in flight keep.
pub(crate) const BALANCES: &str = "sluice_balances";

/// One row per hold in flight, so that settling or expiring it releases exactly what it held.
pub(crate) const HOLDS: &str = "sluice_holds";

/// The balance row and hold tables.
pub(crate) fn tables() -> [String; 2] {
    [
        format!(
            "CREATE TABLE IF NOT EXISTS {BALANCES} (tenant TEXT PRIMARY KEY, \
             spent BIGINT NOT NULL, reserved BIGINT NOT NULL, reserved_tokens BIGINT NOT NULL, \
             day BIGINT NOT NULL, day_tokens BIGINT NOT NULL, \
             month BIGINT NOT NULL, month_spent BIGINT NOT NULL)"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {HOLDS} (id BIGINT PRIMARY KEY, tenant TEXT NOT NULL, \
             cost BIGINT NOT NULL, tokens BIGINT NOT NULL, expires_ms BIGINT NOT NULL)"
        ),
    ]
}

/// Where the calendar stands: the UTC day (days since 1970-01-01) and its start, the UTC
/// month (`year * 12 + month`) and its start, in milliseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Today {
    pub day: i64,
    pub day_start_ms: i64,
    pub month: i64,
    pub month_start_ms: i64,
}

impl Today {
    pub(crate) fn at(wall: std::time::SystemTime) -> Self {
        use sluice_core::calendar;
        let (day, _) = calendar::day_of(wall);
        let ((y, m), _) = calendar::month_of(wall);
        Self {
            day,
            day_start_ms: day * 86_400_000,
            month: Self::month_key(y, m),
            month_start_ms: calendar::days_from_civil(y, m, 1) * 86_400_000,
        }
    }

    /// The month of a ledger row at `at_ms`, as [`Today::month`] counts it.
    pub(crate) fn month_of_ms(at_ms: i64) -> i64 {
        let (y, m, _) = sluice_core::calendar::civil_from_days(at_ms.div_euclid(86_400_000));
        Self::month_key(y, m)
    }

    fn month_key(y: i64, m: u32) -> i64 {
        y * 12 + i64::from(m)
    }
}

/// Creates the tables in `tx` (under the schema lock); when the balances are new, fills them
/// from the ledger's rows, so they start at what the ledger says each tenant spent.
pub(crate) async fn create(
    tx: &mut Transaction<'_, Postgres>,
    today: Today,
) -> Result<(), LedgerError> {
    let existed: Option<i64> = sqlx::query_scalar(
        "SELECT 1::BIGINT FROM information_schema.tables \
         WHERE table_name = $1 AND table_schema = current_schema()",
    )
    .bind(BALANCES)
    .fetch_optional(&mut **tx)
    .await?;
    for statement in tables().into_iter().chain(super::instances::tables()) {
        // Audited: built from this module's and `instances`' constants only.
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&mut **tx)
            .await?;
    }
    if existed.is_some() {
        return Ok(());
    }
    let fill = format!(
        "INSERT INTO {BALANCES} SELECT tenant, COALESCE(SUM(cost_micros), 0)::BIGINT, 0, 0, \
         $1, COALESCE(SUM(CASE WHEN at_ms >= $2 THEN prompt_tokens + completion_tokens \
         ELSE 0 END), 0)::BIGINT, $3, COALESCE(SUM(CASE WHEN at_ms >= $4 THEN cost_micros \
         ELSE 0 END), 0)::BIGINT FROM {} WHERE tenant IS NOT NULL GROUP BY tenant",
        crate::sql::TABLE
    );
    // Audited: built from this module's constants only.
    sqlx::query(sqlx::AssertSqlSafe(fill))
        .bind(today.day)
        .bind(today.day_start_ms)
        .bind(today.month)
        .bind(today.month_start_ms)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// A tenant's caps: `-1` where it has none.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Caps {
    pub credits: i64,
    pub spend_per_month: i64,
    pub tokens_per_day: i64,
}

/// Holds `cost` and `tokens` as hold `id` for `tenant` if its caps take them: one statement,
/// checked and moved under the row's lock. Whether it was held (false: refused, or the
/// tenant has no row yet).
pub(crate) async fn reserve(
    pool: &PgPool,
    (tenant, id, instance): (&str, i64, &str),
    (cost, tokens): (i64, i64),
    caps: Caps,
    today: Today,
    expires_ms: i64,
) -> Result<bool, LedgerError> {
    let text = format!(
        "WITH b AS (UPDATE {BALANCES} SET reserved = reserved + $3, \
         reserved_tokens = reserved_tokens + $4 WHERE tenant = $1 \
         AND ($5 < 0 OR spent + reserved + $3 <= $5) \
         AND ($6 < 0 OR (CASE WHEN month = $8 THEN month_spent ELSE 0 END) + reserved + $3 <= $6) \
         AND ($7 < 0 OR (CASE WHEN day = $9 THEN day_tokens ELSE 0 END) + reserved_tokens + $4 <= $7) \
         RETURNING tenant) \
         INSERT INTO {HOLDS} (id, tenant, cost, tokens, expires_ms, instance) \
         SELECT $2, tenant, $3, $4, $10, $11 FROM b"
    );
    // Audited: built from this module's constants only.
    let done = sqlx::query(sqlx::AssertSqlSafe(text))
        .bind(tenant)
        .bind(id)
        .bind(cost)
        .bind(tokens)
        .bind(caps.credits)
        .bind(caps.spend_per_month)
        .bind(caps.tokens_per_day)
        .bind(today.month)
        .bind(today.day)
        .bind(expires_ms)
        .bind(instance)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Makes `tenant`'s row, at `spent` in all, `month_spent` this month and `day_tokens` today,
/// unless it has one. Whether it was made.
pub(crate) async fn open(
    pool: &PgPool,
    tenant: &str,
    today: Today,
    (spent, month_spent, day_tokens): (i64, i64, i64),
) -> Result<bool, LedgerError> {
    let text = format!(
        "INSERT INTO {BALANCES} VALUES ($1, $2, 0, 0, $3, $4, $5, $6) ON CONFLICT DO NOTHING"
    );
    // Audited: built from this module's constants only.
    let done = sqlx::query(sqlx::AssertSqlSafe(text))
        .bind(tenant)
        .bind(spent)
        .bind(today.day)
        .bind(day_tokens)
        .bind(today.month)
        .bind(month_spent)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// A tenant's row: spent, reserved, reserved tokens, tokens today, spend this month.
pub(crate) type Row = (i64, i64, i64, i64, i64);

/// `tenant`'s row as of `today` (a past day's tokens and month's spend read as 0).
pub(crate) async fn read(
    pool: &PgPool,
    tenant: &str,
    today: Today,
) -> Result<Option<Row>, LedgerError> {
    let text = format!(
        "SELECT spent, reserved, reserved_tokens, \
         CASE WHEN day = $2 THEN day_tokens ELSE 0 END, \
         CASE WHEN month = $3 THEN month_spent ELSE 0 END FROM {BALANCES} WHERE tenant = $1"
    );
    // Audited: built from this module's constants only.
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(text))
        .bind(tenant)
        .bind(today.day)
        .bind(today.month)
        .fetch_optional(pool)
        .await?)
}

/// Spend to add to a balance: `cost` in all, `tokens` on `day`, `month_cost` in `month`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Spend {
    pub cost: i64,
    pub tokens: i64,
    pub day: i64,
    pub month: i64,
    pub month_cost: i64,
}

impl Spend {
    /// `cost` and `tokens` spent `today`.
    pub(crate) fn on(today: Today, cost: i64, tokens: i64) -> Self {
        Self {
            cost,
            tokens,
            day: today.day,
            month: today.month,
            month_cost: cost,
        }
    }
}

/// The `SET` that adds spend `$2` in all, tokens `$3` on day `$4`, and `$6` in month `$5` to
/// row `b` (a day or month older than the row's adds to the total only).
const ADD_SPEND: &str = "spent = b.spent + $2, \
     day_tokens = CASE WHEN b.day = $4 THEN b.day_tokens + $3 WHEN b.day < $4 THEN $3 \
     ELSE b.day_tokens END, day = GREATEST(b.day, $4), \
     month_spent = CASE WHEN b.month = $5 THEN b.month_spent + $6 WHEN b.month < $5 THEN $6 \
     ELSE b.month_spent END, month = GREATEST(b.month, $5)";

/// Settles hold `id` at `cost` and `tokens`: releases what it held and adds what was spent,
/// in one statement. Whether the hold was there (when it was not, the spend is not added:
/// see [`spend`]).
pub(crate) async fn settle(
    conn: &mut PgConnection,
    id: i64,
    spent: Spend,
) -> Result<bool, LedgerError> {
    let text = format!(
        "WITH h AS (DELETE FROM {HOLDS} WHERE id = $1 RETURNING tenant, cost, tokens) \
         UPDATE {BALANCES} b SET reserved = b.reserved - h.cost, \
         reserved_tokens = b.reserved_tokens - h.tokens, {ADD_SPEND} \
         FROM h WHERE b.tenant = h.tenant"
    );
    // Audited: built from this module's constants only.
    let done = sqlx::query(sqlx::AssertSqlSafe(text))
        .bind(id)
        .bind(spent.cost)
        .bind(spent.tokens)
        .bind(spent.day)
        .bind(spent.month)
        .bind(spent.month_cost)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Adds `spent` to `tenant`'s row, making it if absent.
pub(crate) async fn spend(
    conn: &mut PgConnection,
    tenant: &str,
    spent: Spend,
) -> Result<(), LedgerError> {
    let text = format!(
        "INSERT INTO {BALANCES} AS b VALUES ($1, $2, 0, 0, $4, $3, $5, $6) \
         ON CONFLICT (tenant) DO UPDATE SET {ADD_SPEND}"
    );
    // Audited: built from this module's constants only.
    sqlx::query(sqlx::AssertSqlSafe(text))
        .bind(tenant)
        .bind(spent.cost)
        .bind(spent.tokens)
        .bind(spent.day)
        .bind(spent.month)
        .bind(spent.month_cost)
        .execute(conn)
        .await?;
    Ok(())
}

/// Releases, unspent, every hold whose time ran out before `now_ms` (its call's settlement
/// never came: its instance died, or could not reach the database for longer than the
/// hold's time). How many.
pub(crate) async fn expire(pool: &PgPool, now_ms: i64) -> Result<u64, LedgerError> {
    let text = format!(
        "WITH h AS (DELETE FROM {HOLDS} WHERE expires_ms < $1 RETURNING tenant, cost, tokens), \
         s AS (SELECT tenant, SUM(cost)::BIGINT AS cost, SUM(tokens)::BIGINT AS tokens \
         FROM h GROUP BY tenant) \
         UPDATE {BALANCES} b SET reserved = b.reserved - s.cost, \
         reserved_tokens = b.reserved_tokens - s.tokens FROM s WHERE b.tenant = s.tenant"
    );
    // Audited: built from this module's constants only.
    let done = sqlx::query(sqlx::AssertSqlSafe(text))
        .bind(now_ms)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}
