//! The gateway built from what the builder was given, in named steps: model groups with
//! their deployments' limiters and breakers, the key ring, tenants' accounts and lanes,
//! then the shared state.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use parking_lot::Mutex;
use sluice_economy::{KeyRing, KeySpec};
use sluice_routing::{Deployment, ModelGroup, Routes, ticket_hash};
use sluice_tail::Breaker;
use sluice_tail::limit::LimitSpec;
use sluice_tail::pace::PaceSpec;
use sluice_telemetry::{AccessLog, Telemetry};

use super::{BuildError, GatewayBuilder, UNLIMITED, cluster, routers, time_seed, traces};
use crate::caches::Caches;
use crate::gateway::Gateway;
use crate::learning::Learning;
use crate::observers::{Judged, Observers, Recent};
use crate::shaping::Shaping;
use crate::tenants::{KeyCheck, LocalTenants, Tenants};

/// Tenants' accounts, lanes and stored settings, as the build makes them.
struct TenantState {
    accounts: sluice_economy::Books,
    configured: HashSet<Arc<str>>,
    stored: std::collections::BTreeSet<Arc<str>>,
    lanes: HashMap<Arc<str>, usize>,
}

impl GatewayBuilder {
    /// Resolves provider references and builds the gateway.
    pub fn build(mut self) -> Result<Arc<Gateway>, BuildError> {
        let seed = self.seed.unwrap_or_else(time_seed);
        let (groups, upstreams) = self.groups(seed)?;
        let key_check = KeyCheck::from_setting(self.require_keys);
        let keys = key_ring(
            std::mem::take(&mut self.keys),
            std::mem::take(&mut self.stored),
            &self.revoked,
        )?;
        // Tenants' prompts are counted (those configured now, and any the admin API adds):
        // load the tokenizer now, before the gateway can answer `/readyz`, so no request pays
        // for it; refuse to start without it.
        let tokenizer = sluice_economy::estimate::Tokenizer::load()?;
        let tenants = self.tenant_state()?;
        let telemetry = Arc::new(
            Telemetry::new(self.window)?
                .with_tenant_labels(std::mem::take(&mut self.tenant_labels)),
        );
        crate::observers::export_objectives(&telemetry, &self.slos);
        let access_log = match self.access_log {
            Some((format, out)) => Some(
                AccessLog::start(format, out, telemetry.metrics().access_log_dropped.clone())
                    .map_err(BuildError::AccessLog)?,
            ),
            None => None,
        };
        let routers = routers::build(self.routers, &self.router_state, &groups)?;
        let traces = traces::start(self.traces, upstreams, &telemetry)?;
        let shaping = Shaping {
            counter: crate::shaping::Counter(tokenizer.clone()),
            cache_keys: self
                .shapes
                .iter()
                .filter_map(|(g, s)| {
                    let spread = s.cache_key?;
                    Some((
                        g.clone(),
                        parking_lot::Mutex::new(sluice_context::cache_key::Keys::new(spread)),
                    ))
                })
                .collect(),
            shapes: self.shapes,
            prefixes: self.prefixes,
        };
        let gw = Arc::new(Gateway {
            routes: Routes::new(groups, seed)
                .with_task_routes(self.task_routes)
                .with_routers(routers),
            lanes: self.lanes,
            tenants: Tenants {
                keys,
                key_check,
                admin_token: self.admin_token,
                metrics_token: self.metrics_token,
                accounts: tenants.accounts,
                tokenizer,
                pricing: crate::tenants::Pricing {
                    unpriced: self.unpriced,
                    catalog: self.catalog,
                },
                directory: Box::new(LocalTenants::new(tenants.lanes, tenants.stored)),
                classes: self.tenant_defaults.classes,
                configured: tenants.configured,
                admin_writes: tokio::sync::Mutex::new(()),
            },
            caches: Caches {
                exact: self
                    .cache
                    .map(|(ttl, bytes)| cluster::answer_cache(self.cluster.as_ref(), ttl, bytes)),
                semantic: cluster::semantic(self.cluster.as_ref(), self.semantic),
            },
            pacing: cluster::pacing(self.cluster.as_ref()),
            shaping,
            observers: Observers {
                telemetry,
                access_log,
                sinks: self.sinks,
                recent: (self.diagnose_keep > 0).then(|| Recent::new(self.diagnose_keep)),
                slos: self.slos.into_iter().map(Judged::new).collect(),
                traces,
            },
            learning: Learning::default(),
            ledger: self.ledger,
            cluster: self.cluster,
            max_body_bytes: self.max_body_bytes,
            body_stall: self.body_stall,
            draining: AtomicBool::new(false),
            store_health: crate::cluster::StoreHealth::default(),
        });
        crate::learning::share(&gw);
        Ok(gw)
    }

    /// The model groups, each deployment with its provider, price, limiter (pacing needs the
    /// queue) and breaker; and, when calls are traced, what their spans say of each.
    fn groups(&self, seed: u64) -> Result<(Vec<ModelGroup>, sluice_trace::Upstreams), BuildError> {
        let mut groups = Vec::with_capacity(self.models.len());
        let mut upstreams = sluice_trace::Upstreams::new();
        let hints = cluster::hints(self.cluster.as_ref());
        for (group, deps, own) in &self.models {
            let p = own.or(self.defaults);
            let mut out = Vec::with_capacity(deps.len());
            for d in deps {
                let provider =
                    self.providers
                        .get(&d.provider)
                        .ok_or_else(|| BuildError::UnknownProvider {
                            group: group.clone(),
                            provider: d.provider.clone(),
                        })?;
                let name = d.display_name();
                if self.traces.is_some() {
                    upstreams.insert(Arc::from(name.as_str()), traces::upstream(d, &self.servers));
                }
                // Pacing needs the queue, so a deployment with a configured rate limit gets a
                // limiter even where its group limits no concurrency (a fixed, roomy one).
                let pace = PaceSpec {
                    rpm: d.rpm,
                    tpm: d.tpm,
                };
                let spec = p.limit.on().or_else(|| {
                    (pace != PaceSpec::default()).then_some(LimitSpec::Fixed(UNLIMITED))
                });
                let limiter = spec.map(|spec| {
                    let seed = ticket_hash(seed, 2, &name);
                    Arc::new(cluster::limiter(
                        self.cluster.as_ref(),
                        (&spec, &self.lanes, seed),
                        &name,
                        pace,
                    ))
                });
                let breaker = p.breaker.on().map(|policy| {
                    Arc::new(Mutex::new(Breaker::new(
                        policy,
                        tokio::time::Instant::now(),
                    )))
                });
                out.push(Deployment {
                    name: Arc::from(name),
                    provider: provider.clone(),
                    model: Arc::from(d.model.as_str()),
                    weight: d.weight,
                    price: self.catalog.price(&d.model).copied(),
                    info: self.catalog.info(&d.model).copied(),
                    limiter,
                    breaker,
                    hints: hints.clone(),
                });
            }
            groups.push(
                ModelGroup::new(group, out, p.hedge.on())
                    .with_retries(p.retry.on())
                    .with_timeout(p.timeout)
                    .with_affinity_of(cluster::affinity(self.cluster.as_ref(), group, p.affinity))
                    .with_fallbacks(self.fallbacks.get(group).map_or(&[], Vec::as_slice)),
            );
        }
        Ok((groups, upstreams))
    }

    /// Tenants' accounts (configured and stored limits), the tenants configured, those set
    /// through the admin API, and each tenant's default lane.
    fn tenant_state(&mut self) -> Result<TenantState, BuildError> {
        let store = self.ledger.as_ref().map(|(_, s)| s);
        let accounts = cluster::books(self.cluster.as_ref(), store);
        // Tenants' prompts are counted (those configured now, and any the admin API adds):
        // load the tokenizer now, before the gateway can answer `/readyz`, so no request pays
        // for it; refuse to start without it.
        let _tokenizer = sluice_economy::estimate::Tokenizer::load()?;
        for (tenant, limits) in &self.limits {
            accounts.set_limits(tenant, *limits, tokio::time::Instant::now());
        }
        let configured_tenants = self.tenant_defaults.configured(&self.limits);
        let mut api_tenants = BTreeMap::new();
        let mut api_lanes = Vec::new();
        for t in std::mem::take(&mut self.stored_tenants) {
            if configured_tenants.contains(t.name.as_str()) {
                tracing::warn!(tenant = %t.name, "a stored tenant has a configured tenant's name; the configured one is used");
                continue;
            }
            accounts.set_limits(
                &t.name,
                crate::tenants::limits_of(&t),
                tokio::time::Instant::now(),
            );
            match t
                .lane
                .as_deref()
                .map(|l| self.lanes.iter().position(|x| &*x.name == l))
            {
                Some(Some(i)) => api_lanes.push((Arc::from(t.name.as_str()), i)),
                Some(None) => {
                    tracing::warn!(tenant = %t.name, "a stored tenant's lane is gone; its requests use the first lane")
                }
                None => {}
            }
            api_tenants.insert(Arc::from(t.name.as_str()), t);
        }
        let mut tenant_lanes = HashMap::new();
        for (tenant, lane) in &self.tenant_defaults.lanes {
            let i = self
                .lanes
                .iter()
                .position(|l| &*l.name == lane.as_str())
                .ok_or_else(|| BuildError::UnknownLane {
                    tenant: tenant.clone(),
                    lane: lane.clone(),
                })?;
            tenant_lanes.insert(Arc::from(tenant.as_str()), i);
        }
        tenant_lanes.extend(api_lanes);
        Ok(TenantState {
            accounts,
            configured: configured_tenants,
            stored: api_tenants.into_keys().collect(),
            lanes: tenant_lanes,
        })
    }
}

/// The key ring: configured and stored keys, less those revoked. Keys are required, unless
/// turned off, once any key exists: from the configuration, the store, or made later through
/// the admin API.
fn key_ring(
    configured: Vec<(KeySpec, String)>,
    stored: Vec<(KeySpec, String)>,
    revoked: &HashSet<String>,
) -> Result<Arc<dyn sluice_economy::KeyDirectory>, BuildError> {
    let keys: Arc<dyn sluice_economy::KeyDirectory> = Arc::new(KeyRing::default());
    // Keys were in use once any was revoked: revoking the last one must not open the gateway
    // after a restart.
    if !revoked.is_empty() {
        keys.mark_held();
    }
    for (spec, hash) in configured.into_iter().chain(stored) {
        if revoked.contains(&hash.trim().to_ascii_lowercase()) {
            tracing::warn!(
                key = %spec.name,
                "the key is revoked (DELETE /admin/keys) and stays refused until the \
                 configuration gives it another sha256"
            );
            continue;
        }
        keys.insert_hashed(spec, &hash)?;
    }
    Ok(keys)
}
