//! What several of the simulator's end-to-end tests share: a provider that keeps each request
//! as it reached the upstream, a deployment named after its provider, the simulator's HTTP
//! server and a gateway served on a loopback port.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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

/// A gateway served on a loopback port until dropped.
pub struct Serving {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<sluice_gateway::server::Stopped>>>,
}

impl Serving {
    /// Serves `gw` on a free loopback port.
    pub async fn start(gw: impl Into<sluice_gateway::App>) -> Self {
        let server = bind(gw).await;
        let addr = server.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops it and waits for it to drain.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

/// Serves the simulator `sim` on a free loopback port for the rest of the test; its address.
pub async fn simulator(sim: sluice_sim::server::SimServer) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(sluice_sim::server::serve_on(
        sim,
        listener,
        std::future::pending(),
    ));
    addr
}

/// Serves `gw` on a free loopback port for the rest of the test; its base URL.
pub async fn gateway_url(gw: impl Into<sluice_gateway::App>) -> String {
    let server = bind(gw).await;
    let url = format!("http://{}", server.local_addr().unwrap());
    tokio::spawn(server.run(std::future::pending()));
    url
}

/// `gw`'s server bound to a free loopback port (a second's drain on stopping).
async fn bind(gw: impl Into<sluice_gateway::App>) -> sluice_gateway::server::Server {
    sluice_gateway::server::Server::bind(gw, "127.0.0.1:0".parse().unwrap(), Duration::from_secs(1))
        .await
        .unwrap()
}
