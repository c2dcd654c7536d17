//! Where generated load goes: a gateway over HTTP, or a gateway's router in-process (for
//! virtual-time runs, where sockets cannot be used).

use std::convert::Infallible;

use axum::body::Body;
use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tower::ServiceExt;

/// Something that answers HTTP requests.
pub trait Target: Clone + Send + Sync + 'static {
    /// Sends one request; an `Err` means no answer came back.
    fn send(
        &self,
        req: http::Request<Full<Bytes>>,
    ) -> BoxFuture<'static, Result<http::Response<Body>, String>>;
}

/// A server reached over HTTP/1.1 with pooled keep-alive connections.
#[derive(Clone, Debug)]
pub struct HttpTarget {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl HttpTarget {
    /// A client with a pool sized for `max_idle` connections.
    pub fn new(max_idle: usize) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(max_idle)
            .build(connector);
        Self { client }
    }
}

impl Target for HttpTarget {
    fn send(
        &self,
        req: http::Request<Full<Bytes>>,
    ) -> BoxFuture<'static, Result<http::Response<Body>, String>> {
        let fut = self.client.request(req);
        async move {
            let resp = fut.await.map_err(|e| e.to_string())?;
            Ok(resp.map(Body::new))
        }
        .boxed()
    }
}

/// A gateway's router called in-process: the whole HTTP stack but the socket.
#[derive(Clone, Debug)]
pub struct RouterTarget(pub axum::Router);

impl Target for RouterTarget {
    fn send(
        &self,
        req: http::Request<Full<Bytes>>,
    ) -> BoxFuture<'static, Result<http::Response<Body>, String>> {
        let router = self.0.clone();
        async move {
            let resp: Result<http::Response<Body>, Infallible> =
                router.oneshot(req.map(Body::new)).await;
            resp.map_err(|e| match e {})
        }
        .boxed()
    }
}
