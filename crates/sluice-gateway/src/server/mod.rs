//! The HTTP server: routes, and graceful shutdown with a grace period.

mod conns;
mod limits;
mod shape;
mod stall;

pub use limits::{ConnLimits, auto_max_connections, raise_file_limit};
pub use shape::dialect_of;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use axum::routing::{delete, get, post, put};
use axum::{Router, middleware};
use tokio::net::{TcpListener, TcpSocket};
use tokio_util::sync::CancellationToken;

use crate::admin::{
    self, cache as cache_api, keys as keys_api, tenants as tenants_api, upstreams,
    usage as usage_api,
};
use crate::{App, analyses, batches, feedback, public, walk};

/// The routes of a gateway and the work served beside it.
pub fn router(app: impl Into<App>) -> Router {
    let app: App = app.into();
    let gw = app.gateway.clone();
    let admin_routes = Router::new()
        .route("/admin/latency", get(admin::latency))
        .route("/admin/latency/history", get(admin::diagnose::history))
        .route("/admin/features", get(admin::features))
        .route("/admin/upstreams", get(upstreams::upstreams))
        .route("/admin/keys", get(keys_api::list).post(keys_api::create))
        .route("/admin/keys/{name}", delete(keys_api::revoke))
        .route("/admin/tenants", get(tenants_api::list))
        .route(
            "/admin/tenants/{name}",
            put(tenants_api::put).delete(tenants_api::delete),
        )
        .route("/admin/usage", get(usage_api::usage))
        .route("/admin/router", get(admin::router::show))
        .route("/admin/prefixes", get(admin::prefixes::show))
        .route("/admin/diagnose", get(admin::diagnose::show))
        .route("/admin/slo", get(admin::slo::show))
        .route("/admin/batches", get(batches::api::open_jobs))
        .route(
            "/admin/cache",
            get(cache_api::show).delete(cache_api::purge),
        )
        .route_layer(middleware::from_fn_with_state(gw.clone(), admin::guard));
    Router::new()
        .route("/v1/messages/count_tokens", post(public::count_tokens))
        .route("/v1/models", get(public::models))
        .route("/v1/feedback", post(feedback::api::feedback))
        .route(
            "/v1/files",
            post(batches::api::upload_file)
                .get(batches::api::list_files)
                // The file's own limit is checked as it is read.
                .layer(axum::extract::DefaultBodyLimit::disable()),
        )
        .route(
            "/v1/files/{id}",
            get(batches::api::file).delete(batches::api::delete_file),
        )
        .route("/v1/files/{id}/content", get(batches::api::content))
        .route(
            "/v1/batches",
            post(batches::api::create).get(batches::api::list),
        )
        .route("/v1/batches/{id}", get(batches::api::retrieve))
        .route("/v1/batches/{id}/cancel", post(batches::api::cancel))
        .route("/v1/batches/{id}/events", get(batches::api::events))
        .route(
            "/v1/analyses",
            post(analyses::api::create).layer(axum::extract::DefaultBodyLimit::disable()),
        )
        .route("/v1/analyses/{id}", get(analyses::api::retrieve))
        .route("/healthz", get(public::healthz))
        .route("/readyz", get(public::readyz))
        .route("/metrics", get(public::metrics))
        .route("/dashboard", get(crate::dashboard::page))
        .route("/dashboard/app.js", get(crate::dashboard::script))
        .merge(admin_routes)
        // Every route so far: what the HTTP layer refuses is said in the API's shape.
        .route_layer(middleware::from_fn(shape::reshape))
        // The walk's routes read their requests themselves, in their own shape.
        .route("/v1/chat/completions", post(walk::http::chat_completions))
        .route("/v1/messages", post(walk::http::messages))
        .route("/v1/responses", post(walk::http::responses))
        .route("/v1/embeddings", post(walk::http::embeddings))
        // Google's clients use either version of the Gemini API's URLs.
        .route("/v1beta/models/{call}", post(walk::http::gemini))
        .route("/v1/models/{call}", post(walk::http::gemini))
        .fallback(public::not_found)
        .method_not_allowed_fallback(public::method_not_allowed)
        .with_state(app)
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
    app: App,
    grace: Duration,
    notice: Duration,
    limits: ConnLimits,
}

/// Connections the kernel may hold, handshake done, before the server accepts them (it caps
/// this at `net.core.somaxconn`, 4,096 by default): the runtime's own 128 overflows when a
/// fleet's clients reconnect at once or the server is briefly starved of CPU, and a
/// connection past it waits a second or more for a retransmitted handshake.
pub const LISTEN_BACKLOG: u32 = 4_096;

/// A listening socket on `addr`, the address reusable at once after a restart, with
/// [`LISTEN_BACKLOG`].
fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// How often a draining server looks whether its last call has ended.
const DRAIN_POLL: Duration = Duration::from_millis(20);

impl Server {
    /// Binds `addr` (port 0 picks a free port).
    pub async fn bind(app: impl Into<App>, addr: SocketAddr, grace: Duration) -> io::Result<Self> {
        Ok(Self {
            listener: listen(addr)?,
            app: app.into(),
            grace,
            notice: Duration::ZERO,
            limits: ConnLimits::default(),
        })
    }

    /// Applies `limits` to client connections (by default [`ConnLimits::default`]).
    pub fn limits(mut self, limits: ConnLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Keeps answering for at least `notice` after shutdown begins, even with nothing in
    /// flight, so that a load balancer probing `/readyz` sees the 503 before the port closes.
    pub fn notice(mut self, notice: Duration) -> Self {
        self.notice = notice;
        self
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` resolves; then drains: connections are still accepted,
    /// `/readyz` answers 503 and new chat requests 503 `shutting_down` with `Retry-After`,
    /// while the calls in flight finish. Once none is left (and the notice has passed) the
    /// listener closes; calls still running when the grace period ends are cut.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<Stopped> {
        let signalled = CancellationToken::new();
        let close = CancellationToken::new();
        let (gw, notice, grace) = (self.app.gateway.clone(), self.notice, self.grace);
        let (began, closing) = (signalled.clone(), close.clone());
        tokio::spawn(async move {
            shutdown.await;
            gw.start_draining();
            began.cancel();
            let in_flight = gw.telemetry().in_flight();
            if in_flight > 0 || !notice.is_zero() {
                tracing::info!(
                    in_flight,
                    ?notice,
                    "shutting down: answering 503 to new requests, draining the calls in flight"
                );
            } else {
                tracing::debug!("shutting down: nothing in flight");
            }
            let start = tokio::time::Instant::now();
            let mut poll = tokio::time::interval(DRAIN_POLL);
            loop {
                poll.tick().await;
                let waited = start.elapsed();
                if (waited >= notice && gw.telemetry().in_flight() == 0) || waited >= grace {
                    break;
                }
            }
            closing.cancel();
        });
        let serve = conns::serve(
            self.listener,
            router(self.app),
            self.limits,
            close.cancelled_owned(),
        );
        let expired = async move {
            signalled.cancelled().await;
            tokio::time::sleep(grace).await;
        };
        tokio::select! {
            () = serve => Ok(Stopped::Drained),
            () = expired => {
                tracing::warn!(?grace, "grace period expired; cutting the requests still running");
                Ok(Stopped::GraceExpired)
            }
        }
    }
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
