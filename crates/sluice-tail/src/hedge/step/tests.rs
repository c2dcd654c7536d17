use std::cell::Cell;

use tokio::sync::oneshot::error::TryRecvError;

use super::*;
use crate::HedgePolicy;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A world of fixed windows and one target, which may refuse.
struct World {
    observed: Option<BodyQuantile>,
    target: [Option<Duration>; 2],
    primary: [Option<Duration>; 2],
    could_go: bool,
    claims: Cell<u32>,
    claimable: bool,
}

impl Default for World {
    fn default() -> Self {
        Self {
            observed: Some(BodyQuantile {
                value: ms(500),
                stalls: 0,
            }),
            target: [None, None],
            primary: [None, None],
            could_go: true,
            claims: Cell::new(0),
            claimable: true,
        }
    }
}

impl Look for World {
    type Target = &'static str;

    fn observed(&self) -> Option<BodyQuantile> {
        self.observed
    }

    fn ttfb(&self, window: Window, q: f64) -> Option<Duration> {
        let i = usize::from(q != DEADLINE_TTFB_QUANTILE);
        match window {
            Window::Target => self.target[i],
            Window::Primary => self.primary[i],
        }
    }

    fn could_go(&self, _: Instant) -> bool {
        self.could_go
    }

    fn claim(&self, _: Instant) -> Option<&'static str> {
        self.claims.set(self.claims.get() + 1);
        self.claimable.then_some("other")
    }
}

/// Hedging with `tokens` in its budget at the start (burst of that many, no floor unless
/// asked).
fn hedging(tokens: f64, floor: f64) -> Hedging {
    Hedging::new(HedgePolicy {
        burst: tokens.max(1.0),
        min_per_second: floor,
        ..HedgePolicy::default()
    })
}

fn drain(h: &Hedging, t: Instant) {
    while h.budget.try_spend(t) {}
}

#[test]
fn a_thin_window_looks_again_later_and_a_full_one_sets_the_time() {
    let h = hedging(10.0, 0.0);
    let t = Instant::now();
    let thin = World {
        observed: None,
        ..World::default()
    };
    let mut hedge = Hedge::new(&h, t, None);
    assert!(
        matches!(hedge.step(&h, t, &thin), Next::Wait(at) if at == t + super::super::THIN_WINDOW_RECHECK)
    );
    assert_eq!(hedge.rule(), None);
    let w = World::default();
    assert!(matches!(hedge.step(&h, t + ms(250), &w), Next::Wait(at) if at == t + ms(500)));
    assert_eq!(hedge.rule(), Some(DelayRule::Quantile));
}

#[test]
fn when_due_with_a_token_the_hedge_goes_where_the_look_claims() {
    let h = hedging(10.0, 0.0);
    let t = Instant::now();
    let w = World::default();
    let mut hedge = Hedge::new(&h, t, None);
    assert!(matches!(hedge.step(&h, t, &w), Next::Wait(_)));
    let before = h.budget.balance();
    assert!(matches!(
        hedge.step(&h, t + ms(500), &w),
        Next::Send("other")
    ));
    assert_eq!(w.claims.get(), 1);
    assert!(
        (before - h.budget.balance() - 1.0).abs() < 1e-9,
        "one token spent"
    );
    assert!(matches!(
        hedge.step(&h, t + ms(600), &w),
        Next::GiveUp { denied: false }
    ));
}

#[test]
fn nowhere_to_go_when_due_gives_up_without_spending() {
    let h = hedging(10.0, 0.0);
    let t = Instant::now();
    let w = World {
        could_go: false,
        ..World::default()
    };
    let mut hedge = Hedge::new(&h, t, None);
    let before = h.budget.balance();
    assert!(matches!(
        hedge.step(&h, t + ms(500), &w),
        Next::GiveUp { denied: true }
    ));
    assert_eq!(h.budget.balance(), before);
    assert_eq!(w.claims.get(), 0);
}

#[test]
fn a_token_spent_for_a_target_that_is_gone_goes_back() {
    let h = hedging(10.0, 0.0);
    let t = Instant::now();
    let w = World {
        claimable: false,
        ..World::default()
    };
    let mut hedge = Hedge::new(&h, t, None);
    let before = h.budget.balance();
    assert!(matches!(
        hedge.step(&h, t + ms(500), &w),
        Next::GiveUp { denied: true }
    ));
    assert_eq!(h.budget.balance(), before, "refunded");
}

#[test]
fn an_empty_budget_puts_the_request_in_line_and_a_token_sends_it() {
    let h = hedging(1.0, 0.0);
    let t = Instant::now();
    drain(&h, t);
    let w = World::default();
    let mut hedge = Hedge::new(&h, t, None);
    let Next::Line(mut place) = hedge.step(&h, t + ms(500), &w) else {
        panic!("in line");
    };
    assert!(matches!(place.try_recv(), Err(TryRecvError::Empty)));
    assert_eq!(hedge.floor(&h, t + ms(500)), None, "no floor");
    // Other requests deposit until a whole token comes; it goes to the waiter.
    for _ in 0..20 {
        h.budget.deposit(t + ms(600));
    }
    assert!(place.try_recv().is_ok());
    assert!(matches!(
        hedge.served(&h, t + ms(600), true, &w),
        Next::Send("other")
    ));
}

#[test]
fn a_place_whose_time_is_over_gives_up() {
    let h = hedging(1.0, 0.0);
    let t = Instant::now();
    drain(&h, t);
    let w = World {
        target: [Some(ms(300)), Some(ms(200))],
        ..World::default()
    };
    // Due 2 s: leaves by 2 s - 300 ms, useful until 2 s - 200 ms.
    let mut hedge = Hedge::new(&h, t, Some(t + ms(2_000)));
    assert!(matches!(hedge.step(&h, t, &w), Next::Wait(at) if at == t + ms(500)));
    let Next::Line(mut place) = hedge.step(&h, t + ms(500), &w) else {
        panic!("in line");
    };
    for _ in 0..20 {
        h.budget.deposit(t + ms(1_900));
    }
    assert!(
        matches!(place.try_recv(), Err(TryRecvError::Closed)),
        "past 1.8 s"
    );
    assert!(matches!(
        hedge.served(&h, t + ms(1_900), false, &w),
        Next::GiveUp { denied: true }
    ));
}

#[test]
fn the_deadline_sets_the_time_from_the_targets_window_else_the_primarys() {
    let h = hedging(10.0, 0.0);
    let t = Instant::now();
    let slow = World {
        observed: Some(BodyQuantile {
            value: ms(1_800),
            stalls: 0,
        }),
        target: [Some(ms(1_300)), Some(ms(1_000))],
        primary: [Some(ms(900)), Some(ms(700))],
        ..World::default()
    };
    let mut hedge = Hedge::new(&h, t, Some(t + ms(2_000)));
    assert!(matches!(hedge.step(&h, t, &slow), Next::Wait(at) if at == t + ms(700)));
    assert_eq!(hedge.rule(), Some(DelayRule::Deadline));
    let thin_target = World {
        target: [None, None],
        ..slow
    };
    let mut hedge = Hedge::new(&h, t, Some(t + ms(2_000)));
    assert!(
        matches!(hedge.step(&h, t, &thin_target), Next::Wait(at) if at == t + ms(1_100)),
        "the primary's P60 stands in"
    );
    // Without a deadline no window but the primary's quantile is asked.
    let mut hedge = Hedge::new(&h, t, None);
    assert!(matches!(hedge.step(&h, t, &thin_target), Next::Wait(at) if at == t + ms(1_800)));
}

#[test]
fn an_answer_while_in_line_gives_back_a_token_handed_over_just_then() {
    // A burst of two, so that the refund is not capped.
    let h = hedging(2.0, 0.0);
    let t = Instant::now();
    drain(&h, t);
    let w = World::default();
    let mut hedge = Hedge::new(&h, t, None);
    let Next::Line(place) = hedge.step(&h, t + ms(500), &w) else {
        panic!("in line");
    };
    for _ in 0..20 {
        h.budget.deposit(t + ms(600));
    }
    let before = h.budget.balance();
    hedge.answered_in_line(&h, place);
    assert!(
        (h.budget.balance() - before - 1.0).abs() < 1e-9,
        "the token went back"
    );
}

#[test]
fn in_line_the_floor_earns_the_next_token_by_time() {
    let h = hedging(1.0, 1.0);
    let t = Instant::now();
    drain(&h, t);
    let w = World::default();
    let mut hedge = Hedge::new(&h, t, None);
    let Next::Line(mut place) = hedge.step(&h, t + ms(500), &w) else {
        panic!("in line");
    };
    let at = hedge.floor(&h, t + ms(500)).unwrap();
    hedge.tick(&h, at);
    assert!(
        place.try_recv().is_ok(),
        "the floor's token went to the line"
    );
}
