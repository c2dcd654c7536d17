//! The sections that say where requests go: providers, model groups and their deployments,
//! and each group's policies (limit, retry, breaker, hedge, affinity).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::Toggle;

/// `limit = { ... }` of a model group: an adaptive limit on each deployment's requests in
/// flight, with requests beyond it queued in their lane.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
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
    /// Anthropic only: how long placed breakpoints keep their prefix: `"auto"` (the
    /// default: 1 hour for a prefix typically reused 5 to 60 minutes apart, else 5
    /// minutes), `"5m"` or `"1h"`.
    #[serde(default)]
    pub cache_ttl: Option<CacheTtlConfig>,
    /// OpenAI only: the upstream serves OpenAI's Responses API (`/responses`), so a
    /// Responses client's request goes to it as it came. Off unless `true` (most
    /// OpenAI-compatible servers serve chat completions only, and get it translated).
    #[serde(default)]
    pub responses: Option<bool>,
}

/// `cache_ttl` of an Anthropic provider.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub enum CacheTtlConfig {
    /// Chosen per prefix from its reuse.
    #[serde(rename = "auto")]
    Auto,
    /// 5 minutes.
    #[serde(rename = "5m")]
    FiveMinutes,
    /// 1 hour.
    #[serde(rename = "1h")]
    OneHour,
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
#[serde(deny_unknown_fields)]
pub struct ModelGroupConfig {
    /// Where the group's requests may go.
    pub deployments: Vec<DeploymentConfig>,
    /// Hedging of slow requests; off when absent.
    #[serde(default)]
    pub hedge: Option<HedgeConfig>,
    /// Adaptive concurrency limit per deployment, with pacing under the upstream's rate
    /// limits and its 429 pause; on with its defaults when absent, `false` turns it off.
    #[serde(default)]
    pub limit: Toggle<LimitConfig>,
    /// Retries of failed attempts, elsewhere first; on with its defaults when absent,
    /// `false` turns them off.
    #[serde(default)]
    pub retry: Toggle<RetryConfig>,
    /// A circuit breaker per deployment; on with its defaults when absent, `false` turns it
    /// off.
    #[serde(default)]
    pub breaker: Toggle<BreakerConfig>,
    /// The deadline of a request that sends no `x-sluice-timeout-ms`: from its arrival to its
    /// last byte, queueing, retries and hedges included. None when absent.
    #[serde(default, with = "crate::duration::option")]
    pub timeout: Option<Duration>,
    /// Prefix affinity: requests whose prompts start alike go to the deployment that served
    /// that prefix last, so its provider's prompt cache hits. Off when absent.
    #[serde(default)]
    pub affinity: Option<AffinityConfig>,
    /// Normalisation that keeps meaning and makes prompts cacheable. Off when absent.
    #[serde(default)]
    pub normalise: Option<NormaliseConfig>,
    /// Compression of prompts over a token budget (the document in the newest user message
    /// only). Off when absent.
    #[serde(default)]
    pub compress: Option<CompressConfig>,
    /// Progressive loading of long documents (complete answers only). Off when absent.
    #[serde(default)]
    pub progressive: Option<ProgressiveConfig>,
    /// A `prompt_cache_key` derived from tenant and prefix for requests that send none
    /// (OpenAI-compatible upstreams that accept the field). Off when absent.
    #[serde(default)]
    pub prompt_cache_key: Option<PromptCacheKeyConfig>,
    /// Groups that take a request in this order, within the same request and its deadline,
    /// when this one cannot: every deployment unavailable, the tenant's quota refused, the
    /// prompt too long for every deployment's context window, or an upstream saying so.
    #[serde(default)]
    pub fallbacks: Vec<String>,
}

/// `[models.GROUP] affinity`: send a request to the deployment that last served the longest
/// prefix of its `messages`, when that prefix is at least `min_share` of them and the
/// deployment is free; otherwise route by weight.
/// `[models.GROUP] normalise`: what is rewritten so that requests share a cached prefix.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct NormaliseConfig {
    /// Tools in a stable order (by function name), their JSON keys sorted.
    pub tools: bool,
    /// Lines of the system prompt holding a timestamp, date, UUID or id moved to a system
    /// message at the end of the conversation.
    pub volatile: bool,
}

/// `[models.GROUP] compress`: over `budget` prompt tokens, the document in the newest user
/// message loses its boilerplate and duplicates and keeps the passages most relevant to the
/// question.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct CompressConfig {
    /// Prompt tokens before compression starts; absent: the group's smallest context window
    /// less the request's `max_tokens`.
    pub budget: Option<u64>,
}

/// `[models.GROUP] prompt_cache_key`: one key per tenant and stable prefix, spread over up
/// to `keys` keys so that none carries more than `per_key_rpm` requests a minute.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct PromptCacheKeyConfig {
    /// Requests a minute one key may carry (OpenAI: about 15).
    pub per_key_rpm: u32,
    /// Keys one prefix may be spread over.
    pub keys: u32,
}

impl Default for PromptCacheKeyConfig {
    fn default() -> Self {
        Self {
            per_key_rpm: 15,
            keys: 4,
        }
    }
}

/// `[models.GROUP] progressive`: a document longer than `round_tokens` is sent a round at a
/// time, most relevant passages first, while the answer is `sentinel`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct ProgressiveConfig {
    /// Tokens of the document each round sends.
    pub round_tokens: u64,
    /// Calls at most, the first included.
    pub rounds: u32,
    /// What an answer says when the passages sent did not suffice.
    pub sentinel: String,
}

impl Default for ProgressiveConfig {
    fn default() -> Self {
        Self {
            round_tokens: 8_000,
            rounds: 3,
            sentinel: "INSUFFICIENT_CONTEXT".into(),
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
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
