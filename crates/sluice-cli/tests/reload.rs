//! A changed configuration taken on SIGHUP by a running `sluice serve`: keys added and
//! removed and tenants' quotas changed take effect at once, sections that need a restart
//! are named in the log, and a file with errors is refused with them, the running
//! configuration kept; the process serves throughout.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use sluice_economy::keys::hash_hex;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn config(gw: u16, sim: u16, keys: &[(&str, &str)], rpm: u64, timeout: &str) -> String {
    let mut s = format!(
        "[server]\nlisten = \"127.0.0.1:{gw}\"\n[ledger]\nstore = \"off\"\n\
         [providers.up]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{sim}/up/v1\"\n\
         [models.chat]\ntimeout = \"{timeout}\"\ndeployments = [{{ provider = \"up\", model = \"m\" }}]\n\
         [tenants.acme]\nrpm = {rpm}\n"
    );
    for (name, secret) in keys {
        s.push_str(&format!(
            "[keys.{name}]\ntenant = \"acme\"\nsha256 = \"{}\"\n",
            hash_hex(secret)
        ));
    }
    s
}

async fn call(url: &str, key: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(key)
        .json(&serde_json::json!({"model": "chat", "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

fn hangup(pid: u32) {
    let ok = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Waits until `f` holds (the signal is taken asynchronously).
async fn until<F: Future<Output = bool>>(what: &str, mut f: impl FnMut() -> F) {
    for _ in 0..100 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} never held");
}

#[tokio::test]
async fn sighup_takes_keys_and_quotas_names_what_needs_a_restart_and_refuses_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let (sim_port, gw_port) = (free_port(), free_port());
    std::fs::write(
        dir.path().join("sim.toml"),
        format!("[sim]\nlisten = \"127.0.0.1:{sim_port}\"\nseed = 3\n[upstreams.up]\napi = \"openai\"\nttft_median = \"5ms\"\noutput_tokens_median = 3\n"),
    )
    .unwrap();
    let mut sim = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["sim", "--config"])
        .arg(dir.path().join("sim.toml"))
        .env("SLUICE_LOG", "error")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let path = dir.path().join("gw.toml");
    std::fs::write(
        &path,
        config(gw_port, sim_port, &[("old", "sk-old")], 1_000, "60s"),
    )
    .unwrap();
    let mut gw = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--config"])
        .arg(&path)
        .env("SLUICE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{gw_port}");
    until("the gateway answers", || async {
        reqwest::get(format!("{url}/readyz")).await.is_ok()
    })
    .await;
    assert_eq!(call(&url, "sk-old").await, 200);
    assert_eq!(call(&url, "sk-new").await, 401);

    // A new key, the old one removed, a quota of 2 a minute, and a change that needs a restart.
    std::fs::write(
        &path,
        config(gw_port, sim_port, &[("new", "sk-new")], 2, "30s"),
    )
    .unwrap();
    hangup(gw.id());
    until("the new key works", || async {
        call(&url, "sk-new").await == 200
    })
    .await;
    assert_eq!(
        call(&url, "sk-old").await,
        401,
        "the removed key is refused"
    );
    // The new quota: at most two a minute (one was spent above).
    let statuses = [call(&url, "sk-new").await, call(&url, "sk-new").await];
    assert!(statuses.contains(&429), "the new quota holds: {statuses:?}");

    // A file with errors is refused; the running configuration stays.
    std::fs::write(&path, "[server]\nlisten = 42\n").unwrap();
    hangup(gw.id());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(call(&url, "sk-old").await, 401);
    assert_ne!(call(&url, "sk-new").await, 401, "the running keys stay");
    assert!(matches!(gw.try_wait(), Ok(None)), "the gateway still runs");

    let _ = gw.kill();
    let _ = gw.wait();
    let _ = sim.kill();
    let _ = sim.wait();
    let mut log = String::new();
    gw.stderr.take().unwrap().read_to_string(&mut log).unwrap();
    assert!(
        log.contains("[models] changed and take effect only at a restart"),
        "{log}"
    );
    assert!(log.contains("configuration is refused"), "{log}");
    assert!(log.contains("listen"), "the refusal names the field: {log}");
}
