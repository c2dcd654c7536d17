//! `sluice bench forward`: a bare HTTP/1 forwarder (a hyper server and a pooled hyper client,
//! no parsing, no records, no policies), the floor that `sluice bench overhead --floor` sets
//! sluice against: what one more proxy hop costs on this machine before any gateway work. A
//! complete answer is read whole and sent on; a stream (`text/event-stream`) is passed
//! through chunk by chunk as it arrives, the floor for streams.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};

/// Options of the bare forwarder.
#[derive(Args, Debug, Clone)]
pub struct ForwardArgs {
    /// Address to listen on.
    #[arg(long)]
    pub listen: SocketAddr,
    /// Address every request is sent on to, with its path and headers unchanged.
    #[arg(long)]
    pub upstream: SocketAddr,
    /// Threads that run requests (default: one per core, as `sluice serve`).
    #[arg(long)]
    pub threads: Option<usize>,
}

type Upstream = Client<HttpConnector, Full<Bytes>>;

/// A complete answer read whole, or a stream passed through.
type Answer = Either<Full<Bytes>, Incoming>;

/// Runs the forwarder until killed, on the same runtime `sluice serve` builds, so the two
/// compare like for like.
pub fn run(a: &ForwardArgs) -> anyhow::Result<ExitCode> {
    sluice_cli::runtime(a.threads)?.block_on(serve(a.listen, a.upstream))
}

async fn serve(listen: SocketAddr, upstream: SocketAddr) -> anyhow::Result<ExitCode> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Upstream = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(1024)
        .build(connector);
    loop {
        let (stream, _) = listener.accept().await.context("accepting")?;
        stream.set_nodelay(true).context("setting TCP_NODELAY")?;
        let client = client.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| answer(client.clone(), upstream, req));
            // A connection that fails only ends itself.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// `/readyz` answers here; everything else goes on to the upstream (502 when it fails).
async fn answer(
    client: Upstream,
    upstream: SocketAddr,
    req: Request<Incoming>,
) -> Result<Response<Answer>, Infallible> {
    if req.uri().path() == "/readyz" {
        return Ok(Response::new(Either::Left(Full::default())));
    }
    Ok(match relay(&client, upstream, req).await {
        Ok(r) => r,
        Err(e) => {
            let mut r = Response::new(Either::Left(Full::new(Bytes::from(format!("{e:#}")))));
            *r.status_mut() = StatusCode::BAD_GATEWAY;
            r
        }
    })
}

async fn relay(
    client: &Upstream,
    upstream: SocketAddr,
    req: Request<Incoming>,
) -> anyhow::Result<Response<Answer>> {
    let (mut parts, body) = req.into_parts();
    let body = body.collect().await?.to_bytes();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    parts.uri = format!("http://{upstream}{path}").parse()?;
    parts.headers.remove(http::header::HOST);
    let answer = client
        .request(Request::from_parts(parts, Full::new(body)))
        .await?;
    let (parts, body) = answer.into_parts();
    let streamed = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if streamed {
        return Ok(Response::from_parts(parts, Either::Right(body)));
    }
    let body = body.collect().await?.to_bytes();
    Ok(Response::from_parts(parts, Either::Left(Full::new(body))))
}
