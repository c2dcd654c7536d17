use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::*;
use crate::spec::{Degradation, Faults};

fn req(id: &str) -> Incoming {
    Incoming {
        request_id: id.to_string(),
        prompt_tokens: 100,
        prefix_hashes: Vec::new(),
        max_tokens: None,
        text: Vec::new(),
    }
}

#[test]
fn rate_limits_answer_429_at_the_configured_rpm() {
    let now = Instant::now();
    let spec = UpstreamSpec {
        rpm: 60,
        ..UpstreamSpec::default()
    };
    let up = SimUpstream::new("u", spec, 1, now);
    // 120 requests spread over the first second: 60 fit the bucket, 60 are refused.
    let mut limited = 0;
    for i in 0..120 {
        let at = now + Duration::from_millis(i * 8);
        if let Plan::RateLimited(state) = up.plan(&req(&format!("r{i}")), at) {
            limited += 1;
            assert!(state.retry_after.is_some());
            assert_eq!(state.requests.map(|r| r.0), Some(60));
        }
    }
    assert_eq!(
        limited, 60,
        "the bucket holds 60; nothing refills within the first second"
    );
    // Then one per second: over the next minute, a request every 500 ms gets half through.
    let mut ok = 0;
    for i in 0..120 {
        let at = now + Duration::from_secs(1) + Duration::from_millis(500 * i);
        if matches!(up.plan(&req(&format!("s{i}")), at), Plan::Answer(_)) {
            ok += 1;
        }
    }
    assert!(
        (59..=61).contains(&ok),
        "{ok} admitted in a minute at 60 RPM"
    );
    assert_eq!(up.stats().rate_limited, 120 - ok + 60);
}

#[test]
fn fault_rates_match_the_configuration() {
    let now = Instant::now();
    let spec = UpstreamSpec {
        faults: Faults {
            error_500: 0.05,
            error_503: 0.10,
            reset: 0.02,
            ..Faults::default()
        },
        ..UpstreamSpec::default()
    };
    let up = SimUpstream::new("u", spec, 3, now);
    for i in 0..10_000 {
        up.plan(&req(&i.to_string()), now);
    }
    let s = up.stats();
    assert!((420..=580).contains(&s.error_500), "{}", s.error_500);
    assert!((900..=1100).contains(&s.error_503), "{}", s.error_503);
    assert!((150..=250).contains(&s.resets), "{}", s.resets);
    assert_eq!(s.answered + s.error_500 + s.error_503 + s.resets, 10_000);
}

#[test]
fn degradations_apply_only_in_their_window() {
    let now = Instant::now();
    let spec = UpstreamSpec {
        ttft_sigma: 0.0,
        ttft_median: Duration::from_millis(500),
        degradations: vec![
            Degradation {
                from: Duration::from_secs(60),
                to: Duration::from_secs(120),
                latency_factor: 4.0,
                ..Degradation::default()
            },
            Degradation {
                from: Duration::from_secs(200),
                to: Duration::from_secs(260),
                error_503: Some(1.0),
                ..Degradation::default()
            },
        ],
        ..UpstreamSpec::default()
    };
    let up = SimUpstream::new("u", spec, 1, now);
    let ttft = |t: u64| match up.plan(&req(&t.to_string()), now + Duration::from_secs(t)) {
        Plan::Answer(p) => Some(p.ttft),
        _ => None,
    };
    assert_eq!(ttft(10), Some(Duration::from_millis(500)));
    assert_eq!(ttft(90), Some(Duration::from_millis(2000)));
    assert_eq!(ttft(130), Some(Duration::from_millis(500)));
    assert_eq!(ttft(230), None, "100% 503 during the outage");
    assert_eq!(ttft(300), Some(Duration::from_millis(500)));
}

#[test]
fn a_warm_prefix_reports_cached_tokens_and_starts_sooner() {
    let now = Instant::now();
    let spec = UpstreamSpec {
        ttft_sigma: 0.0,
        ttft_median: Duration::from_millis(1000),
        ..UpstreamSpec::default()
    };
    let up = SimUpstream::new("u", spec, 1, now);
    let prompt = vec![b'p'; 16 * 1024];
    let r = Incoming {
        request_id: "a".into(),
        prompt_tokens: crate::cache::tokens_of(prompt.len()),
        prefix_hashes: crate::cache::prefix_hashes(&prompt),
        max_tokens: None,
        text: prompt.clone(),
    };
    let Plan::Answer(cold) = up.plan(&r, now) else {
        panic!()
    };
    let Plan::Answer(warm) = up.plan(&r, now + Duration::from_secs(10)) else {
        panic!()
    };
    assert_eq!(cold.cached_tokens, 0);
    assert_eq!(warm.cached_tokens, 4096);
    assert_eq!(
        warm.ttft,
        Duration::from_millis(200),
        "fully cached: 0.2 of the cold time"
    );
}

#[test]
fn duplicate_request_ids_are_counted() {
    let now = Instant::now();
    let up = SimUpstream::new("u", UpstreamSpec::default(), 1, now);
    up.plan(&req("x"), now);
    up.plan(&req("x"), now);
    up.plan(&req("y"), now);
    let s = up.stats();
    assert_eq!((s.requests, s.duplicate_requests), (3, 1));
    assert_eq!(s.request_ids["x"], 2);
}

#[tokio::test(start_paused = true)]
async fn beyond_capacity_requests_wait_for_a_slot() {
    let now = Instant::now();
    let spec = UpstreamSpec {
        capacity: 2,
        ..UpstreamSpec::default()
    };
    let up = Arc::new(SimUpstream::new("u", spec, 1, now));
    let a = up.admit().await;
    let _b = up.admit().await;
    let waiter = {
        let up = up.clone();
        tokio::spawn(async move {
            let _c = up.admit().await;
            Instant::now()
        })
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    drop(a);
    let admitted_at = waiter.await.unwrap();
    assert_eq!(
        admitted_at,
        now + Duration::from_secs(5),
        "the third waited for a free slot"
    );
    assert_eq!(up.stats().max_busy, 2);
}

#[tokio::test(start_paused = true)]
async fn an_incident_can_halve_capacity_and_give_it_back() {
    let t0 = Instant::now();
    let spec = UpstreamSpec {
        capacity: 10,
        degradations: vec![Degradation {
            from: Duration::from_secs(10),
            to: Duration::from_secs(20),
            capacity_factor: 0.5,
            ..Degradation::default()
        }],
        ..UpstreamSpec::default()
    };
    let up = Arc::new(SimUpstream::new("u", spec, 1, t0));
    // A request every 100 ms, each served for 2 s: 20 would be in service at once, capacity
    // allowing. Count how many are, each second.
    let serving = Arc::new(AtomicU32::new(0));
    let peak = Arc::new(Mutex::new(vec![0u32; 30]));
    for i in 0..300u64 {
        let (up, serving, peak) = (up.clone(), serving.clone(), peak.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100 * i)).await;
            let _busy = up.admit().await;
            let now = serving.fetch_add(1, Ordering::Relaxed) + 1;
            let second = (Instant::now() - t0).as_secs() as usize;
            if let Some(p) = peak.lock().get_mut(second) {
                *p = (*p).max(now);
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
            serving.fetch_sub(1, Ordering::Relaxed);
        });
    }
    tokio::time::sleep(Duration::from_secs(40)).await;
    let peak = peak.lock().clone();
    let most = |r: std::ops::Range<usize>| peak[r].iter().copied().max().unwrap();
    assert_eq!(most(2..10), 10, "{peak:?}");
    // Those in service when it began finish; nothing new starts beyond half.
    assert_eq!(most(10..20), 5, "{peak:?}");
    assert_eq!(most(20..30), 10, "{peak:?}");
}

#[test]
fn the_same_seed_plans_the_same_answers() {
    let now = Instant::now();
    let spec = UpstreamSpec {
        stall_probability: 0.1,
        ..UpstreamSpec::default()
    };
    let a = SimUpstream::new("u", spec.clone(), 9, now);
    let b = SimUpstream::new("u", spec, 9, now);
    for i in 0..200 {
        assert_eq!(
            a.plan(&req(&i.to_string()), now),
            b.plan(&req(&i.to_string()), now)
        );
    }
}

#[test]
fn prefill_time_grows_with_the_uncached_prompt_and_a_reader_answers_from_it() {
    let now = Instant::now();
    let spec = UpstreamSpec {
        ttft_sigma: 0.0,
        prefill_per_token: Duration::from_millis(1),
        reader: true,
        ..UpstreamSpec::default()
    };
    let up = SimUpstream::new("u", spec, 1, now);
    let ask = |id: &str, text: &str| Incoming {
        request_id: id.into(),
        prompt_tokens: crate::cache::tokens_of(text.len()),
        prefix_hashes: Vec::new(),
        max_tokens: None,
        text: text.as_bytes().to_vec(),
    };
    let short = ask("s", "What is the term?");
    let long = ask(
        "l",
        &format!(
            "{} the term is 3 years. What is the term?",
            "x ".repeat(2000)
        ),
    );
    let (Plan::Answer(s), Plan::Answer(l)) = (up.plan(&short, now), up.plan(&long, now)) else {
        panic!()
    };
    assert_eq!(
        l.ttft - s.ttft,
        Duration::from_millis(l.prompt_tokens - s.prompt_tokens)
    );
    assert_eq!(s.content.as_deref(), Some(crate::reader::DEFAULT_SENTINEL));
    assert_eq!(l.content.as_deref(), Some("The term is 3 years."));
    assert_eq!(u64::from(l.output_tokens), crate::cache::tokens_of(20));
}
