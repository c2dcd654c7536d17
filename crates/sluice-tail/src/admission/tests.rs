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
