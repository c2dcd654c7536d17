#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

/// Windows of one length: the rates compare as the counts do.
const SAME: Windows = Windows {
    baseline: Duration::from_secs(300),
    recent: Duration::from_secs(300),
};

/// A deterministic spread in [0, 1): call `i`'s draw.
fn u(i: usize, salt: u64) -> f64 {
    let mut x = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ salt;
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 29;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// `n` calls: `batch` of them in the batch lane, `limited` met a 429 and waited `wait`
/// seconds in the queue for it, the upstream's first byte `ttfb` seconds (times a spread), a
/// second of stream.
struct Shape {
    n: usize,
    batch: f64,
    limited: f64,
    wait: f64,
    ttfb: f64,
    upstream: &'static str,
    salt: u64,
}

fn calls(s: &Shape) -> Vec<Summary> {
    (0..s.n)
        .map(|i| {
            let lane = if u(i, s.salt ^ 1) < s.batch {
                "batch"
            } else {
                "interactive"
            };
            let limited = u(i, s.salt ^ 2) < s.limited;
            let queue = 0.01
                + if limited {
                    s.wait * (0.5 + u(i, s.salt ^ 3))
                } else {
                    0.0
                };
            let up = s.ttfb * (0.5 + 2.0 * u(i, s.salt ^ 4).powi(3));
            // Half the rate-limited calls met their 429 after dispatch: a failed attempt and
            // a pause before the retry that answered.
            let retry_wait = if limited && u(i, s.salt ^ 5) < 0.5 {
                s.wait * (0.5 + u(i, s.salt ^ 6))
            } else {
                0.0
            };
            Summary {
                lane: lane.into(),
                upstream: s.upstream.into(),
                status: 200,
                queue: secs(queue),
                upstream_ttfb: secs(retry_wait + up),
                attempt_ttfb: secs(up),
                attempt_own: secs(up),
                ttfb: secs(queue + retry_wait + up),
                total: secs(queue + retry_wait + up + 1.0),
                rate_limited: limited,
                hedged: false,
                retried: false,
                cache_hit: false,
            }
        })
        .collect()
}

fn calm(salt: u64) -> Shape {
    Shape {
        n: 2_000,
        batch: 0.12,
        limited: 0.001,
        wait: 2.0,
        ttfb: 1.5,
        upstream: "east",
        salt,
    }
}

#[test]
fn the_seeds_incident_is_rate_limit_contention_not_a_slower_llm() {
    let baseline = calls(&calm(1));
    let incident = calls(&Shape {
        batch: 0.31,
        limited: 0.047,
        wait: 12.0,
        ..calm(2)
    });
    let d = explain(&baseline, &incident, SAME);
    contention_not_slower(&d);
    let batch = d.changes.iter().find(|c| c.what == "batch share").unwrap();
    assert!((0.10..0.14).contains(&batch.before), "{batch:?}");
    assert!((0.28..0.34).contains(&batch.after), "{batch:?}");
    assert!(
        d.summary.contains("batch share 11.2% -> 31.6%"),
        "{}",
        d.summary
    );
    assert!(
        d.summary.contains("rate-limited share 0.1% -> 4."),
        "{}",
        d.summary
    );
    assert!(d.summary.contains("P99 interactive"), "{}", d.summary);
    assert!(
        !d.changes
            .iter()
            .any(|c| c.what.starts_with("upstream east")),
        "the upstream did not change: {:?}",
        d.changes
    );
}

#[test]
fn an_upstream_brownout_is_the_upstream_named() {
    let baseline = calls(&calm(3));
    let brownout = calls(&Shape {
        ttfb: 3.5,
        ..calm(4)
    });
    let d = explain(&baseline, &brownout, SAME);
    assert_eq!(d.verdict, Verdict::UpstreamSlower, "{}", d.summary);
    assert!(
        d.summary.contains("the upstream got slower (east)"),
        "{}",
        d.summary
    );
    assert!(!d.summary.contains("429"), "{}", d.summary);
}

/// `calls`, each with `queue` seconds more in sluice's queue.
fn queued(mut calls: Vec<Summary>, queue: f64) -> Vec<Summary> {
    for c in &mut calls {
        c.queue += secs(queue);
        c.ttfb += secs(queue);
        c.total += secs(queue);
    }
    calls
}

/// An upstream six times slower, and sluice's queue grown behind it: the verdict is the
/// upstream's, and it names the queue too (every factor its figures show).
#[test]
fn a_six_fold_slower_upstream_is_named_even_when_sluice_queued_behind_it() {
    let baseline = calls(&calm(41));
    let slowdown = queued(
        calls(&Shape {
            ttfb: 9.0,
            ..calm(42)
        }),
        6.0,
    );
    let d = explain(&baseline, &slowdown, SAME);
    assert_eq!(d.verdict, Verdict::UpstreamSlower, "{}", d.summary);
    assert_eq!(
        d.factors,
        vec![Factor::UpstreamSlower, Factor::Queueing],
        "{}",
        d.summary
    );
    assert!(
        d.summary.contains("the upstream got slower (east), 6.")
            && d.summary.contains("times, and sluice queued behind it"),
        "{}",
        d.summary
    );
    assert!(
        d.summary.contains("queue of the slowest 5%"),
        "{}",
        d.summary
    );
    // A queue grown with an upstream barely slower is sluice's own, the upstream named too.
    let mild = queued(
        calls(&Shape {
            ttfb: 2.1,
            ..calm(43)
        }),
        20.0,
    );
    let d = explain(&baseline, &mild, SAME);
    assert_eq!(d.verdict, Verdict::Queueing, "{}", d.summary);
    assert_eq!(d.factors, vec![Factor::Queueing, Factor::UpstreamSlower]);
    assert!(
        d.summary
            .starts_with("sluice is queueing, and the upstream is slower too (east)"),
        "{}",
        d.summary
    );
}

/// Calls that ran out waiting for a first byte that never came: no first-byte figure is
/// shown for them (no "0.00 s"), and their wait counts as the upstream's.
#[test]
fn calls_without_a_first_byte_show_none_and_their_wait_is_the_upstreams() {
    let baseline = calls(&calm(44));
    let stuck: Vec<Summary> = calls(&calm(45))
        .into_iter()
        .map(|mut c| {
            c.status = 504;
            c.attempt_ttfb = Duration::ZERO;
            c.attempt_own = secs(30.0);
            c.upstream_ttfb = Duration::ZERO;
            c.ttfb = secs(30.0);
            c.total = secs(30.0);
            c
        })
        .collect();
    let d = explain(&baseline, &stuck, SAME);
    assert_eq!(d.recent.attempt_ttfb_p99, None);
    assert_eq!(d.recent.unanswered, 2_000);
    assert!(d.recent.slow_attempt >= 30.0, "{:?}", d.recent);
    assert!(!d.summary.contains(" 0.00 s"), "{}", d.summary);
    assert!(
        d.summary.contains("-> none (each from its own start)")
            || !d.summary.contains("first byte at P99"),
        "{}",
        d.summary
    );
    assert!(
        d.factors.contains(&Factor::UpstreamSlower),
        "{:?}",
        d.factors
    );
    assert!(d.factors.contains(&Factor::Errors), "{:?}", d.factors);
}

#[test]
fn a_quiet_period_says_nothing_is_wrong() {
    let d = explain(&calls(&calm(5)), &calls(&calm(6)), SAME);
    assert_eq!(d.verdict, Verdict::Quiet, "{}: {:?}", d.summary, d.changes);
    assert!(d.summary.starts_with("nothing is wrong"), "{}", d.summary);
    assert!(d.changes.is_empty(), "{:?}", d.changes);
}

/// Traffic gone: 102 calls in the baseline, none since. Said as it is, never "nothing is
/// wrong"; a handful of calls is too few to judge either.
#[test]
fn a_window_without_calls_says_no_traffic() {
    let mut before = calm(31);
    before.n = 102;
    let baseline = calls(&before);
    let windows = Windows {
        baseline: Duration::from_secs(1_800),
        recent: Duration::from_secs(300),
    };
    let d = explain(&baseline, &[], windows);
    assert_eq!(d.verdict, Verdict::NoTraffic, "{}", d.summary);
    assert!(
        d.summary.starts_with(
            "no traffic: 0 calls in the last 5 min against 102 in the baseline's 30 min"
        ),
        "{}",
        d.summary
    );
    let few: Vec<Summary> = calls(&calm(32)).into_iter().take(7).collect();
    let d = explain(&baseline, &few, windows);
    assert_eq!(d.verdict, Verdict::NoTraffic, "{}", d.summary);
    assert!(
        d.summary.starts_with("too few calls to judge: 7 calls"),
        "{}",
        d.summary
    );
    assert!(!d.summary.contains("nothing is wrong"), "{}", d.summary);
}

/// A fall to a tenth of the baseline's rate, the calls that came as before: the verdict says
/// traffic fell, not that nothing is wrong.
#[test]
fn a_fall_in_traffic_is_named_even_when_the_calls_look_as_before() {
    let baseline = calls(&calm(33));
    let mut thin = calm(34);
    thin.n = 200;
    let d = explain(&baseline, &calls(&thin), SAME);
    assert_eq!(d.verdict, Verdict::TrafficFell, "{}", d.summary);
    assert!(
        d.summary.contains("calls in 5 min 2000 -> 200"),
        "{}",
        d.summary
    );
    // At the same rate it stays quiet.
    let d = explain(&baseline, &calls(&calm(35)), SAME);
    assert_eq!(d.verdict, Verdict::Quiet, "{}", d.summary);
}

#[test]
fn queueing_without_a_rate_limit_is_sluices() {
    let baseline = calls(&calm(7));
    let mut queued = calls(&calm(8));
    for (i, c) in queued.iter_mut().enumerate() {
        if u(i, 99) < 0.1 {
            c.queue = secs(8.0);
            c.ttfb = c.queue + c.upstream_ttfb;
            assert_eq!(c.upstream_ttfb, c.attempt_ttfb);
            c.total = c.ttfb + secs(1.0);
        }
    }
    let d = explain(&baseline, &queued, SAME);
    assert_eq!(d.verdict, Verdict::Queueing, "{}", d.summary);
    assert!(d.summary.starts_with("sluice is queueing"), "{}", d.summary);
}

#[test]
fn failures_without_a_longer_tail_are_errors() {
    let baseline = calls(&calm(9));
    let mut failing = calls(&calm(10));
    for (i, c) in failing.iter_mut().enumerate() {
        if u(i, 7) < 0.05 {
            c.status = 502;
        }
    }
    let d = explain(&baseline, &failing, SAME);
    assert_eq!(d.verdict, Verdict::Errors, "{}", d.summary);
    assert!(d.summary.contains("error rate 0.0% -> 5."), "{}", d.summary);
}

#[test]
fn empty_windows_have_no_baseline() {
    let d = explain(&[], &[], SAME);
    assert_eq!(d.verdict, Verdict::NoBaseline);
    assert_eq!(d.recent.calls, 0);
}

/// A fresh gateway: calls in the recent window, none before. No verdict against zero.
#[test]
fn a_thin_baseline_is_said_to_be_none_and_gives_no_verdict() {
    let mut slow = calm(11);
    slow.n = 173;
    let recent = calls(&slow);
    let baseline: Vec<Summary> = calls(&calm(12)).into_iter().take(99).collect();
    for before in [Vec::new(), baseline] {
        let d = explain(&before, &recent, SAME);
        assert_eq!(d.verdict, Verdict::NoBaseline, "{}", d.summary);
        assert!(d.changes.is_empty());
        assert!(
            d.summary.starts_with(&format!(
                "no baseline yet: {} calls in the baseline window, fewer than the 100",
                before.len()
            )),
            "{}",
            d.summary
        );
        assert!(
            d.summary.contains("173 calls in the recent window"),
            "{}",
            d.summary
        );
        assert!(!d.summary.contains("got slower"), "{}", d.summary);
        assert!(d.next.contains("--baseline"), "{}", d.next);
    }
}

/// Every verdict ends with what to do, naming settings or metrics that exist.
#[test]
fn every_verdict_says_what_to_do() {
    let baseline = calls(&calm(1));
    let incident = calls(&Shape {
        batch: 0.68,
        limited: 0.2,
        wait: 25.0,
        ..calm(2)
    });
    let d = explain(&baseline, &incident, SAME);
    assert_eq!(d.verdict, Verdict::RateLimitContention, "{}", d.summary);
    assert!(d.summary.ends_with(&format!("What to do: {}", d.next)));
    for words in ["[lanes.batch]", "rpm", "limit", "sluice_admission_requests"] {
        assert!(d.next.contains(words), "{words}: {}", d.next);
    }
    let quiet = explain(&calls(&calm(5)), &calls(&calm(6)), SAME);
    assert!(
        quiet.summary.ends_with("What to do: nothing"),
        "{}",
        quiet.summary
    );
}

/// The flood the seed describes, as a gateway saw it: batch items take the provider's limit,
/// interactive calls meet 429s after dispatch and wait 20-30 s in pauses and retries, while
/// every attempt that answered did so in 1.0-1.2 s. The verdict is rate-limit contention,
/// and no figure in it says the upstream's first byte grew: the time from dispatch (which
/// holds the pauses) is never called the upstream's.
#[test]
fn a_flood_is_never_said_to_slow_the_upstream_in_the_same_breath() {
    let shape = |n: usize, salt: u64, flood: bool| -> Vec<Summary> {
        (0..n)
            .map(|i| {
                let own = 1.0 + 0.2 * u(i, salt);
                let limited = flood && u(i, salt ^ 1) < 0.3;
                let pause = if limited {
                    20.0 + 10.0 * u(i, salt ^ 2)
                } else {
                    0.0
                };
                let lane = if flood && u(i, salt ^ 3) < 0.6 {
                    "batch"
                } else {
                    "interactive"
                };
                Summary {
                    lane: lane.into(),
                    upstream: "east".into(),
                    status: 200,
                    queue: secs(0.01),
                    upstream_ttfb: secs(pause + own),
                    attempt_ttfb: secs(own),
                    attempt_own: secs(own),
                    ttfb: secs(0.01 + pause + own),
                    total: secs(0.01 + pause + own + 0.5),
                    rate_limited: limited,
                    hedged: false,
                    retried: limited,
                    cache_hit: false,
                }
            })
            .collect()
    };
    let d = explain(&shape(2_000, 21, false), &shape(2_000, 22, true), SAME);
    contention_not_slower(&d);
    let (before, after) = (
        d.baseline.attempt_ttfb_p99.unwrap(),
        d.recent.attempt_ttfb_p99.unwrap(),
    );
    assert!(after < 1.25, "{:?}", d.recent);
    assert!(
        d.summary.contains(&format!(
            "the upstream's attempts answered their first byte at P99 {before:.2} s -> {after:.2} s"
        )),
        "{}",
        d.summary
    );
    assert!(d.recent.slow_waits > 20.0, "{:?}", d.recent);
    assert!(
        d.summary
            .contains("retries and pauses after 429s of the slowest 5% 0.00 s -> 2"),
        "{}",
        d.summary
    );
    // No change said of the upstream's own time: it did not grow.
    assert!(
        !d.changes.iter().any(|c| c.what.contains("own first byte")),
        "{:?}",
        d.changes
    );
    assert!(d.next.contains("/admin/diagnose"), "{}", d.next);
}

/// Whatever the incident, a verdict that says the LLM is not slower never comes with a
/// grown upstream figure, and one that says sluice's queue is unchanged never with a grown
/// queue.
#[test]
fn no_verdict_contradicts_its_own_figures() {
    let baseline = calls(&calm(31));
    let incidents = [
        Shape {
            batch: 0.5,
            limited: 0.2,
            wait: 20.0,
            ..calm(32)
        },
        Shape {
            ttfb: 4.0,
            ..calm(33)
        },
        Shape {
            ttfb: 4.0,
            batch: 0.5,
            limited: 0.2,
            wait: 20.0,
            ..calm(34)
        },
        calm(35),
    ];
    for shape in incidents {
        let d = explain(&baseline, &calls(&shape), SAME);
        let attempt_rose =
            d.recent.attempt_ttfb_p99.unwrap() > d.baseline.attempt_ttfb_p99.unwrap() * 1.25;
        if d.summary.contains("not a slower LLM") {
            assert!(!attempt_rose, "{}", d.summary);
        }
        if d.summary.contains("sluice's queue unchanged") {
            assert!(
                d.recent.slow_queue <= d.baseline.slow_queue * 1.25 + 0.05,
                "{}",
                d.summary
            );
        }
        if d.verdict != Verdict::Quiet {
            assert!(
                d.next.contains("/admin/diagnose"),
                "{:?}: {}",
                d.verdict,
                d.next
            );
        }
    }
}

/// The verdict is rate-limit contention, said to be no slower LLM.
fn contention_not_slower(d: &Diagnosis) {
    assert_eq!(d.verdict, Verdict::RateLimitContention, "{}", d.summary);
    assert!(
        d.summary
            .starts_with("rate-limit contention, not a slower LLM"),
        "{}",
        d.summary
    );
}
