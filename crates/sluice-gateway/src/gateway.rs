//! The gateway's shared state, and the builder that assembles it from config and code.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use sluice_config::gateway::{DeploymentConfig, Env, GatewayConfig, HedgeConfig};
use sluice_core::{CallRecord, ErrorKind, GatewayError};
use sluice_providers::Provider;
use sluice_tail::{Cooldowns, HedgePolicy, WindowConfig, WindowError};
use sluice_telemetry::Telemetry;
use tokio::time::{Duration, Instant};

use crate::routing::{Deployment, ModelGroup, Routes};

/// A function told about every finished call (the demo and tests collect records with it).
pub type RecordSink = Arc<dyn Fn(&CallRecord) + Send + Sync>;

/// Everything a request needs, shared by all requests.
pub struct Gateway {
    pub(crate) routes: Routes,
    pub(crate) telemetry: Arc<Telemetry>,
    pub(crate) max_body_bytes: usize,
    draining: AtomicBool,
    sinks: Vec<RecordSink>,
    /// Deployments that answered 429 recently: no optional work (hedges) goes to them.
    cooling: Mutex<Cooldowns<Arc<str>>>,
}

/// How long hedges keep away from a deployment that answered 429: at least this long, or its
/// `retry-after` if longer. An upstream that just refused us has no quota to spare, and a
/// hedge that spends it is paid for by the upstream's next ordinary request.
const HEDGE_QUIET_AFTER_429: Duration = Duration::from_secs(10);

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("routes", &self.routes)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// The telemetry hub (metrics, windows).
    pub fn telemetry(&self) -> &Arc<Telemetry> {
        &self.telemetry
    }

    /// The model groups.
    pub fn routes(&self) -> &Routes {
        &self.routes
    }

    /// Whether shutdown has begun (`/readyz` answers 503 from then on).
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// Marks the gateway as draining.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// Notes an attempt's failure: a 429 starts the deployment's cool-down.
    pub(crate) fn attempt_failed(&self, deployment: &Arc<str>, e: &GatewayError, now: Instant) {
        let Some(reply) = e.upstream.as_deref() else {
            return;
        };
        if e.kind == ErrorKind::UpstreamRejected && reply.status == 429 {
            let d = reply
                .retry_after()
                .unwrap_or_default()
                .max(HEDGE_QUIET_AFTER_429);
            self.cooling.lock().start(deployment.clone(), now, d);
        }
    }

    /// Whether `deployment` answered 429 recently enough that no hedge should go there.
    pub fn is_cooling(&self, deployment: &Arc<str>, now: Instant) -> bool {
        self.cooling.lock().active(deployment, now)
    }

    /// Hands a finished call to telemetry and every sink.
    pub(crate) fn settle(&self, record: &CallRecord) {
        self.telemetry.observe(record);
        for sink in &self.sinks {
            sink(record);
        }
    }
}

/// Why a gateway could not be assembled.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A deployment names a provider nobody supplied.
    #[error("model `{group}`: no provider named `{provider}`")]
    UnknownProvider {
        /// The group.
        group: String,
        /// The missing provider.
        provider: String,
    },
    /// A provider adapter could not be built.
    #[error("provider `{name}`: {source}")]
    Provider {
        /// The provider.
        name: String,
        /// Why.
        source: GatewayError,
    },
    /// The latency window shape is unusable.
    #[error("latency window: {0}")]
    Window(#[from] WindowError),
}

/// Assembles a [`Gateway`].
pub struct GatewayBuilder {
    providers: HashMap<String, Arc<dyn Provider>>,
    models: Vec<(String, Vec<DeploymentConfig>, Option<HedgePolicy>)>,
    default_hedge: Option<HedgePolicy>,
    window: WindowConfig,
    max_body_bytes: usize,
    seed: Option<u64>,
    sinks: Vec<RecordSink>,
}

impl Default for GatewayBuilder {
    fn default() -> Self {
        Self {
            providers: HashMap::new(),
            models: Vec::new(),
            default_hedge: None,
            window: WindowConfig::default(),
            max_body_bytes: usize::try_from(sluice_config::gateway::DEFAULT_MAX_BODY_BYTES)
                .unwrap_or(usize::MAX),
            seed: None,
            sinks: Vec::new(),
        }
    }
}

impl GatewayBuilder {
    /// An empty builder with default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder holding everything `cfg` describes, HTTP providers included.
    pub fn from_config(cfg: &GatewayConfig, env: &dyn Env) -> Result<Self, BuildError> {
        let mut b = Self::new()
            .max_body_bytes(usize::try_from(cfg.server.max_body_bytes).unwrap_or(usize::MAX))
            .window(WindowConfig {
                length: cfg.telemetry.latency_window,
                slices: cfg.telemetry.latency_window_slices,
            });
        for (name, p) in &cfg.providers {
            let provider = crate::providers::from_config(name, p, env).map_err(|source| {
                BuildError::Provider {
                    name: name.clone(),
                    source,
                }
            })?;
            b = b.provider(name, provider);
        }
        for (group, m) in &cfg.models {
            b = b.model_hedged(
                group,
                m.deployments.clone(),
                m.hedge.as_ref().map(hedge_policy),
            );
        }
        Ok(b)
    }

    /// Adds (or replaces) a provider, e.g. an in-process simulator.
    pub fn provider(mut self, name: &str, provider: Arc<dyn Provider>) -> Self {
        self.providers.insert(name.to_string(), provider);
        self
    }

    /// Adds a model group (hedging by the default policy, if one is set).
    pub fn model(self, group: &str, deployments: Vec<DeploymentConfig>) -> Self {
        self.model_hedged(group, deployments, None)
    }

    /// Adds a model group hedging by `hedge` (or by the default policy when `None`).
    pub fn model_hedged(
        mut self,
        group: &str,
        deployments: Vec<DeploymentConfig>,
        hedge: Option<HedgePolicy>,
    ) -> Self {
        self.models.push((group.to_string(), deployments, hedge));
        self
    }

    /// Hedges every group that sets no policy of its own.
    pub fn hedging(mut self, policy: HedgePolicy) -> Self {
        self.default_hedge = Some(policy);
        self
    }

    /// Sets the body limit.
    pub fn max_body_bytes(mut self, n: usize) -> Self {
        self.max_body_bytes = n;
        self
    }

    /// Sets the latency window shape.
    pub fn window(mut self, w: WindowConfig) -> Self {
        self.window = w;
        self
    }

    /// Seeds the routing RNG, for runs that must repeat.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Adds a sink told about every finished call.
    pub fn on_record(mut self, sink: RecordSink) -> Self {
        self.sinks.push(sink);
        self
    }

    /// Resolves provider references and builds the gateway.
    pub fn build(self) -> Result<Arc<Gateway>, BuildError> {
        let mut groups = Vec::with_capacity(self.models.len());
        for (group, deps, hedge) in &self.models {
            let mut out = Vec::with_capacity(deps.len());
            for d in deps {
                let provider =
                    self.providers
                        .get(&d.provider)
                        .ok_or_else(|| BuildError::UnknownProvider {
                            group: group.clone(),
                            provider: d.provider.clone(),
                        })?;
                out.push(Deployment {
                    name: Arc::from(d.display_name()),
                    provider: provider.clone(),
                    model: Arc::from(d.model.as_str()),
                    weight: d.weight,
                });
            }
            groups.push(ModelGroup::new(group, out, hedge.or(self.default_hedge)));
        }
        let seed = self.seed.unwrap_or_else(time_seed);
        Ok(Arc::new(Gateway {
            routes: Routes::new(groups, seed),
            telemetry: Arc::new(Telemetry::new(self.window)?),
            max_body_bytes: self.max_body_bytes,
            draining: AtomicBool::new(false),
            sinks: self.sinks,
            cooling: Mutex::new(Cooldowns::new()),
        }))
    }
}

/// The policy a `hedge = { ... }` entry describes.
pub fn hedge_policy(c: &HedgeConfig) -> HedgePolicy {
    HedgePolicy {
        quantile: c.quantile,
        min_samples: c.min_samples,
        min_delay: c.min_delay,
        budget: c.budget,
        burst: c.burst,
    }
}

/// A seed from the wall clock, for runs that need not repeat.
fn time_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x5eed)
}
