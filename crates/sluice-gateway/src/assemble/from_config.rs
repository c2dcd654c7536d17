//! A builder from a whole configuration (every section turned into the builder's calls), and the
//! semantic cache's builder calls.

use std::sync::Arc;

use sluice_config::gateway::{Env, GatewayConfig};
use sluice_routing::rules::TaskRoute;
use sluice_tail::WindowConfig;
use sluice_tail::admission::LaneSpec;

use super::{BuildError, GatewayBuilder, policies};

impl GatewayBuilder {
    /// Normalises the prompts of `group` as `n` says.
    pub fn normalise(mut self, group: &str, n: sluice_context::normalise::Normalise) -> Self {
        self.shapes.entry(Arc::from(group)).or_default().normalise = Some(n);
        self
    }

    /// Compresses the prompts of `group` over their budget as `c` says.
    pub fn compress(mut self, group: &str, c: sluice_context::compress::Compress) -> Self {
        self.shapes.entry(Arc::from(group)).or_default().compress = Some(c);
        self
    }

    /// Adds a provider prompt-cache key to `group`'s requests that send none, spread as `s`
    /// says.
    pub fn prompt_cache_key(mut self, group: &str, s: sluice_context::cache_key::Spread) -> Self {
        self.shapes.entry(Arc::from(group)).or_default().cache_key = Some(s);
        self
    }

    /// Loads the long documents of `group`'s requests progressively as `p` says.
    pub fn progressive(mut self, group: &str, p: sluice_context::progressive::Progressive) -> Self {
        self.shapes.entry(Arc::from(group)).or_default().progressive = Some(p);
        self
    }

    /// Keeps the last `keep` calls for the incident explainer (0: none).
    pub fn diagnose_keep(mut self, keep: usize) -> Self {
        self.diagnose_keep = keep;
        self
    }

    /// Judges every finished call by `slo` (counted in `sluice_slo_events_total`).
    pub fn slo(mut self, slo: sluice_telemetry::slo::Slo) -> Self {
        self.slos.push(slo);
        self
    }

    /// Watches `share` of requests for prefix churn (0: none).
    pub fn watch_prefixes(mut self, share: f64) -> Self {
        self.prefixes = (share > 0.0).then(|| crate::shaping::PrefixWatch::new(share));
        self
    }

    /// Caches answers by meaning under `policy`, up to `temperature` `ceiling`, with
    /// questions embedded by `embedder`.
    pub fn semantic_cache(
        self,
        policy: sluice_cache::semantic::Policy,
        ceiling: f64,
        embedder: Arc<sluice_embed::Embedder>,
    ) -> Self {
        self.semantic_cache_with(policy, ceiling, embedder, Vec::new())
    }

    /// As [`GatewayBuilder::semantic_cache`], with groups whose mode is their own (`None`:
    /// the group is not cached by meaning).
    pub fn semantic_cache_with(
        self,
        policy: sluice_cache::semantic::Policy,
        ceiling: f64,
        embedder: Arc<sluice_embed::Embedder>,
        groups: Vec<(String, Option<sluice_cache::semantic::Mode>)>,
    ) -> Self {
        let mut cache = sluice_cache::semantic::SemanticCache::new(policy, ceiling);
        for (group, mode) in groups {
            cache = cache.with_route(&group, mode);
        }
        self.semantic_cache_from(cache, embedder)
    }

    /// Caches answers by meaning in `cache` (one filled beforehand, say), with questions
    /// embedded by `embedder`.
    pub fn semantic_cache_from(
        mut self,
        cache: sluice_cache::semantic::SemanticCache,
        embedder: Arc<sluice_embed::Embedder>,
    ) -> Self {
        self.semantic = Some(crate::caches::Semantic {
            cache,
            embedder,
            coins: parking_lot::Mutex::new(rand::SeedableRng::seed_from_u64(0x5e3a_c0de)),
            served: moka::sync::Cache::new(crate::caches::HITS_KEPT),
        });
        self
    }

    /// The semantic cache `cfg` describes: embedded by its `[cache.semantic.embeddings]`
    /// upstream (a provider of `cfg`, its key read from `env`), else by the model in the
    /// folder `model` names relative to `base` (the config file's folder); nothing when it
    /// is off. A missing model is an error naming its folder and the command that installs
    /// it.
    pub fn semantic_from_config(
        self,
        cfg: &GatewayConfig,
        env: &dyn Env,
        base: &std::path::Path,
    ) -> Result<Self, BuildError> {
        let c = &cfg.cache.semantic;
        if !c.enabled {
            return Ok(self);
        }
        let embedder = match &c.embeddings {
            Some(e) => {
                let provider = cfg
                    .providers
                    .iter()
                    .find(|(n, _)| *n == e.provider)
                    .map(|(_, p)| p)
                    .ok_or_else(|| {
                        BuildError::Embeddings(format!("no provider `{}`", e.provider))
                    })?;
                let settings = provider
                    .openai_settings(api_key(provider, env))
                    .ok_or_else(|| {
                        BuildError::Embeddings(format!(
                            "`{}` is not OpenAI-compatible (kind = \"openai\")",
                            e.provider
                        ))
                    })?;
                let upstream = sluice_providers::embeddings::Embeddings::new(
                    &e.provider,
                    settings,
                    &e.model,
                    e.dimensions,
                )
                .map_err(|err| BuildError::Embeddings(err.to_string()))?;
                sluice_embed::Embedder::remote(upstream, e.timeout)
            }
            None => sluice_embed::Embedder::load(&base.join(&c.model))?,
        };
        Ok(self.semantic_as(c, Arc::new(embedder)))
    }

    /// The semantic cache `c` describes (whether or not it says `enabled`), its questions
    /// embedded by `embedder`.
    pub fn semantic_as(
        self,
        c: &sluice_config::gateway::SemanticParams,
        embedder: Arc<sluice_embed::Embedder>,
    ) -> Self {
        let mut cache =
            sluice_cache::semantic::SemanticCache::new(c.policy(), c.temperature_ceiling)
                .with_max_chars(c.max_question_chars);
        for (name, g) in &c.groups {
            let mode = (g.enabled != Some(false)).then(|| c.mode(Some(g)));
            cache = cache.with_route(name, mode);
        }
        self.semantic_cache_from(cache, embedder)
    }

    /// A builder holding everything `cfg` describes, HTTP providers included (the semantic
    /// cache apart: [`GatewayBuilder::semantic_from_config`], which needs the config's folder).
    pub fn from_config(cfg: &GatewayConfig, env: &dyn Env) -> Result<Self, BuildError> {
        let mut b = Self::new()
            .max_body_bytes(usize::try_from(cfg.server.max_body_bytes).unwrap_or(usize::MAX))
            .body_stall(cfg.server.stall_timeout)
            .window(WindowConfig {
                length: cfg.telemetry.latency_window,
                slices: cfg.telemetry.latency_window_slices,
            })
            .lanes(
                cfg.lanes
                    .iter()
                    .map(|(name, l)| LaneSpec::named(name, l))
                    .collect(),
            );
        if cfg.cache.enabled {
            b = b.answer_cache(cfg.cache.ttl, cfg.cache.max_bytes);
        }
        b = b.watch_prefixes(cfg.prefixes.watch);
        if let Some(format) = cfg.telemetry.access_log.format() {
            b = b.access_log(format, Box::new(std::io::stdout()));
        }
        for (name, p) in &cfg.providers {
            let provider = p
                .provider(name, api_key(p, env), &|var| env.get(var))
                .map_err(|source| BuildError::Provider {
                    name: name.clone(),
                    source,
                })?;
            b = b.provider(name, provider).provider_server(
                name,
                p.kind().name(),
                &p.upstream.base_url,
            );
        }
        if let Some(setup) = super::TraceSetup::from_config(&cfg.traces) {
            b = b.traces(setup);
        }
        if let Some(var) = &cfg.server.admin_token_env
            && let Some(token) = env.get(var)
        {
            b = b.admin_token(&token);
        }
        if let Some(var) = &cfg.server.metrics_token_env
            && let Some(token) = env.get(var)
        {
            b = b.metrics_token(&token);
        }
        b = b.tenant_labels(cfg.telemetry.tenant_labels.clone());
        if let Some(required) = cfg.server.require_keys {
            b = b.require_keys(required);
        }
        for (_, k) in &cfg.keys {
            b = b.key(k.spec.clone(), &k.sha256);
        }
        b = b.catalog(super::catalog::from_config(cfg)?);
        b = b.unpriced(cfg.billing.unpriced);
        for (tenant, t) in &cfg.tenants {
            if let Some(lane) = &t.lane {
                b = b.tenant_lane(tenant, lane);
            }
            if let Some(class) = &t.class {
                b = b.tenant_class(tenant, class);
            }
            if t.limits.any() {
                b = b.tenant_limits(tenant, t.limits);
            }
        }
        for (group, m) in &cfg.models {
            if let Some(n) = m.normalise {
                b = b.normalise(group, n);
            }
            if let Some(c) = m.compress {
                b = b.compress(group, c);
            }
            if let Some(k) = m.prompt_cache_key {
                b = b.prompt_cache_key(group, k);
            }
            if let Some(p) = &m.progressive {
                b = b.progressive(group, p.clone());
            }
            b = b.model_with(group, m.deployments.clone(), policies::of_group(m));
            if !m.fallbacks.is_empty() {
                b = b.fallbacks(group, &m.fallbacks);
            }
        }
        for (name, r) in &cfg.routers {
            b = b.router(name, &r.candidates, r.policy());
        }
        for slo in policies::slos(cfg) {
            b = b.slo(slo);
        }
        b = b.diagnose_keep(cfg.diagnose.keep);
        for (name, r) in &cfg.routes {
            b = b.task_route(TaskRoute::new(name, r));
        }
        Ok(b)
    }
}

/// A provider's API key (or an Azure provider's `token_env` token), from the environment
/// variable its entry names.
fn api_key(p: &sluice_config::gateway::ProviderConfig, env: &dyn Env) -> Option<String> {
    p.key_env().and_then(|var| env.get(var))
}
