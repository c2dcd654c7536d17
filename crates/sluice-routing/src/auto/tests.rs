//! The router's rule on its own: each branch, and a seeded bandit of six task classes over
//! three candidates (the mix the gateway's acceptance test replays end to end).

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::*;

fn price(usd_per_output: f64) -> Option<TokenPrice> {
    Some(TokenPrice {
        input: usd_per_output / 4.0,
        cached_input: usd_per_output / 40.0,
        output: usd_per_output,
    })
}

fn offer(p: f64) -> Offer {
    Offer {
        price: price(p),
        ttfb_p95: None,
        available: true,
    }
}

fn router(candidates: &[&str], policy: RouterPolicy) -> Router {
    Router::new(
        "auto",
        candidates.iter().map(|c| Arc::from(*c)).collect(),
        policy,
    )
}

const ASK: Ask = Ask {
    prompt_tokens: 400,
    max_tokens: None,
    time_left: None,
};

fn no_explore() -> RouterPolicy {
    RouterPolicy {
        explore: 0.0,
        ..RouterPolicy::default()
    }
}

fn teach(r: &mut Router, task: &str, candidate: usize, good: u32, bad: u32) {
    let t = r.task_key(Some(task));
    for _ in 0..good {
        r.observe(&t, candidate, 1.0, None);
    }
    for _ in 0..bad {
        r.observe(&t, candidate, 0.0, None);
    }
}

#[test]
fn knowing_nothing_it_takes_the_dearest_and_once_taught_the_cheapest_that_clears() {
    let mut r = router(&["cheap", "mid", "strong"], no_explore());
    let offers = [offer(1.0), offer(3.0), offer(10.0)];
    let c = r.choose(Some("qa"), &ASK, &offers);
    assert_eq!((c.winner(), c.why), (2, Why::NoneClears));
    teach(&mut r, "qa", 1, 40, 1);
    teach(&mut r, "qa", 0, 10, 30);
    let c = r.choose(Some("qa"), &ASK, &offers);
    assert_eq!((c.winner(), c.why), (1, Why::Cheapest), "{c:?}");
    // The order to fall back in: the winner, then what clears by cost, then by belief.
    assert_eq!(c.order, vec![1, 2, 0]);
    assert_eq!(&*c.task, "qa");
    assert!(c.estimates[1].lower >= 0.8 && c.estimates[0].lower < 0.8);
    let cost = c.estimates[1].cost.unwrap_or(0.0);
    assert!((cost - (400.0 * 0.75 + 256.0 * 3.0)).abs() < 1e-6, "{cost}");
    // Another task knows nothing of it.
    assert_eq!(r.choose(Some("code"), &ASK, &offers).winner(), 2);
}

#[test]
fn a_candidate_that_cannot_meet_the_deadline_or_take_the_call_is_passed_over() {
    let mut r = router(&["cheap", "strong"], no_explore());
    teach(&mut r, "qa", 0, 50, 0);
    teach(&mut r, "qa", 1, 50, 0);
    let slow = Offer {
        ttfb_p95: Some(Duration::from_secs(3)),
        ..offer(1.0)
    };
    let ask = Ask {
        time_left: Some(Duration::from_secs(2)),
        ..ASK
    };
    let c = r.choose(Some("qa"), &ask, &[slow, offer(10.0)]);
    assert_eq!(c.winner(), 1);
    assert!(!c.estimates[0].fits);
    // Without a deadline, the slow one is fine.
    assert_eq!(r.choose(Some("qa"), &ASK, &[slow, offer(10.0)]).winner(), 0);
    let down = Offer {
        available: false,
        ..offer(1.0)
    };
    assert_eq!(r.choose(Some("qa"), &ASK, &[down, offer(10.0)]).winner(), 1);
    // None fits: the available ones are still chosen among.
    let ask = Ask {
        time_left: Some(Duration::from_millis(1)),
        ..ASK
    };
    let slow10 = Offer {
        ttfb_p95: Some(Duration::from_secs(3)),
        ..offer(10.0)
    };
    assert_eq!(r.choose(Some("qa"), &ask, &[slow, slow10]).winner(), 0);
}

#[test]
fn a_latency_weight_prices_the_first_byte() {
    let policy = RouterPolicy {
        latency_weight: 0.001,
        ..no_explore()
    };
    let mut r = router(&["slow", "fast"], policy);
    teach(&mut r, "qa", 0, 50, 0);
    teach(&mut r, "qa", 1, 50, 0);
    let tiny = |p: f64, ms: u64| Offer {
        price: Some(TokenPrice {
            input: 0.0,
            cached_input: 0.0,
            output: p,
        }),
        ttfb_p95: Some(Duration::from_millis(ms)),
        available: true,
    };
    // 256 tokens at 1e-6 and 2e-6: the slower is 0.000256 cheaper but 2 s slower (0.002).
    let c = r.choose(Some("qa"), &ASK, &[tiny(1e-6, 2_500), tiny(2e-6, 500)]);
    assert_eq!(c.winner(), 1, "{c:?}");
}

#[test]
fn exploration_stays_within_its_budget() {
    let policy = RouterPolicy {
        explore: 0.05,
        ..RouterPolicy::default()
    };
    let mut r = router(&["cheap", "strong"], policy);
    let offers = [offer(1.0), offer(10.0)];
    let n = 4_000;
    let explored = (0..n)
        .filter(|_| r.choose(Some("qa"), &ASK, &offers).why == Why::Explore)
        .count();
    // Knowing nothing, draws disagree often: the budget (with the burst a new task starts
    // with) is what bounds it.
    assert!(explored as f64 <= 0.05 * n as f64 + 20.0, "{explored}");
    assert!(explored as f64 >= 0.04 * n as f64, "{explored}");
    let arms = r.task("qa").unwrap_or(&[]);
    assert_eq!(arms.iter().map(|a| a.picks).sum::<u64>(), n as u64);
}

#[test]
fn an_explicit_score_replaces_the_implicit_one() {
    let mut r = router(&["a"], no_explore());
    let t = r.task_key(Some("qa"));
    r.observe(&t, 0, 0.0, None);
    r.observe(&t, 0, 1.0, Some(0.0));
    let b = r.task("qa").unwrap_or(&[])[0].belief;
    assert_eq!((b.alpha, b.beta), (2.0, 1.0));
}

#[test]
fn tasks_beyond_the_limit_share_one_belief_and_state_round_trips() {
    let policy = RouterPolicy {
        max_tasks: 2,
        ..no_explore()
    };
    let mut r = router(&["a", "b"], policy.clone());
    for t in ["x", "y", "z", "w"] {
        r.choose(Some(t), &ASK, &[offer(1.0), offer(2.0)]);
    }
    let names: Vec<String> = r.tasks().iter().map(|(t, _)| t.to_string()).collect();
    assert_eq!(names, ["other", "x", "y"]);
    assert_eq!(&*r.task_key(None), "other");
    teach(&mut r, "x", 1, 5, 1);
    let t = r.task_key(Some("x"));
    r.observe_usage(&t, 1, 300, 0.5);
    let stored = r.export();
    let mut back = router(&["b", "c"], policy);
    assert_eq!(back.restore(&stored), 3, "a is no longer a candidate");
    assert_eq!(
        back.task("x").unwrap_or(&[])[0].belief,
        r.task("x").unwrap_or(&[])[1].belief
    );
    assert_eq!(back.task("x").unwrap_or(&[])[0].output.get(), Some(300.0));
}

/// The acceptance mix: six classes, three candidates (cheap 1x, mid 3x, strong 10x); cheap
/// is good enough for three classes, mid for two more, only strong for the last.
pub(crate) struct Mix {
    /// quality[class][candidate]
    quality: Vec<Vec<f64>>,
}

impl Mix {
    fn standard() -> Self {
        let q = |c: f64, m: f64, s: f64| vec![c, m, s];
        Self {
            quality: vec![
                q(0.93, 0.95, 0.97),
                q(0.91, 0.94, 0.97),
                q(0.90, 0.93, 0.96),
                q(0.55, 0.92, 0.96),
                q(0.45, 0.90, 0.95),
                q(0.30, 0.60, 0.94),
            ],
        }
    }
    fn oracle(&self, class: usize, floor: f64) -> usize {
        (0..3)
            .find(|&i| self.quality[class][i] >= floor)
            .unwrap_or(2)
    }
}

struct Tally {
    cost: f64,
    good: f64,
    n: f64,
}

fn run(mix: &Mix, r: &mut Router, rng: &mut StdRng, n: usize, tally: bool) -> Tally {
    let prices = [1.0, 3.0, 10.0];
    let offers: Vec<Offer> = prices
        .iter()
        .take(r.candidates.len())
        .map(|p| offer(*p))
        .collect();
    let mut t = Tally {
        cost: 0.0,
        good: 0.0,
        n: 0.0,
    };
    for i in 0..n {
        let class = i % 6;
        let name = format!("class-{class}");
        let c = r.choose(Some(&name), &ASK, &offers);
        let w = c.winner();
        let good = rng.random_bool(mix.quality[class][w]);
        r.observe(&c.task, w, if good { 1.0 } else { 0.0 }, None);
        if tally {
            t.cost += prices[w];
            t.good += f64::from(u8::from(good));
            t.n += 1.0;
        }
    }
    t
}

#[test]
fn after_warm_up_it_costs_within_fifteen_percent_of_the_oracle_at_its_quality() {
    let mix = Mix::standard();
    let floor = RouterPolicy::default().floor;
    let oracle_cost: f64 = (0..6)
        .map(|c| [1.0, 3.0, 10.0][mix.oracle(c, floor)])
        .sum::<f64>()
        / 6.0;
    let oracle_good: f64 = (0..6)
        .map(|c| mix.quality[c][mix.oracle(c, floor)])
        .sum::<f64>()
        / 6.0;
    for seed in [1, 2, 3, 4, 5] {
        let mut r = router(&["cheap", "mid", "strong"], RouterPolicy::default());
        let mut rng = StdRng::seed_from_u64(seed);
        run(&mix, &mut r, &mut rng, 2_000, false);
        let t = run(&mix, &mut r, &mut rng, 6_000, true);
        let (cost, good) = (t.cost / t.n, t.good / t.n);
        eprintln!(
            "seed {seed}: cost {:.3}x the oracle's, good answers {:.3}x",
            cost / oracle_cost,
            good / oracle_good
        );
        assert!(
            cost <= 1.15 * oracle_cost,
            "seed {seed}: cost {cost:.3} vs oracle {oracle_cost:.3}"
        );
        assert!(
            good >= 0.98 * oracle_good,
            "seed {seed}: good {good:.3} vs oracle {oracle_good:.3}"
        );
    }
}

/// The share of the last `window` picks of `class` that went to `candidate`.
fn share_of(
    r: &mut Router,
    mix: &Mix,
    rng: &mut StdRng,
    n: usize,
    class: usize,
    who: usize,
) -> (f64, f64) {
    // Returns (share over the run, share over its last fifth).
    let prices = [1.0, 3.0, 10.0, 0.5];
    let offers: Vec<Offer> = (0..r.candidates.len()).map(|i| offer(prices[i])).collect();
    let (mut all, mut late, mut seen, mut seen_late) = (0.0, 0.0, 0.0, 0.0);
    for i in 0..n {
        let c = i % 6;
        let name = format!("class-{c}");
        let choice = r.choose(Some(&name), &ASK, &offers);
        let w = choice.winner();
        let good = rng.random_bool(mix.quality[c][w]);
        r.observe(&choice.task, w, if good { 1.0 } else { 0.0 }, None);
        if c == class {
            seen += 1.0;
            all += f64::from(u8::from(w == who));
            if i >= n * 4 / 5 {
                seen_late += 1.0;
                late += f64::from(u8::from(w == who));
            }
        }
    }
    (all / seen, late / seen_late)
}

#[test]
fn a_cheaper_candidate_added_later_carries_its_classes_within_a_thousand_requests() {
    let mix = Mix::standard();
    let mut r = router(&["cheap", "mid", "strong"], RouterPolicy::default());
    let mut rng = StdRng::seed_from_u64(5);
    run(&mix, &mut r, &mut rng, 3_000, false);
    let stored = r.export();
    // A fourth candidate at half cheap's price, as good as mid everywhere but the last class.
    let mut grown = router(
        &["cheap", "mid", "strong", "cheaper"],
        RouterPolicy::default(),
    );
    grown.restore(&stored);
    let quality = mix
        .quality
        .iter()
        .map(|q| vec![q[0], q[1], q[2], q[1].min(0.93)])
        .collect();
    let mix4 = Mix { quality };
    let (_, late) = share_of(&mut grown, &mix4, &mut rng, 1_000, 4, 3);
    assert!(late >= 0.8, "class 4 late share on the newcomer {late:.2}");
    let (_, late0) = share_of(&mut grown, &mix4, &mut rng, 1_000, 0, 3);
    assert!(
        late0 >= 0.8,
        "class 0 late share on the newcomer {late0:.2}"
    );
}

#[test]
fn a_candidate_that_fell_below_the_floor_is_left_within_a_thousand_requests() {
    let mut mix = Mix::standard();
    let mut r = router(&["cheap", "mid", "strong"], RouterPolicy::default());
    let mut rng = StdRng::seed_from_u64(9);
    run(&mix, &mut r, &mut rng, 3_000, false);
    let (before, _) = share_of(&mut r, &mix, &mut rng, 600, 0, 0);
    assert!(before >= 0.9, "cheap carried class 0: {before:.2}");
    mix.quality[0][0] = 0.5;
    let (_, late) = share_of(&mut r, &mix, &mut rng, 1_000, 0, 0);
    // Only exploration (a share of 0.15) still sends it some.
    assert!(late <= 0.2, "cheap still takes {late:.2} of class 0");
}
