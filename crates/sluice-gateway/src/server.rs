//! The HTTP server: routes, and graceful shutdown with a grace period.

use std::future::{Future, IntoFuture};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::{delete, get, post, put};
use axum::{Router, middleware};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::admin::{
    self, cache as cache_api, keys as keys_api, tenants as tenants_api, upstreams,
    usage as usage_api,
};
use crate::{Gateway, public, walk};

/// The routes of a gateway.
pub fn router(gw: Arc<Gateway>) -> Router {
    let admin_routes = Router::new()
        .route("/admin/latency", get(admin::latency))
        .route("/admin/upstreams", get(upstreams::upstreams))
        .route("/admin/keys", get(keys_api::list).post(keys_api::create))
        .route("/admin/keys/{name}", delete(keys_api::revoke))
        .route("/admin/tenants", get(tenants_api::list))
        .route(
            "/admin/tenants/{name}",
            put(tenants_api::put).delete(tenants_api::delete),
        )
        .route("/admin/usage", get(usage_api::usage))
        .route(
            "/admin/cache",
            get(cache_api::show).delete(cache_api::purge),
        )
        .route_layer(middleware::from_fn_with_state(gw.clone(), admin::guard));
    Router::new()
        .route("/v1/chat/completions", post(walk::chat_completions))
        .route("/v1/models", get(public::models))
        .route("/healthz", get(public::healthz))
        .route("/readyz", get(public::readyz))
        .route("/metrics", get(public::metrics))
        .merge(admin_routes)
        .fallback(public::not_found)
        .method_not_allowed_fallback(public::method_not_allowed)
        .with_state(gw)
}

/// How a server stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// Every in-flight request finished within the grace period.
    Drained,
    /// The grace period ran out with requests still running; they are cut.
    GraceExpired,
}

/// Triggers a graceful shutdown from code (tests, the demo).
#[derive(Clone, Debug, Default)]
pub struct ShutdownHandle(CancellationToken);

impl ShutdownHandle {
    /// A handle not yet triggered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts the shutdown.
    pub fn trigger(&self) {
        self.0.cancel();
    }

    /// Resolves once triggered.
    pub async fn triggered(&self) {
        self.0.cancelled().await;
    }
}

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    gw: Arc<Gateway>,
    grace: Duration,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port).
    pub async fn bind(gw: Arc<Gateway>, addr: SocketAddr, grace: Duration) -> io::Result<Self> {
        Ok(Self {
            listener: TcpListener::bind(addr).await?,
            gw,
            grace,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` resolves; then stops accepting, answers `/readyz` with 503,
    /// and waits for in-flight requests for at most the grace period.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<Stopped> {
        let token = CancellationToken::new();
        let gw = self.gw.clone();
        let trigger = token.clone();
        tokio::spawn(async move {
            shutdown.await;
            gw.start_draining();
            tracing::info!("shutting down: no new connections, draining in-flight requests");
            trigger.cancel();
        });
        let serve = axum::serve(nodelay(self.listener), router(self.gw))
            .with_graceful_shutdown(token.clone().cancelled_owned())
            .into_future();
        let grace = self.grace;
        let expired = async move {
            token.cancelled().await;
            tokio::time::sleep(grace).await;
        };
        tokio::select! {
            r = serve => r.map(|()| Stopped::Drained),
            () = expired => {
                tracing::warn!(?grace, "grace period expired; cutting the requests still running");
                Ok(Stopped::GraceExpired)
            }
        }
    }
}

/// Sets `TCP_NODELAY` on every accepted connection: without it a small write (a stream's
/// chunk, or headers sent apart from the body) waits up to 40 ms for the peer's delayed ACK.
pub fn nodelay(
    listener: TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = SocketAddr> {
    use axum::serve::ListenerExt;
    listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("could not set TCP_NODELAY: {e}");
        }
    })
}

/// Resolves on SIGTERM or SIGINT.
pub async fn signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
