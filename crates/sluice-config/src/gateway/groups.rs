//! The section that says where requests go: model groups, their deployments, and each
//! group's policies (limit, retry, breaker, hedge, affinity, and how its prompts are shaped:
//! normalise, compress, progressive, prompt_cache_key), read straight into the types of the
//! crates that decide by them (`sluice-tail`, `sluice-routing`, `sluice-context`), which own
//! their defaults and their checks.

use std::time::Duration;

use serde::Deserialize;

use sluice_context::cache_key::Spread;
use sluice_context::compress::Compress;
use sluice_context::normalise::Normalise;
use sluice_context::progressive::Progressive;
use sluice_routing::affinity::AffinityPolicy;
use sluice_tail::limit::LimitParams;
use sluice_tail::{BreakerPolicy, HedgePolicy, RetryPolicy};

use crate::Toggle;

mod defaults {
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
    /// Hedging of slow requests: when absent, the first lane's only within 2%
    /// (`HedgePolicy::interactive`); `true` or a table, every lane within 5% unless the table
    /// says otherwise; `false` turns it off.
    #[serde(default)]
    pub hedge: Toggle<HedgePolicy>,
    /// Adaptive concurrency limit per deployment, with pacing under the upstream's rate
    /// limits and its 429 pause; on with its defaults when absent, `false` turns it off.
    #[serde(default)]
    pub limit: Toggle<LimitParams>,
    /// Retries of failed attempts, elsewhere first; on with its defaults when absent,
    /// `false` turns them off.
    #[serde(default)]
    pub retry: Toggle<RetryPolicy>,
    /// A circuit breaker per deployment; on with its defaults when absent, `false` turns it
    /// off.
    #[serde(default)]
    pub breaker: Toggle<BreakerPolicy>,
    /// The deadline of a request that sends no `x-sluice-timeout-ms`: from its arrival to its
    /// last byte, queueing, retries and hedges included. None when absent.
    #[serde(default, with = "crate::duration::option")]
    pub timeout: Option<Duration>,
    /// Prefix affinity: requests whose prompts start alike go to the deployment that served
    /// that prefix last, so its provider's prompt cache hits. Off when absent.
    #[serde(default)]
    pub affinity: Option<AffinityPolicy>,
    /// Normalisation that keeps meaning and makes prompts cacheable. Off when absent.
    #[serde(default)]
    pub normalise: Option<Normalise>,
    /// Compression of prompts over a token budget (the document in the newest user message
    /// only). Off when absent.
    #[serde(default)]
    pub compress: Option<Compress>,
    /// Progressive loading of long documents (complete answers only). Off when absent.
    #[serde(default)]
    pub progressive: Option<Progressive>,
    /// A `prompt_cache_key` derived from tenant and prefix for requests that send none
    /// (OpenAI-compatible upstreams that accept the field). Off when absent.
    #[serde(default)]
    pub prompt_cache_key: Option<Spread>,
    /// Groups that take a request in this order, within the same request and its deadline,
    /// when this one cannot: every deployment unavailable, the tenant's quota refused, the
    /// prompt too long for every deployment's context window, or an upstream saying so.
    #[serde(default)]
    pub fallbacks: Vec<String>,
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
