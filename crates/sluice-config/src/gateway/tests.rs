use std::time::Duration;

use super::*;
use sluice_economy::Micros;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const GOOD: &str = r#"
[server]
listen = "127.0.0.1:0"
shutdown_grace = "5s"

[providers.deepseek]
kind = "openai"
base_url = "https://api.deepseek.com/v1"
api_key_env = "DEEPSEEK_API_KEY"
first_byte_timeout = "20s"

[providers.claude]
kind = "anthropic"
base_url = "https://api.anthropic.com/v1"
default_max_tokens = 2048

[models.chat]
deployments = [
  { provider = "deepseek", model = "deepseek-chat", weight = 3 },
  { provider = "claude", model = "claude-haiku-4-5" },
]
"#;

#[test]
fn a_good_file_loads_with_defaults_filled() {
    let cfg = load(GOOD, &env(&[("DEEPSEEK_API_KEY", "sk-x")]), &[]).unwrap();
    assert_eq!(cfg.server.shutdown_grace, Duration::from_secs(5));
    assert_eq!(cfg.server.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
    assert_eq!(cfg.server.worker_threads, None);
    assert_eq!(cfg.telemetry.latency_window, Duration::from_secs(60));
    assert_eq!(cfg.providers[0].0, "deepseek");
    assert_eq!(
        cfg.providers[0].1.http.first_byte_timeout,
        Duration::from_secs(20)
    );
    assert_eq!(
        cfg.providers[0].1.http.idle_timeout,
        Duration::from_secs(30)
    );
    let chat = &cfg.models[0].1;
    assert_eq!(chat.deployments[0].weight, 3);
    assert_eq!(chat.deployments[1].weight, 1);
    assert_eq!(
        chat.deployments[1].display_name(),
        "claude/claude-haiku-4-5"
    );
}

#[test]
fn every_error_is_reported_with_path_and_line() {
    let bad = r#"
[server]
listen = "nowhere"
colour = "blue"

[provider.x]
kind = "openai"

[providers.deepseek]
kind = "openai"
base_url = "ftp://example.com"
api_key_env = "MISSING_KEY"
default_max_tokens = 10

[providers.weird]
kind = "grpc"
base_url = "http://localhost"

[models.chat]
deployments = [
  { provider = "deepseek", model = "a", weight = 0 },
  { provider = "nobody", model = "b" },
]
"#;
    let err = load(bad, &env(&[]), &[]).unwrap_err();
    let text = err.to_string();
    let has = |path: &str, line: usize| {
        assert!(
            err.iter().any(|d| d.path == path && d.line == Some(line)),
            "missing {path} at line {line} in:\n{text}"
        );
    };
    has("server.listen", 3);
    has("server.colour", 4);
    has("provider", 6);
    has("providers.deepseek.base_url", 11);
    has("providers.deepseek.api_key_env", 12);
    has("providers.deepseek.default_max_tokens", 13);
    has("providers.weird.kind", 16);
    has("models.chat.deployments[0].weight", 21);
    has("models.chat.deployments[1].provider", 22);
    assert_eq!(err.len(), 9, "{text}");
}

#[test]
fn worker_threads_are_checked() {
    let with = |n: &str| format!("[server]\nlisten = \"127.0.0.1:0\"\nworker_threads = {n}\n");
    let cfg = load(&with("2"), &env(&[]), &[]).unwrap();
    assert_eq!(cfg.server.worker_threads, Some(2));
    for bad in ["0", "100000"] {
        let err = load(&with(bad), &env(&[]), &[]).unwrap_err();
        assert!(
            err.iter()
                .any(|d| d.path == "server.worker_threads" && d.line == Some(3)),
            "{err}"
        );
    }
}

#[test]
fn extra_providers_satisfy_references() {
    let text = "[models.m]\ndeployments = [{ provider = \"sim-a\", model = \"x\" }]\n";
    assert!(load(text, &env(&[]), &[]).is_err());
    let cfg = load(text, &env(&[]), &["sim-a"]).unwrap();
    assert_eq!(cfg.models.len(), 1);
}

#[test]
fn duplicate_deployment_names_are_rejected() {
    let text = r#"
[providers.p]
kind = "openai"
base_url = "http://localhost:1/v1"
[models.m]
deployments = [{ provider = "p", model = "x" }, { provider = "p", model = "x" }]
"#;
    let err = load(text, &env(&[]), &[]).unwrap_err();
    assert!(err.to_string().contains("used twice"), "{err}");
}

#[test]
fn the_example_config_is_valid() {
    let text = include_str!("../../../../sluice.example.toml");
    let vars = env(&[
        ("OPENAI_API_KEY", "x"),
        ("DEEPSEEK_API_KEY", "x"),
        ("ANTHROPIC_API_KEY", "x"),
        ("MOONSHOT_API_KEY", "x"),
        ("ZHIPU_API_KEY", "x"),
        ("MINIMAX_API_KEY", "x"),
        ("HUNYUAN_API_KEY", "x"),
    ]);
    if let Err(e) = load(text, &vars, &[]) {
        panic!("{e}");
    }
}

#[test]
fn hedging_is_configured_per_group_and_checked() {
    let text = r#"
[providers.p]
kind = "openai"
base_url = "http://localhost:1/v1"
[models.fast]
deployments = [{ provider = "p", model = "x" }]
hedge = { quantile = 0.9, budget = 0.08 }
[models.bad]
deployments = [{ provider = "p", model = "y" }]
hedge = { quantile = 1.5, burst = 0.5 }
"#;
    let err = load(text, &env(&[]), &[]).unwrap_err();
    let paths: Vec<&str> = err.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(
        paths,
        ["models.bad.hedge.quantile", "models.bad.hedge.burst"],
        "{err}"
    );
    let ok = text.split("[models.bad]").next().unwrap();
    let cfg = load(ok, &env(&[]), &[]).unwrap();
    let h = *cfg.models[0].1.hedge.written().unwrap();
    assert_eq!((h.quantile, h.budget, h.min_samples), (0.9, 0.08, 20));
}

#[test]
fn lanes_limits_and_retries_are_read_and_checked() {
    let text = r#"
[lanes.live]
share = 0.7
max_wait = "5s"
[lanes.bulk]
share = 0.6
max_queue = 50000
[providers.p]
kind = "openai"
base_url = "http://localhost:1/v1"
[models.a]
deployments = [{ provider = "p", model = "x" }]
limit = { algorithm = "vegas", initial = 8, max = 64 }
retry = { max_attempts = 2 }
[models.b]
deployments = [{ provider = "p", model = "y" }]
limit = { initial = 0 }
retry = { max_attempts = 20, budget = 3.0 }
"#;
    let err = load(text, &env(&[]), &[]).unwrap_err();
    let paths: Vec<&str> = err.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "lanes",
            "models.b.limit",
            "models.b.retry.max_attempts",
            "models.b.retry.budget"
        ],
        "{err}"
    );
    let fixed = text.replace("share = 0.6", "share = 0.3");
    let ok = fixed.split("[models.b]").next().unwrap();
    let cfg = load(ok, &env(&[]), &[]).unwrap();
    assert_eq!(
        cfg.lanes
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["live", "bulk"]
    );
    assert_eq!(cfg.lanes[0].1.max_wait, Duration::from_secs(5));
    assert_eq!(cfg.lanes[1].1.max_queue, 50000);
    let a = &cfg.models[0].1;
    assert_eq!(
        a.limit.written().unwrap().algorithm,
        sluice_tail::limit::LimitAlgorithm::Vegas
    );
    assert_eq!(a.retry.written().unwrap().max_attempts, 2);
}

#[test]
fn without_lanes_the_defaults_apply() {
    let cfg = load("", &env(&[]), &[]).unwrap();
    assert_eq!(
        cfg.lanes
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["interactive", "batch"]
    );
}

#[test]
fn breakers_are_read_and_checked() {
    let text = r#"
[providers.p]
kind = "openai"
base_url = "http://localhost:1/v1"
[models.a]
deployments = [{ provider = "p", model = "x" }]
breaker = { failure_rate = 0.3, open_for = "5s" }
[models.b]
deployments = [{ provider = "p", model = "y" }]
breaker = { failure_rate = 0.0, min_calls = 0, window = "100ms", close_after = 0 }
"#;
    let err = load(text, &env(&[]), &[]).unwrap_err();
    assert_eq!(err.len(), 4, "{err}");
    let ok = text.split("[models.b]").next().unwrap();
    let cfg = load(ok, &env(&[]), &[]).unwrap();
    let b = cfg.models[0].1.breaker.written().cloned().unwrap();
    assert_eq!(
        (b.failure_rate, b.open_for, b.min_calls),
        (0.3, Duration::from_secs(5), 20)
    );
}

#[test]
fn a_group_timeout_is_read_and_checked() {
    let text = r#"
[providers.p]
kind = "openai"
base_url = "http://localhost:1/v1"
[models.a]
deployments = [{ provider = "p", model = "x" }]
timeout = "2s"
[models.b]
deployments = [{ provider = "p", model = "y" }]
timeout = "0s"
"#;
    let err = load(text, &env(&[]), &[]).unwrap_err();
    assert_eq!(err.len(), 1, "{err}");
    assert!(err.to_string().contains("models.b.timeout"), "{err}");
    let ok = text.split("[models.b]").next().unwrap();
    let cfg = load(ok, &env(&[]), &[]).unwrap();
    assert_eq!(cfg.models[0].1.timeout, Some(Duration::from_secs(2)));
}

#[test]
fn tenants_lanes_and_deployment_rate_limits_are_read_and_checked() {
    let text = r#"
[tenants.acme]
lane = "batch"
[tenants.globex]
credits = 5.0
tokens_per_day = 100000
spend_per_month = 20.0
[tenants.initech]
lane = "bulk"
tokens_per_day = 0
spend_per_month = -1.0
[providers.p]
kind = "openai"
base_url = "http://localhost:1/v1"
[models.a]
deployments = [{ provider = "p", model = "x", rpm = 500, tpm = 200000 }, { provider = "p", model = "y", rpm = 0 }]
"#;
    let err = load(text, &env(&[]), &[]).unwrap_err();
    let paths: Vec<&str> = err.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "tenants.initech.lane",
            "tenants.initech.tokens_per_day",
            "tenants.initech.spend_per_month",
            "models.a.deployments[1].rpm"
        ],
        "{err}"
    );
    assert!(err.to_string().contains("`bulk` is not a lane"), "{err}");
    let ok = text
        .replace("lane = \"bulk\"", "")
        .replace("tokens_per_day = 0", "")
        .replace("spend_per_month = -1.0", "")
        .replace(", rpm = 0", "");
    let cfg = load(&ok, &env(&[]), &[]).unwrap();
    assert_eq!(cfg.tenants.len(), 3);
    assert_eq!(cfg.tenants[0].1.lane.as_deref(), Some("batch"));
    assert_eq!(cfg.tenants[1].1.lane, None);
    let g = &cfg.tenants[1].1;
    assert_eq!(
        (
            g.limits.credits,
            g.limits.tokens_per_day,
            g.limits.spend_per_month
        ),
        (
            Some(Micros(5_000_000)),
            Some(100_000),
            Some(Micros(20_000_000))
        )
    );
    let d = &cfg.models[0].1.deployments;
    assert_eq!((d[0].rpm, d[0].tpm), (Some(500), Some(200_000)));
    assert_eq!((d[1].rpm, d[1].tpm), (None, None));
}

#[test]
fn keys_prices_and_the_admin_token_are_read_and_checked() {
    let hash = "a".repeat(64);
    let text = format!(
        r#"
[server]
admin_token_env = "SLUICE_ADMIN"
require_keys = true
[keys.ci]
tenant = "acme"
sha256 = "{hash}"
lane = "batch"
models = ["chat"]
[keys.bad]
tenant = ""
sha256 = "xyz"
lane = "vip"
models = ["nope"]
[prices."glm-4.5-air"]
input = 0.11
output = 0.28
[prices.broken]
input = -1.0
output = 1.0
[providers.p]
kind = "openai"
base_url = "http://localhost:1/v1"
[models.chat]
deployments = [{{ provider = "p", model = "glm-4.5-air" }}]
"#
    );
    let err = load(&text, &env(&[]), &[]).unwrap_err();
    let paths: Vec<&str> = err.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "server.admin_token_env",
            "keys.bad.tenant",
            "keys.bad.sha256",
            "keys.bad.lane",
            "keys.bad.models",
            "prices.broken.input"
        ],
        "{err}"
    );
    let ok = text[..text.find("[keys.bad]").unwrap()].to_string()
        + &text[text.find("[prices.\"glm").unwrap()..text.find("[prices.broken]").unwrap()]
        + &text[text.find("[providers.p]").unwrap()..];
    let cfg = load(&ok, &env(&[("SLUICE_ADMIN", "admin-token-for-tests")]), &[]).unwrap();
    assert_eq!(cfg.server.require_keys, Some(true));
    assert_eq!(cfg.keys[0].1.spec.models, ["chat"]);
    assert_eq!(
        cfg.keys[0].1.spec.name, cfg.keys[0].0,
        "named after its table"
    );
    assert_eq!(cfg.prices[0].0, "glm-4.5-air");
    assert_eq!(cfg.prices[0].1.cached_input, None);
}

#[test]
fn the_answer_cache_is_off_by_default_and_checked() {
    let cfg = load(GOOD, &env(&[("DEEPSEEK_API_KEY", "sk-x")]), &[]).unwrap();
    assert_eq!(cfg.cache, CacheConfig::default());
    assert!(!cfg.cache.enabled);

    let with = |body: &str| format!("[server]\nlisten = \"127.0.0.1:0\"\n[cache]\n{body}\n");
    let cfg = load(
        &with("enabled = true\nttl = \"90s\"\nmax_bytes = 4096"),
        &env(&[]),
        &[],
    )
    .unwrap();
    assert!(cfg.cache.enabled);
    assert_eq!(cfg.cache.ttl, Duration::from_secs(90));
    assert_eq!(cfg.cache.max_bytes, 4096);

    let err = load(
        &with("enabled = true\nttl = \"0s\"\nmax_bytes = 10\nsize = 3"),
        &env(&[]),
        &[],
    )
    .unwrap_err();
    for (path, line) in [("cache.ttl", 5), ("cache.max_bytes", 6), ("cache.size", 7)] {
        assert!(
            err.iter().any(|d| d.path == path && d.line == Some(line)),
            "missing {path} at line {line} in:\n{err}"
        );
    }
}

#[test]
fn prefix_affinity_is_read_and_checked() {
    let with = |affinity: &str| {
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[providers.p]\nkind = \"openai\"\nbase_url = \"http://localhost\"\n[models.chat]\ndeployments = [{{ provider = \"p\", model = \"m\" }}]\n{affinity}\n"
        )
    };
    let cfg = load(&with(""), &env(&[]), &[]).unwrap();
    assert_eq!(cfg.models[0].1.affinity, None);
    let cfg = load(&with("affinity = {}"), &env(&[]), &[]).unwrap();
    assert_eq!(
        cfg.models[0].1.affinity,
        Some(sluice_routing::affinity::AffinityPolicy::default())
    );
    let cfg = load(
        &with("affinity = { min_share = 0.8, ttl = \"1h\" }"),
        &env(&[]),
        &[],
    )
    .unwrap();
    let a = cfg.models[0].1.affinity.unwrap();
    assert_eq!((a.min_share, a.ttl), (0.8, Duration::from_secs(3600)));
    let err = load(
        &with("affinity = { min_share = 1.5, ttl = \"0s\", sticky = true }"),
        &env(&[]),
        &[],
    )
    .unwrap_err();
    for path in [
        "models.chat.affinity.min_share",
        "models.chat.affinity.ttl",
        "models.chat.affinity.sticky",
    ] {
        assert!(
            err.iter().any(|d| d.path == path && d.line == Some(8)),
            "missing {path} in:\n{err}"
        );
    }
}

#[test]
fn cache_breakpoint_settings_are_anthropic_only() {
    let with = |kind: &str| {
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[providers.p]\nkind = \"{kind}\"\nbase_url = \"http://localhost\"\ncache_breakpoints = false\ncache_min_tokens = 2048\n"
        )
    };
    let cfg = load(&with("anthropic"), &env(&[]), &[]).unwrap();
    let sluice_providers::KindParams::Anthropic(a) = &cfg.providers[0].1.settings else {
        panic!("an anthropic provider read as another kind");
    };
    assert_eq!((a.cache_breakpoints, a.cache_min_tokens), (false, 2048));
    let err = load(&with("openai"), &env(&[]), &[]).unwrap_err();
    for (path, line) in [
        ("providers.p.cache_breakpoints", 6),
        ("providers.p.cache_min_tokens", 7),
    ] {
        assert!(
            err.iter().any(|d| d.path == path
                && d.line == Some(line)
                && d.message == "only applies to kind = \"anthropic\""),
            "missing {path} at line {line} in:\n{err}"
        );
    }
}

/// A provider's table is read in parts by its kind; a key no part takes is named once, with
/// the nearest key any part takes, and each kind's own checks run.
#[test]
fn a_providers_keys_are_checked_against_its_kind() {
    let text = "[server]\nlisten = \"127.0.0.1:0\"\n[providers.p]\nkind = \"anthropic\"\n\
                base_url = \"http://localhost\"\nidle_timeot = \"5s\"\n\
                default_max_tokens = 0\nconnect_timeout = \"0s\"\n";
    let err = load(text, &env(&[]), &[]).unwrap_err();
    let at = |path: &str| {
        err.iter()
            .filter(|d| d.path == path)
            .map(|d| d.message.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        at("providers.p.idle_timeot"),
        ["unknown key `idle_timeot`; did you mean `idle_timeout`?"]
    );
    assert_eq!(at("providers.p.default_max_tokens"), ["must be at least 1"]);
    assert_eq!(
        at("providers.p.connect_timeout"),
        ["must be longer than zero"]
    );
    let bad_kind = text.replace("\"anthropic\"", "\"anthropc\"");
    let err = load(&bad_kind, &env(&[]), &[]).unwrap_err();
    assert!(
        err.iter()
            .any(|d| d.path == "providers.p.kind" && d.message.contains("did you mean `anthropic`")),
        "{err}"
    );
}

#[test]
fn the_responses_setting_is_openai_only() {
    let with = |kind: &str| {
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[providers.p]\nkind = \"{kind}\"\nbase_url = \"http://localhost\"\nresponses = true\n"
        )
    };
    let cfg = load(&with("openai"), &env(&[]), &[]).unwrap();
    assert_eq!(
        cfg.providers[0]
            .1
            .openai_settings(None)
            .map(|o| o.responses),
        Some(true)
    );
    let err = load(&with("anthropic"), &env(&[]), &[]).unwrap_err();
    assert!(
        err.iter().any(|d| d.path == "providers.p.responses"
            && d.line == Some(6)
            && d.message == "only applies to kind = \"openai\""),
        "{err}"
    );
}

#[test]
fn a_price_without_output_is_refused_and_the_unpriced_policy_is_read() {
    let base = r#"
[providers.p]
kind = "openai"
base_url = "http://localhost:1/v1"
[models.a]
deployments = [{ provider = "p", model = "x" }]
"#;
    let text = format!("{base}[prices.x]\ninput = 1.0\n");
    let err = load(&text, &env(&[]), &[]).unwrap_err();
    let all = err.to_string();
    assert!(all.contains("prices.x") && all.contains("output"), "{all}");
    let text = format!("{base}[prices.x]\ninput = 1.0\noutput = -2\n");
    let err = load(&text, &env(&[]), &[]).unwrap_err();
    assert!(err.to_string().contains("0 or more"), "{err}");
    let cfg = load(base, &env(&[]), &[]).unwrap();
    assert_eq!(
        cfg.billing.unpriced,
        sluice_economy::Unpriced::Refuse,
        "the default"
    );
    let text = format!("{base}[billing]\nunpriced = \"free\"\n");
    let cfg = load(&text, &env(&[]), &[]).unwrap();
    assert_eq!(cfg.billing.unpriced, sluice_economy::Unpriced::Free);
    let text = format!("{base}[prices.x]\ninput = 0.5\noutput = 2\n");
    let cfg = load(&text, &env(&[]), &[]).unwrap();
    assert_eq!(
        cfg.prices[0].1.output.0, 2_000_000,
        "micro-units, converted once"
    );
}

#[test]
fn one_error_never_hides_the_next_in_the_same_table() {
    // Each pair: fixing the first used to reveal the second.
    let text = r#"
[cache]
enabled = "yes"
ttl = "1 fortnight"
[tenants.acme]
rpm = -5
lane = "fast"
[providers.p]
kind = "opnai"
base_url = "api.example.com/v1"
[models.chat]
deployments = [{ provider = "p", model = "x" }]
limit = { algorithm = "gradiant" }
hedge = { quantile = 1.5, min_sample = 3 }
retry = { max_attempts = 0 }
"#;
    let err = load(text, &env(&[]), &[]).unwrap_err();
    let shown = err.to_string();
    let said = |path: &str, words: &str| {
        let d = err
            .iter()
            .find(|d| d.path == path)
            .unwrap_or_else(|| panic!("nothing at {path} in:\n{shown}"));
        assert!(
            d.message.contains(words),
            "{path}: {} (want {words})",
            d.message
        );
    };
    said("cache.enabled", "expected true or false, found \"yes\"");
    said("cache.ttl", "a duration such as 30s or 2m");
    said("tenants.acme.rpm", "a whole number >= 0, found -5");
    said("tenants.acme.lane", "`fast` is not a lane");
    said("providers.p.kind", "did you mean `openai`?");
    said("providers.p.base_url", "is not an http(s) URL");
    said("models.chat.limit.algorithm", "did you mean `gradient2`?");
    said("models.chat.hedge.quantile", "between 0 and 1");
    said(
        "models.chat.hedge.min_sample",
        "did you mean `min_samples`?",
    );
    said("models.chat.retry.max_attempts", "between 1 and 10");
    assert_eq!(err.len(), 10, "{shown}");
}

#[test]
fn unset_secrets_are_errors_to_serve_and_warnings_to_check() {
    let text = r#"
[server]
admin_token_env = "NO_SUCH_ADMIN_TOKEN"
[providers.p]
kind = "openai"
base_url = "http://localhost:1/v1"
api_key_env = "NO_SUCH_KEY"
[models.chat]
deployments = [{ provider = "p", model = "x" }]
"#;
    let err = load(text, &env(&[]), &[]).unwrap_err();
    let paths: Vec<&str> = err.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(paths, ["server.admin_token_env", "providers.p.api_key_env"]);
    let checked = check(text, &env(&[]), &[], Secrets::Warn);
    assert!(checked.errors.is_empty(), "{}", checked.errors);
    assert!(checked.config.is_some());
    let warned: Vec<&str> = checked.warnings.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(
        warned,
        ["server.admin_token_env", "providers.p.api_key_env"]
    );
    let set = env(&[("NO_SUCH_ADMIN_TOKEN", "t"), ("NO_SUCH_KEY", "k")]);
    assert!(
        check(text, &set, &[], Secrets::Required)
            .warnings
            .is_empty()
    );
}

#[test]
fn serving_without_keys_while_keys_exist_is_warned_about() {
    let hash = "a".repeat(64);
    let base = "[models.chat]\ndeployments = [{ provider = \"sim\", model = \"x\" }]\n";
    let with_keys = format!(
        "[server]\nrequire_keys = false\n[keys.k]\ntenant = \"t\"\nsha256 = \"{hash}\"\n{base}"
    );
    let c = check(&with_keys, &env(&[]), &["sim"], Secrets::Required);
    assert!(c.config.is_some(), "{}", c.errors);
    assert_eq!(c.warnings.len(), 1);
    let w = &c.warnings.0[0];
    assert_eq!(w.path, "server.require_keys");
    assert!(w.message.contains("[keys]"), "{}", w.message);
    let api_keys = format!("[server]\nrequire_keys = false\nadmin_token_env = \"T\"\n{base}");
    let c = check(
        &api_keys,
        &env(&[("T", "admin-token-for-tests")]),
        &["sim"],
        Secrets::Required,
    );
    assert!(
        c.warnings.0[0].message.contains("/admin/keys"),
        "{}",
        c.warnings
    );
    // Left out, or with no way for keys to exist, there is nothing to warn about.
    let quiet = format!("[server]\nrequire_keys = false\n{base}");
    assert!(
        check(&quiet, &env(&[]), &["sim"], Secrets::Required)
            .warnings
            .is_empty()
    );
}

#[test]
fn the_access_log_is_off_unless_asked_for() {
    let base = "[models.chat]\ndeployments = [{ provider = \"sim\", model = \"x\" }]\n";
    let cfg = load(base, &env(&[]), &["sim"]).unwrap();
    assert_eq!(
        cfg.telemetry.access_log,
        sluice_telemetry::AccessLogSetting::Off
    );
    let on = format!("[telemetry]\naccess_log = \"logfmt\"\n{base}");
    let cfg = load(&on, &env(&[]), &["sim"]).unwrap();
    assert_eq!(
        cfg.telemetry.access_log,
        sluice_telemetry::AccessLogSetting::Logfmt
    );
    let bad = format!("[telemetry]\naccess_log = \"jsn\"\n{base}");
    let err = load(&bad, &env(&[]), &["sim"]).unwrap_err();
    assert!(err.to_string().contains("did you mean `json`?"), "{err}");
}

#[test]
fn catalog_fallbacks_and_routes_are_read_and_checked() {
    let groups = r#"
[models.chat]
deployments = [{ provider = "sim", model = "x" }]
fallbacks = ["big"]
[models.big]
deployments = [{ provider = "sim", model = "y" }]
"#;
    let good = format!(
        r#"{groups}
[catalog.x]
context_window = 32000
max_output = 4000
tools = true
[routes.auto]
default = "chat"
rules = [
  {{ name = "reviews", task = ["contract-review"], group = "big" }},
  {{ min_prompt_tokens = 30000, group = "big" }},
  {{ script = "cjk", group = "chat" }},
]
[keys.k]
tenant = "t"
sha256 = "{}"
models = ["auto"]
"#,
        "a".repeat(64)
    );
    let c = check(&good, &env(&[]), &["sim"], Secrets::Required);
    let cfg = c.config.unwrap_or_else(|| panic!("{}", c.errors));
    assert_eq!(cfg.models[0].1.fallbacks, ["big"]);
    assert_eq!(cfg.catalog[0].1.context_window, Some(32_000));
    assert_eq!(cfg.routes[0].1.rules.len(), 3);
    assert_eq!(
        cfg.routes[0].1.rules[2].script,
        Some(sluice_routing::rules::Script::Cjk)
    );
    assert!(c.warnings.is_empty(), "{}", c.warnings);

    let bad = r#"
[models.chat]
deployments = [{ provider = "sim", model = "x" }]
fallbacks = ["bigg", "solo", "huge"]
[models.big]
deployments = [{ provider = "sim", model = "y" }]
fallbacks = ["solo"]
[models.solo]
deployments = [{ provider = "sim", model = "z" }]
fallbacks = ["big"]
[catalog.x]
context_window = 1000
max_output = 2000
[routes.auto]
default = "chatt"
rules = [
  { task = ["review"], group = "big" },
  { task = ["review"], script = "cjk", group = "chat" },
  { min_prompt_tokens = 500, max_prompt_tokens = 100, group = "big" },
  { task = ["review", "summary"], group = "solo" },
]
[routes.chat]
default = "big"
"#;
    let c = check(bad, &env(&[]), &["sim"], Secrets::Required);
    let shown = c.errors.to_string();
    let said = |path: &str, words: &str| {
        assert!(
            c.errors
                .iter()
                .any(|d| d.path == path && d.message.contains(words)),
            "{path}: {words}\n{shown}"
        );
    };
    said("models.chat.fallbacks[0]", "did you mean `big`?");
    // Every unknown group of the list, not only the first.
    said("models.chat.fallbacks[2]", "no model group named `huge`");
    said(
        "models.big.fallbacks",
        "falls back in a circle: big -> solo -> big",
    );
    said("catalog.x.max_output", "longer than the context window");
    said("routes.auto.default", "did you mean `chat`?");
    said("routes.auto.rules[1]", "can never fire: rules[0]");
    said(
        "routes.auto.rules[2].max_prompt_tokens",
        "below min_prompt_tokens",
    );
    said("routes.chat", "already a model group");
    // Rules whose order decides are pointed out, not refused.
    let w = c.warnings.to_string();
    assert!(
        w.contains("routes.auto.rules[3]") && w.contains("the first match wins"),
        "{w}"
    );
}

#[test]
fn routers_are_read_and_their_settings_checked() {
    let groups = r#"
[models.cheap]
deployments = [{ provider = "sim", model = "x" }]
[models.strong]
deployments = [{ provider = "sim", model = "y" }]
"#;
    let good = format!(
        "{groups}[routers.auto]\ncandidates = [\"cheap\", \"strong\"]\nfloor = 0.9\n[keys.k]\ntenant = \"t\"\nsha256 = \"{}\"\nmodels = [\"auto\"]\n",
        "a".repeat(64)
    );
    let c = check(&good, &env(&[]), &["sim"], Secrets::Required);
    let cfg = c.config.unwrap_or_else(|| panic!("{}", c.errors));
    let (name, r) = &cfg.routers[0];
    assert_eq!(
        (name.as_str(), r.policy().floor, r.policy().explore),
        ("auto", 0.9, 0.15)
    );
    assert_eq!(r.candidates, ["cheap", "strong"]);

    let bad = format!(
        "{groups}[routers.cheap]\ncandidates = []\n[routers.auto]\ncandidates = [\"cheep\", \"strong\", \"strong\"]\nfloor = 1.5\nconfidence = 0.3\nexplore = -0.1\nrevisit = 2\nmemory = 0\nlatency_weight = -1\ngood_answer_value = 0\n"
    );
    let c = check(&bad, &env(&[]), &["sim"], Secrets::Required);
    let shown = c.errors.to_string();
    for (path, words) in [
        ("routers.cheap", "already a model group"),
        ("routers.cheap.candidates", "at least one"),
        ("routers.auto.candidates", "did you mean `cheap`?"),
        ("routers.auto.floor", "above 0 and below 1 (is 1.5)"),
        ("routers.auto.confidence", "above 0.5"),
        ("routers.auto.explore", "from 0 to 1"),
        ("routers.auto.revisit", "from 0 to 1"),
        ("routers.auto.memory", "at least 1"),
        ("routers.auto.latency_weight", "not be negative"),
        ("routers.auto.good_answer_value", "above 0"),
    ] {
        assert!(
            c.errors
                .iter()
                .any(|d| d.path == path && d.message.contains(words)),
            "{path}: {words}\n{shown}"
        );
    }
}

#[test]
fn the_semantic_cache_is_off_unless_asked_for_and_its_settings_are_checked() {
    let base = "[models.chat]\ndeployments = [{ provider = \"sim\", model = \"x\" }]\n";
    let cfg = load(base, &env(&[]), &["sim"]).unwrap();
    assert!(!cfg.cache.semantic.enabled);
    assert_eq!(cfg.cache.semantic.threshold, 0.9);
    let on = format!("[cache.semantic]\nenabled = true\nthreshold = 0.95\nmodel = \"m\"\n{base}");
    let cfg = load(&on, &env(&[]), &["sim"]).unwrap();
    assert!(cfg.cache.semantic.enabled && cfg.cache.semantic.threshold == 0.95);
    let bad = format!(
        "[cache.semantic]\nenabled = true\nthreshold = 1.5\ntemperature_ceiling = -1\nmax_question_chars = 0\nttl = \"0s\"\nmax_bytes = 10\nmodel = \"\"\n{base}"
    );
    let c = check(&bad, &env(&[]), &["sim"], Secrets::Required);
    let shown = c.errors.to_string();
    for path in [
        "cache.semantic.threshold",
        "cache.semantic.temperature_ceiling",
        "cache.semantic.max_question_chars",
        "cache.semantic.ttl",
        "cache.semantic.max_bytes",
        "cache.semantic.model",
    ] {
        assert!(c.errors.iter().any(|d| d.path == path), "{path}\n{shown}");
    }
}

#[test]
fn the_semantic_cache_names_its_embeddings_upstream_and_groups_and_each_is_checked() {
    let base = "[providers.tei]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:8080/v1\"\n\
                [providers.claude]\nkind = \"anthropic\"\nbase_url = \"https://api.anthropic.com/v1\"\n\
                [models.chat]\ndeployments = [{ provider = \"tei\", model = \"x\" }]\n";
    let good = format!(
        "[cache.semantic]\nenabled = true\nverify_share = 0.05\n\
         embeddings = {{ provider = \"tei\", model = \"bge-small\", dimensions = 256 }}\n\
         groups = {{ chat = {{ threshold = 0.95, max_error = 0.01 }} }}\n{base}"
    );
    let cfg = load(&good, &env(&[]), &[]).unwrap();
    let s = &cfg.cache.semantic;
    let e = s.embeddings.as_ref().unwrap();
    assert_eq!((e.provider.as_str(), e.dimensions), ("tei", Some(256)));
    assert_eq!(e.timeout, Duration::from_secs(1));
    assert_eq!(s.groups["chat"].max_error, Some(0.01));
    assert_eq!(s.verify_share, 0.05);
    let bad = format!(
        "[cache.semantic]\nenabled = true\nverify_share = 2\n\
         embeddings = {{ provider = \"claude\", model = \"\", timeout = \"0s\" }}\n\
         groups = {{ nosuch = {{ threshold = 0 }}, chat = {{ max_error = 1 }} }}\n{base}"
    );
    let c = check(&bad, &env(&[]), &[], Secrets::Required);
    let shown = c.errors.to_string();
    for (path, words) in [
        ("cache.semantic.verify_share", "from 0 to 1"),
        (
            "cache.semantic.embeddings.provider",
            "not OpenAI-compatible",
        ),
        ("cache.semantic.embeddings.model", "must name"),
        ("cache.semantic.embeddings.timeout", "longer than zero"),
        ("cache.semantic.groups.nosuch", "not a model group"),
        ("cache.semantic.groups.nosuch.threshold", "above 0"),
        ("cache.semantic.groups.chat.max_error", "below 1"),
    ] {
        assert!(
            c.errors
                .iter()
                .any(|d| d.path == path && d.message.contains(words)),
            "{path}: {words}\n{shown}"
        );
    }
    let unknown = format!(
        "[cache.semantic]\nembeddings = {{ provider = \"nosuch\", model = \"m\" }}\n{base}"
    );
    let c = check(&unknown, &env(&[]), &[], Secrets::Required);
    assert!(
        c.errors
            .iter()
            .any(|d| d.path == "cache.semantic.embeddings.provider"
                && d.message.contains("not in [providers]")),
        "{}",
        c.errors
    );
}

#[test]
fn the_prefix_watch_samples_a_share_of_requests() {
    let base = "[models.chat]\ndeployments = [{ provider = \"sim\", model = \"x\" }]\n";
    let cfg = load(base, &env(&[]), &["sim"]).unwrap();
    assert_eq!(cfg.prefixes.watch, 0.01);
    let shaped = "[models.chat]\ndeployments = [{ provider = \"sim\", model = \"x\" }]\nnormalise = { volatile = true }\n";
    let cfg = load(shaped, &env(&[]), &["sim"]).unwrap();
    let n = cfg.models[0].1.normalise.unwrap();
    assert!(n.volatile && !n.tools);
    let typo = shaped.replace("volatile", "volatil");
    assert!(load(&typo, &env(&[]), &["sim"]).is_err());
    let off = format!("[prefixes]\nwatch = 0\n{base}");
    assert_eq!(load(&off, &env(&[]), &["sim"]).unwrap().prefixes.watch, 0.0);
    let bad = format!("[prefixes]\nwatch = 1.5\n{base}");
    let c = check(&bad, &env(&[]), &["sim"], Secrets::Required);
    assert!(
        c.errors
            .iter()
            .any(|d| d.path == "prefixes.watch" && d.message.contains("from 0 to 1")),
        "{}",
        c.errors
    );
}

#[test]
fn compression_and_progressive_loading_are_read_and_checked() {
    let ok = "[models.docs]\ndeployments = [{ provider = \"sim\", model = \"x\" }]\ncompress = { budget = 6000 }\nprogressive = { round_tokens = 4000, rounds = 2 }\nprompt_cache_key = {}\n";
    let cfg = load(ok, &env(&[]), &["sim"]).unwrap();
    let m = &cfg.models[0].1;
    assert_eq!(m.compress.unwrap().budget, Some(6000));
    let p = m.progressive.as_ref().unwrap();
    assert_eq!((p.round_tokens, p.rounds), (4000, 2));
    assert_eq!(p.sentinel, "INSUFFICIENT_CONTEXT");
    let k = m.prompt_cache_key.unwrap();
    assert_eq!((k.per_key_rpm, k.keys), (15, 4));
    let bad = "[models.docs]\ndeployments = [{ provider = \"sim\", model = \"x\" }]\ncompress = { budget = 0 }\nprogressive = { round_tokens = 10, rounds = 0, sentinel = \" \" }\nprompt_cache_key = { keys = 0, per_key_rpm = 0 }\n";
    let c = check(bad, &env(&[]), &["sim"], Secrets::Required);
    for field in [
        "models.docs.compress.budget",
        "models.docs.progressive.rounds",
        "models.docs.progressive.round_tokens",
        "models.docs.progressive.sentinel",
        "models.docs.prompt_cache_key.keys",
        "models.docs.prompt_cache_key.per_key_rpm",
    ] {
        assert!(
            c.errors.iter().any(|d| d.path == field),
            "{field} not named in {}",
            c.errors
        );
    }
}

#[test]
fn protective_policies_are_on_unless_turned_off_and_a_table_sets_them() {
    let text = r#"
[models.quiet]
deployments = [{ provider = "sim", model = "x" }]
[models.off]
deployments = [{ provider = "sim", model = "x" }]
retry = false
breaker = false
limit = false
[models.set]
deployments = [{ provider = "sim", model = "x" }]
retry = { max_attempts = 2 }
limit = true
"#;
    let cfg = load(text, &env(&[]), &["sim"]).unwrap();
    let (quiet, off, set) = (&cfg.models[0].1, &cfg.models[1].1, &cfg.models[2].1);
    assert_eq!(
        quiet.retry.in_force(),
        Some(sluice_tail::RetryPolicy::default())
    );
    assert_eq!(
        quiet.breaker.in_force(),
        Some(sluice_tail::BreakerPolicy::default())
    );
    assert_eq!(
        quiet.limit.in_force(),
        Some(sluice_tail::limit::LimitParams::default())
    );
    assert!(off.retry.is_off() && off.breaker.is_off() && off.limit.is_off());
    assert_eq!(set.retry.in_force().unwrap().max_attempts, 2);
    assert_eq!(
        set.limit.in_force(),
        Some(sluice_tail::limit::LimitParams::default())
    );
    let c = check(
        "[models.m]\ndeployments = [{ provider = \"sim\", model = \"x\" }]\nretry = 3\n",
        &env(&[]),
        &["sim"],
        Secrets::Required,
    );
    assert!(
        c.errors
            .iter()
            .any(|d| d.path == "models.m.retry" && d.message.contains("false, true or a table")),
        "{}",
        c.errors
    );
}

#[test]
fn settings_that_cannot_do_what_they_suggest_are_warned_of() {
    let text = format!(
        r#"
[models.pair]
deployments = [{{ provider = "sim", model = "a" }}, {{ provider = "sim", model = "b" }}]
retry = false
fallbacks = ["twin", "other"]
[models.twin]
deployments = [{{ provider = "sim", model = "b" }}, {{ provider = "sim", model = "a" }}]
retry = {{ budget = 0.0 }}
[models.other]
deployments = [{{ provider = "sim", model = "c" }}]
[keys.narrow]
tenant = "t"
sha256 = "{}"
models = ["pair"]
"#,
        "a".repeat(64)
    );
    let c = check(&text, &env(&[]), &["sim"], Secrets::Required);
    assert!(c.config.is_some(), "{}", c.errors);
    let warned = |path: &str, words: &str| {
        assert!(
            c.warnings
                .iter()
                .any(|d| d.path == path && d.message.contains(words)),
            "{path}: {words}\n{}",
            c.warnings
        );
    };
    warned(
        "models.pair.retry",
        "retry = false: a request that fails at one",
    );
    warned("models.twin.retry", "can never go");
    warned(
        "models.pair.fallbacks[0]",
        "sends to the same deployments as `pair`",
    );
    warned("keys.narrow.models", "none of its fallbacks (twin, other)");
    assert_eq!(c.warnings.len(), 4, "{}", c.warnings);
    // One deployment with retries off, a fallback of its own kind: nothing to say.
    let fine =
        "[models.solo]\ndeployments = [{ provider = \"sim\", model = \"a\" }]\nretry = false\n";
    assert!(
        check(fine, &env(&[]), &["sim"], Secrets::Required)
            .warnings
            .is_empty()
    );
}

#[test]
fn batches_need_the_ledger_and_a_lane_that_exists() {
    let base = "[models.m]\ndeployments = [{ provider = \"sim\", model = \"a\" }]\n";
    let ok = check(base, &env(&[]), &["sim"], Secrets::Required);
    let b = ok.config.unwrap().batches;
    assert!(b.enabled);
    let lanes = ["interactive".to_string(), "batch".to_string()];
    assert_eq!(b.lane_in(&lanes).map(String::as_str), Some("batch"));
    let off = format!("{base}[ledger]\nstore = \"off\"\n[batches]\nconcurrency = 8\n");
    let c = check(&off, &env(&[]), &["sim"], Secrets::Required);
    assert!(
        c.warnings
            .iter()
            .any(|d| d.path == "batches" && d.message.contains("not served")),
        "{}",
        c.warnings
    );
    let bad = format!("{base}[batches]\nlane = \"bulk\"\nconcurrency = 0\n");
    let c = check(&bad, &env(&[]), &["sim"], Secrets::Required);
    let text = c.errors.to_string();
    assert!(
        text.contains("batches.lane") && text.contains("no lane `bulk`"),
        "{text}"
    );
    assert!(text.contains("batches.concurrency"), "{text}");
}

#[test]
fn a_batch_window_slo_needs_its_objective() {
    let base = "[models.m]\ndeployments = [{ provider = \"sim\", model = \"a\" }]\n";
    let ok = format!("{base}[slo.jobs]\nkind = \"batch_window\"\nobjective = 0.99\n");
    let c = check(&ok, &env(&[]), &["sim"], Secrets::Required);
    assert_eq!(c.config.unwrap().slos[0].1.kind, SloKind::BatchWindow);
    let bad = format!("{base}[slo.jobs]\nkind = \"batch_window\"\n");
    let c = check(&bad, &env(&[]), &["sim"], Secrets::Required);
    assert!(
        c.errors
            .to_string()
            .contains("required for kind = \"batch_window\""),
        "{}",
        c.errors
    );
}

#[test]
fn a_weak_or_placeholder_admin_token_is_refused() {
    let text = "[server]\nadmin_token_env = \"A\"\nmetrics_token_env = \"M\"\n";
    for (admin, metrics, fault) in [
        ("short", "metrics-token-for-tests", "server.admin_token_env"),
        (
            "admin-token-for-tests",
            "CHANGE-ME",
            "server.metrics_token_env",
        ),
        (
            "change-me-change-me-please",
            "metrics-token-for-tests",
            "server.admin_token_env",
        ),
    ] {
        let c = check(
            text,
            &env(&[("A", admin), ("M", metrics)]),
            &[],
            Secrets::Required,
        );
        assert!(c.config.is_none(), "{admin} / {metrics}");
        let paths: Vec<_> = c.errors.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, [fault], "{}", c.errors);
    }
    let ok = env(&[
        ("A", "admin-token-for-tests"),
        ("M", "metrics-token-for-tests"),
    ]);
    assert!(check(text, &ok, &[], Secrets::Required).config.is_some());
}

#[test]
fn a_listener_open_to_other_machines_without_an_admin_token_is_warned_of() {
    let open = "[server]\nlisten = \"0.0.0.0:8080\"\n";
    let c = check(open, &env(&[]), &[], Secrets::Required);
    assert!(c.config.is_some(), "{}", c.errors);
    let w: Vec<_> = c.warnings.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(w, ["server.listen"], "{}", c.warnings);
    for quiet in [
        "[server]\nlisten = \"127.0.0.1:8080\"\n",
        "[server]\nlisten = \"[::1]:8080\"\n",
    ] {
        assert!(
            check(quiet, &env(&[]), &[], Secrets::Required)
                .warnings
                .is_empty(),
            "{quiet}"
        );
    }
}

#[test]
fn connection_limits_are_read_and_checked() {
    let c = check(
        "[server]\nmax_connections = 500\nheader_timeout = \"5s\"\nstall_timeout = \"7s\"\nmax_header_bytes = 16384\n",
        &env(&[]),
        &[],
        Secrets::Required,
    );
    let s = c.config.unwrap().server;
    assert_eq!(s.max_connections, Some(500));
    assert_eq!(s.header_timeout, std::time::Duration::from_secs(5));
    assert_eq!(s.stall_timeout, std::time::Duration::from_secs(7));
    assert_eq!(s.max_header_bytes, 16384);
    let bad = check(
        "[server]\nmax_connections = 0\nheader_timeout = \"0s\"\nstall_timeout = \"0s\"\nmax_header_bytes = 100\n",
        &env(&[]),
        &[],
        Secrets::Required,
    );
    let paths: Vec<_> = bad.errors.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "server.max_connections",
            "server.header_timeout",
            "server.stall_timeout",
            "server.max_header_bytes"
        ]
    );
}
