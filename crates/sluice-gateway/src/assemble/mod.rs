//! Assembles a [`Gateway`] from configuration and code: providers, model groups with their
//! policies (hedging, concurrency limits, pacing, retries, breakers), lanes and tenants'
//! default lanes, telemetry.

mod build;
pub mod catalog;
mod cluster;
pub(crate) mod from_config;
mod group_policies;
pub mod policies;
pub mod routers;
mod tenancy;
mod traces;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use sluice_config::gateway::DeploymentConfig;
use sluice_core::GatewayError;
use sluice_economy::{Catalog, InfoOverride, KeyError, KeySpec, Limits, Price, Unpriced};
use sluice_ledger::{AnyStore, Ledger, StoredTenant};
use sluice_providers::Provider;
use sluice_tail::admission::LaneSpec;
use sluice_tail::limit::LimitSpec;
use sluice_tail::{BreakerPolicy, HedgePolicy, RetryPolicy, WindowConfig, WindowError};
use sluice_telemetry::AccessFormat;

use crate::gateway::RecordSink;
use sluice_routing::affinity::AffinityPolicy;
use sluice_routing::auto::{RouterPolicy, Stored};
use sluice_routing::rules::TaskRoute;

pub use group_policies::{DEFAULT_LIMIT, GroupPolicies, Setting};
pub use traces::TraceSetup;

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
    /// An API key could not be added.
    #[error("key: {0}")]
    Key(#[from] KeyError),
    /// A tenant's default lane is not a lane.
    #[error("tenant `{tenant}`: no lane named `{lane}`")]
    UnknownLane {
        /// The tenant.
        tenant: String,
        /// The missing lane.
        lane: String,
    },
    /// `[analysis]`'s rule file could not be read or is wrong (every error named).
    #[error("[analysis] rules: {0}")]
    Rules(String),
    /// The semantic cache's embeddings upstream could not be set up.
    #[error("[cache.semantic.embeddings]: {0}")]
    Embeddings(String),
    /// The semantic cache's embedding model would not load.
    #[error("[cache.semantic] model: {0}")]
    Embedder(#[from] sluice_embed::EmbedError),
    /// A router names a candidate that is not a model group.
    #[error("router `{router}`: no model group named `{group}`")]
    UnknownCandidate {
        /// The router.
        router: String,
        /// The missing group.
        group: String,
    },
    /// Tenants are counted in tokens, and the tokenizer would not load.
    #[error("{0}")]
    Tokenizer(#[from] sluice_economy::estimate::TokenizerError),
    /// The latency window shape is unusable.
    #[error("latency window: {0}")]
    Window(#[from] WindowError),
    /// `[catalog.MODEL]` describes a model sluice does not ship without both sizes.
    #[error(
        "catalog.{model}: a model sluice does not ship needs `context_window` and `max_output`"
    )]
    Catalog {
        /// The model.
        model: String,
    },
    /// `[billing]` or a price's currency cannot be used.
    #[error("billing: {0}")]
    Billing(String),
    /// The access log's writer could not be started.
    #[error("starting the access log: {0}")]
    AccessLog(std::io::Error),
    /// The trace exporter could not be started.
    #[error("starting the trace exporter: {0}")]
    Traces(#[from] sluice_trace::StartError),
}

/// The concurrency limit of a deployment that is paced but not limited: room enough never
/// to be the constraint.
const UNLIMITED: usize = 100_000;
/// Calls the incident explainer keeps by default (about 2 MB).
pub const DEFAULT_DIAGNOSE_KEEP: usize = 20_000;

/// Assembles a [`Gateway`].
pub struct GatewayBuilder {
    providers: HashMap<String, Arc<dyn Provider>>,
    models: Vec<(String, Vec<DeploymentConfig>, GroupPolicies)>,
    defaults: GroupPolicies,
    lanes: Vec<LaneSpec>,
    tenant_defaults: tenancy::TenantDefaults,
    keys: Vec<(KeySpec, String)>,
    /// Keys made at run time, kept in the ledger's store.
    stored: Vec<(KeySpec, String)>,
    /// Tenants set at run time, kept in the ledger's store.
    stored_tenants: Vec<StoredTenant>,
    /// Hashes (hex) of keys revoked through the admin API, kept in the ledger's store.
    revoked: HashSet<String>,
    limits: Vec<(String, Limits)>,
    require_keys: Option<bool>,
    admin_token: Option<String>,
    metrics_token: Option<String>,
    tenant_labels: sluice_telemetry::TenantLabels,
    catalog: Catalog,
    unpriced: Unpriced,
    window: WindowConfig,
    max_body_bytes: usize,
    body_stall: std::time::Duration,
    seed: Option<u64>,
    sinks: Vec<RecordSink>,
    ledger: Option<(Ledger, Arc<AnyStore>)>,
    /// The answer cache's time to live and size in bytes, when answers are cached.
    cache: Option<(Duration, u64)>,
    /// Where the access log goes, when there is one.
    access_log: Option<(AccessFormat, Box<dyn std::io::Write + Send>)>,
    /// Each group's fallbacks, in order.
    fallbacks: HashMap<String, Vec<String>>,
    /// Model names that choose a group by rules.
    task_routes: Vec<TaskRoute>,
    routers: Vec<(String, Vec<String>, RouterPolicy)>,
    semantic: Option<crate::caches::Semantic>,
    pub(super) prefixes: Option<crate::shaping::PrefixWatch>,
    pub(super) shapes: HashMap<Arc<str>, sluice_context::Shaping>,
    pub(super) slos: Vec<sluice_telemetry::slo::Slo>,
    pub(super) diagnose_keep: usize,
    router_state: Vec<(String, Vec<Stored>)>,
    pub(super) traces: Option<traces::TraceSetup>,
    /// Each provider's host and port, for the spans of its calls.
    pub(super) servers: HashMap<String, traces::Site>,
    /// The instances this one shares limits, budgets and pacing with, when any.
    pub(super) cluster: Option<sluice_cluster::Cluster>,
}

impl Default for GatewayBuilder {
    fn default() -> Self {
        Self {
            providers: HashMap::new(),
            models: Vec::new(),
            defaults: GroupPolicies::protective(),
            lanes: sluice_tail::admission::default_lanes()
                .iter()
                .map(|(name, l)| LaneSpec::named(name, l))
                .collect(),
            tenant_defaults: tenancy::TenantDefaults::default(),
            keys: Vec::new(),
            stored: Vec::new(),
            stored_tenants: Vec::new(),
            revoked: HashSet::new(),
            limits: Vec::new(),
            require_keys: None,
            admin_token: None,
            metrics_token: None,
            tenant_labels: sluice_telemetry::TenantLabels::default(),
            catalog: Catalog::with_defaults(),
            unpriced: Unpriced::Refuse,
            window: WindowConfig::default(),
            max_body_bytes: usize::try_from(sluice_config::gateway::DEFAULT_MAX_BODY_BYTES)
                .unwrap_or(usize::MAX),
            body_stall: sluice_config::gateway::DEFAULT_STALL_TIMEOUT,
            seed: None,
            sinks: Vec::new(),
            ledger: None,
            cache: None,
            access_log: None,
            fallbacks: HashMap::new(),
            task_routes: Vec::new(),
            routers: Vec::new(),
            semantic: None,
            prefixes: Some(crate::shaping::PrefixWatch::new(0.01)),
            shapes: HashMap::new(),
            slos: Vec::new(),
            diagnose_keep: DEFAULT_DIAGNOSE_KEEP,
            router_state: Vec::new(),
            traces: None,
            servers: HashMap::new(),
            cluster: None,
        }
    }
}

impl GatewayBuilder {
    /// Writes one line per finished request to `out` (standard output, from the config).
    pub fn access_log(mut self, format: AccessFormat, out: Box<dyn std::io::Write + Send>) -> Self {
        self.access_log = Some((format, out));
        self
    }

    /// Overrides what the catalog says `model` can take and do; an error for a model the
    /// catalog does not know when `o` does not give both its sizes.
    pub fn model_info(mut self, model: &str, o: &InfoOverride) -> Result<Self, BuildError> {
        if self.catalog.set_info(model, o) {
            Ok(self)
        } else {
            Err(BuildError::Catalog {
                model: model.to_string(),
            })
        }
    }

    /// Has `group` fall back to `to`, in order, when it cannot take a request.
    pub fn fallbacks(mut self, group: &str, to: &[String]) -> Self {
        self.fallbacks.insert(group.to_string(), to.to_vec());
        self
    }

    /// Adds a model name that chooses a group by rules.
    pub fn task_route(mut self, route: TaskRoute) -> Self {
        self.task_routes.push(route);
        self
    }

    /// An empty builder with sluice's defaults: every group retries (elsewhere first,
    /// within a budget), breaks circuits and paces its deployments under admission unless
    /// it says otherwise ([`GroupPolicies::protective`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty builder for a plain proxy: no group retries, breaks circuits or queues
    /// unless it sets its own ([`GroupPolicies::bare`]).
    pub fn bare() -> Self {
        Self {
            defaults: GroupPolicies::bare(),
            ..Self::default()
        }
    }

    /// Adds (or replaces) a provider, e.g. an in-process simulator.
    pub fn provider(mut self, name: &str, provider: Arc<dyn Provider>) -> Self {
        self.providers.insert(name.to_string(), provider);
        self
    }

    /// Adds a model group with the default policies.
    pub fn model(self, group: &str, deployments: Vec<DeploymentConfig>) -> Self {
        self.model_with(group, deployments, GroupPolicies::default())
    }

    /// Adds a model group with its own policies (the defaults fill what it leaves `None`).
    pub fn model_with(
        mut self,
        group: &str,
        deployments: Vec<DeploymentConfig>,
        p: GroupPolicies,
    ) -> Self {
        self.models.push((group.to_string(), deployments, p));
        self
    }

    /// Hedges every group that sets no hedging of its own.
    pub fn hedging(mut self, policy: HedgePolicy) -> Self {
        self.defaults.hedge = Setting::On(policy);
        self
    }

    /// Hedges no group that sets no hedging of its own (the default hedges the first lane's
    /// slow requests: [`HedgePolicy::interactive`]).
    pub fn without_hedging(mut self) -> Self {
        self.defaults.hedge = Setting::Off;
        self
    }

    /// Limits the concurrency of every deployment whose group sets no limit of its own.
    pub fn limits(mut self, spec: LimitSpec) -> Self {
        self.defaults.limit = Setting::On(spec);
        self
    }

    /// Retries in every group that sets no retries of its own.
    pub fn retries(mut self, policy: RetryPolicy) -> Self {
        self.defaults.retry = Setting::On(policy);
        self
    }

    /// Routes by prompt prefix in every group that sets no affinity of its own.
    pub fn affinity(mut self, policy: AffinityPolicy) -> Self {
        self.defaults.affinity = Some(policy);
        self
    }

    /// Breaks circuits in every group that sets no breaker of its own.
    pub fn breakers(mut self, policy: BreakerPolicy) -> Self {
        self.defaults.breaker = Setting::On(policy);
        self
    }

    /// Gives every group that sets no timeout of its own a deadline for requests that carry
    /// none (`x-sluice-timeout-ms`).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.defaults.timeout = Some(timeout);
        self
    }

    /// Sets the lanes, in priority order (the first is the default lane).
    pub fn lanes(mut self, lanes: Vec<LaneSpec>) -> Self {
        if !lanes.is_empty() {
            self.lanes = lanes;
        }
        self
    }

    /// What happens to a call whose deployment's model has no price: refused for tenants
    /// who pay by credits or a spend quota (the default), or served free; counted either way.
    pub fn unpriced(mut self, policy: Unpriced) -> Self {
        self.unpriced = policy;
        self
    }

    /// Prices upstream model `model` (over the shipped default, if any).
    pub fn price(mut self, model: &str, price: Price) -> Self {
        self.catalog.set(model, price);
        self
    }

    /// Sets the body limit.
    pub fn max_body_bytes(mut self, n: usize) -> Self {
        self.max_body_bytes = n;
        self
    }

    /// Sets the longest pause a client may take while it sends a body (then 408).
    pub fn body_stall(mut self, d: std::time::Duration) -> Self {
        self.body_stall = d;
        self
    }

    /// Names tenants in metric labels as `labels` says.
    pub fn tenant_labels(mut self, labels: sluice_telemetry::TenantLabels) -> Self {
        self.tenant_labels = labels;
        self
    }

    /// Sets the latency window shape.
    pub fn window(mut self, w: WindowConfig) -> Self {
        self.window = w;
        self
    }

    /// Seeds routing (and the limits' jitter), for runs that must repeat.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Caches complete answers for `ttl`, holding at most `max_bytes` of them (see
    /// [`sluice_cache`]).
    pub fn answer_cache(mut self, ttl: Duration, max_bytes: u64) -> Self {
        self.cache = Some((ttl, max_bytes));
        self
    }

    /// Keeps a usage ledger: every finished call's row goes to `ledger`, which writes into
    /// `store`; `/admin/usage` reads `store`.
    pub fn ledger(mut self, ledger: Ledger, store: Arc<AnyStore>) -> Self {
        self.ledger = Some((ledger, store));
        self
    }

    /// Adds a sink told about every finished call.
    pub fn on_record(mut self, sink: RecordSink) -> Self {
        self.sinks.push(sink);
        self
    }
}

/// A seed from the wall clock, for runs that need not repeat.
fn time_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x5eed)
}
