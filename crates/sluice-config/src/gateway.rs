//! The gateway's configuration: schema, defaults and validation.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;

use crate::diagnostic::{Diagnostic, Diagnostics};
use crate::document::Document;

/// The top-level sections a gateway config may have.
const SECTIONS: &[&str] = &[
    "server",
    "telemetry",
    "ledger",
    "cache",
    "prefixes",
    "billing",
    "lanes",
    "tenants",
    "keys",
    "prices",
    "providers",
    "models",
    "catalog",
    "routes",
    "routers",
    "slo",
    "diagnose",
    "traces",
    "batches",
    "cluster",
    "analysis",
];

mod analysis;
mod batches;
mod billing;
mod cache;
mod checks;
mod choosing;
mod cluster;
mod groups;
mod protection;
mod providers;
mod sections;
mod slos;
mod tenancy;
mod traces;

pub use analysis::AnalysisConfig;
pub use batches::BatchesConfig;
pub use cache::*;
pub use cluster::{BudgetFallback, ClusterConfig};
pub use groups::*;
pub use providers::ProviderConfig;
pub use sections::*;
pub use slos::{DiagnoseConfig, SloConfig};
pub use sluice_telemetry::slo::SloKind;
pub use tenancy::{KeyConfig, TenantConfig};
pub use traces::{TraceProtocol, TracesConfig};

pub use sluice_routing::auto::RouterParams;
pub use sluice_routing::rules::RouteParams;
pub use sluice_tail::admission::LaneParams;

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
    /// `[prefixes]`.
    pub prefixes: PrefixesConfig,
    /// `[billing]`.
    pub billing: BillingConfig,
    /// `[lanes.*]`, in priority order (the defaults when none are given).
    pub lanes: Vec<(String, LaneParams)>,
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
    /// `[catalog.*]`: overrides of what models can take and do, in file order.
    pub catalog: Vec<(String, CatalogConfig)>,
    /// `[routes.*]`: model names that choose a group by rules, in file order.
    pub routes: Vec<(String, RouteParams)>,
    /// `[routers.*]`: model names that learn which candidate group to choose, in file order.
    pub routers: Vec<(String, RouterParams)>,
    /// `[slo.*]`: the objectives calls are judged by, in file order.
    pub slos: Vec<(String, SloConfig)>,
    /// `[diagnose]`.
    pub diagnose: DiagnoseConfig,
    /// `[traces]`.
    pub traces: TracesConfig,
    /// `[batches]`.
    pub batches: BatchesConfig,
    /// `[cluster]`.
    pub cluster: ClusterConfig,
    /// `[analysis]`.
    pub analysis: AnalysisConfig,
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

/// What missing secrets (provider keys, the admin token, the ledger's URL) count as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Secrets {
    /// Errors: `serve` cannot run without them.
    Required,
    /// Warnings: `config check` on a machine that does not hold every key.
    Warn,
}

/// Everything `check` found in a configuration.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Checked {
    /// The configuration, when there were no errors.
    pub config: Option<GatewayConfig>,
    /// What makes the file unusable, top to bottom.
    pub errors: Diagnostics,
    /// What works but is probably not meant, top to bottom.
    pub warnings: Diagnostics,
}

/// Reads and validates a gateway configuration for serving: every error found, missing
/// secrets included. Warnings are dropped; [`check`] returns them.
///
/// `extra_providers` names providers that will be supplied in code (the demo's simulated
/// upstreams), so deployments may refer to them without a `[providers]` entry.
pub fn load(
    text: &str,
    env: &dyn Env,
    extra_providers: &[&str],
) -> Result<GatewayConfig, Diagnostics> {
    let checked = check(text, env, extra_providers, Secrets::Required);
    match checked.config {
        Some(config) => Ok(config),
        None => Err(checked.errors),
    }
}

/// Reads and validates a gateway configuration, reporting every error and warning in one
/// pass; `secrets` says whether an unset secret variable is an error or a warning.
pub fn check(text: &str, env: &dyn Env, extra_providers: &[&str], secrets: Secrets) -> Checked {
    let doc = match Document::parse(text) {
        Ok(doc) => doc,
        Err(errors) => {
            return Checked {
                errors,
                ..Checked::default()
            };
        }
    };
    let mut diags = Vec::new();
    let mut unset = Vec::new();
    let mut warnings = Vec::new();
    doc.reject_unknown_top_level(SECTIONS, &mut diags);
    let server: Option<ServerConfig> = doc.section("server", &mut diags);
    let telemetry: Option<TelemetryConfig> = doc.section("telemetry", &mut diags);
    let ledger: Option<LedgerConfig> = doc.section("ledger", &mut diags);
    if let Some(l) = &ledger {
        checks::ledger(&doc, l, env, &mut diags, &mut unset);
    }
    let (cache, prefixes) = caches(&doc, &mut diags);
    let billing: Option<BillingConfig> = doc.section("billing", &mut diags);
    let mut lanes: Vec<(String, LaneParams)> = doc.map_section("lanes", &mut diags);
    checks::lanes(&doc, &lanes, &mut diags);
    if lanes.is_empty() {
        lanes = sluice_tail::admission::default_lanes();
    }
    let tenants = tenancy::tenants(&doc, &mut diags);
    checks::tenants(&doc, &tenants, &lanes, &mut diags);
    let keys = tenancy::keys(&doc, &mut diags);
    let prices: Vec<(String, PriceConfig)> = doc.map_section("prices", &mut diags);
    if let Some(b) = &billing {
        billing::check(&doc, b, &prices, &mut diags);
    }
    let providers: Vec<(String, ProviderConfig)> = providers::read(&doc, &mut diags);
    let models: Vec<(String, ModelGroupConfig)> = doc.map_section("models", &mut diags);
    let (catalog, routes, routers) = choosing(&doc, &models, &mut diags, &mut warnings);
    let mut route_names: Vec<&str> = routes.iter().map(|(n, _)| n.as_str()).collect();
    route_names.extend(routers.iter().map(|(n, _)| n.as_str()));
    checks::keys(&doc, &keys, &lanes, &models, &route_names, &mut diags);
    let slos: Vec<(String, SloConfig)> = doc.map_section("slo", &mut diags);
    let diagnose: Option<DiagnoseConfig> = doc.section("diagnose", &mut diags);
    slos::check(&doc, &slos, &lanes, &models, &mut diags);
    let traces: Option<TracesConfig> = doc.section("traces", &mut diags);
    if let Some(t) = &traces {
        traces::check(&doc, t, &mut diags);
    }
    let (batches, analysis) = jobs(
        &doc,
        ledger.as_ref(),
        &lanes,
        &models,
        &route_names,
        &mut diags,
        &mut warnings,
    );
    let cluster = cluster_section(
        &doc,
        ledger.as_ref(),
        env,
        &mut diags,
        &mut unset,
        &mut warnings,
    );

    let listen = server.as_ref().and_then(|s| {
        checks::server(
            &doc,
            s,
            !keys.is_empty(),
            env,
            &mut diags,
            &mut unset,
            &mut warnings,
        )
    });
    if let Some(t) = &telemetry {
        checks::telemetry(&doc, t, &mut diags);
    }
    for (name, p) in &providers {
        checks::provider(&doc, name, p, env, &mut diags, &mut unset);
    }
    let mut known: HashSet<&str> = providers.iter().map(|(n, _)| n.as_str()).collect();
    known.extend(extra_providers.iter().copied());
    checks::models(&doc, &models, &known, &mut diags);
    protection::warn(&doc, &models, &keys, &mut warnings);
    if let Some(c) = &cache {
        checks::semantic_refs(&doc, &c.semantic, &providers, &models, &mut diags);
    }

    match secrets {
        Secrets::Required => diags.extend(unset),
        Secrets::Warn => warnings.extend(unset),
    }
    let read = Read {
        server,
        telemetry,
        ledger,
        cache,
        prefixes,
        billing,
        lanes,
        tenants,
        keys,
        prices,
        providers,
        models,
        catalog,
        routes,
        routers,
        slos,
        diagnose,
        traces,
        batches,
        cluster,
        analysis,
    };
    read.finish(listen, diags, warnings)
}

/// `[cache]` and `[prefixes]`, each checked on its own.
fn caches(
    doc: &Document<'_>,
    diags: &mut Vec<Diagnostic>,
) -> (Option<CacheConfig>, Option<PrefixesConfig>) {
    let cache: Option<CacheConfig> = doc.section("cache", diags);
    let prefixes: Option<PrefixesConfig> = doc.section("prefixes", diags);
    if let Some(p) = &prefixes {
        checks::prefixes(doc, p, diags);
    }
    if let Some(c) = &cache {
        checks::cache(doc, c, diags);
    }
    (cache, prefixes)
}

/// `[cluster]`, checked against the ledger it shares and the environment that holds its
/// secrets.
fn cluster_section(
    doc: &Document<'_>,
    ledger: Option<&LedgerConfig>,
    env: &dyn Env,
    diags: &mut Vec<Diagnostic>,
    unset: &mut Vec<Diagnostic>,
    warnings: &mut Vec<Diagnostic>,
) -> Option<ClusterConfig> {
    let cluster: Option<ClusterConfig> = doc.section("cluster", diags);
    if let Some(c) = &cluster {
        cluster::check(doc, c, ledger, env, diags, unset, warnings);
    }
    cluster
}

/// Tables of a section, by name, in the order written.
type Named<T> = Vec<(String, T)>;

/// What says how a model is chosen: `[catalog]`, `[routes]` and `[routers]`, checked
/// against the model groups (and the groups' fallbacks).
fn choosing(
    doc: &Document<'_>,
    models: &[(String, ModelGroupConfig)],
    diags: &mut Vec<Diagnostic>,
    warnings: &mut Vec<Diagnostic>,
) -> (
    Named<CatalogConfig>,
    Named<RouteParams>,
    Named<RouterParams>,
) {
    let catalog: Vec<(String, CatalogConfig)> = doc.map_section("catalog", diags);
    let routes: Vec<(String, RouteParams)> = doc.map_section("routes", diags);
    choosing::catalog(doc, &catalog, diags);
    choosing::fallbacks(doc, models, diags);
    choosing::routes(doc, &routes, models, diags, warnings);
    let routers: Vec<(String, RouterParams)> = doc.map_section("routers", diags);
    choosing::routers(doc, &routers, models, &routes, diags);
    (catalog, routes, routers)
}

/// Every section as read, before the configuration is whole.
struct Read {
    server: Option<ServerConfig>,
    telemetry: Option<TelemetryConfig>,
    ledger: Option<LedgerConfig>,
    cache: Option<CacheConfig>,
    prefixes: Option<PrefixesConfig>,
    billing: Option<BillingConfig>,
    lanes: Vec<(String, LaneParams)>,
    tenants: Vec<(String, TenantConfig)>,
    keys: Vec<(String, KeyConfig)>,
    prices: Vec<(String, PriceConfig)>,
    providers: Vec<(String, ProviderConfig)>,
    models: Vec<(String, ModelGroupConfig)>,
    catalog: Vec<(String, CatalogConfig)>,
    routes: Vec<(String, RouteParams)>,
    routers: Vec<(String, RouterParams)>,
    slos: Vec<(String, SloConfig)>,
    diagnose: Option<DiagnoseConfig>,
    traces: Option<TracesConfig>,
    batches: Option<BatchesConfig>,
    cluster: Option<ClusterConfig>,
    analysis: Option<AnalysisConfig>,
}

impl Read {
    /// The configuration when nothing is wrong, else every error (the first at each path).
    fn finish(
        self,
        listen: Option<SocketAddr>,
        diags: Vec<Diagnostic>,
        warnings: Vec<Diagnostic>,
    ) -> Checked {
        let mut warnings = Diagnostics(warnings);
        warnings.sort();
        let config = match (
            self.server,
            self.telemetry,
            self.ledger,
            self.cache,
            self.billing,
            listen,
        ) {
            (
                Some(server),
                Some(telemetry),
                Some(ledger),
                Some(cache),
                Some(billing),
                Some(listen),
            ) if diags.is_empty() => GatewayConfig {
                server,
                listen,
                telemetry,
                ledger,
                cache,
                prefixes: self.prefixes.unwrap_or_default(),
                billing,
                lanes: self.lanes,
                tenants: self.tenants,
                keys: self.keys,
                prices: self.prices,
                providers: self.providers,
                models: self.models,
                catalog: self.catalog,
                routes: self.routes,
                routers: self.routers,
                slos: self.slos,
                diagnose: self.diagnose.unwrap_or_default(),
                traces: self.traces.unwrap_or_default(),
                batches: self.batches.unwrap_or_default(),
                cluster: self.cluster.unwrap_or_default(),
                analysis: self.analysis.unwrap_or_default(),
            },
            _ => {
                let mut errors = Diagnostics(diags);
                errors.first_per_path();
                errors.sort();
                return Checked {
                    config: None,
                    errors,
                    warnings,
                };
            }
        };
        Checked {
            config: Some(config),
            errors: Diagnostics::default(),
            warnings,
        }
    }
}

/// `[batches]` and `[analysis]`, checked against the lanes, the model groups and routes
/// they name, and the ledger's store they need.
fn jobs(
    doc: &Document<'_>,
    ledger: Option<&LedgerConfig>,
    lanes: &[(String, LaneParams)],
    models: &[(String, ModelGroupConfig)],
    route_names: &[&str],
    diags: &mut Vec<Diagnostic>,
    warnings: &mut Vec<Diagnostic>,
) -> (Option<BatchesConfig>, Option<AnalysisConfig>) {
    let batches: Option<BatchesConfig> = doc.section("batches", diags);
    if let Some(b) = &batches {
        let names: Vec<String> = lanes.iter().map(|(n, _)| n.clone()).collect();
        batches::check(doc, b, &names, diags);
        if b.enabled && ledger.is_some_and(|l| l.store == LedgerStoreKind::Off) {
            warnings.push(doc.diag(
                &[crate::document::Seg::Key("batches".into())],
                "batch jobs live in the ledger's store: with [ledger] store = \"off\" \
                 /v1/files and /v1/batches are not served",
            ));
        }
    }
    let analysis: Option<AnalysisConfig> = doc.section("analysis", diags);
    if let Some(a) = &analysis {
        let names: Vec<String> = lanes.iter().map(|(n, _)| n.clone()).collect();
        let mut choosable: Vec<&str> = models.iter().map(|(n, _)| n.as_str()).collect();
        choosable.extend(route_names.iter().copied());
        analysis::check(doc, a, &names, &choosable, diags);
        let stored = ledger.is_none_or(|l| l.store != LedgerStoreKind::Off);
        analysis::batched(doc, a, batches.as_ref().filter(|_| stored), warnings);
    }
    (batches, analysis)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod tests_azure;
#[cfg(test)]
mod tests_bedrock;
#[cfg(test)]
mod tests_gemini;
