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

fn lane(count: u64, ok: u64, over_slo: u64, ttfb_p99_ms: u64, p50_ms: u64) -> LaneSummary {
    LaneSummary {
        count,
        ok,
        errors_by_status: BTreeMap::new(),
        stream_failures: BTreeMap::new(),
        cache_hits: 0,
        uncached_total: sluice_tail::Percentiles::default(),
        ttfb: sluice_tail::Percentiles {
            p99: Duration::from_millis(ttfb_p99_ms),
            ..Default::default()
        },
        total: sluice_tail::Percentiles {
            p50: Duration::from_millis(p50_ms),
            ..Default::default()
        },
        over_slo,
    }
}

#[test]
fn a_column_says_what_it_gains_and_why_it_loses_against_the_proxy() {
    use super::against::{Facts, against};
    let proxy_lanes = BTreeMap::from([
        ("interactive".to_owned(), lane(1523, 1523, 86, 8319, 4387)),
        ("batch".to_owned(), lane(600, 596, 40, 16_400, 4792)),
    ]);
    let ours = BTreeMap::from([
        ("interactive".to_owned(), lane(1523, 1523, 74, 4641, 4387)),
        ("batch".to_owned(), lane(600, 600, 71, 16_400, 5636)),
    ]);
    let none = BTreeMap::new();
    let queued = BTreeMap::from([("batch".to_owned(), 107), ("interactive".to_owned(), 0)]);
    let base = Facts {
        name: "proxy",
        lanes: &proxy_lanes,
        deepest_queue: &none,
        upstream_429s: 184,
        cost_micros: 898_700,
        extra_micros: 0,
    };
    let col = Facts {
        name: "sluice",
        lanes: &ours,
        deepest_queue: &queued,
        upstream_429s: 0,
        cost_micros: 916_900,
        extra_micros: 14_700,
    };
    let said = against(&base, &col);
    assert_eq!(
        said,
        vec![
            "sluice against proxy, interactive: better on first byte P99 4641 ms against 8319 ms, \
             over SLO 74 against 86."
                .to_owned(),
            "sluice against proxy, batch: better on failed 0 against 4; worse on over SLO 71 \
             against 40, total P50 5636 ms against 4792 ms, because its calls waited in sluice's \
             queue (up to 107 at once) behind the interactive lane's and under the upstream's \
             rate limit, where the proxy sent them at once and met 184 429s (0 through sluice) \
             that its clients waited out and sent again."
                .to_owned(),
            "sluice against proxy, the bill: $0.9169 against $0.8987 (+2.0%), of which hedges \
             and retries $0.0147."
                .to_owned(),
        ]
    );
    // A loss the figures cannot explain says so.
    let unexplained = Facts {
        deepest_queue: &none,
        ..col
    };
    assert!(against(&base, &unexplained)[1].contains("the figures of this run do not show why"));
}

#[test]
fn times_within_three_percent_are_the_same() {
    use super::against::{Facts, against};
    let a = BTreeMap::from([("interactive".to_owned(), lane(10, 10, 1, 1000, 4395))]);
    let b = BTreeMap::from([("interactive".to_owned(), lane(10, 10, 1, 1029, 4411))]);
    let none = BTreeMap::new();
    let f = |lanes| Facts {
        name: "x",
        lanes,
        deepest_queue: &none,
        upstream_429s: 0,
        cost_micros: 1,
        extra_micros: 0,
    };
    assert_eq!(
        against(&f(&a), &f(&b))[0],
        "x against proxy, interactive: the same on every line."
    );
}
