//! The `sluice` binary end to end: the README's demo command, config checking and scenarios.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

fn sluice(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env("SLUICE_LOG", "error")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn the_demo_runs_and_reports_in_plain_words() {
    // A short run of the healthy scenario keeps the test quick; `sluice demo` alone replays
    // the full doc-analysis scenario.
    let (ok, text) = sluice(&[
        "demo",
        "--scenario",
        "steady",
        "--duration",
        "2s",
        "--seed",
        "3",
    ]);
    assert!(ok, "{text}");
    assert!(text.contains("What clients saw"), "{text}");
    assert!(text.contains("total P999"), "{text}");
    assert!(
        text.contains("interactive requests waited more than 10.0 s"),
        "{text}"
    );
    assert!(text.contains("alpha/alpha-chat"), "{text}");
    // The token bill comes from each column's ledger: every column counted its calls.
    assert!(text.contains("The token bill"), "{text}");
    let calls = text
        .lines()
        .find(|l| l.starts_with("calls "))
        .unwrap_or_else(|| panic!("no calls row: {text}"));
    let counts: Vec<u64> = calls
        .split_whitespace()
        .skip(1)
        .map(|n| n.replace(',', "").parse().unwrap())
        .collect();
    assert_eq!(counts.len(), 3, "{calls}");
    assert!(counts.iter().all(|n| *n > 0 && *n == counts[0]), "{calls}");
}

/// The secret variables `sluice.example.toml` names.
const EXAMPLE_KEYS: [&str; 7] = [
    "OPENAI_API_KEY",
    "DEEPSEEK_API_KEY",
    "ANTHROPIC_API_KEY",
    "MOONSHOT_API_KEY",
    "ZHIPU_API_KEY",
    "MINIMAX_API_KEY",
    "HUNYUAN_API_KEY",
];

#[test]
fn config_check_passes_the_example_and_lists_every_error() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../sluice.example.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["config", "check", example])
        .envs(EXAMPLE_KEYS.map(|k| (k, "x")))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let bad = std::env::temp_dir().join(format!("sluice-bad-{}.toml", std::process::id()));
    std::fs::write(
        &bad,
        "[server]\nlisten = \"x\"\ncolour = 1\n[models.m]\ndeployments = []\n",
    )
    .unwrap();
    let (ok, text) = sluice(&["config", "check", bad.to_str().unwrap()]);
    std::fs::remove_file(&bad).unwrap();
    assert!(!ok);
    assert!(text.contains("3 configuration errors"), "{text}");
    assert!(text.contains("line 2, column 1: server.listen"), "{text}");
    assert!(text.contains("server.colour: unknown key"), "{text}");
}

#[test]
fn what_serve_would_refuse_is_refused_at_check_and_each_error_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gw.toml");
    std::fs::write(
        &file,
        "[ledger]\nstore = \"off\"\n[providers.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
         [models.m]\ndeployments = [{ provider = \"p\", model = \"x\" }]\n\
         [cache.semantic]\nenabled = true\nmodel = \"no-model-here\"\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let (ok, text) = sluice(&["config", "check", path]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("cache.semantic.model: the embedding model is missing")
            && text.contains("install it with `scripts/install-embedder"),
        "{text}"
    );
    let (ok, text) = sluice(&["serve", "--config", path]);
    assert!(!ok, "{text}");
    assert_eq!(
        text.matches("the embedding model is missing").count(),
        1,
        "said once: {text}"
    );
}

#[test]
fn a_deployment_priced_in_a_currency_with_no_rate_is_warned_of_at_check() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gw.toml");
    let base = "[ledger]\nstore = \"off\"\n[providers.p]\nkind = \"openai\"\n\
                base_url = \"http://127.0.0.1:9/v1\"\n\
                [models.m]\ndeployments = [{ provider = \"p\", model = \"glm-5.3\" }]\n";
    std::fs::write(&file, base).unwrap();
    let path = file.to_str().unwrap();
    let (ok, text) = sluice(&["config", "check", path]);
    assert!(ok, "a warning, not an error: {text}");
    assert!(
        text.contains("`glm-5.3` is priced in CNY") && text.contains("rates = { CNY = N }"),
        "{text}"
    );
    std::fs::write(
        &file,
        format!("{base}[billing]\nrates = {{ CNY = 0.14 }}\n"),
    )
    .unwrap();
    let (ok, text) = sluice(&["config", "check", path]);
    assert!(ok && !text.contains("priced in CNY"), "{text}");
}

#[test]
fn scenarios_run_in_virtual_time_from_the_command_line() {
    let (ok, text) = sluice(&["scenario", "run", "outage", "--seed", "5"]);
    assert!(ok, "{text}");
    assert!(text.contains("upstream alpha"), "{text}");
    let (ok, text) = sluice(&["scenario", "list"]);
    assert!(ok && text.contains("heavy-tail"), "{text}");
}

#[test]
fn the_example_simulator_config_is_valid() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../sim.example.toml"
    ))
    .unwrap();
    let sim = match sluice_sim::server::SimConfig::parse(&text) {
        Ok(sim) => sim,
        Err(e) => panic!("{e}"),
    };
    // The ready-made gateway in front of it checks, and names upstreams the simulator has.
    let gateway = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/sim-gateway.toml"
    );
    let (ok, out) = sluice(&["config", "check", "--strict", gateway]);
    assert!(ok, "{out}");
    let text = std::fs::read_to_string(gateway).unwrap();
    let cfg = sluice_config::gateway::load(&text, &std::collections::BTreeMap::new(), &[]).unwrap();
    for (name, p) in &cfg.providers {
        let upstream = p.upstream.base_url.split('/').nth(3).unwrap();
        assert!(
            sim.upstreams.iter().any(|(u, _)| u == upstream),
            "{name} points at `{upstream}`, which sim.example.toml does not define"
        );
    }
}

#[test]
fn the_overhead_benchmark_runs_and_every_request_succeeds() {
    let json = std::env::temp_dir().join(format!("sluice-overhead-{}.json", std::process::id()));
    let (ok, text) = sluice(&[
        "bench",
        "overhead",
        "--rates",
        "100",
        "--phase",
        "1s",
        "--rounds",
        "1",
        "--floor",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(ok, "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).unwrap();
    let r = &v["rates"][0];
    assert_eq!(r["sluice_errors"], 0, "{text}");
    assert!(r["requests_each"].as_u64().unwrap() > 50, "{text}");
    assert!(v["sluice_peak_rss_mib"].as_f64().unwrap() > 1.0);
    // The floor: the bare forwarder answered every request, and its numbers are reported.
    assert_eq!(r["forwarder_errors"], 0, "{text}");
    assert!(r["forwarder"]["p50_ms"].as_f64().unwrap() > 0.0, "{text}");
    assert!(r["floor_added"]["p99_ms"].is_number(), "{text}");
    // One round: its own figures are the pooled ones.
    assert_eq!(r["added_by_round"].as_array().unwrap().len(), 1, "{text}");
    assert_eq!(r["added_round_median"], r["added"], "{text}");
    assert_eq!(r["floor_added_round_median"], r["floor_added"], "{text}");
    assert!(text.contains("bare forwarder"), "{text}");
}

#[test]
fn a_new_key_comes_with_a_config_entry_that_checks_and_holds_only_its_hash() {
    let (ok, text) = sluice(&[
        "keys", "new", "--name", "ci", "--tenant", "acme", "--lane", "batch", "--models", "chat",
    ]);
    assert!(ok, "{text}");
    assert!(text.contains("models = [\"chat\"]"), "{text}");
    let key = text
        .split_whitespace()
        .find(|w| w.starts_with("sk-sluice-"))
        .unwrap()
        .to_string();
    let entry = &text[text.find("[keys.ci]").unwrap()..];
    assert!(
        !entry.contains(&key),
        "the entry holds the hash, not the key"
    );
    let config = format!(
        "[providers.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
         [models.chat]\ndeployments = [{{ provider = \"p\", model = \"m\" }}]\n{entry}"
    );
    let path = std::env::temp_dir().join(format!("sluice-keys-{}.toml", std::process::id()));
    std::fs::write(&path, config).unwrap();
    let (ok, out) = sluice(&["config", "check", path.to_str().unwrap()]);
    std::fs::remove_file(&path).unwrap();
    assert!(ok, "{out}");
    // Two keys made one after the other differ.
    let (_, again) = sluice(&["keys", "new", "--name", "ci", "--tenant", "acme"]);
    assert!(!again.contains(&key));
}

#[test]
fn usage_reads_the_ledger_a_config_names_as_a_table_csv_or_json() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sluice.toml");
    std::fs::write(&config, "[ledger]\npath = \"ledger.db\"\n").unwrap();
    // 120 settled calls (a third gpt-4o, the rest deepseek-chat), into the file the config
    // names (relative to the config's folder).
    let db = dir.path().join("ledger.db");
    let (ok, text) = sluice(&[
        "bench",
        "ledger",
        "--acks",
        "--entries",
        "120",
        "--path",
        db.to_str().unwrap(),
    ]);
    assert!(ok, "{text}");
    let cfg = config.to_str().unwrap();
    let (ok, table) = sluice(&["usage", "--config", cfg, "--group-by", "model"]);
    assert!(ok, "{table}");
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("model "), "{table}");
    assert!(
        lines[1].starts_with("deepseek-chat ") && lines[1].contains(" 80 "),
        "{table}"
    );
    assert!(
        lines[2].starts_with("gpt-4o ") && lines[2].contains(" 40 "),
        "{table}"
    );
    assert!(
        lines[3].starts_with("TOTAL ") && lines[3].contains(" 120 "),
        "{table}"
    );

    let (ok, csv) = sluice(&[
        "usage",
        "--config",
        cfg,
        "--group-by",
        "tenant",
        "--format",
        "csv",
        "--tenant",
        "tenant-7",
    ]);
    assert!(ok, "{csv}");
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows.len(), 2, "{csv}");
    assert!(rows[1].starts_with("tenant-7,3,0,"), "{csv}");

    let (ok, json) = sluice(&[
        "usage",
        "--config",
        cfg,
        "--group-by",
        "",
        "--format",
        "json",
    ]);
    assert!(ok, "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["total"]["requests"], 120);
    assert_eq!(v["total"]["cost_micros"], 120 * 2_400);

    let (ok, text) = sluice(&["usage", "--config", cfg, "--group-by", "colour"]);
    assert!(!ok);
    assert!(
        text.contains("group_by: unknown column \"colour\""),
        "{text}"
    );

    // Reading the ledger needs neither the admin token nor a provider's key.
    let serving = dir.path().join("serving.toml");
    std::fs::write(
        &serving,
        "[server]\nadmin_token_env = \"SLUICE_TEST_UNSET_ADMIN\"\n[ledger]\npath = \"ledger.db\"\n\
         [providers.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
         api_key_env = \"SLUICE_TEST_UNSET_KEY\"\n\
         [models.m]\ndeployments = [{ provider = \"p\", model = \"x\" }]\n",
    )
    .unwrap();
    let (ok, text) = sluice(&["usage", "--config", serving.to_str().unwrap()]);
    assert!(ok, "{text}");
    assert!(text.contains("TOTAL") && text.contains(" 120 "), "{text}");
}

#[test]
fn config_check_warns_of_unset_secrets_and_strict_makes_them_errors() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../sluice.example.toml");
    let run = |strict: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.args(["config", "check", example]);
        if strict {
            cmd.arg("--strict");
        }
        for k in EXAMPLE_KEYS {
            cmd.env_remove(k);
        }
        let out = cmd.output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (ok, text) = run(false);
    assert!(ok, "{text}");
    assert!(text.contains("7 warnings:"), "{text}");
    assert!(
        text.contains(
            "providers.openai.api_key_env: environment variable `OPENAI_API_KEY` is not set"
        ),
        "{text}"
    );
    assert!(text.contains(": ok ("), "{text}");
    let (ok, text) = run(true);
    assert!(!ok, "{text}");
    assert!(text.contains("7 configuration errors"), "{text}");
}

/// A gateway with one API key in front of the in-process simulated upstream, on a free
/// port; the records of its calls.
fn keyed_gateway(
    rt: &tokio::runtime::Runtime,
    secret: &str,
) -> (
    String,
    std::sync::Arc<parking_lot::Mutex<Vec<sluice_core::CallRecord>>>,
) {
    use parking_lot::Mutex;
    use std::sync::Arc;
    use std::time::Duration;
    let records = Arc::new(Mutex::new(Vec::new()));
    let sink = records.clone();
    let spec = sluice_sim::UpstreamSpec {
        ttft_median: Duration::from_millis(2),
        ttft_sigma: 0.0,
        per_token: Duration::ZERO,
        output_tokens_median: 4,
        output_tokens_sigma: 0.0,
        ..sluice_sim::UpstreamSpec::default()
    };
    let addr = rt.block_on(async move {
        let up = Arc::new(sluice_sim::SimUpstream::new(
            "sim",
            spec,
            1,
            tokio::time::Instant::now(),
        ));
        let dep = sluice_config::gateway::DeploymentConfig {
            provider: "sim".into(),
            model: "m".into(),
            weight: 1,
            name: None,
            rpm: None,
            tpm: None,
        };
        let key = sluice_economy::KeySpec {
            name: "bench".into(),
            tenant: Arc::from("acme"),
            lane: None,
            models: vec![],
        };
        let gw = sluice_gateway::GatewayBuilder::new()
            .provider("sim", Arc::new(sluice_sim::SimProvider(up)))
            .model("chat", vec![dep])
            .unpriced(sluice_economy::Unpriced::Free)
            .key(key, &sluice_economy::keys::hash_hex(secret))
            .on_record(Arc::new(move |r: &sluice_core::CallRecord| {
                sink.lock().push(r.clone());
            }))
            .build()
            .unwrap();
        let server = sluice_gateway::server::Server::bind(
            gw,
            "127.0.0.1:0".parse().unwrap(),
            Duration::from_secs(1),
        )
        .await
        .unwrap();
        let addr = server.local_addr().unwrap();
        tokio::spawn(server.run(std::future::pending()));
        addr
    });
    (format!("http://{addr}"), records)
}

#[test]
fn bench_sends_a_key_and_headers_and_fails_when_no_request_succeeds() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let secret = "sk-sluice-bench-test-key";
    let (url, records) = keyed_gateway(&rt, secret);
    let run = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            "--target",
            &url,
            "--count",
            "20",
            "--rate",
            "400",
            "--prompt-tokens",
            "20",
        ];
        args.extend_from_slice(extra);
        sluice(&args)
    };

    // Without the key every request is refused: the run says so and fails.
    let (ok, text) = run(&[]);
    assert!(!ok, "{text}");
    assert!(text.contains("failed, by status: 401: 20"), "{text}");
    assert!(text.contains("no request succeeded"), "{text}");
    let p50 = text.lines().find(|l| l.starts_with("total P50")).unwrap();
    assert!(
        p50.trim_end().ends_with('-'),
        "nothing to take a percentile of: {p50}"
    );

    // With it, and a header naming the lane, all succeed and the gateway saw both.
    records.lock().clear();
    let (ok, text) = run(&["--api-key", secret, "--header", "x-sluice-lane: batch"]);
    assert!(ok, "{text}");
    assert!(text.contains("20 requests to"), "{text}");
    let seen = records.lock();
    assert_eq!(seen.len(), 20);
    assert!(
        seen.iter()
            .all(|r| r.status == 200 && r.api_key.as_deref() == Some("bench"))
    );
    assert!(
        seen.iter().all(|r| r.lane.as_deref() == Some("batch")),
        "the header went through"
    );

    // A malformed header is refused before anything is sent.
    let (ok, text) = run(&["--header", "no colon here"]);
    assert!(!ok);
    assert!(text.contains("write it as `Name: value`"), "{text}");
}

#[test]
fn models_prints_the_catalog_with_a_configs_overrides() {
    let (ok, text) = sluice(&["models"]);
    assert!(ok, "{text}");
    let row = |text: &str, model: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(model))
            .unwrap_or_else(|| panic!("no {model} in:\n{text}"))
            .to_string()
    };
    for model in [
        "gpt-4o",
        "claude-sonnet-4-5",
        "deepseek-chat",
        "glm-4.5",
        "kimi-k2-0905-preview",
        "MiniMax-M2",
        "hunyuan-turbos-latest",
    ] {
        row(&text, model);
    }
    let ds = row(&text, "deepseek-chat");
    assert!(
        ds.contains("128000") && ds.contains("tools,json") && ds.contains("0.270"),
        "{ds}"
    );
    // GLM on bigmodel.cn bills in yuan: shown as published, and not billed without a rate.
    let glm = row(&text, "glm-5.3");
    assert!(
        glm.contains(" CNY ") && glm.contains("8.000") && glm.contains("no rate"),
        "{glm}"
    );
    for model in ["kimi-k3", "MiniMax-M3", "hy4"] {
        assert!(row(&text, model).contains(" USD "), "{model}");
    }

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("sluice.toml");
    std::fs::write(
        &cfg,
        "[ledger]\nstore = \"off\"\n[catalog.deepseek-chat]\ncontext_window = 64000\n\
         [catalog.in-house]\ncontext_window = 32768\nmax_output = 4096\nreasoning = true\n\
         [prices.in-house]\ninput = 0.1\noutput = 0.2\n",
    )
    .unwrap();
    let (ok, text) = sluice(&["models", "--config", cfg.to_str().unwrap()]);
    assert!(ok, "{text}");
    assert!(row(&text, "deepseek-chat").contains("64000"), "{text}");
    assert!(row(&text, "glm-5.3").contains("no rate"), "{text}");
    let own = row(&text, "in-house");
    assert!(
        own.contains("32768") && own.contains("reasoning") && own.contains("0.100"),
        "{own}"
    );

    // With a rate, yuan prices are billed in dollars: 8 yuan at 0.14 is 1.12.
    std::fs::write(
        &cfg,
        "[ledger]\nstore = \"off\"\n[billing]\nrates = { CNY = 0.14 }\n",
    )
    .unwrap();
    let (ok, text) = sluice(&["models", "--config", cfg.to_str().unwrap()]);
    assert!(ok, "{text}");
    let glm = row(&text, "glm-5.3");
    assert!(glm.contains("1.120") && glm.contains("3.920"), "{glm}");

    std::fs::write(&cfg, "[catalog.unknown-model]\ntools = true\n").unwrap();
    let (ok, text) = sluice(&["models", "--config", cfg.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        text.contains("needs `context_window` and `max_output`"),
        "{text}"
    );
}

#[test]
fn analyze_reports_each_document_and_names_the_one_it_cannot_read() {
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-documents/fixtures");
    let out_dir = tempfile::tempdir().unwrap();
    let dir = out_dir.path().join("reports");
    let run = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["analyze", "--out"])
        .arg(&dir)
        .arg(format!("{fixtures}/contract-zh.docx"))
        .arg(format!("{fixtures}/apache-2.0.pdf"))
        .arg(format!("{fixtures}/encrypted.pdf"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(
        run.status.code(),
        Some(1),
        "a refused file fails the run: {err}"
    );
    assert!(err.contains("encrypted.pdf: the PDF is encrypted"), "{err}");
    assert!(err.contains("2 documents analysed, 1 refused"), "{err}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("contract-zh.docx.json")).unwrap()).unwrap();
    let findings = report["findings"].as_array().unwrap();
    assert!(findings.len() >= 10, "{report}");
    assert!(findings.iter().all(|f| f["review"]["status"] == "reviewed"));
    // Each report says first what made it: the simulated reviewer, and the rules' version.
    let raw = std::fs::read_to_string(dir.join("contract-zh.docx.json")).unwrap();
    assert!(
        raw.starts_with("{\n  \"made_by\": {\n    \"reviewer\""),
        "{raw}"
    );
    let by = &report["made_by"];
    assert_eq!(by["reviewer"]["simulated"], true, "{by}");
    assert_eq!(by["reviewer"]["group"], "reviewer", "{by}");
    assert_eq!(by["rules"]["name"], "contract-risks", "{by}");
    assert_eq!(by["rules"]["version"].as_str().unwrap().len(), 12, "{by}");
    let md = std::fs::read_to_string(dir.join("apache-2.0.pdf.md")).unwrap();
    assert!(md.contains("warranty-disclaimer"), "{md}");
    assert!(md.contains("\n\n**Reviewer: simulated.**"), "{md}");
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.contains("**Reviewer: simulated.**"), "{summary}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["made_by"]["reviewer"]["simulated"], true);
    // The simulated verdicts follow the rules' severity (one step lower at most, where the
    // clause's words soften it), and each reason opens with its own level.
    let level = |w: &str| {
        ["none", "low", "medium", "high", "critical"]
            .iter()
            .position(|l| *l == w)
    };
    for f in findings {
        let risk = f["review"]["verdict"]["risk"].as_str().unwrap();
        let most = f["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| level(r["severity"].as_str().unwrap()))
            .max()
            .unwrap()
            .min(3);
        let got = level(risk).unwrap();
        assert!(got == most || got + 1 == most, "{f}");
        let reason = f["review"]["verdict"]["reason"].as_str().unwrap();
        assert!(reason.starts_with(&format!("{risk} risk")), "{f}");
    }

    let (ok, text) = sluice(&[
        "analyze",
        "--no-review",
        &format!("{fixtures}/contract-zh.txt"),
    ]);
    assert!(ok, "{text}");
    assert!(
        text.contains("zh-renew-auto") && text.contains("| - | matched"),
        "{text}"
    );
    assert!(text.contains("Reviews: 0 sent"), "{text}");
    assert!(
        text.contains("Not reviewed: the findings are the rules' matches."),
        "{text}"
    );
    assert!(!text.to_lowercase().contains("reviewer"), "{text}");
}
