//! The gateway's configuration: schema, defaults and validation.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

use crate::diagnostic::{Diagnostic, Diagnostics};
use crate::document::{Document, Seg};
use crate::money::Money;

/// Default body limit: 10 MiB.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 10 * 1024 * 1024;
/// Most request threads `[server] worker_threads` may ask for.
pub const MAX_WORKER_THREADS: usize = 1024;

/// The top-level sections a gateway config may have.
const SECTIONS: &[&str] = &[
    "server",
    "telemetry",
    "ledger",
    "cache",
    "billing",
    "lanes",
    "tenants",
    "keys",
    "prices",
    "providers",
    "models",
];

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
    /// Environment variable holding the token `/admin/*` requires (`Authorization: Bearer`).
    /// Without it the read-only admin routes are open and the key routes are off.
    pub admin_token_env: Option<String>,
    /// Whether requests need an API key; by default, when any `[keys]` are configured.
    pub require_keys: Option<bool>,
    /// Threads that run requests; by default one per CPU core.
    pub worker_threads: Option<usize>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            shutdown_grace: Duration::from_secs(30),
            admin_token_env: None,
            require_keys: None,
            worker_threads: None,
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

/// Which database keeps the usage ledger.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LedgerStoreKind {
    /// An embedded SQLite file (write-ahead log).
    #[default]
    Sqlite,
    /// A PostgreSQL database, for several gateways or a long history.
    Postgres,
    /// No ledger.
    Off,
}

/// When an embedded-ledger commit counts as done.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LedgerDurability {
    /// Every commit is flushed to the disk: survives power loss.
    #[default]
    Disk,
    /// Survives a crash of sluice (kill -9), not of the machine; faster.
    Process,
}

/// `[ledger]`: where each call's usage row is kept.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct LedgerConfig {
    /// `sqlite` (the default), `postgres` or `off`.
    pub store: LedgerStoreKind,
    /// The SQLite file; a relative path is taken from the config file's folder.
    pub path: std::path::PathBuf,
    /// For `postgres`: the environment variable holding the database URL (it carries a
    /// password, so it never sits in the file).
    pub url_env: Option<String>,
    /// For `sqlite`: `disk` (the default) or `process`.
    pub durability: LedgerDurability,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        Self {
            store: LedgerStoreKind::Sqlite,
            path: "sluice-ledger.db".into(),
            url_env: None,
            durability: LedgerDurability::Disk,
        }
    }
}

/// `[cache]`: the exact answer cache. A complete answer is kept under its request (tenant,
/// model group and every field but `stream` and `stream_options`) and served again to the
/// same request until it expires.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct CacheConfig {
    /// Whether answers are cached (off by default).
    pub enabled: bool,
    /// How long an answer is served after it was stored.
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
    /// The most the cached answers may hold, in bytes of answer body; the least used go
    /// first.
    pub max_bytes: u64,
}

/// Default size of the answer cache: 64 MiB.
pub const DEFAULT_CACHE_BYTES: u64 = 64 * 1024 * 1024;

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            ttl: Duration::from_secs(3600),
            max_bytes: DEFAULT_CACHE_BYTES,
        }
    }
}

/// `[lanes.NAME]`: a class of traffic with its own queue. Lanes are listed in priority order;
/// requests name theirs in `x-sluice-lane` and default to the first.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct LaneConfig {
    /// Share of an upstream's concurrency limit the lane is guaranteed under contention
    /// (a guarantee, not a cap: idle slots go to whoever waits).
    pub share: f64,
    /// Requests that may wait; beyond that sluice answers 503 with `Retry-After`.
    pub max_queue: usize,
    /// How long a request may wait for a slot (and for retries) before 503.
    #[serde(with = "humantime_serde")]
    pub max_wait: Duration,
}

/// `[tenants.NAME]`: what sluice knows of a tenant (requests name theirs in
/// `x-sluice-tenant`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct TenantConfig {
    /// The lane of the tenant's requests that name none (a `[lanes]` name).
    pub lane: Option<String>,
    /// Money it may spend, in whole currency units (the catalog's); none: no limit.
    pub credits: Option<f64>,
    /// Requests per minute; none: no limit.
    pub rpm: Option<u64>,
    /// Tokens per minute (prompt and output); none: no limit.
    pub tpm: Option<u64>,
    /// Tokens per UTC day; none: no limit.
    pub tokens_per_day: Option<u64>,
    /// Money per UTC month, in whole currency units; none: no limit.
    pub spend_per_month: Option<f64>,
}

/// `[keys.NAME]`: an API key, known by its SHA-256 (`sluice keys new` makes one).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct KeyConfig {
    /// The tenant it belongs to.
    pub tenant: String,
    /// The key's SHA-256, 64 hex digits.
    pub sha256: String,
    /// The lane of its requests that name none (else its tenant's).
    pub lane: Option<String>,
    /// The model groups it may use; empty or absent: all.
    pub models: Vec<String>,
}

/// What a call to a model with no price gets (`[billing] unpriced`).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum UnpricedPolicy {
    /// Refused for a tenant who pays by credits or a spend quota.
    #[default]
    Refuse,
    /// Served at no charge (counted in `sluice_unpriced_calls_total`).
    Free,
}

/// `[billing]`: how calls are charged.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct BillingConfig {
    /// What a call to a model with no price gets.
    pub unpriced: UnpricedPolicy,
}

/// `[prices.MODEL]`: what a million tokens of the upstream model `MODEL` cost, in whole
/// currency units (read once into integer micro-units).
/// `input` and `output` are required: a price that leaves one out is refused, never zero.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct PriceConfig {
    /// Input tokens at full price.
    pub input: Money,
    /// Input tokens read from the prompt cache (default: `input`).
    #[serde(default)]
    pub cached_input: Option<Money>,
    /// Input tokens written to the prompt cache (default: `input`).
    #[serde(default)]
    pub cache_write: Option<Money>,
    /// Output tokens.
    pub output: Money,
}

impl Default for LaneConfig {
    fn default() -> Self {
        Self {
            share: 0.5,
            max_queue: 1000,
            max_wait: Duration::from_secs(60),
        }
    }
}

/// The lanes used when a config defines none: interactive (80% guaranteed, a short wait)
/// before batch (20%, a long wait: batch work waits rather than fails).
pub fn default_lanes() -> Vec<(String, LaneConfig)> {
    vec![
        (
            "interactive".into(),
            LaneConfig {
                share: 0.8,
                max_queue: 256,
                max_wait: Duration::from_secs(30),
            },
        ),
        (
            "batch".into(),
            LaneConfig {
                share: 0.2,
                max_queue: 10_000,
                max_wait: Duration::from_secs(600),
            },
        ),
    ]
}

/// `limit = { ... }` of a model group: an adaptive limit on each deployment's requests in
/// flight, with requests beyond it queued in their lane.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct LimitConfig {
    /// `aimd` (loss-based: 429s, 503s and timeouts cut it), `gradient2`, `vegas` (latency-based)
    /// or `fixed`.
    pub algorithm: LimitAlgorithm,
    /// Starting limit (the limit, for `fixed`).
    pub initial: usize,
    /// Lowest limit.
    pub min: usize,
    /// Highest limit.
    pub max: usize,
}

impl Default for LimitConfig {
    fn default() -> Self {
        Self {
            algorithm: LimitAlgorithm::Gradient2,
            initial: 64,
            min: 1,
            max: 256,
        }
    }
}

/// The algorithm of a concurrency limit.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LimitAlgorithm {
    /// Additive increase, multiplicative decrease.
    Aimd,
    /// Netflix's Gradient2, cut on drops too.
    #[default]
    Gradient2,
    /// TCP Vegas.
    Vegas,
    /// A fixed limit.
    Fixed,
}

/// `retry = { ... }` of a model group: a failed attempt (a 429, a 5xx, a timeout, a lost
/// connection) is tried again, on another deployment when one is free, after `retry-after`
/// for a 429, within the lane's `max_wait`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct RetryConfig {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// Retries allowed per request on average (0.2: at most 20% extra requests).
    pub budget: f64,
    /// Retries that may be spent at once after a quiet spell.
    pub burst: f64,
    /// Retries earned per second whatever the traffic, on top of `budget`.
    pub min_per_second: f64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            budget: 0.2,
            burst: 10.0,
            min_per_second: 0.5,
        }
    }
}

/// `breaker = { ... }` of a model group: stop sending to a deployment whose calls keep
/// failing (5xx, timeouts, lost connections; not 429s, not 4xx) or crawling (first byte
/// after `slow_call`), probe it now and then, close once probes succeed.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct BreakerConfig {
    /// Open when at least this share of the window's calls failed...
    pub failure_rate: f64,
    /// ...and the window holds at least this many calls.
    pub min_calls: u32,
    /// The span the failure rate is taken over.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// How long the first opening lasts (doubling while it keeps failing).
    #[serde(with = "humantime_serde")]
    pub open_for: Duration,
    /// The longest opening.
    #[serde(with = "humantime_serde")]
    pub max_open_for: Duration,
    /// While half-open, one probe per this interval.
    #[serde(with = "humantime_serde")]
    pub probe_every: Duration,
    /// Successful probes in a row that close it.
    pub close_after: u32,
    /// A call whose first byte takes this long or longer is slow.
    #[serde(with = "humantime_serde")]
    pub slow_call: Duration,
    /// Open when at least this share of the window's calls were slow (1: only when all were).
    pub slow_call_rate: f64,
    /// Open after this many failures in a row, whatever the window says (0: never).
    pub consecutive_failures: u32,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            failure_rate: 0.5,
            min_calls: 20,
            window: Duration::from_secs(30),
            open_for: Duration::from_secs(15),
            max_open_for: Duration::from_secs(300),
            probe_every: Duration::from_secs(1),
            close_after: 3,
            slow_call: Duration::from_secs(30),
            slow_call_rate: 1.0,
            consecutive_failures: 5,
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
    /// Anthropic only: mark prompt-cache breakpoints for clients that mark none (the end of
    /// the system prompt and of the conversation so far). On unless `false`.
    #[serde(default)]
    pub cache_breakpoints: Option<bool>,
    /// Anthropic only: the shortest prefix, in tokens, worth a breakpoint (the model's
    /// minimum cacheable length: 1,024 for Sonnet, up to 4,096 for some models). Default
    /// 1,024.
    #[serde(default)]
    pub cache_min_tokens: Option<u64>,
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
    /// Adaptive concurrency limit per deployment; unlimited when absent.
    #[serde(default)]
    pub limit: Option<LimitConfig>,
    /// Retries of failed attempts; none when absent.
    #[serde(default)]
    pub retry: Option<RetryConfig>,
    /// A circuit breaker per deployment; none when absent.
    #[serde(default)]
    pub breaker: Option<BreakerConfig>,
    /// The deadline of a request that sends no `x-sluice-timeout-ms`: from its arrival to its
    /// last byte, queueing, retries and hedges included. None when absent.
    #[serde(default, with = "crate::duration::option")]
    pub timeout: Option<Duration>,
    /// Prefix affinity: requests whose prompts start alike go to the deployment that served
    /// that prefix last, so its provider's prompt cache hits. Off when absent.
    #[serde(default)]
    pub affinity: Option<AffinityConfig>,
}

/// `[models.GROUP] affinity`: send a request to the deployment that last served the longest
/// prefix of its `messages`, when that prefix is at least `min_share` of them and the
/// deployment is free; otherwise route by weight.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct AffinityConfig {
    /// The least share of a request's `messages` its known prefix must cover (0 to 1): a
    /// system prompt every request shares must not pull all traffic onto one deployment.
    pub min_share: f64,
    /// How long a prefix is remembered after it was last sent (providers keep prompt caches
    /// for 5 to 60 minutes).
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
}

impl Default for AffinityConfig {
    fn default() -> Self {
        Self {
            min_share: 0.5,
            ttl: Duration::from_secs(300),
        }
    }
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
    /// Hedges allowed per request on average (0.05: at most 5% extra requests).
    pub budget: f64,
    /// Hedges that may be spent at once after a quiet spell.
    pub burst: f64,
    /// Hedges earned per second whatever the traffic, on top of `budget`.
    pub min_per_second: f64,
}

impl Default for HedgeConfig {
    fn default() -> Self {
        Self {
            quantile: 0.95,
            min_samples: 20,
            min_delay: Duration::from_millis(10),
            budget: 0.05,
            burst: 10.0,
            min_per_second: 0.1,
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
        if !(0.0..=100.0).contains(&self.min_per_second) {
            out.push((
                "min_per_second",
                format!("must be between 0 and 100 (got {})", self.min_per_second),
            ));
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
    /// The deployment's requests-per-minute limit, if known; sluice paces under it (and
    /// under what the upstream's rate-limit headers report, when lower).
    #[serde(default)]
    pub rpm: Option<u64>,
    /// The deployment's tokens-per-minute limit, if known.
    #[serde(default)]
    pub tpm: Option<u64>,
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
    /// `[ledger]`.
    pub ledger: LedgerConfig,
    /// `[cache]`.
    pub cache: CacheConfig,
    /// `[billing]`.
    pub billing: BillingConfig,
    /// `[lanes.*]`, in priority order (the defaults when none are given).
    pub lanes: Vec<(String, LaneConfig)>,
    /// `[tenants.*]`, in file order.
    pub tenants: Vec<(String, TenantConfig)>,
    /// `[keys.*]`, in file order.
    pub keys: Vec<(String, KeyConfig)>,
    /// `[prices.*]`, in file order.
    pub prices: Vec<(String, PriceConfig)>,
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
    let ledger: Option<LedgerConfig> = doc.section("ledger", &mut diags);
    if let Some(l) = &ledger {
        check_ledger(&doc, l, env, &mut diags);
    }
    let cache: Option<CacheConfig> = doc.section("cache", &mut diags);
    if let Some(c) = &cache {
        check_cache(&doc, c, &mut diags);
    }
    let billing: Option<BillingConfig> = doc.section("billing", &mut diags);
    let mut lanes: Vec<(String, LaneConfig)> = doc.map_section("lanes", &mut diags);
    check_lanes(&doc, &lanes, &mut diags);
    if lanes.is_empty() {
        lanes = default_lanes();
    }
    let tenants: Vec<(String, TenantConfig)> = doc.map_section("tenants", &mut diags);
    for (name, t) in &tenants {
        for (field, v) in [
            ("credits", t.credits),
            ("spend_per_month", t.spend_per_month),
        ] {
            if v.is_some_and(|c| Money::from_units(c).is_none()) {
                diags.push(doc.diag(&key(&["tenants", name, field]), "must be 0 or more"));
            }
        }
        let counts = [
            ("rpm", t.rpm),
            ("tpm", t.tpm),
            ("tokens_per_day", t.tokens_per_day),
        ];
        for (field, v) in counts {
            if v == Some(0) {
                diags.push(doc.diag(
                    &key(&["tenants", name, field]),
                    "must be at least 1 (leave it out for none)",
                ));
            }
        }
        if let Some(lane) = &t.lane
            && !lanes.iter().any(|(l, _)| l == lane)
        {
            let known: Vec<&str> = lanes.iter().map(|(l, _)| l.as_str()).collect();
            diags.push(doc.diag(
                &key(&["tenants", name, "lane"]),
                format!("`{lane}` is not a lane; lanes: {}", known.join(", ")),
            ));
        }
    }
    let keys: Vec<(String, KeyConfig)> = doc.map_section("keys", &mut diags);
    let prices: Vec<(String, PriceConfig)> = doc.map_section("prices", &mut diags);
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
    check_keys(&doc, &keys, &lanes, &models, &mut diags);
    if let Some(var) = server.as_ref().and_then(|s| s.admin_token_env.as_deref())
        && env.get(var).is_none()
    {
        diags.push(doc.diag(
            &key(&["server", "admin_token_env"]),
            format!("environment variable `{var}` is not set"),
        ));
    }

    match (server, telemetry, ledger, cache, billing, listen) {
        (Some(server), Some(telemetry), Some(ledger), Some(cache), Some(billing), Some(listen))
            if diags.is_empty() =>
        {
            Ok(GatewayConfig {
                server,
                listen,
                telemetry,
                ledger,
                cache,
                billing,
                lanes,
                tenants,
                keys,
                prices,
                providers,
                models,
            })
        }
        _ => {
            let mut d = Diagnostics(diags);
            d.sort();
            Err(d)
        }
    }
}

fn check_keys(
    doc: &Document<'_>,
    keys: &[(String, KeyConfig)],
    lanes: &[(String, LaneConfig)],
    models: &[(String, ModelGroupConfig)],
    diags: &mut Vec<Diagnostic>,
) {
    for (name, k) in keys {
        let at = |field: &str| key(&["keys", name, field]);
        if k.tenant.trim().is_empty() {
            diags.push(doc.diag(&at("tenant"), "is required"));
        }
        let hex = k.sha256.len() == 64 && k.sha256.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex {
            diags.push(doc.diag(
                &at("sha256"),
                "must be the key's SHA-256, 64 hex digits (`sluice keys new` prints it)",
            ));
        }
        if let Some(lane) = &k.lane
            && !lanes.iter().any(|(l, _)| l == lane)
        {
            diags.push(doc.diag(&at("lane"), format!("`{lane}` is not a lane")));
        }
        for m in &k.models {
            if !models.iter().any(|(g, _)| g == m) {
                diags.push(doc.diag(&at("models"), format!("`{m}` is not a model group")));
            }
        }
    }
}

fn check_cache(doc: &Document<'_>, c: &CacheConfig, diags: &mut Vec<Diagnostic>) {
    if c.ttl.is_zero() {
        diags.push(doc.diag(&key(&["cache", "ttl"]), "must be longer than zero"));
    }
    if c.max_bytes < 1024 {
        diags.push(doc.diag(&key(&["cache", "max_bytes"]), "must be at least 1024"));
    }
}

fn check_lanes(doc: &Document<'_>, lanes: &[(String, LaneConfig)], diags: &mut Vec<Diagnostic>) {
    let mut total = 0.0;
    for (name, l) in lanes {
        if !(0.0..=1.0).contains(&l.share) {
            diags.push(doc.diag(&key(&["lanes", name, "share"]), "must be between 0 and 1"));
        }
        if l.max_wait.is_zero() {
            diags.push(doc.diag(
                &key(&["lanes", name, "max_wait"]),
                "must be longer than zero",
            ));
        }
        total += l.share;
    }
    if total > 1.0 + 1e-9 {
        diags.push(doc.diag(
            &key(&["lanes"]),
            format!("shares add up to {total}, more than 1"),
        ));
    }
}

fn check_group_policies(
    doc: &Document<'_>,
    group: &str,
    m: &ModelGroupConfig,
    diags: &mut Vec<Diagnostic>,
) {
    let at = |section: &str, field: &str| key(&["models", group, section, field]);
    for (field, problem) in m.hedge.iter().flat_map(HedgeConfig::problems) {
        diags.push(doc.diag(&at("hedge", field), problem));
    }
    if let Some(a) = &m.affinity {
        if !(0.0..=1.0).contains(&a.min_share) {
            diags.push(doc.diag(&at("affinity", "min_share"), "must be between 0 and 1"));
        }
        if a.ttl.is_zero() {
            diags.push(doc.diag(&at("affinity", "ttl"), "must be longer than zero"));
        }
    }
    if let Some(l) = &m.limit
        && (l.min == 0 || l.min > l.max || !(l.min..=l.max).contains(&l.initial))
    {
        diags.push(doc.diag(
            &key(&["models", group, "limit"]),
            format!(
                "needs 1 <= min <= initial <= max (got min {}, initial {}, max {})",
                l.min, l.initial, l.max
            ),
        ));
    }
    if let Some(b) = &m.breaker {
        if !(b.failure_rate > 0.0 && b.failure_rate <= 1.0) {
            diags.push(doc.diag(
                &at("breaker", "failure_rate"),
                "must be above 0 and at most 1",
            ));
        }
        if b.min_calls == 0 {
            diags.push(doc.diag(&at("breaker", "min_calls"), "must be at least 1"));
        }
        if b.window < Duration::from_secs(1) {
            diags.push(doc.diag(&at("breaker", "window"), "must be at least 1s"));
        }
        if b.close_after == 0 {
            diags.push(doc.diag(&at("breaker", "close_after"), "must be at least 1"));
        }
        if !(b.slow_call_rate > 0.0 && b.slow_call_rate <= 1.0) {
            diags.push(doc.diag(
                &at("breaker", "slow_call_rate"),
                "must be above 0 and at most 1",
            ));
        }
        if b.slow_call.is_zero() {
            diags.push(doc.diag(&at("breaker", "slow_call"), "must be longer than zero"));
        }
    }
    if m.timeout.is_some_and(|t| t < Duration::from_millis(1)) {
        diags.push(doc.diag(&key(&["models", group, "timeout"]), "must be at least 1ms"));
    }
    if let Some(r) = &m.retry {
        if !(1..=10).contains(&r.max_attempts) {
            diags.push(doc.diag(&at("retry", "max_attempts"), "must be between 1 and 10"));
        }
        if !(0.0..=1.0).contains(&r.budget) {
            diags.push(doc.diag(&at("retry", "budget"), "must be between 0 and 1"));
        }
        if !(r.min_per_second >= 0.0 && r.min_per_second <= 1000.0) {
            diags.push(doc.diag(&at("retry", "min_per_second"), "must be between 0 and 1000"));
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
    if s.worker_threads
        .is_some_and(|n| !(1..=MAX_WORKER_THREADS).contains(&n))
    {
        diags.push(doc.diag(
            &key(&["server", "worker_threads"]),
            format!("must be between 1 and {MAX_WORKER_THREADS}"),
        ));
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

fn check_ledger(doc: &Document<'_>, l: &LedgerConfig, env: &dyn Env, diags: &mut Vec<Diagnostic>) {
    let at = |field: &str| key(&["ledger", field]);
    match (l.store, &l.url_env) {
        (LedgerStoreKind::Postgres, None) => diags.push(doc.diag(
            &at("store"),
            "`postgres` needs `url_env`: the environment variable holding the database URL",
        )),
        (LedgerStoreKind::Postgres, Some(var)) if env.get(var).is_none() => diags.push(doc.diag(
            &at("url_env"),
            format!("environment variable `{var}` is not set"),
        )),
        (LedgerStoreKind::Sqlite | LedgerStoreKind::Off, Some(_)) => {
            diags.push(doc.diag(&at("url_env"), "only a `postgres` ledger reads a URL"))
        }
        _ => {}
    }
    if l.store == LedgerStoreKind::Sqlite && l.path.as_os_str().is_empty() {
        diags.push(doc.diag(&at("path"), "must name a file"));
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
            ("cache_breakpoints", p.cache_breakpoints.is_some()),
            ("cache_min_tokens", p.cache_min_tokens.is_some()),
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
        check_group_policies(doc, group, m, diags);
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
            for (field, v) in [("rpm", d.rpm), ("tpm", d.tpm)] {
                if v == Some(0) {
                    diags.push(doc.diag(&at(field), "must be at least 1 (leave it out for none)"));
                }
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
