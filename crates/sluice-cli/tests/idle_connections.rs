//! Ten thousand idle connections to a running `sluice serve` with its defaults (a listen
//! backlog of 4,096, so a burst of them is queued, not dropped): requests
//! are still served while they are open, each costs the process little memory, and at the
//! header timeout (30 s) the gateway closes every one of them, giving back their file
//! descriptors; ten thousand more, opened after, are held in the memory the first gave
//! back, and closed by their clients they give back their descriptors at once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;

use std::time::Duration;

use harness::{Fleet, Sim};

const IDLE: usize = 10_000;

/// Descriptors of the gateway's own that may come and go while it is measured.
const SLACK: usize = 8;

/// The process's open file descriptors and resident memory (kB).
fn footprint(pid: u32) -> (usize, u64) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    (fds, rss)
}

async fn chat(url: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .json(&serde_json::json!({"model": "chat", "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// `IDLE` connections to `port`, opened in waves of 500, each wave waited for until the
/// gateway `pid` holds it (above `base` descriptors), so that the listen backlog (1,024)
/// never overflows: a connection the kernel could not queue looks open to its client but
/// waits for a retransmitted handshake, seconds later, while the first ones near their
/// header timeout.
async fn open_idle(port: u16, pid: u32, base: usize) -> Vec<tokio::net::TcpStream> {
    let mut idle = Vec::with_capacity(IDLE);
    while idle.len() < IDLE {
        let wave: Vec<_> = (0..500)
            .map(|_| tokio::net::TcpStream::connect(("127.0.0.1", port)))
            .collect();
        for c in futures::future::join_all(wave).await {
            idle.push(c.unwrap());
        }
        let want = base + idle.len();
        until(pid, 500, |fds| fds + SLACK >= want).await;
    }
    idle
}

/// The footprint of `pid` once `done` says it is reached, polling every 20 ms for at most
/// `tries` times.
async fn until(pid: u32, tries: u32, done: impl Fn(usize) -> bool) -> (usize, u64) {
    let mut now = footprint(pid);
    for _ in 0..tries {
        if done(now.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        now = footprint(pid);
    }
    now
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_idle_connections_cost_little_and_are_closed_at_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(
        dir.path(),
        "ttft_median = \"5ms\"\noutput_tokens_median = 5\n",
    );
    // One gateway with the defaults (the harness kills it when the test ends, failed or not).
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:1\"\n[ledger]\nstore = \"off\"\n\
         [providers.up]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{}/up/v1\"\n\
         [models.chat]\ndeployments = [{{ provider = \"up\", model = \"m\" }}]\n",
        sim.port
    );
    let gw = Fleet::start_n(dir.path(), &config, Vec::new(), 1).await;
    let url = gw.urls[0].clone();
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let pid = gw.children[0].as_ref().unwrap().id();
    // Its listen backlog is sluice's 4,096 (or the kernel's cap), not the runtime's 128: `ss`
    // shows a listening socket's backlog as its send queue.
    let ss = std::process::Command::new("ss")
        .args(["-ltnH", &format!("sport = :{port}")])
        .output()
        .expect("ss (iproute2) lists the listening socket");
    let line = String::from_utf8_lossy(&ss.stdout).to_string();
    let backlog: u32 = line.split_whitespace().nth(2).unwrap().parse().unwrap();
    let cap: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(backlog, cap.min(4_096), "{line}");
    // Twenty at once first, so the upstream connection pool is as large before as after.
    let warm = futures::future::join_all((0..20).map(|_| chat(&url))).await;
    assert!(warm.iter().all(|s| *s == 200), "{warm:?}");
    let (fds_before, rss_before) = footprint(pid);

    let mut idle = open_idle(port, pid, fds_before).await;
    // Every one accepted: the gateway holds a descriptor for each.
    // (A few descriptors of the gateway's own, such as a pooled upstream connection, may
    // come and go meanwhile.)
    let accepted = |fds: usize| fds + SLACK >= fds_before + IDLE;
    let open = until(pid, 1000, accepted).await;
    assert!(
        accepted(open.0),
        "{} of {IDLE} accepted",
        open.0.saturating_sub(fds_before)
    );
    let statuses = futures::future::join_all((0..20).map(|_| chat(&url))).await;
    assert!(
        statuses.iter().all(|s| *s == 200),
        "served while they wait: {statuses:?}"
    );
    let per_connection = (open.1.saturating_sub(rss_before)) * 1024 / IDLE as u64;
    eprintln!(
        "{IDLE} idle connections: {} descriptors, {} kB resident more ({per_connection} bytes each)",
        open.0 - fds_before,
        open.1.saturating_sub(rss_before)
    );
    assert!(
        per_connection < 16 * 1024,
        "{per_connection} bytes a connection"
    );

    // The header timeout closes them all; their descriptors come back.
    let after = until(pid, 3000, |fds| fds <= fds_before + SLACK).await;
    assert!(
        after.0 <= fds_before + SLACK,
        "{} descriptors left of {}",
        after.0,
        fds_before
    );
    eprintln!(
        "after the timeout: {} descriptors (before {fds_before}), {} kB resident (before {rss_before})",
        after.0, after.1
    );
    // And the client sees each end.
    let mut buf = [0u8; 1];
    for c in idle.iter_mut().take(100) {
        use tokio::io::AsyncReadExt;
        let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf)).await;
        assert!(matches!(n, Ok(Ok(0)) | Ok(Err(_))), "still open: {n:?}");
    }
    assert_eq!(chat(&url).await, 200);

    // Ten thousand more live in the memory the first gave back: resident memory grows by at
    // most a tenth of what the first wave took (the allocator's own slack).
    drop(idle);
    let again = open_idle(port, pid, fds_before).await;
    let reopened = until(pid, 1000, accepted).await;
    assert!(accepted(reopened.0), "the second wave was accepted");
    let first_wave = open.1.saturating_sub(rss_before);
    eprintln!(
        "the second wave: {} kB resident (the first: {} kB)",
        reopened.1, open.1
    );
    assert!(
        reopened.1 <= open.1 + first_wave / 10,
        "the second wave took {} kB more than the first held",
        reopened.1.saturating_sub(open.1)
    );
    // Closed by their clients, they give back their descriptors without waiting for the
    // timeout.
    drop(again);
    let closed = until(pid, 500, |fds| fds <= fds_before + SLACK).await;
    assert!(
        closed.0 <= fds_before + SLACK,
        "{} descriptors left of {fds_before} after the clients closed",
        closed.0
    );
    assert_eq!(chat(&url).await, 200);
    drop(gw);
    drop(sim);
}
