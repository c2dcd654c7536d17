//! No secret is written anywhere: a gateway run with the access log, the ledger, both
//! caches' tenant scoping, batches, every call traced, a key made through the admin API and
//! every way a key is sent; then everything it wrote (its files, its standard output and
//! error, the spans it exported over OTLP, /metrics, /admin/usage, every answer but the one
//! that hands out a new key) is searched for each API key, the admin and metrics tokens and
//! the upstream's key.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use harness::{Sim, free_port, submit, until_ended};
use serde_json::json;
use sluice_economy::keys::hash_hex;

const KEY: &str = "sk-sluice-secret-key-4f1d2c9a";
const ADMIN: &str = "admin-token-secret-7b3e90aa";
const METRICS: &str = "metrics-token-secret-2c81d4";
const UPSTREAM: &str = "sk-upstream-secret-9e0f71b2";

fn config(port: u16, sim: u16, spans: u16, dir: &std::path::Path) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\nshutdown_grace = \"2s\"\n\
         admin_token_env = \"T_ADMIN\"\nmetrics_token_env = \"T_METRICS\"\n\
         [telemetry]\naccess_log = \"json\"\n\
         [traces]\nenabled = true\nsample = 1.0\nflush = \"100ms\"\n\
         endpoint = \"http://127.0.0.1:{spans}/v1/traces\"\n\
         [ledger]\npath = \"{}\"\n\
         [cache]\nenabled = true\n\
         [providers.up]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{sim}/up/v1\"\napi_key_env = \"T_UPSTREAM\"\n\
         [prices.m]\ninput = 1.0\noutput = 2.0\n\
         [models.chat]\ndeployments = [{{ provider = \"up\", model = \"m\" }}]\n\
         [keys.ci]\ntenant = \"acme\"\nsha256 = \"{}\"\n",
        dir.join("ledger.db").display(),
        hash_hex(KEY)
    )
}

/// What the gateway exports over OTLP/HTTP, kept as it arrives: a listener that reads each
/// request's body whole and answers 200 with an empty export response.
async fn span_sink() -> (u16, Arc<Mutex<Vec<u8>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let kept = Arc::new(Mutex::new(Vec::new()));
    let sink = kept.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            tokio::spawn(export_requests(conn, sink.clone()));
        }
    });
    (port, kept)
}

/// Reads OTLP requests off `conn` until it closes, keeping their bodies in `kept`.
async fn export_requests(mut conn: tokio::net::TcpStream, kept: Arc<Mutex<Vec<u8>>>) {
    let mut buf = Vec::new();
    let mut piece = [0u8; 16 * 1024];
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match conn.read(&mut piece).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&piece[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        while buf.len() < end + 4 + length {
            match conn.read(&mut piece).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&piece[..n]),
            }
        }
        kept.lock()
            .extend_from_slice(&buf[end + 4..end + 4 + length]);
        buf.drain(..end + 4 + length);
        let ok =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if conn.write_all(ok).await.is_err() {
            return;
        }
    }
}

/// Every file under `dir`, read whole.
fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
        }
    }
    out
}

fn holds(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_or_token_is_written_anywhere() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(
        dir.path(),
        "ttft_median = \"5ms\"\noutput_tokens_median = 5\n",
    );
    let port = free_port();
    let (spans_port, spans) = span_sink().await;
    let path = dir.path().join("gw.toml");
    std::fs::write(&path, config(port, sim.port, spans_port, dir.path())).unwrap();
    let mut gw = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--config"])
        .arg(&path)
        .env("T_ADMIN", ADMIN)
        .env("T_METRICS", METRICS)
        .env("T_UPSTREAM", UPSTREAM)
        .env("SLUICE_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    for _ in 0..200 {
        if client.get(format!("{url}/readyz")).send().await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut answers: Vec<Vec<u8>> = Vec::new();
    let chat = |stream: bool| {
        json!({"model": "chat", "stream": stream, "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi"}]})
    };
    // A key as a bearer, streamed and not, and as Anthropic's `x-api-key`; a wrong one.
    for (stream, auth) in [
        (false, KEY),
        (true, KEY),
        (false, "sk-sluice-secret-key-4f1d2c9a-not"),
    ] {
        let r = client
            .post(format!("{url}/v1/chat/completions"))
            .bearer_auth(auth)
            .json(&chat(stream))
            .send()
            .await
            .unwrap();
        answers.push(r.bytes().await.unwrap().to_vec());
    }
    let r = client
        .post(format!("{url}/v1/messages"))
        .header("x-api-key", KEY)
        .json(&json!({"model": "chat", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    answers.push(r.bytes().await.unwrap().to_vec());
    // A key made through the admin API: its secret is in that answer only.
    let made: serde_json::Value = client
        .post(format!("{url}/admin/keys"))
        .bearer_auth(ADMIN)
        .json(&json!({"name": "made", "tenant": "acme"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let new_key = made["key"]
        .as_str()
        .unwrap_or_else(|| panic!("{made}"))
        .to_string();
    let r = client
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(&new_key)
        .json(&chat(false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    answers.push(r.bytes().await.unwrap().to_vec());
    // A batch, its files kept by the gateway.
    let job = submit(&url, KEY, 3, "secret").await;
    let ended = until_ended(&url, KEY, &job, Duration::from_secs(60)).await;
    assert_eq!(ended["status"], "completed", "{ended}");
    answers.push(ended.to_string().into_bytes());
    for (path, token) in [
        ("/metrics", METRICS),
        ("/admin/usage", ADMIN),
        ("/admin/keys", ADMIN),
    ] {
        let r = client
            .get(format!("{url}{path}"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        answers.push(r.bytes().await.unwrap().to_vec());
    }
    // Stopped as an operator stops it: the ledger and the log are flushed.
    Command::new("kill")
        .args(["-TERM", &gw.id().to_string()])
        .status()
        .unwrap();
    let status = gw.wait().unwrap();
    assert!(status.success(), "{status}");
    let mut out = Vec::new();
    gw.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    let mut err = Vec::new();
    gw.stderr.take().unwrap().read_to_end(&mut err).unwrap();
    assert!(holds(&out, "\"status\":200"), "the access log was written");
    assert!(!files(dir.path()).is_empty());

    let mut written: Vec<(String, Vec<u8>)> = files(dir.path())
        .into_iter()
        // The configuration holds the environment variables' names, not their values.
        .filter(|(p, _)| !p.ends_with("gw.toml") && !p.contains("sim-"))
        .collect();
    let exported = spans.lock().clone();
    assert!(
        holds(&exported, "acme") && holds(&exported, "chat"),
        "the calls' spans were exported ({} bytes)",
        exported.len()
    );
    written.push(("the exported spans".into(), exported));
    written.push(("standard output".into(), out));
    written.push(("standard error".into(), err));
    for (i, a) in answers.into_iter().enumerate() {
        written.push((format!("answer {i}"), a));
    }
    // The search reads what matters: the ledger names the tenant and the key (by name), and
    // holds the batch's items.
    let ledger = written
        .iter()
        .filter(|(p, _)| p.contains("ledger.db"))
        .map(|(_, b)| b.as_slice())
        .collect::<Vec<_>>()
        .concat();
    for known in ["acme", "made", "secret-2"] {
        assert!(holds(&ledger, known), "the ledger lacks `{known}`");
    }
    for secret in [KEY, new_key.as_str(), ADMIN, METRICS, UPSTREAM] {
        for (what, bytes) in &written {
            assert!(
                !holds(bytes, secret),
                "{what} holds a secret ({}...)",
                &secret[..6]
            );
        }
    }
    drop(sim);
}
