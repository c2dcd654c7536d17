//! Tests of `demo`.

use super::report::{plain_words, thousands};
use super::*;

#[test]
fn numbers_read_like_prose() {
    assert_eq!(thousands(3000), "3,000");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1_234_567), "1,234,567");
    let mut errors = BTreeMap::new();
    errors.insert(429, 96);
    let l = LaneSummary {
        count: 3000,
        ok: 2904,
        errors_by_status: errors,
        stream_failures: BTreeMap::new(),
        cache_hits: 0,
        uncached_total: sluice_tail::Percentiles::default(),
        ttfb: sluice_tail::Percentiles::default(),
        total: sluice_tail::Percentiles {
            max: Duration::from_millis(38_700),
            ..Default::default()
        },
        over_slo: 12,
    };
    let w = plain_words("interactive", &l, Some(Duration::from_secs(10)));
    assert_eq!(
        w,
        "12 of 3,000 interactive requests waited more than 10.0 s; the slowest answer took 38.7 s. 96 failed: 96 were refused by a rate limit (429)."
    );
}
