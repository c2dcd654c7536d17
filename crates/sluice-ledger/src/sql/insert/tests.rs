//! The ledger SQL's texts and batching, without a database.

use super::*;

#[test]
fn insert_texts_number_their_placeholders_and_drop_null_rows() {
    let pg = InsertSql::new::<sqlx::Postgres>().unwrap();
    let (one, rows) = pg.for_rows(1);
    assert_eq!(rows, 1);
    assert!(one.starts_with(
        "INSERT INTO sluice_ledger (request_id, at_ms, day, tenant, api_key, model_group,"
    ));
    assert!(one.ends_with("SELECT * FROM (VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29)) AS v WHERE column1 IS NOT NULL ON CONFLICT DO NOTHING"));
    let (four, rows) = pg.for_rows(3);
    assert_eq!(rows, 4);
    assert_eq!(four.matches('$').count(), 116);
    assert!(four.ends_with("$115, $116)) AS v WHERE column1 IS NOT NULL ON CONFLICT DO NOTHING"));
    let (all, rows) = pg.for_rows(ROWS_PER_INSERT);
    assert_eq!(rows, ROWS_PER_INSERT);
    assert!(all.ends_with(&format!(
        "${})) AS v WHERE column1 IS NOT NULL ON CONFLICT DO NOTHING",
        ROWS_PER_INSERT * COLUMNS.len()
    )));

    let lite = InsertSql::new::<sqlx::Sqlite>().unwrap();
    let (two, rows) = lite.for_rows(2);
    assert_eq!(rows, 2);
    assert_eq!(two.matches('?').count(), 58);
    assert!(two.ends_with(
        "?), (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)) AS v WHERE column1 IS NOT NULL ON CONFLICT DO NOTHING"
    ));
    // Out of range asks are held to the range.
    assert_eq!(lite.for_rows(0), lite.for_rows(1));
    assert_eq!(
        lite.for_rows(ROWS_PER_INSERT + 1),
        lite.for_rows(ROWS_PER_INSERT)
    );
}

#[test]
fn a_batch_takes_the_smallest_statement_that_holds_it() {
    let lite = InsertSql::new::<sqlx::Sqlite>().unwrap();
    let sizes: Vec<usize> = [1, 2, 3, 5, 40, 64, 65, 129, 256]
        .iter()
        .map(|&n| lite.for_rows(n).1)
        .collect();
    assert_eq!(sizes, [1, 2, 4, 8, 64, 64, 128, 256, 256]);
    // Nine statements in all, whatever the batch sizes.
    let texts: std::collections::HashSet<&str> =
        (1..=ROWS_PER_INSERT).map(|n| lite.for_rows(n).0).collect();
    assert_eq!(texts.len(), STATEMENT_ROWS.len());
    for n in 1..=ROWS_PER_INSERT {
        let (text, rows) = lite.for_rows(n);
        assert!(
            rows >= n && rows < 2 * n,
            "{n} rows in a statement of {rows}"
        );
        assert_eq!(text.matches('?').count(), rows * COLUMNS.len());
    }
}

#[test]
fn a_day_is_written_once_for_its_rows() {
    let mut days = Days::default();
    let noon = 1_796_040_000_000; // 2026-11-30T12:00:00Z
    let first = days.of(noon);
    assert_eq!(&*first, "2026-11-30");
    assert!(Arc::ptr_eq(&first, &days.of(noon + 3_600_000)));
    let next = days.of(noon + 43_200_000);
    assert_eq!(&*next, "2026-12-01");
    assert_eq!(&*days.of(noon - 43_200_001), "2026-11-29");
    for c in [
        CacheOutcome::Miss,
        CacheOutcome::Provider,
        CacheOutcome::Exact,
    ] {
        assert_eq!(&*cache_text(c), c.as_str());
    }
}

#[test]
fn text_columns_are_columns() {
    let text: Vec<&str> = COLUMNS
        .iter()
        .filter(|(_, ty)| is_text(ty))
        .map(|(name, _)| *name)
        .collect();
    assert_eq!(
        text,
        [
            "request_id",
            "day",
            "tenant",
            "api_key",
            "model_group",
            "upstream",
            "model",
            "error",
            "cache",
            "batch_item",
            "currency",
            "hold"
        ]
    );
    assert_eq!(
        COLUMNS[0],
        ("request_id", "TEXT NOT NULL"),
        "the padding filter reads column1"
    );
}
