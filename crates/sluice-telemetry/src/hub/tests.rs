use std::time::Duration;

use sluice_core::{Attempt, RequestId, Usage};

use super::*;

fn record(now: Instant, ttfb_ms: u64, total_ms: u64) -> CallRecord {
    let mut rec = CallRecord::new(RequestId::generate(), now);
    rec.model_group = Some(Arc::from("chat"));
    rec.upstream = Some(Arc::from("sim-a"));
    rec.status = 200;
    let start = now + Duration::from_millis(1);
    rec.timings.dispatched = Some(start);
    rec.timings.first_byte = Some(start + Duration::from_millis(ttfb_ms));
    rec.timings.done = Some(start + Duration::from_millis(total_ms));
    let mut a = Attempt::start(Arc::from("sim-a"), start);
    a.first_byte = rec.timings.first_byte;
    a.ended = rec.timings.done;
    a.outcome = AttemptOutcome::Ok;
    rec.attempts.push(a);
    rec.usage = Some(Usage {
        prompt_tokens: 100,
        completion_tokens: 10,
        cached_tokens: 64,
        cache_write_tokens: 0,
        reasoning_tokens: 0,
        cache_write_long_tokens: 0,
    });
    rec
}

#[test]
fn records_feed_windows_and_metrics() {
    let t = Arc::new(Telemetry::new(WindowConfig::default()).unwrap());
    let now = Instant::now();
    for i in 1..=100 {
        t.observe(&record(now, i * 10, i * 20));
    }
    let report = t.latency_report(now + Duration::from_secs(2));
    assert_eq!(report.upstreams.len(), 1);
    let u = &report.upstreams[0];
    assert_eq!(
        (u.group.as_str(), u.upstream.as_str(), u.mode),
        ("chat", "sim-a", "complete")
    );
    assert_eq!(u.ttfb.count, 100);
    let p99 = u.ttfb.p99.as_millis();
    assert!((980..=1000).contains(&p99), "{p99}");
    let page = t.render(now + Duration::from_secs(2));
    assert!(page.contains("sluice_requests_total{lane=\"-\",group=\"chat\",upstream=\"sim-a\",status=\"200\",code=\"ok\"} 100"), "{page}");
    assert!(
        page.contains(
            "sluice_tokens_total{group=\"chat\",upstream=\"sim-a\",kind=\"cached\"} 6400"
        )
    );
    assert!(page.contains("sluice_upstream_latency_window_p999_seconds{group=\"chat\",upstream=\"sim-a\",mode=\"complete\",phase=\"ttfb\"}"));
    assert!(
        !page.contains("quantile=\""),
        "no gauge carries a summary's label"
    );
    assert!(page.contains("sluice_upstream_ttfb_seconds_bucket"));
}

#[test]
fn timeouts_count_in_the_tail() {
    let t = Telemetry::new(WindowConfig::default()).unwrap();
    let now = Instant::now();
    let mut rec = CallRecord::new(RequestId::generate(), now);
    rec.model_group = Some(Arc::from("chat"));
    rec.status = 504;
    rec.error = Some(ErrorKind::UpstreamTimeout);
    let mut a = Attempt::start(Arc::from("slow"), now);
    a.ended = Some(now + Duration::from_secs(60));
    a.outcome = AttemptOutcome::Failed(ErrorKind::UpstreamTimeout);
    rec.attempts.push(a);
    t.observe(&rec);
    let r = t.latency_report(now + Duration::from_secs(61));
    assert_eq!(r.upstreams[0].ttfb.count, 1);
    assert!(r.upstreams[0].ttfb.max >= Duration::from_secs(59));
}

#[test]
fn inflight_follows_guards() {
    let t = Arc::new(Telemetry::new(WindowConfig::default()).unwrap());
    let g1 = t.inflight();
    let g2 = t.inflight();
    assert!(
        t.render(Instant::now())
            .contains("sluice_inflight_requests 2")
    );
    drop(g1);
    drop(g2);
    assert!(
        t.render(Instant::now())
            .contains("sluice_inflight_requests 0")
    );
}

#[test]
fn streamed_and_complete_answers_keep_separate_windows() {
    let t = Telemetry::new(WindowConfig::default()).unwrap();
    let now = Instant::now();
    let mut streamed = record(now, 300, 5_000);
    streamed.stream = true;
    t.observe(&streamed);
    t.observe(&record(now, 5_000, 5_000));
    let r = t.latency_report(now + Duration::from_secs(6));
    let modes: Vec<(&str, u128)> = r
        .upstreams
        .iter()
        .map(|u| (u.mode, u.ttfb.p50.as_millis()))
        .collect();
    assert_eq!(modes.len(), 2);
    assert!(
        modes.contains(&("stream", 300))
            || modes
                .iter()
                .any(|(m, v)| *m == "stream" && (297..=303).contains(v)),
        "{modes:?}"
    );
    assert!(
        modes.iter().any(|(m, v)| *m == "complete" && *v >= 4_950),
        "{modes:?}"
    );
}

#[test]
fn a_scrape_stays_small_enough_to_read() {
    // Nine requests over three groups, each on two upstreams, streamed and complete: the
    // page must not grow to what no dashboard reads.
    let t = Arc::new(Telemetry::new(WindowConfig::default()).unwrap());
    let now = Instant::now();
    for (i, group) in ["chat", "review", "batch"].iter().enumerate() {
        for (j, upstream) in ["a", "b", "a"].iter().enumerate() {
            let mut r = record(now, 100, 300);
            r.model_group = Some(Arc::from(*group));
            r.upstream = Some(Arc::from(*upstream));
            r.stream = (i + j) % 2 == 0;
            t.observe(&r);
        }
    }
    let page = t.render(now + Duration::from_secs(2));
    // 155 KB with six buckets a doubling everywhere and a total-time histogram per attempt;
    // the prompt cache's five series per tenant, group and upstream add about 3 KB here, and
    // the client's time to first byte per lane, group and class (one histogram a group here)
    // about 16 KB.
    assert!(page.len() < 86_000, "{} bytes", page.len());
}

#[test]
fn what_clients_waited_is_kept_apart_from_the_attempts() {
    // A batch call of a gold tenant that spent 20 s in retries and pauses before an attempt
    // that answered in 1 s: the client waited 21 s, the upstream's attempt took 1 s.
    let t = Arc::new(Telemetry::new(WindowConfig::default()).unwrap());
    let now = Instant::now();
    let mut r = record(now, 1_000, 1_500);
    r.lane = Some(Arc::from("batch"));
    r.class = Some(Arc::from("gold"));
    let late = now + Duration::from_secs(20);
    r.attempts[0].started = late;
    r.attempts[0].first_byte = Some(late + Duration::from_secs(1));
    r.attempts[0].ended = Some(late + Duration::from_millis(1_500));
    r.timings.first_byte = r.attempts[0].first_byte;
    r.timings.done = r.attempts[0].ended;
    t.observe(&r);
    let report = t.latency_report(now + Duration::from_secs(22));
    let c = &report.clients[0];
    assert_eq!((&*c.lane, &*c.group, &*c.class), ("batch", "chat", "gold"));
    assert!(c.ttfb.p99 >= Duration::from_secs(21), "{:?}", c.ttfb);
    let u = &report.upstreams[0];
    assert!(u.ttfb.p99 <= Duration::from_millis(1_010), "{:?}", u.ttfb);
    let page = t.render(now + Duration::from_secs(22));
    assert!(page.contains(
        "sluice_request_ttfb_seconds_count{lane=\"batch\",group=\"chat\",class=\"gold\"} 1"
    ));
    assert!(page.contains(
        "sluice_requests_total{lane=\"batch\",group=\"chat\",upstream=\"sim-a\",status=\"200\",code=\"ok\"} 1"
    ));
}
