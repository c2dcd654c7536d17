use std::time::Duration;

use tokio::time::{Instant, sleep};

use super::*;

fn lanes() -> Vec<LaneSpec> {
    vec![
        LaneSpec {
            name: Arc::from("interactive"),
            share: 0.8,
            max_queue: 100,
            max_wait: Duration::from_secs(30),
        },
        LaneSpec {
            name: Arc::from("batch"),
            share: 0.2,
            max_queue: 1000,
            max_wait: Duration::from_secs(600),
        },
    ]
}

const I: usize = 0;
const B: usize = 1;

#[tokio::test(start_paused = true)]
async fn under_the_limit_requests_go_straight_through() {
    let a = Admission::new(2, lanes());
    let p1 = a.acquire(I).await.unwrap();
    let p2 = a.acquire(B).await.unwrap();
    assert_eq!((p1.inflight, p2.inflight), (1, 2));
    assert_eq!(a.stats().inflight, 2);
    drop((p1, p2));
    assert_eq!(a.stats().inflight, 0);
}

#[tokio::test(start_paused = true)]
async fn beyond_the_limit_requests_wait_and_interactive_goes_first() {
    let a = Admission::new(5, lanes());
    let held: Vec<Permit> = futures::future::join_all((0..5).map(|_| a.acquire(B)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    // Five batch requests hold every slot. A batch and an interactive request queue, batch first.
    let order = Arc::new(Mutex::new(Vec::new()));
    let spawn = |lane: usize, name: &'static str| {
        let (a, order) = (a.clone(), order.clone());
        tokio::spawn(async move {
            let p = a.acquire(lane).await.unwrap();
            order.lock().push(name);
            sleep(Duration::from_secs(1)).await;
            drop(p);
        })
    };
    let b = spawn(B, "batch");
    tokio::task::yield_now().await;
    let i = spawn(I, "interactive");
    tokio::task::yield_now().await;
    assert_eq!(a.stats().lanes[0].2 + a.stats().lanes[1].2, 2, "both wait");
    // Batch already holds 5 slots (over its share of 1): the freed slot goes to interactive.
    let mut held = held;
    held.pop();
    tokio::task::yield_now().await;
    assert_eq!(*order.lock(), vec!["interactive"]);
    held.pop();
    i.await.unwrap();
    b.await.unwrap();
    assert_eq!(*order.lock(), vec!["interactive", "batch"]);
}

#[tokio::test(start_paused = true)]
async fn a_lane_below_its_share_is_served_before_a_busier_one() {
    let a = Admission::new(10, lanes());
    // Interactive holds all ten slots; both lanes have waiters.
    let mut held: Vec<Permit> = Vec::new();
    for _ in 0..10 {
        held.push(a.acquire(I).await.unwrap());
    }
    let (a1, a2) = (a.clone(), a.clone());
    let wi = tokio::spawn(async move { a1.acquire(I).await });
    let wb = tokio::spawn(async move { a2.acquire(B).await });
    tokio::task::yield_now().await;
    held.pop();
    tokio::task::yield_now().await;
    // Batch is guaranteed 2 of 10 and has 0: it goes first even though interactive queued first.
    assert!(wb.is_finished() && !wi.is_finished());
    let b = wb.await.unwrap().unwrap();
    assert_eq!(b.inflight, 10);
    assert_eq!(a.stats().lanes[0].2, 1, "interactive still waits");
    held.pop();
    assert!(wi.await.unwrap().is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_refuses_with_a_retry_after() {
    let mut specs = lanes();
    specs[0].max_queue = 1;
    let a = Admission::new(1, specs);
    let _held = a.acquire(I).await.unwrap();
    let a2 = a.clone();
    let _waiter = tokio::spawn(async move { a2.acquire(I).await.map(drop) });
    tokio::task::yield_now().await;
    let err = a.acquire(I).await.unwrap_err();
    assert!(
        matches!(err, Rejected::QueueFull { lane: 0, .. }),
        "{err:?}"
    );
    assert!(err.retry_after() >= Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn a_request_that_waits_too_long_is_told_when_to_come_back() {
    let a = Admission::new(1, lanes());
    let _held = a.acquire(B).await.unwrap();
    let start = Instant::now();
    let err = a.acquire(I).await.unwrap_err();
    assert_eq!(Instant::now() - start, Duration::from_secs(30));
    assert!(matches!(err, Rejected::TimedOut { lane: 0, .. }));
    assert_eq!(a.stats().lanes[0].2, 0, "it left the queue");
}

#[tokio::test(start_paused = true)]
async fn a_waiter_that_gives_up_does_not_leak_its_slot() {
    let a = Admission::new(1, lanes());
    let held = a.acquire(I).await.unwrap();
    let a2 = a.clone();
    let quitter = tokio::spawn(async move { a2.acquire(I).await.map(drop) });
    tokio::task::yield_now().await;
    quitter.abort();
    let _ = quitter.await;
    drop(held);
    assert_eq!(a.stats().inflight, 0);
    assert!(a.try_acquire(I).is_some());
}

#[tokio::test(start_paused = true)]
async fn raising_the_limit_admits_waiters_and_optional_work_never_jumps_the_queue() {
    let a = Admission::new(1, lanes());
    let _held = a.acquire(I).await.unwrap();
    let a2 = a.clone();
    let w = tokio::spawn(async move { a2.acquire(B).await.map(|_| ()) });
    tokio::task::yield_now().await;
    assert!(a.try_acquire(I).is_none(), "someone waits");
    a.set_limit(2);
    w.await.unwrap().unwrap();
    assert_eq!(a.stats().limit, 2);
}

#[tokio::test(start_paused = true)]
async fn retry_after_follows_the_drain_rate() {
    let mut specs = lanes();
    specs[1].max_queue = 50;
    let a = Admission::new(10, specs);
    // Ten requests finish every second for ten seconds: a drain rate of 10/s.
    for _ in 0..10 {
        let batch: Vec<Permit> = futures::future::join_all((0..10).map(|_| a.acquire(I)))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        sleep(Duration::from_secs(1)).await;
        drop(batch);
    }
    let _full: Vec<Permit> = futures::future::join_all((0..10).map(|_| a.acquire(I)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for _ in 0..50 {
        let a2 = a.clone();
        tokio::spawn(async move { a2.acquire(B).await.map(drop) });
    }
    tokio::task::yield_now().await;
    let err = a.acquire(B).await.unwrap_err();
    // 50 waiting + this one, at 10/s: about 6 s.
    assert_eq!(err.retry_after(), Duration::from_secs(6), "{err:?}");
}

#[tokio::test(start_paused = true)]
async fn a_pause_holds_every_slot_until_it_ends() {
    let a = Admission::new(10, lanes());
    let start = Instant::now();
    a.pause_until(start + Duration::from_secs(3));
    assert!(a.try_acquire(I).is_none(), "paused");
    let p = a.acquire(B).await.unwrap();
    assert_eq!(
        Instant::now() - start,
        Duration::from_secs(3),
        "waited out the pause"
    );
    drop(p);
    assert!(a.try_acquire(I).is_some());
}

fn ask(lane: usize, tenant: &str, tokens: u64) -> Ask {
    Ask {
        lane,
        tenant: Arc::from(tenant),
        tokens,
        deadline: None,
    }
}

/// Spawns `n` requests of `tenant` in `lane`, each holding its slot for `hold`; they log
/// `(tenant, when admitted)`.
fn flood(
    a: &Admission,
    lane: usize,
    tenant: &'static str,
    n: usize,
    hold: Duration,
    log: &Arc<Mutex<Vec<(&'static str, Instant)>>>,
) {
    for _ in 0..n {
        let (a, log) = (a.clone(), log.clone());
        tokio::spawn(async move {
            let p = a.acquire(ask(lane, tenant, 0)).await.unwrap();
            log.lock().push((tenant, Instant::now()));
            sleep(hold).await;
            drop(p);
        });
    }
}

#[tokio::test(start_paused = true)]
async fn within_a_lane_tenants_take_turns() {
    let a = Admission::new(1, lanes());
    let log = Arc::new(Mutex::new(Vec::new()));
    // acme's 200-document batch arrives first; globex sends 3 just after.
    flood(&a, B, "acme", 200, Duration::from_secs(1), &log);
    tokio::task::yield_now().await;
    flood(&a, B, "globex", 3, Duration::from_secs(1), &log);
    sleep(Duration::from_secs(10)).await;
    let order: Vec<&str> = log.lock().iter().map(|(t, _)| *t).collect();
    // globex's three are done within its first turns, not after acme's 200.
    let last_globex = order.iter().rposition(|t| *t == "globex").unwrap();
    assert_eq!(order.iter().filter(|t| **t == "globex").count(), 3);
    assert!(last_globex <= 7, "{order:?}");
    assert_eq!(a.stats().tenants_waiting, vec![0, 1]);
}

#[tokio::test(start_paused = true)]
async fn a_paced_admission_lets_calls_out_at_the_upstreams_rate_and_loses_none() {
    let t0 = Instant::now();
    let pacer = Pacer::new(
        PaceSpec {
            rpm: Some(60),
            tpm: None,
        },
        t0,
    );
    let a = Admission::paced(1_000, lanes(), pacer);
    let log = Arc::new(Mutex::new(Vec::new()));
    flood(&a, B, "acme", 30, Duration::from_millis(100), &log);
    sleep(Duration::from_secs(40)).await;
    let times: Vec<f64> = log
        .lock()
        .iter()
        .map(|(_, t)| (*t - t0).as_secs_f64())
        .collect();
    assert_eq!(times.len(), 30, "every request got through");
    // One a second (the burst is one second's worth): the 30th leaves at about 29 s.
    assert!((28.9..=29.1).contains(&times[29]), "{times:?}");
    for w in times.windows(2) {
        assert!(w[1] - w[0] >= 0.99, "{times:?}");
    }
    // A report that the upstream has nothing left for 5 s holds the next call that long.
    a.observe(Dimension::Requests, 60, 0, Duration::from_secs(5));
    assert!(a.try_acquire(ask(I, "x", 0)).is_none());
    assert!(a.would_wait(&ask(I, "x", 0)));
    sleep(Duration::from_secs(5)).await;
    assert!(a.try_acquire(ask(I, "x", 0)).is_some());
}

#[tokio::test(start_paused = true)]
async fn token_pacing_holds_a_large_call_until_the_bucket_can_pay_for_it() {
    let t0 = Instant::now();
    let pacer = Pacer::new(
        PaceSpec {
            rpm: None,
            tpm: Some(60_000),
        },
        t0,
    );
    let a = Admission::paced(10, lanes(), pacer);
    // 1,000 tokens a second and a burst of one second's worth. A call above the burst waits
    // for a full bucket, goes, and leaves a debt the next call waits out: two 4,000-token
    // calls leave 4 s apart.
    let p1 = a.acquire(ask(I, "x", 1_000)).await.unwrap();
    let p2 = a.acquire(ask(I, "x", 4_000)).await.unwrap();
    let second = t0.elapsed();
    let p3 = a.acquire(ask(I, "x", 4_000)).await.unwrap();
    let third = t0.elapsed();
    assert_eq!(second.as_millis(), 1_000);
    assert_eq!((third - second).as_millis(), 4_000);
    drop((p1, p2, p3));
}

#[tokio::test(start_paused = true)]
async fn a_permit_says_whether_its_wait_was_the_upstreams_rate_limit() {
    // Slots full: the wait is sluice's own concurrency limit.
    let a = Admission::new(1, lanes());
    let first = a.acquire(I).await.unwrap();
    assert!(!first.rate_limited, "went at once");
    let waiting = tokio::spawn({
        let a = a.clone();
        async move { a.acquire(I).await.unwrap() }
    });
    tokio::task::yield_now().await;
    drop(first);
    assert!(!waiting.await.unwrap().rate_limited, "waited for a slot");
    // Paced at one a second: the second call's wait is the rate limit's.
    let t0 = Instant::now();
    let paced = Admission::paced(
        10,
        lanes(),
        Pacer::new(
            PaceSpec {
                rpm: Some(60),
                tpm: None,
            },
            t0,
        ),
    );
    assert!(!paced.acquire(B).await.unwrap().rate_limited);
    let second = paced.acquire(B).await.unwrap();
    assert!(second.rate_limited);
    // So is a wait behind a 429's pause.
    let paused = Admission::new(10, lanes());
    paused.pause_until(Instant::now() + Duration::from_secs(2));
    assert!(paused.acquire(I).await.unwrap().rate_limited);
}

/// A request that gives up in the queue, or is refused at arrival, is told whether the
/// upstream's rate limit held the queue back: a wait for the pacer is the provider's, a wait
/// for a slot sluice's own.
#[tokio::test(start_paused = true)]
async fn a_refusal_says_whether_the_rate_limit_held_the_queue() {
    let short = vec![LaneSpec {
        max_wait: Duration::from_secs(3),
        ..lanes()[0].clone()
    }];
    // Paced at one a minute: the second request waits out its lane behind the pacer.
    let paced = Admission::paced(
        10,
        short.clone(),
        Pacer::new(
            PaceSpec {
                rpm: Some(1),
                tpm: None,
            },
            Instant::now(),
        ),
    );
    let first = paced.acquire(I).await.unwrap();
    let since = Instant::now();
    let gave_up = paced.acquire(I).await.unwrap_err();
    assert!(matches!(gave_up, Rejected::TimedOut { .. }), "{gave_up:?}");
    assert!(gave_up.rate_limited(), "{gave_up:?}");
    assert!(paced.rate_held_since(since));
    drop(first);
    // One slot held for a minute: the wait is sluice's concurrency limit, not the pacer.
    let full = Admission::new(1, short);
    let held = full.acquire(I).await.unwrap();
    let since = Instant::now();
    let gave_up = full.acquire(I).await.unwrap_err();
    assert!(matches!(gave_up, Rejected::TimedOut { .. }), "{gave_up:?}");
    assert!(!gave_up.rate_limited(), "{gave_up:?}");
    assert!(!full.rate_held_since(since));
    drop(held);
}

/// A queue the pacer drains at one a second refuses newcomers by their predicted wait, and
/// says the rate limit set that wait.
#[tokio::test(start_paused = true)]
async fn a_queue_drained_by_the_pacer_refuses_as_the_rate_limits() {
    let a = Admission::paced(
        100,
        lanes(),
        Pacer::new(
            PaceSpec {
                rpm: Some(60),
                tpm: None,
            },
            Instant::now(),
        ),
    );
    let mut calls = Vec::new();
    for _ in 0..60 {
        let a = a.clone();
        calls.push(tokio::spawn(async move { a.acquire(I).await.map(drop) }));
        sleep(Duration::from_millis(100)).await;
    }
    let refused: Vec<Rejected> = futures::future::join_all(calls)
        .await
        .into_iter()
        .filter_map(|r| r.unwrap().err())
        .collect();
    assert!(!refused.is_empty());
    assert!(
        refused
            .iter()
            .all(|r| matches!(r, Rejected::WouldWait { .. }) && r.rate_limited()),
        "{refused:?}"
    );
}

/// Ten requests a second into a lane that drains one a second (one slot, each call holding
/// it a second): once the queue's rate is measured, a newcomer whose predicted wait passes
/// 90% of the lane's 30 s is refused at once, told when to come back; none accepted waits it
/// out.
#[tokio::test(start_paused = true)]
async fn a_request_whose_predicted_wait_passes_its_lane_is_refused_at_arrival() {
    let a = Admission::new(1, lanes());
    let mut calls = Vec::new();
    for _ in 0..60 {
        let a = a.clone();
        calls.push(tokio::spawn(async move {
            let p = a.acquire(I).await?;
            sleep(Duration::from_secs(1)).await;
            drop(p);
            Ok::<(), Rejected>(())
        }));
        sleep(Duration::from_millis(100)).await;
    }
    let mut served = 0;
    let mut refused = Vec::new();
    for c in calls {
        match c.await.unwrap() {
            Ok(()) => served += 1,
            Err(r) => refused.push(r),
        }
    }
    assert!(
        refused
            .iter()
            .all(|r| matches!(r, Rejected::WouldWait { .. })),
        "{refused:?}"
    );
    assert!((25..=40).contains(&served), "{served} served");
    assert!(
        refused
            .iter()
            // Past 90% of the lane's 30 s (the prediction's margin).
            .all(|r| r.retry_after() >= Duration::from_secs(27)),
        "{refused:?}"
    );
    let s = a.stats();
    assert_eq!(s.timed_out, 0, "an accepted request waited out its lane");
    assert_eq!(s.refused_at_arrival, refused.len() as u64);
}

/// A request whose deadline is nearer than its lane's `max_wait` is refused at arrival by
/// the deadline: the queue would hold it past it.
#[tokio::test(start_paused = true)]
async fn a_predicted_wait_past_the_deadline_is_refused_at_arrival() {
    let a = Admission::new(1, lanes());
    let mut calls = Vec::new();
    for _ in 0..12 {
        let a = a.clone();
        calls.push(tokio::spawn(async move {
            let p = a.acquire(I).await?;
            sleep(Duration::from_secs(1)).await;
            drop(p);
            Ok::<(), Rejected>(())
        }));
    }
    // Three seconds of draining one a second: about nine wait ahead of a newcomer.
    sleep(Duration::from_millis(3_500)).await;
    let mut hurried = ask(I, "t", 0);
    hurried.deadline = Some(Instant::now() + Duration::from_secs(5));
    let refused = a.acquire(hurried).await;
    assert!(
        matches!(refused, Err(Rejected::WouldWait { .. })),
        "{refused:?}"
    );
    // Without a deadline its lane's 30 s take it.
    let patient = a.clone();
    let queued = tokio::spawn(async move { patient.acquire(ask(I, "t", 0)).await.map(drop) });
    for c in calls {
        c.await.unwrap().unwrap();
    }
    queued.await.unwrap().unwrap();
    assert_eq!(a.stats().timed_out, 0);
}
