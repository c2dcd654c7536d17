//! Tests of `state`.

use super::*;
use crate::pace::{Dimension, PaceSpec, Pacer};

/// A waiter that is only its cost and whether it left.
#[derive(Debug)]
struct W(u64, bool);

impl Waiting for W {
    fn tokens(&self) -> u64 {
        self.0
    }
    fn gone(&self) -> bool {
        self.1
    }
}

fn lanes() -> Vec<LaneSpec> {
    let lane = |name: &str, share, max_queue| LaneSpec {
        name: Arc::from(name),
        share,
        max_queue,
        max_wait: Duration::from_secs(30),
    };
    vec![lane("interactive", 0.8, 2), lane("batch", 0.2, 10)]
}

fn state(limit: usize, now: Instant) -> State<W> {
    State::new(
        limit,
        lanes(),
        Box::new(Pacer::new(PaceSpec::default(), now)),
        now,
    )
}

fn ask(lane: usize, tenant: &str) -> Ask {
    Ask {
        lane,
        tenant: Arc::from(tenant),
        tokens: 0,
        deadline: None,
    }
}

#[test]
fn a_free_slot_is_granted_at_once_and_a_full_queue_refuses() {
    let t = Instant::now();
    let mut st = state(1, t);
    assert!(st.goes_at_once(t, 0));
    st.take(0, t, 0);
    assert!(!st.goes_at_once(t, 0), "the only slot is taken");
    assert!(st.enqueue(&ask(0, "a"), W(0, false), t).is_ok());
    assert!(st.enqueue(&ask(0, "a"), W(0, false), t).is_ok());
    let full = st.enqueue(&ask(0, "a"), W(0, false), t);
    assert!(matches!(full, Err(Rejected::QueueFull { lane: 0, .. })));
}

#[test]
fn a_full_queue_of_callers_who_left_takes_a_newcomer() {
    let t = Instant::now();
    let mut st = state(1, t);
    st.take(0, t, 0);
    for _ in 0..2 {
        assert!(st.enqueue(&ask(0, "a"), W(0, true), t).is_ok());
    }
    assert!(st.enqueue(&ask(0, "a"), W(0, false), t).is_ok());
    assert_eq!(st.waiting(), 1);
}

#[test]
fn a_freed_slot_goes_to_the_next_waiter_passing_over_those_who_left() {
    let t = Instant::now();
    let mut st = state(1, t);
    st.take(0, t, 0);
    st.enqueue(&ask(0, "a"), W(1, true), t).ok();
    st.enqueue(&ask(0, "b"), W(2, false), t).ok();
    assert!(matches!(st.next(t), Next::Idle), "no slot free");
    st.release(0, t, true);
    match st.next(t) {
        Next::Grant {
            lane,
            waiter,
            inflight,
        } => {
            assert_eq!((lane, waiter.0, inflight), (0, 2, 1));
        }
        other => panic!("expected a grant, got {other:?}"),
    }
    assert!(matches!(st.next(t), Next::Idle));
}

#[test]
fn a_pause_holds_the_next_waiter_until_it_ends() {
    let t = Instant::now();
    let until = t + Duration::from_secs(2);
    let mut st = state(2, t);
    assert!(st.pause_until(t, until));
    assert!(
        !st.pause_until(t, t + Duration::from_secs(1)),
        "an earlier end loses"
    );
    assert!(!st.goes_at_once(t, 0));
    st.enqueue(&ask(1, "a"), W(0, false), t).ok();
    assert!(matches!(st.next(t), Next::HeldUntil(at) if at == until));
    assert!(matches!(st.next(until), Next::Grant { lane: 1, .. }));
}

/// A pacer with one unit left, kept for the first lane's calls.
#[derive(Debug)]
struct KeepsLast(Instant);

impl Pace for KeepsLast {
    fn ready_at(&mut self, now: Instant, _: u64) -> Instant {
        now
    }
    fn ready_in_lane(&mut self, now: Instant, _: u64, lane: usize) -> Instant {
        if lane == 0 { now } else { self.0 }
    }
    fn take(&mut self, _: Instant, _: u64) {}
    fn observe(&mut self, _: Instant, _: Dimension, _: u64, _: u64, _: Duration) {}
    fn exhausted(&mut self, _: Instant) {}
    fn state(&mut self, _: Instant) -> (Option<DimensionState>, Option<DimensionState>) {
        (None, None)
    }
}

#[test]
fn a_later_lane_held_by_the_pacer_does_not_hold_the_first() {
    let t = Instant::now();
    let later = t + Duration::from_millis(400);
    let mut st: State<W> = State::new(10, lanes(), Box::new(KeepsLast(later)), t);
    // Interactive is past its share, so the scheduler weighs batch first.
    for _ in 0..8 {
        st.take(0, t, 0);
    }
    st.enqueue(&ask(1, "batch"), W(0, false), t).ok();
    st.enqueue(&ask(0, "user"), W(7, false), t).ok();
    match st.next(t) {
        Next::Grant { lane, waiter, .. } => assert_eq!((lane, waiter.0), (0, 7)),
        other => panic!("the interactive call goes on the kept unit, got {other:?}"),
    }
    assert!(matches!(st.next(t), Next::HeldUntil(at) if at == later));
    // A pause holds every lane.
    st.enqueue(&ask(0, "user"), W(8, false), t).ok();
    assert!(st.pause_until(t, t + Duration::from_secs(1)));
    assert!(matches!(st.next(t), Next::HeldUntil(at) if at == t + Duration::from_secs(1)));
}

#[test]
fn a_hedge_is_admitted_only_when_it_would_be_next_in_line() {
    let t = Instant::now();
    let mut st = state(2, t);
    assert!(st.admits_now(&ask(1, "a"), t));
    st.take(0, t, 0);
    st.take(0, t, 0);
    assert!(!st.admits_now(&ask(1, "a"), t), "no slot free");
    st.release(0, t, true);
    st.enqueue(&ask(1, "b"), W(0, false), t).ok();
    assert!(!st.admits_now(&ask(1, "a"), t), "someone of its lane waits");
}

#[test]
fn come_back_when_the_queue_has_drained_at_its_measured_rate() {
    let t = Instant::now();
    let mut st = state(1, t);
    assert_eq!(st.retry_after(t), Duration::from_secs(1), "no rate yet");
    for _ in 0..10 {
        st.take(0, t, 0);
        st.release(0, t, true);
    }
    // 10 drained in ten seconds: 1/s; 4 waiting and the newcomer: 5 s.
    st.take(0, t, 0);
    for _ in 0..2 {
        st.enqueue(&ask(0, "a"), W(0, false), t).ok();
    }
    for _ in 0..2 {
        st.enqueue(&ask(1, "a"), W(0, false), t).ok();
    }
    assert_eq!(st.retry_after(t), Duration::from_secs(5));
}

#[test]
fn a_wake_is_set_only_when_none_is_due_sooner() {
    let t = Instant::now();
    let mut st = state(1, t);
    let s = Duration::from_secs;
    assert!(st.should_wake(t + s(2), t));
    st.wake_at = Some(t + s(1));
    assert!(!st.should_wake(t + s(2), t), "one is due sooner");
    assert!(st.should_wake(t + s(2), t + s(1)), "that one has run");
    assert!(st.should_wake(t + Duration::from_millis(500), t));
}

#[test]
fn a_slow_start_holds_direct_calls_not_routing_and_ends_at_the_concurrency_limit() {
    use crate::admission::slow_start::{INITIAL, SlowStart};
    let t = Instant::now();
    let mut st = state(INITIAL + 1, t);
    st.slow = SlowStart::new();
    for _ in 0..INITIAL {
        assert!(st.goes_at_once(t, 0));
        st.take(0, t, 0);
    }
    assert!(!st.goes_at_once(t, 0), "the window is full");
    assert!(
        st.admits_now(&ask(0, "a"), t),
        "routing and hedges see the free slot: the window opens with the next answer"
    );
    // One answer while the window held a call back: it grows to the concurrency limit,
    // and the slow start is over.
    st.slow.answered(t, false);
    st.release(0, t, true);
    assert!(st.goes_at_once(t, 0));
    assert!(
        !st.slow.opening(),
        "a window as wide as the limit holds nothing back"
    );
}
