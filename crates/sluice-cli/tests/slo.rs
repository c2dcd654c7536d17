//! `sluice slo rules` against Prometheus' own checker: the rules shipped in
//! `deploy/prometheus/` are what the example configuration generates, `promtool check rules`
//! accepts them, and `promtool test rules` shows an upstream slowdown firing only the
//! upstream alert and a queue in sluice only sluice's. `scripts/test` installs Debian's
//! `prometheus` package (which carries `promtool`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn promtool(args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(repo().join("deploy/prometheus"))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "promtool could not run ({e}): scripts/test installs Debian's prometheus package"
            )
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}: {text}");
    text
}

#[test]
fn the_shipped_rules_are_what_the_example_generates() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["slo", "rules", "--config"])
        .arg(repo().join("sluice.example.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shipped =
        std::fs::read_to_string(repo().join("deploy/prometheus/sluice-rules.yml")).unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        shipped,
        "regenerate: sluice slo rules -c sluice.example.toml -o deploy/prometheus/sluice-rules.yml"
    );
}

#[test]
fn promtool_accepts_the_rules_and_their_tests_pass() {
    let checked = promtool(&["check", "rules", "sluice-rules.yml"]);
    assert!(checked.contains("SUCCESS: 37 rules found"), "{checked}");
    let tested = promtool(&["test", "rules", "sluice-rules.test.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

#[test]
fn a_configuration_without_slos_is_refused_by_name() {
    let dir = std::env::temp_dir().join(format!("sluice-slo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("none.toml");
    std::fs::write(
        &file,
        "[providers.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n[models.m]\ndeployments = [{ provider = \"p\", model = \"x\" }]\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["slo", "rules", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no [slo.*] section"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_query_of_the_grafana_dashboard_is_promql_prometheus_accepts() {
    let text = std::fs::read_to_string(repo().join("deploy/grafana/sluice.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    let mut n = 0;
    for p in v["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            // Grafana's variables, as Grafana fills them in.
            let expr = t["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "1m")
                .replace("$group", ".*");
            n += 1;
            rules.push_str(&format!(
                "      - record: dashboard_query_{n}\n        expr: {}\n",
                serde_json::Value::from(expr)
            ));
        }
    }
    assert!(n >= 16, "{n} queries");
    let dir = std::env::temp_dir().join(format!("sluice-dash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("dashboard.yml"), rules).unwrap();
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(dir.join("dashboard.yml"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("SUCCESS: {n} rules found")),
        "{text}"
    );
}

#[tokio::test]
async fn diagnose_asks_a_running_gateway_and_prints_its_answer() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("sluice-diag-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gw.toml");
    std::fs::write(
        &file,
        format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\n[ledger]\nstore = \"off\"\n[providers.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n[models.m]\ndeployments = [{{ provider = \"p\", model = \"x\" }}]\n"
        ),
    )
    .unwrap();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--config"])
        .arg(&file)
        .env("SLUICE_LOG", "error")
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args([
                "diagnose",
                "--url",
                &url,
                "--window",
                "1m",
                "--baseline",
                "5m",
            ])
            .output()
            .unwrap()
    };
    // The gateway takes a moment to listen: asked until it answers, for 20 s at most.
    let mut out = run();
    for _ in 0..200 {
        if out.status.success() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        out = run();
    }
    let _ = serve.kill();
    let _ = serve.wait();
    std::fs::remove_dir_all(&dir).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A gateway that just started has no baseline: it says so, and gives no verdict.
    assert!(
        text.starts_with("no baseline yet: 0 calls in the baseline window"),
        "{text}"
    );
    assert!(text.contains("What to do: ask again"), "{text}");
    assert!(
        text.contains("0 calls in the last 60 s, 0 in the 300 s before"),
        "{text}"
    );
}
