//! The gateway's configuration: schema, defaults and validation.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

use crate::diagnostic::{Diagnostic, Diagnostics};
use crate::document::{Document, Seg};

/// Default body limit: 10 MiB.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 10 * 1024 * 1024;

/// The top-level sections a gateway config may have.
const SECTIONS: &[&str] = &["server", "telemetry", "providers", "models"];

/// `[server]`: the listener and request limits.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct ServerConfig {
    /// Address to listen on.
    pub listen: String,
    /// Largest request body accepted; larger ones get 413.
    pub max_body_bytes: u64,
    /// How long in-flight requests may run after SIGTERM/SIGINT before they are cut.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            shutdown_grace: Duration::from_secs(30),
        }
    }
}

/// `[telemetry]`: percentile windows.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct TelemetryConfig {
    /// The span the latency percentiles describe.
    #[serde(with = "humantime_serde")]
    pub latency_window: Duration,
    /// How many slices the window rotates in.
    pub latency_window_slices: u32,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            latency_window: Duration::from_secs(60),
            latency_window_slices: 6,
        }
    }
}

/// Which wire protocol an upstream speaks.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI chat completions: OpenAI, DeepSeek, GLM, Kimi, MiniMax, Hunyuan, vLLM, SGLang,
    /// Ollama and anything else that speaks it.
    Openai,
    /// Anthropic Messages.
    Anthropic,
}

/// `[providers.NAME]`: one upstream endpoint with its own connection pool.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ProviderConfig {
    /// Wire protocol.
    pub kind: ProviderKind,
    /// Base URL, up to and including the version (`https://api.openai.com/v1`).
    pub base_url: String,
    /// Name of the environment variable holding the API key. Keys never live in the file.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Extra headers sent on every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Limit on establishing a connection.
    #[serde(default = "defaults::connect_timeout", with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Limit from sending the request to the first byte of the answer.
    #[serde(default = "defaults::first_byte_timeout", with = "humantime_serde")]
    pub first_byte_timeout: Duration,
    /// Limit on the silence between two chunks of an answer.
    #[serde(default = "defaults::idle_timeout", with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Idle connections kept per host.
    #[serde(default = "defaults::pool_max_idle")]
    pub pool_max_idle: usize,
    /// How long an idle connection is kept.
    #[serde(default = "defaults::pool_idle_timeout", with = "humantime_serde")]
    pub pool_idle_timeout: Duration,
    /// Anthropic only: the `anthropic-version` header.
    #[serde(default)]
    pub anthropic_version: Option<String>,
    /// Anthropic only: `max_tokens` sent when the client gave none (Anthropic requires one).
    #[serde(default)]
    pub default_max_tokens: Option<u32>,
}

mod defaults {
    use std::time::Duration;

    pub(super) fn connect_timeout() -> Duration {
        Duration::from_secs(5)
    }
    pub(super) fn first_byte_timeout() -> Duration {
        Duration::from_secs(60)
    }
    pub(super) fn idle_timeout() -> Duration {
        Duration::from_secs(30)
    }
    pub(super) fn pool_max_idle() -> usize {
        64
    }
    pub(super) fn pool_idle_timeout() -> Duration {
        Duration::from_secs(90)
    }
    pub(super) fn weight() -> u32 {
        1
    }
}

/// `[models.GROUP]`: the name clients use, mapped to upstream deployments.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ModelGroupConfig {
    /// Where the group's requests may go.
    pub deployments: Vec<DeploymentConfig>,
    /// Hedging of slow requests; off when absent.
    #[serde(default)]
    pub hedge: Option<HedgeConfig>,
}

/// `hedge = { ... }` of a model group: after the primary attempt has waited longer than the
/// `quantile` of its upstream's time to first byte, send a copy to another deployment; the
/// first good first byte wins and the other attempt is cancelled.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct HedgeConfig {
    /// Hedge after this quantile of the upstream's time to first byte (0 to 1, exclusive).
    pub quantile: f64,
    /// Samples the upstream's latency window needs before hedging starts.
    pub min_samples: u64,
    /// Never hedge sooner than this.
    #[serde(with = "humantime_serde")]
    pub min_delay: Duration,
    /// Hedges allowed per request on average (0.1: at most 10% extra requests).
    pub budget: f64,
    /// Hedges that may be spent at once after a quiet spell.
    pub burst: f64,
}

impl Default for HedgeConfig {
    fn default() -> Self {
        Self {
            quantile: 0.95,
            min_samples: 50,
            min_delay: Duration::from_millis(10),
            budget: 0.1,
            burst: 10.0,
        }
    }
}

impl HedgeConfig {
    /// What is wrong with it, if anything: (field, message).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if !(self.quantile > 0.0 && self.quantile < 1.0) {
            out.push((
                "quantile",
                format!("must be between 0 and 1 (got {})", self.quantile),
            ));
        }
        if !(0.0..=1.0).contains(&self.budget) {
            out.push((
                "budget",
                format!("must be between 0 and 1 (got {})", self.budget),
            ));
        }
        if self.burst < 1.0 {
            out.push(("burst", format!("must be at least 1 (got {})", self.burst)));
        }
        out
    }
}

/// One deployment: a provider, the model name it knows, and a share of traffic.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct DeploymentConfig {
    /// A `[providers.NAME]` key.
    pub provider: String,
    /// The model name sent upstream.
    pub model: String,
    /// Relative share of the group's traffic.
    #[serde(default = "defaults::weight")]
    pub weight: u32,
    /// Name in headers and metrics; defaults to `PROVIDER/MODEL`.
    #[serde(default)]
    pub name: Option<String>,
}

impl DeploymentConfig {
    /// The deployment's display name.
    pub fn display_name(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("{}/{}", self.provider, self.model))
    }
}

/// A validated gateway configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayConfig {
    /// `[server]`.
    pub server: ServerConfig,
    /// The parsed listen address.
    pub listen: SocketAddr,
    /// `[telemetry]`.
    pub telemetry: TelemetryConfig,
    /// `[providers.*]`, in file order.
    pub providers: Vec<(String, ProviderConfig)>,
    /// `[models.*]`, in file order.
    pub models: Vec<(String, ModelGroupConfig)>,
}

/// Where secrets are looked up; tests pass a map, the binary passes the process environment.
pub trait Env {
    /// The value of variable `name`, if set and not empty.
    fn get(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn get(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

impl Env for BTreeMap<String, String> {
    fn get(&self, name: &str) -> Option<String> {
        BTreeMap::get(self, name).cloned()
    }
}

/// Reads and validates a gateway configuration, reporting every error found.
///
/// `extra_providers` names providers that will be supplied in code (the demo's simulated
/// upstreams), so deployments may refer to them without a `[providers]` entry.
pub fn load(
    text: &str,
    env: &dyn Env,
    extra_providers: &[&str],
) -> Result<GatewayConfig, Diagnostics> {
    let doc = Document::parse(text)?;
    let mut diags = Vec::new();
    doc.reject_unknown_top_level(SECTIONS, &mut diags);
    let server: Option<ServerConfig> = doc.section("server", &mut diags);
    let telemetry: Option<TelemetryConfig> = doc.section("telemetry", &mut diags);
    let providers: Vec<(String, ProviderConfig)> = doc.map_section("providers", &mut diags);
    let models: Vec<(String, ModelGroupConfig)> = doc.map_section("models", &mut diags);

    let listen = server
        .as_ref()
        .and_then(|s| check_server(&doc, s, &mut diags));
    if let Some(t) = &telemetry {
        check_telemetry(&doc, t, &mut diags);
    }
    for (name, p) in &providers {
        check_provider(&doc, name, p, env, &mut diags);
    }
    let mut known: HashSet<&str> = providers.iter().map(|(n, _)| n.as_str()).collect();
    known.extend(extra_providers.iter().copied());
    check_models(&doc, &models, &known, &mut diags);

    match (server, telemetry, listen) {
        (Some(server), Some(telemetry), Some(listen)) if diags.is_empty() => Ok(GatewayConfig {
            server,
            listen,
            telemetry,
            providers,
            models,
        }),
        _ => {
            let mut d = Diagnostics(diags);
            d.sort();
            Err(d)
        }
    }
}

fn key(parts: &[&str]) -> Vec<Seg> {
    parts.iter().map(|p| Seg::Key((*p).to_string())).collect()
}

fn check_server(
    doc: &Document<'_>,
    s: &ServerConfig,
    diags: &mut Vec<Diagnostic>,
) -> Option<SocketAddr> {
    if s.max_body_bytes == 0 {
        diags.push(doc.diag(&key(&["server", "max_body_bytes"]), "must be at least 1"));
    }
    match s.listen.parse() {
        Ok(addr) => Some(addr),
        Err(_) => {
            diags.push(doc.diag(
                &key(&["server", "listen"]),
                format!("`{}` is not an address like 127.0.0.1:8080", s.listen),
            ));
            None
        }
    }
}

fn check_telemetry(doc: &Document<'_>, t: &TelemetryConfig, diags: &mut Vec<Diagnostic>) {
    if t.latency_window_slices == 0 {
        diags.push(doc.diag(
            &key(&["telemetry", "latency_window_slices"]),
            "must be at least 1",
        ));
    } else if t.latency_window / t.latency_window_slices < Duration::from_millis(1) {
        diags.push(doc.diag(
            &key(&["telemetry", "latency_window"]),
            "each slice of the window must last at least 1 ms",
        ));
    }
}

fn check_provider(
    doc: &Document<'_>,
    name: &str,
    p: &ProviderConfig,
    env: &dyn Env,
    diags: &mut Vec<Diagnostic>,
) {
    let at = |field: &str| key(&["providers", name, field]);
    match url::Url::parse(&p.base_url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => {}
        _ => diags.push(doc.diag(
            &at("base_url"),
            format!("`{}` is not an http(s) URL", p.base_url),
        )),
    }
    if let Some(var) = &p.api_key_env
        && env.get(var).is_none()
    {
        diags.push(doc.diag(
            &at("api_key_env"),
            format!("environment variable `{var}` is not set"),
        ));
    }
    for (header, value) in &p.headers {
        let name_ok = http_token(header);
        let value_ok = value
            .bytes()
            .all(|b| b == b'\t' || (0x20..0x7f).contains(&b));
        if !name_ok || !value_ok {
            diags.push(doc.diag(
                &key(&["providers", name, "headers", header]),
                "not a valid HTTP header",
            ));
        }
    }
    for (field, d) in [
        ("connect_timeout", p.connect_timeout),
        ("first_byte_timeout", p.first_byte_timeout),
        ("idle_timeout", p.idle_timeout),
    ] {
        if d.is_zero() {
            diags.push(doc.diag(&at(field), "must be longer than zero"));
        }
    }
    if p.kind == ProviderKind::Openai {
        for (field, set) in [
            ("anthropic_version", p.anthropic_version.is_some()),
            ("default_max_tokens", p.default_max_tokens.is_some()),
        ] {
            if set {
                diags.push(doc.diag(&at(field), "only applies to kind = \"anthropic\""));
            }
        }
    }
}

fn http_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn check_models(
    doc: &Document<'_>,
    models: &[(String, ModelGroupConfig)],
    providers: &HashSet<&str>,
    diags: &mut Vec<Diagnostic>,
) {
    for (group, m) in models {
        for (field, problem) in m.hedge.iter().flat_map(HedgeConfig::problems) {
            diags.push(doc.diag(&key(&["models", group, "hedge", field]), problem));
        }
        if m.deployments.is_empty() {
            diags.push(doc.diag(
                &key(&["models", group, "deployments"]),
                "needs at least one deployment",
            ));
        }
        let mut names = HashSet::new();
        for (i, d) in m.deployments.iter().enumerate() {
            let at = |field: &str| {
                let mut p = key(&["models", group, "deployments"]);
                p.push(Seg::Index(i));
                p.push(Seg::Key(field.to_string()));
                p
            };
            if !providers.contains(d.provider.as_str()) {
                diags.push(doc.diag(
                    &at("provider"),
                    format!("no provider named `{}` in [providers]", d.provider),
                ));
            }
            if d.weight == 0 {
                diags.push(doc.diag(&at("weight"), "must be at least 1"));
            }
            if !names.insert(d.display_name()) {
                diags.push(doc.diag(
                    &at("name"),
                    format!(
                        "deployment name `{}` is used twice in this group",
                        d.display_name()
                    ),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests;
