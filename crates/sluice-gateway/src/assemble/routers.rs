//! Automatic routers added to a gateway: their candidates checked against the groups, and
//! what they learnt before restored.

use std::sync::Arc;

use sluice_routing::ModelGroup;
use sluice_routing::auto::{Router, RouterPolicy, Stored};

use super::{BuildError, GatewayBuilder};

impl GatewayBuilder {
    /// Adds a model name that learns which of `candidates` (groups) to choose.
    pub fn router(mut self, name: &str, candidates: &[String], policy: RouterPolicy) -> Self {
        self.routers
            .push((name.to_string(), candidates.to_vec(), policy));
        self
    }

    /// What router `name` learnt before (from the store), to start from.
    pub fn router_state(mut self, name: &str, stored: Vec<Stored>) -> Self {
        self.router_state.push((name.to_string(), stored));
        self
    }
}

/// The routers, each over candidates that are groups, started from what was stored.
pub(super) fn build(
    specs: Vec<(String, Vec<String>, RouterPolicy)>,
    state: &[(String, Vec<Stored>)],
    groups: &[ModelGroup],
) -> Result<Vec<Router>, BuildError> {
    let mut routers = Vec::with_capacity(specs.len());
    for (name, candidates, policy) in specs {
        if let Some(c) = candidates
            .iter()
            .find(|c| !groups.iter().any(|g| *g.name == ***c))
        {
            return Err(BuildError::UnknownCandidate {
                router: name,
                group: c.clone(),
            });
        }
        let names = candidates.iter().map(|c| Arc::from(c.as_str())).collect();
        let mut r = Router::new(&name, names, policy);
        for (_, stored) in state.iter().filter(|(n, _)| *n == name) {
            let taken = r.restore(stored);
            tracing::info!(router = %name, taken, "router state restored");
        }
        routers.push(r);
    }
    Ok(routers)
}
