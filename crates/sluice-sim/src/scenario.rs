//! Scenarios as data: simulated upstreams, the gateway's model groups and timeouts, and the
//! traffic to replay, in one TOML file.

use std::collections::HashSet;
use std::time::Duration;

use serde::Deserialize;
use sluice_config::document::Seg;
use sluice_config::gateway::{ModelGroupConfig, RouterParams};
use sluice_config::{Diagnostic, Diagnostics, Document};
use sluice_economy::{Micros, Price};
use sluice_tail::limit::LimitParams;
use sluice_tail::{HedgePolicy, RetryPolicy};

use sluice_gateway::GatewayBuilder;
use sluice_gateway::assemble::policies;

use crate::load::{Burst, Traffic, Workload};
use crate::spec::UpstreamSpec;

/// `[scenario]`: what the run is and how long it lasts.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct Meta {
    /// Short name.
    pub name: String,
    /// What the scenario rehearses.
    pub description: String,
    /// Seed of every random draw (arrivals, latencies, faults).
    pub seed: u64,
    /// Length of the traffic.
    #[serde(with = "sluice_config::duration")]
    pub duration: Duration,
    /// Requests slower than this count as SLO breaches.
    #[serde(with = "sluice_config::duration::option")]
    pub slo: Option<Duration>,
}

impl Default for Meta {
    fn default() -> Self {
        Self {
            name: "unnamed".into(),
            description: String::new(),
            seed: 1,
            duration: Duration::from_secs(60),
            slo: Some(Duration::from_secs(10)),
        }
    }
}

/// `[gateway]`: the timeouts the gateway applies to every simulated upstream.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct GatewaySection {
    /// First-byte timeout.
    #[serde(with = "sluice_config::duration")]
    pub first_byte_timeout: Duration,
    /// Idle timeout between chunks.
    #[serde(with = "sluice_config::duration")]
    pub idle_timeout: Duration,
    /// Hedging for every model group that sets none of its own (off when absent).
    pub hedge: Option<HedgePolicy>,
    /// Concurrency limits for every model group that sets none of its own (none when absent).
    pub limit: Option<LimitParams>,
    /// Retries for every model group that sets none of its own (none when absent).
    pub retry: Option<RetryPolicy>,
    /// The semantic cache (with the exact cache before it, under the same time to live and
    /// size) in the columns that cache: every one but the plain proxy. Its
    /// `embeddings.provider` names an upstream whose `/v1/embeddings` the simulator serves
    /// over HTTP ([`crate::faq`]), so only `sluice demo` runs it.
    pub semantic: Option<sluice_config::gateway::SemanticParams>,
}

impl Default for GatewaySection {
    fn default() -> Self {
        Self {
            first_byte_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(30),
            hedge: None,
            limit: None,
            retry: None,
            semantic: None,
        }
    }
}

/// A whole scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// `[scenario]`.
    pub meta: Meta,
    /// `[gateway]`.
    pub gateway: GatewaySection,
    /// `[upstreams.NAME]`, in file order.
    pub upstreams: Vec<(String, UpstreamSpec)>,
    /// `[models.GROUP]`, whose deployments name upstreams as providers.
    pub models: Vec<(String, ModelGroupConfig)>,
    /// `[routers.NAME]`: automatic routers over the groups.
    pub routers: Vec<(String, RouterParams)>,
    /// `[[traffic]]`.
    pub traffic: Vec<Traffic>,
    /// `[[bursts]]`.
    pub bursts: Vec<Burst>,
}

/// The scenarios that ship with sluice, by name.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "doc-analysis",
        include_str!("../../../scenarios/doc-analysis.toml"),
    ),
    ("steady", include_str!("../../../scenarios/steady.toml")),
    (
        "heavy-tail",
        include_str!("../../../scenarios/heavy-tail.toml"),
    ),
    (
        "rate-limited",
        include_str!("../../../scenarios/rate-limited.toml"),
    ),
    ("brownout", include_str!("../../../scenarios/brownout.toml")),
    ("outage", include_str!("../../../scenarios/outage.toml")),
    (
        "token-economy",
        include_str!("../../../scenarios/token-economy.toml"),
    ),
    (
        "tail-at-scale",
        include_str!("../../../scenarios/tail-at-scale.toml"),
    ),
    ("faq", include_str!("../../../scenarios/faq.toml")),
];

impl Scenario {
    /// A built-in scenario.
    pub fn builtin(name: &str) -> Option<Result<Self, Diagnostics>> {
        BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, text)| Self::parse(text))
    }

    /// Parses and checks a scenario, reporting every error.
    pub fn parse(text: &str) -> Result<Self, Diagnostics> {
        let doc = Document::parse(text)?;
        let mut diags = Vec::new();
        doc.reject_unknown_top_level(
            &[
                "scenario",
                "gateway",
                "upstreams",
                "models",
                "routers",
                "traffic",
                "bursts",
            ],
            &mut diags,
        );
        let meta: Option<Meta> = doc.section("scenario", &mut diags);
        let gateway: Option<GatewaySection> = doc.section("gateway", &mut diags);
        let upstreams: Vec<(String, UpstreamSpec)> = doc.map_section("upstreams", &mut diags);
        let models: Vec<(String, ModelGroupConfig)> = doc.map_section("models", &mut diags);
        let routers: Vec<(String, RouterParams)> = doc.map_section("routers", &mut diags);
        let traffic: Vec<Traffic> = doc.list_section("traffic", &mut diags);
        let bursts: Vec<Burst> = doc.list_section("bursts", &mut diags);
        for (name, spec) in &upstreams {
            for p in spec.problems() {
                diags.push(doc.diag(&[Seg::Key("upstreams".into()), Seg::Key(name.clone())], p));
            }
        }
        hedge_problems(&doc, gateway.as_ref(), &models, &mut diags);
        let known: HashSet<&str> = upstreams.iter().map(|(n, _)| n.as_str()).collect();
        for (group, m) in &models {
            for (i, d) in m.deployments.iter().enumerate() {
                if !known.contains(d.provider.as_str()) {
                    let path = [
                        Seg::Key("models".into()),
                        Seg::Key(group.clone()),
                        Seg::Key("deployments".into()),
                        Seg::Index(i),
                        Seg::Key("provider".into()),
                    ];
                    diags.push(doc.diag(&path, format!("no upstream named `{}`", d.provider)));
                }
            }
        }
        if let Some(sem) = gateway.as_ref().and_then(|g| g.semantic.as_ref()) {
            semantic_problems(&doc, sem, &known, &mut diags);
        }
        let mut groups: HashSet<&str> = models.iter().map(|(n, _)| n.as_str()).collect();
        for (name, r) in &routers {
            for c in &r.candidates {
                if !groups.contains(c.as_str()) {
                    let path = [
                        Seg::Key("routers".into()),
                        Seg::Key(name.clone()),
                        Seg::Key("candidates".into()),
                    ];
                    diags.push(doc.diag(&path, format!("no model group named `{c}`")));
                }
            }
        }
        groups.extend(routers.iter().map(|(n, _)| n.as_str()));
        let uses = traffic
            .iter()
            .map(|t| ("traffic", &t.model))
            .chain(bursts.iter().map(|b| ("bursts", &b.model)));
        for (i, (section, model)) in uses.enumerate() {
            if !groups.contains(model.as_str()) {
                let index = if section == "traffic" {
                    i
                } else {
                    i - traffic.len()
                };
                let path = [
                    Seg::Key(section.into()),
                    Seg::Index(index),
                    Seg::Key("model".into()),
                ];
                diags.push(doc.diag(&path, format!("no model group named `{model}`")));
            }
        }
        match (meta, gateway) {
            (Some(meta), Some(gateway)) if diags.is_empty() => Ok(Self {
                meta,
                gateway,
                upstreams,
                models,
                routers,
                traffic,
                bursts,
            }),
            _ => {
                let mut d = Diagnostics(diags);
                d.sort();
                Err(d)
            }
        }
    }

    /// Applies the scenario's gateway settings to `b`: its default policies (where `b` sets
    /// none) and its model groups with their own policies. Providers are the caller's: the
    /// harness plugs in simulators in-process, the demo over HTTP.
    pub fn configure(&self, mut b: GatewayBuilder) -> GatewayBuilder {
        let g = &self.gateway;
        if let Some(h) = &g.hedge {
            b = b.hedging(*h);
        }
        if let Some(l) = &g.limit {
            b = b.limits(l.spec());
        }
        if let Some(r) = &g.retry {
            b = b.retries(*r);
        }
        for (group, m) in &self.models {
            b = b.model_with(group, m.deployments.clone(), policies::of_group(m));
            for d in &m.deployments {
                if let Some(price) = self.price_of(&d.provider) {
                    b = b.price(&d.model, price);
                }
            }
        }
        for (name, r) in &self.routers {
            b = b.router(name, &r.candidates, r.policy());
        }
        b
    }

    /// `b` with the caches `[gateway.semantic]` asks for (none when it is absent): the exact
    /// cache, and the semantic cache with its questions embedded by the simulator serving
    /// `embeddings.provider`'s `/v1/embeddings` at `sim`.
    pub fn with_caches(
        &self,
        b: GatewayBuilder,
        sim: std::net::SocketAddr,
    ) -> Result<GatewayBuilder, sluice_core::GatewayError> {
        let Some(c) = &self.gateway.semantic else {
            return Ok(b);
        };
        let Some(e) = &c.embeddings else {
            return Err(sluice_core::GatewayError::new(
                sluice_core::ErrorKind::InvalidRequest,
                "[gateway.semantic] needs `embeddings.provider`",
            ));
        };
        let settings = sluice_providers::OpenAiSettings {
            base_url: format!("http://{sim}/{}/v1", e.provider),
            http: sluice_providers::HttpSettings {
                connect_timeout: Duration::from_secs(2),
                first_byte_timeout: e.timeout,
                idle_timeout: e.timeout,
                pool_max_idle: 64,
                pool_idle_timeout: Duration::from_secs(90),
            },
            ..sluice_providers::OpenAiSettings::default()
        };
        let upstream = sluice_providers::embeddings::Embeddings::new(
            &e.provider,
            settings,
            &e.model,
            e.dimensions,
        )?;
        let embedder = sluice_embed::Embedder::remote(upstream, e.timeout);
        Ok(b.answer_cache(c.ttl, c.max_bytes)
            .semantic_as(c, std::sync::Arc::new(embedder)))
    }

    /// The price of upstream `name`'s tokens, when its spec sets one.
    pub fn price_of(&self, name: &str) -> Option<Price> {
        let (_, spec) = self.upstreams.iter().find(|(n, _)| n == name)?;
        let p = spec.price?;
        let micros = |usd: f64| Micros::from_units(usd);
        Some(Price {
            input: micros(p.input)?,
            cached_input: micros(p.cached_input.unwrap_or(p.input / 10.0))?,
            cache_write: micros(p.input)?,
            output: micros(p.output)?,
            published: None,
        })
    }

    /// The scenario's schedule of requests.
    pub fn workload(&self) -> Workload {
        let mut w = Workload::build(
            &self.traffic,
            &self.bursts,
            self.meta.duration,
            self.meta.seed,
        );
        // A simulated judge scores answers when some model has a quality table.
        if self.upstreams.iter().any(|(_, u)| !u.quality.is_empty()) {
            let deployments = self
                .models
                .iter()
                .flat_map(|(_, m)| &m.deployments)
                .map(|d| (d.display_name(), d.provider.clone()))
                .collect();
            w.judge = Some(std::sync::Arc::new(crate::judge::Judge::new(
                &self.upstreams,
                deployments,
                self.meta.seed,
            )));
        }
        w
    }
}

/// The hedging policies' problems, in `[gateway]` and in each model group.
fn hedge_problems(
    doc: &Document<'_>,
    gateway: Option<&GatewaySection>,
    models: &[(String, ModelGroupConfig)],
    diags: &mut Vec<Diagnostic>,
) {
    let hedges = gateway
        .iter()
        .filter_map(|g| {
            g.hedge
                .as_ref()
                .map(|h| (vec![Seg::Key("gateway".into())], h))
        })
        .chain(models.iter().filter_map(|(n, m)| {
            m.hedge
                .written()
                .map(|h| (vec![Seg::Key("models".into()), Seg::Key(n.clone())], h))
        }));
    for (mut path, h) in hedges {
        path.push(Seg::Key("hedge".into()));
        for (field, problem) in h.problems() {
            let mut p = path.clone();
            p.push(Seg::Key(field.into()));
            diags.push(doc.diag(&p, problem));
        }
    }
}

/// The simulated semantic cache's embeddings upstream: named, and one of `known`.
fn semantic_problems(
    doc: &Document<'_>,
    sem: &sluice_config::gateway::SemanticParams,
    known: &HashSet<&str>,
    diags: &mut Vec<Diagnostic>,
) {
    let path = |key: &str| {
        let mut p = vec![Seg::Key("gateway".into()), Seg::Key("semantic".into())];
        p.push(Seg::Key(key.into()));
        p
    };
    match &sem.embeddings {
        None => diags.push(doc.diag(
            &path("embeddings"),
            "the simulated semantic cache needs `embeddings.provider`, an upstream the simulator serves embeddings for",
        )),
        Some(e) if !known.contains(e.provider.as_str()) => diags.push(doc.diag(
            &path("embeddings"),
            format!("no upstream named `{}`", e.provider),
        )),
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests;
