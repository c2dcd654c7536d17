//! The configuration of one simulated upstream, as written in `sim.toml` and scenario files.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::dist::{LogNormalSpec, OutputModel, TtftModel};
use crate::limits::Api;

/// One simulated upstream. Every key is optional; the defaults describe a healthy hosted model.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct UpstreamSpec {
    /// Wire format when served over HTTP, and the rate-limit header style.
    pub api: Api,
    /// Median time to first token.
    #[serde(with = "sluice_config::duration")]
    pub ttft_median: Duration,
    /// Lognormal shape of the time to first token.
    pub ttft_sigma: f64,
    /// Probability that a request stalls before its first token (the heavy tail).
    pub stall_probability: f64,
    /// How long a stall lasts.
    #[serde(with = "sluice_config::duration")]
    pub stall: Duration,
    /// Delay between output tokens of a stream.
    #[serde(with = "sluice_config::duration")]
    pub per_token: Duration,
    /// Tokens sent per stream chunk.
    pub tokens_per_chunk: u32,
    /// Median output length in tokens.
    pub output_tokens_median: u32,
    /// Lognormal shape of the output length.
    pub output_tokens_sigma: f64,
    /// Longest output.
    pub output_tokens_max: u32,
    /// Requests served at once; more wait for a slot (0: unlimited).
    pub capacity: u32,
    /// How much decoding slows as the server fills: per-token delay × (1 + this × busy/capacity).
    pub load_slowdown: f64,
    /// Requests per minute before 429 (0: unlimited).
    pub rpm: u64,
    /// Requests admitted at once before the per-minute refill matters (default: a minute's
    /// worth). Providers quantise limits, e.g. 600 RPM enforced as 10 per second.
    pub rpm_burst: Option<u64>,
    /// Tokens (prompt + expected output) per minute before 429 (0: unlimited).
    pub tpm: u64,
    /// Tokens admitted at once (default: a minute's worth).
    pub tpm_burst: Option<u64>,
    /// Injected faults.
    pub faults: Faults,
    /// Prompt-cache emulation.
    pub prompt_cache: PromptCacheSpec,
    /// Scripted incidents.
    pub degradations: Vec<Degradation>,
    /// The probability that an answer is good, per task (the simulated judge's verdict);
    /// `"*"` for tasks not listed. A model with no table always answers well.
    pub quality: BTreeMap<String, f64>,
    /// What its tokens cost, in USD per million (unpriced when absent).
    pub price: Option<SimPrice>,
    /// Time to read each prompt token not served from the prompt cache, added to the time to
    /// first token (prefill; 0: prompt length does not matter).
    #[serde(with = "sluice_config::duration")]
    pub prefill_per_token: Duration,
    /// Whether answers announce the rate limits (`x-ratelimit-*`); some providers send only a
    /// 429's `Retry-After` (default true).
    pub rate_headers: bool,
    /// Whether a 429 says when to come back (`Retry-After`); some providers answer a bare 429
    /// (default true).
    pub retry_after: bool,
    /// The model reads ([`crate::reader`]): it answers "what is the X?" only when its prompt
    /// holds "the X is V.", and answers `INSUFFICIENT_CONTEXT` otherwise.
    pub reader: bool,
    /// The model answers the FAQ world's questions by meaning ([`crate::faq`]): one answer
    /// per class of questions that share one, whatever the wording.
    pub faq: bool,
    /// Served as Azure OpenAI (`/NAME/openai/...`): a prompt holding any of these words
    /// (in any case) is refused by the simulated content filter, a 400 in Azure's shape.
    pub content_filter: Vec<String>,
}

/// A simulated model's price, in USD per million tokens.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SimPrice {
    /// Prompt tokens at full price.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Prompt tokens read from its cache (default: a tenth of `input`).
    pub cached_input: Option<f64>,
}

impl Default for UpstreamSpec {
    fn default() -> Self {
        Self {
            api: Api::Openai,
            ttft_median: Duration::from_millis(600),
            ttft_sigma: 0.35,
            stall_probability: 0.0,
            stall: Duration::from_secs(3),
            per_token: Duration::from_millis(15),
            tokens_per_chunk: 4,
            output_tokens_median: 150,
            output_tokens_sigma: 0.5,
            output_tokens_max: 2048,
            capacity: 0,
            load_slowdown: 0.3,
            rpm: 0,
            rpm_burst: None,
            tpm: 0,
            tpm_burst: None,
            faults: Faults::default(),
            prompt_cache: PromptCacheSpec::default(),
            degradations: Vec::new(),
            quality: BTreeMap::new(),
            price: None,
            prefill_per_token: Duration::ZERO,
            rate_headers: true,
            retry_after: true,
            reader: false,
            faq: false,
            content_filter: Vec::new(),
        }
    }
}

impl UpstreamSpec {
    /// The time-to-first-token model.
    pub fn ttft(&self) -> TtftModel {
        TtftModel {
            body: LogNormalSpec {
                median: self.ttft_median.as_secs_f64(),
                sigma: self.ttft_sigma,
            },
            stall_p: self.stall_probability,
            stall: self.stall,
        }
    }

    /// The output-length model.
    pub fn output(&self) -> OutputModel {
        OutputModel {
            tokens: LogNormalSpec {
                median: f64::from(self.output_tokens_median),
                sigma: self.output_tokens_sigma,
            },
            max: self.output_tokens_max,
        }
    }

    /// The probability that its answer for `task` is good.
    pub fn quality_for(&self, task: Option<&str>) -> f64 {
        task.and_then(|t| self.quality.get(t))
            .or_else(|| self.quality.get("*"))
            .copied()
            .unwrap_or(1.0)
    }

    /// Human-checkable problems (probabilities out of range, empty windows).
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (task, q) in &self.quality {
            if !(0.0..=1.0).contains(q) {
                out.push(format!("quality.{task} must be between 0 and 1 (got {q})"));
            }
        }
        if let Some(p) = &self.price {
            let parts = [
                ("input", Some(p.input)),
                ("output", Some(p.output)),
                ("cached_input", p.cached_input),
            ];
            for (k, v) in parts {
                if v.is_some_and(|v| !(v >= 0.0 && v.is_finite())) {
                    out.push(format!("price.{k} must be a non-negative number"));
                }
            }
        }
        let probs = [
            ("stall_probability", self.stall_probability),
            ("faults.error_500", self.faults.error_500),
            ("faults.error_503", self.faults.error_503),
            ("faults.reset", self.faults.reset),
            ("faults.stall_mid_stream", self.faults.stall_mid_stream),
        ];
        for (k, p) in probs {
            if !(0.0..=1.0).contains(&p) {
                out.push(format!("{k} must be between 0 and 1 (got {p})"));
            }
        }
        let sum = self.faults.error_500
            + self.faults.error_503
            + self.faults.reset
            + self.faults.stall_mid_stream;
        if sum > 1.0 {
            out.push(format!("fault probabilities add up to {sum}, more than 1"));
        }
        if self.ttft_sigma < 0.0 || self.output_tokens_sigma < 0.0 {
            out.push("sigmas must not be negative".into());
        }
        if self.tokens_per_chunk == 0 {
            out.push("tokens_per_chunk must be at least 1".into());
        }
        for (i, d) in self.degradations.iter().enumerate() {
            if d.to <= d.from {
                out.push(format!("degradations[{i}]: `to` must come after `from`"));
            }
            if d.latency_factor <= 0.0 {
                out.push(format!(
                    "degradations[{i}]: latency_factor must be positive"
                ));
            }
            if !(d.capacity_factor > 0.0 && d.capacity_factor <= 1.0) {
                out.push(format!(
                    "degradations[{i}]: capacity_factor must be above 0 and at most 1"
                ));
            }
        }
        out
    }
}

/// Fault rates, each a probability per request.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct Faults {
    /// Answer 500.
    pub error_500: f64,
    /// Answer 503.
    pub error_503: f64,
    /// Drop the connection before answering.
    pub reset: f64,
    /// Stall a stream half-way through.
    pub stall_mid_stream: f64,
    /// How long a mid-stream stall lasts.
    #[serde(with = "sluice_config::duration")]
    pub mid_stream_stall: Duration,
    /// How long a failing request takes to fail.
    #[serde(with = "sluice_config::duration")]
    pub error_delay: Duration,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            error_500: 0.0,
            error_503: 0.0,
            reset: 0.0,
            stall_mid_stream: 0.0,
            mid_stream_stall: Duration::from_secs(300),
            error_delay: Duration::from_millis(50),
        }
    }
}

/// Prompt-cache emulation.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct PromptCacheSpec {
    /// Whether prefixes are remembered.
    pub enabled: bool,
    /// Shortest cached prefix, in tokens.
    pub min_tokens: u64,
    /// How long an unused prefix stays.
    #[serde(with = "sluice_config::duration")]
    pub ttl: Duration,
    /// Time to first token of the cached part, relative to uncached (0.2: five times faster).
    pub ttft_factor: f64,
}

impl Default for PromptCacheSpec {
    fn default() -> Self {
        Self {
            enabled: true,
            min_tokens: 1024,
            ttl: Duration::from_secs(300),
            ttft_factor: 0.2,
        }
    }
}

/// A scripted incident between two times after the simulator starts.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct Degradation {
    /// Start, after the simulator starts.
    #[serde(with = "sluice_config::duration")]
    pub from: Duration,
    /// End.
    #[serde(with = "sluice_config::duration")]
    pub to: Duration,
    /// Multiplies time to first token and per-token delay.
    pub latency_factor: f64,
    /// Replaces the 500 rate.
    pub error_500: Option<f64>,
    /// Replaces the 503 rate.
    pub error_503: Option<f64>,
    /// Multiplies `capacity` (0.5: half the requests served at once, the rest queue).
    pub capacity_factor: f64,
}

impl Default for Degradation {
    fn default() -> Self {
        Self {
            from: Duration::ZERO,
            to: Duration::ZERO,
            latency_factor: 1.0,
            error_500: None,
            error_503: None,
            capacity_factor: 1.0,
        }
    }
}
