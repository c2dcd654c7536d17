//! What several of the simulator's end-to-end tests share: a provider that keeps each request
//! as it reached the upstream, and a deployment named after its provider.

#![allow(dead_code)]

use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use sluice_config::gateway::DeploymentConfig;
use sluice_core::{ChatRequest, GatewayError};
use sluice_providers::{Provider, UpstreamCall, UpstreamResponse};
use sluice_sim::provider::SimProvider;

/// Passes calls to the simulator, keeping each request as it reached the upstream.
pub struct Recording {
    pub inner: SimProvider,
    pub seen: Arc<Mutex<Vec<ChatRequest>>>,
}

impl Provider for Recording {
    fn call(
        &self,
        call: UpstreamCall,
    ) -> BoxFuture<'static, Result<UpstreamResponse, GatewayError>> {
        self.seen.lock().push((*call.request).clone());
        self.inner.call(call)
    }
}

/// A deployment of model `model` on `provider`, named after it.
pub fn deployment(provider: &str, model: &str) -> DeploymentConfig {
    DeploymentConfig {
        provider: provider.into(),
        model: model.into(),
        weight: 1,
        name: Some(provider.into()),
        rpm: None,
        tpm: None,
    }
}
