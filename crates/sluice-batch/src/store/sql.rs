//! The jobs' SQL, one text for SQLite and PostgreSQL (`$N` placeholders, which sqlx binds
//! for both; sums cast to BIGINT, which PostgreSQL would otherwise widen to NUMERIC).

/// The tables and indexes, made if absent.
pub(super) const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS sluice_files (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, \
     filename TEXT NOT NULL, purpose TEXT NOT NULL, bytes BIGINT NOT NULL, \
     created_ms BIGINT NOT NULL, expires_ms BIGINT NOT NULL, content TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS sluice_files_tenant ON sluice_files (tenant, created_ms)",
    "CREATE TABLE IF NOT EXISTS sluice_batches (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, \
     api_key TEXT, key_sha256 TEXT, endpoint TEXT NOT NULL, input_file_id TEXT NOT NULL, \
     created_ms BIGINT NOT NULL, expires_ms BIGINT NOT NULL, metadata TEXT, \
     total BIGINT NOT NULL, cancel_ms BIGINT, ended_status TEXT, ended_ms BIGINT)",
    "CREATE INDEX IF NOT EXISTS sluice_batches_tenant ON sluice_batches (tenant, created_ms)",
    "CREATE TABLE IF NOT EXISTS sluice_batch_items (batch_id TEXT NOT NULL, \
     line BIGINT NOT NULL, custom_id TEXT NOT NULL, body TEXT NOT NULL, ord BIGINT NOT NULL, \
     expires_ms BIGINT NOT NULL, \
     prefix BIGINT NOT NULL, state TEXT NOT NULL, owner TEXT, lease_ms BIGINT, \
     epoch BIGINT NOT NULL, tries BIGINT NOT NULL, status_code BIGINT, response TEXT, \
     error_code TEXT, error_message TEXT, request_id TEXT, ended_ms BIGINT, \
     prompt_tokens BIGINT NOT NULL, cached_tokens BIGINT NOT NULL, \
     completion_tokens BIGINT NOT NULL, started_ms BIGINT, PRIMARY KEY (batch_id, line))",
    "CREATE INDEX IF NOT EXISTS sluice_batch_items_claim \
     ON sluice_batch_items (state, ord, batch_id, prefix, line)",
    "CREATE INDEX IF NOT EXISTS sluice_batch_items_ended ON sluice_batch_items (ended_ms)",
];

pub(super) const ADD_FILE: &str = "INSERT INTO sluice_files \
    (id, tenant, filename, purpose, bytes, created_ms, expires_ms, content) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

/// A file's columns, as `stored_file` reads them.
macro_rules! file_columns {
    () => {
        "id, tenant, filename, purpose, bytes, created_ms, expires_ms"
    };
}

pub(super) const FILE: &str = concat!(
    "SELECT ",
    file_columns!(),
    " FROM sluice_files WHERE id = $1 AND tenant = $2"
);

pub(super) const FILE_CONTENT: &str =
    "SELECT content FROM sluice_files WHERE id = $1 AND tenant = $2";

pub(super) const FILES: &str = concat!(
    "SELECT ",
    file_columns!(),
    " FROM sluice_files WHERE tenant = $1 AND ($2 IS NULL OR (created_ms, id) < \
     (SELECT created_ms, id FROM sluice_files WHERE id = $2)) \
     ORDER BY created_ms DESC, id DESC LIMIT CAST($3 AS BIGINT)"
);

pub(super) const DELETE_FILE: &str = "DELETE FROM sluice_files WHERE id = $1 AND tenant = $2";

pub(super) const ADD_BATCH: &str = "INSERT INTO sluice_batches (id, tenant, api_key, \
    key_sha256, endpoint, input_file_id, created_ms, expires_ms, metadata, total) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";

/// Items in one `INSERT` (7 values each: well under SQLite's 32,766 variables).
pub(super) const ITEMS_PER_INSERT: usize = 500;

/// Followed by the rows' values.
pub(super) const ADD_ITEMS: &str = "INSERT INTO sluice_batch_items (batch_id, line, \
    custom_id, body, ord, prefix, expires_ms, state, epoch, tries, prompt_tokens, \
    cached_tokens, completion_tokens) SELECT column1, column2, column3, column4, column5, \
    column6, column7, 'queued', 0, 0, 0, 0, 0 FROM (";

/// A job's columns, as `stored_batch` reads them.
macro_rules! batch_columns {
    () => {
        "id, tenant, api_key, key_sha256, endpoint, input_file_id, created_ms, expires_ms, \
         metadata, total, cancel_ms, ended_status, ended_ms"
    };
}

pub(super) const BATCH: &str = concat!(
    "SELECT ",
    batch_columns!(),
    " FROM sluice_batches WHERE id = $1 AND ($2 IS NULL OR tenant = $2)",
);

pub(super) const BATCHES: &str = concat!(
    "SELECT ",
    batch_columns!(),
    " FROM sluice_batches WHERE tenant = $1 AND ($2 IS NULL OR (created_ms, id) < \
     (SELECT created_ms, id FROM sluice_batches WHERE id = $2)) \
     ORDER BY created_ms DESC, id DESC LIMIT CAST($3 AS BIGINT)",
);

pub(super) const OPEN_BATCHES: &str = concat!(
    "SELECT ",
    batch_columns!(),
    " FROM sluice_batches WHERE ended_status IS NULL ORDER BY created_ms, id",
);

pub(super) const COUNTS: &str = "SELECT state, COUNT(*), \
    CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT), \
    CAST(COALESCE(SUM(cached_tokens), 0) AS BIGINT), \
    CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) \
    FROM sluice_batch_items WHERE batch_id = $1 GROUP BY state";

pub(super) const QUEUED_ITEMS: &str =
    "SELECT COUNT(*) FROM sluice_batch_items WHERE state = 'queued'";

pub(super) const AHEAD: &str = "SELECT COUNT(*) FROM sluice_batch_items WHERE state = 'queued' \
    AND (ord < $1 OR (ord = $1 AND batch_id < $2))";

/// Items ended since `$1`, and of those with a start, how many and their time from it.
pub(super) const ENDED_SINCE: &str = "SELECT COUNT(*), COUNT(started_ms), \
    CAST(COALESCE(SUM(ended_ms - started_ms), 0) AS BIGINT) FROM sluice_batch_items \
    WHERE ended_ms >= $1 AND state IN ('done', 'failed')";

/// Items in flight, their time in flight at `$1` summed, and that of the one sent last.
pub(super) const RUNNING_ITEMS: &str = "SELECT COUNT(*), \
    CAST(COALESCE(SUM($1 - started_ms), 0) AS BIGINT), \
    CAST(COALESCE($1 - MAX(started_ms), 0) AS BIGINT) FROM sluice_batch_items \
    WHERE state = 'running'";

/// `started_ms` came after the first batch store: a table of an earlier sluice gains it
/// (PostgreSQL here; SQLite when `HAS_STARTED` finds it missing).
pub(super) const ADD_STARTED_PG: &str =
    "ALTER TABLE sluice_batch_items ADD COLUMN IF NOT EXISTS started_ms BIGINT";
pub(super) const ADD_STARTED_SQLITE: &str =
    "ALTER TABLE sluice_batch_items ADD COLUMN started_ms BIGINT";
pub(super) const HAS_STARTED_SQLITE: &str =
    "SELECT COUNT(*) FROM pragma_table_info('sluice_batch_items') WHERE name = 'started_ms'";

pub(super) const ASK_CANCEL: &str = "UPDATE sluice_batches SET cancel_ms = $3 \
    WHERE id = $1 AND tenant = $2 AND cancel_ms IS NULL AND ended_status IS NULL";

pub(super) const CANCEL_QUEUED: &str = "UPDATE sluice_batch_items SET state = 'cancelled', \
    ended_ms = $2 WHERE batch_id = $1 AND state = 'queued'";

/// Queued items, and running ones whose claim lapsed (their gateway died): never sent
/// again past the window.
pub(super) const EXPIRE_QUEUED: &str = "UPDATE sluice_batch_items SET state = 'expired', \
    ended_ms = $2, owner = NULL, lease_ms = NULL WHERE batch_id = $1 \
    AND (state = 'queued' OR (state = 'running' AND lease_ms < $2))";

pub(super) const END_BATCH: &str = "UPDATE sluice_batches SET ended_status = $2, ended_ms = $3 \
    WHERE id = $1 AND ended_status IS NULL";

/// `{lock}` is PostgreSQL's `FOR UPDATE SKIP LOCKED`, nothing on SQLite.
///
/// Every `LIMIT` here takes its count through a `CAST`: SQLite reads a bare `LIMIT $n` when
/// it prepares the statement, so that the statement is prepared again each time it is run
/// with its parameters bound afresh (the claim, polled several times a second, cost about
/// 640,000 instructions each time, 2.8 million a second with no batch at all).
pub(super) const CLAIM: &str = "UPDATE sluice_batch_items SET state = 'running', owner = $1, \
    lease_ms = $2, epoch = epoch + 1, tries = tries + 1, started_ms = $3 \
    WHERE (batch_id, line) IN (SELECT batch_id, line FROM sluice_batch_items \
    WHERE (state = 'queued' OR (state = 'running' AND lease_ms < $3)) AND expires_ms > $3 \
    AND batch_id {kind} (SELECT id FROM sluice_batches WHERE endpoint = $5) \
    ORDER BY ord, batch_id, prefix, line LIMIT CAST($4 AS BIGINT) {lock}) \
    RETURNING batch_id, line, custom_id, body, epoch, tries";

pub(super) const RENEW: &str = "UPDATE sluice_batch_items SET lease_ms = $2 \
    WHERE owner = $1 AND state = 'running'";

pub(super) const RELEASE: &str = "UPDATE sluice_batch_items SET state = 'queued', owner = NULL, \
    lease_ms = NULL, tries = tries - 1 \
    WHERE batch_id = $1 AND line = $2 AND epoch = $3 AND state = 'running'";

pub(super) const REQUEUE_RUNNING: &str = "UPDATE sluice_batch_items SET state = 'queued', \
    owner = NULL, lease_ms = NULL WHERE state = 'running'";

pub(super) const END_ITEM: &str = "UPDATE sluice_batch_items SET state = $1, status_code = $2, \
    response = $3, error_code = $4, error_message = $5, request_id = $6, ended_ms = $7, \
    prompt_tokens = $8, cached_tokens = $9, completion_tokens = $10, owner = NULL, \
    lease_ms = NULL \
    WHERE batch_id = $11 AND line = $12 AND epoch = $13 AND state = 'running'";

/// An ended item's columns, as `results` reads them.
macro_rules! result_columns {
    () => {
        "SELECT line, custom_id, state, status_code, response, error_code, error_message, \
         request_id FROM sluice_batch_items WHERE batch_id = $1 "
    };
}

pub(super) const OUTPUT_RESULTS: &str =
    concat!(result_columns!(), "AND state = 'done' ORDER BY line");

pub(super) const ERROR_RESULTS: &str = concat!(
    result_columns!(),
    "AND state IN ('failed', 'cancelled', 'expired') ORDER BY line",
);

pub(super) const SWEEP_FILES: &str = "DELETE FROM sluice_files WHERE created_ms < $1";

pub(super) const SWEEP_ITEMS: &str = "DELETE FROM sluice_batch_items WHERE batch_id IN \
    (SELECT id FROM sluice_batches WHERE ended_ms < $1)";

pub(super) const SWEEP_BATCHES: &str = "DELETE FROM sluice_batches WHERE ended_ms < $1";
