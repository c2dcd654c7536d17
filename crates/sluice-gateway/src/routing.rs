//! Model groups: the names clients use, mapped to weighted upstream deployments.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use sluice_core::{ErrorKind, GatewayError};
use sluice_providers::Provider;

/// One place a group's requests can go.
#[derive(Clone)]
pub struct Deployment {
    /// Name in headers and metrics.
    pub name: Arc<str>,
    /// The upstream adapter (shared by every deployment on that provider).
    pub provider: Arc<dyn Provider>,
    /// The model name the upstream knows.
    pub model: Arc<str>,
    /// Relative share of traffic.
    pub weight: u32,
}

impl std::fmt::Debug for Deployment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployment")
            .field("name", &self.name)
            .field("model", &self.model)
            .field("weight", &self.weight)
            .finish_non_exhaustive()
    }
}

/// A model group.
#[derive(Clone, Debug)]
pub struct ModelGroup {
    /// The name clients send as `model`.
    pub name: Arc<str>,
    /// Where its requests may go.
    pub deployments: Vec<Deployment>,
    total_weight: u64,
}

impl ModelGroup {
    /// A group over `deployments` (weights of zero count as one).
    pub fn new(name: &str, deployments: Vec<Deployment>) -> Self {
        let total_weight = deployments.iter().map(|d| u64::from(d.weight.max(1))).sum();
        Self {
            name: Arc::from(name),
            deployments,
            total_weight,
        }
    }

    /// The deployment a ticket in `0..total_weight` falls on.
    fn by_ticket(&self, mut ticket: u64) -> Option<&Deployment> {
        for d in &self.deployments {
            let w = u64::from(d.weight.max(1));
            if ticket < w {
                return Some(d);
            }
            ticket -= w;
        }
        self.deployments.last()
    }
}

/// Every model group, and the seeded RNG that spreads traffic by weight.
pub struct Routes {
    groups: HashMap<Arc<str>, ModelGroup>,
    order: Vec<Arc<str>>,
    rng: Mutex<StdRng>,
}

impl std::fmt::Debug for Routes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routes")
            .field("groups", &self.order)
            .finish_non_exhaustive()
    }
}

impl Routes {
    /// Routes over `groups`, in that order, picking with a generator seeded by `seed`.
    pub fn new(groups: Vec<ModelGroup>, seed: u64) -> Self {
        let order = groups.iter().map(|g| g.name.clone()).collect();
        let groups = groups.into_iter().map(|g| (g.name.clone(), g)).collect();
        Self {
            groups,
            order,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        }
    }

    /// The group names, in configuration order.
    pub fn names(&self) -> &[Arc<str>] {
        &self.order
    }

    /// The group called `model`, or a 404 naming the known ones.
    pub fn group(&self, model: &str) -> Result<&ModelGroup, GatewayError> {
        self.groups.get(model).ok_or_else(|| {
            let known: Vec<&str> = self.order.iter().map(|n| &**n).collect();
            GatewayError::new(
                ErrorKind::ModelNotFound,
                format!(
                    "model `{model}` does not exist; configured models: {}",
                    known.join(", ")
                ),
            )
            .with_param("model")
        })
    }

    /// Picks a deployment of `group` with probability proportional to its weight.
    pub fn pick<'a>(&self, group: &'a ModelGroup) -> Result<&'a Deployment, GatewayError> {
        if group.total_weight == 0 {
            return Err(GatewayError::new(
                ErrorKind::Internal,
                format!("model `{}` has no deployments", group.name),
            ));
        }
        let ticket = self.rng.lock().random_range(0..group.total_weight);
        group
            .by_ticket(ticket)
            .ok_or_else(|| GatewayError::new(ErrorKind::Internal, "no deployment"))
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use futures::future::BoxFuture;
    use sluice_providers::{UpstreamCall, UpstreamResponse};

    use super::*;

    struct Nothing;
    impl Provider for Nothing {
        fn call(
            &self,
            _: UpstreamCall,
        ) -> BoxFuture<'static, Result<UpstreamResponse, GatewayError>> {
            futures::future::ready(Err(GatewayError::new(ErrorKind::Internal, "unused"))).boxed()
        }
    }

    fn dep(name: &str, weight: u32) -> Deployment {
        Deployment {
            name: Arc::from(name),
            provider: Arc::new(Nothing),
            model: Arc::from("m"),
            weight,
        }
    }

    #[test]
    fn traffic_follows_weights() {
        let routes = Routes::new(
            vec![ModelGroup::new("chat", vec![dep("a", 3), dep("b", 1)])],
            7,
        );
        let g = routes.group("chat").unwrap();
        let mut a = 0;
        for _ in 0..10_000 {
            if &*routes.pick(g).unwrap().name == "a" {
                a += 1;
            }
        }
        assert!(
            (7_200..7_800).contains(&a),
            "{a} of 10000 went to the weight-3 deployment"
        );
    }

    #[test]
    fn unknown_models_are_404_and_list_the_known_ones() {
        let routes = Routes::new(vec![ModelGroup::new("chat", vec![dep("a", 1)])], 1);
        let e = routes.group("gpt-9").unwrap_err();
        assert_eq!(e.kind, ErrorKind::ModelNotFound);
        assert!(e.message.contains("chat"));
    }
}
