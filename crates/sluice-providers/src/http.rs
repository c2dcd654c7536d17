//! The pooled HTTP client of one upstream, and reading its answers under first-byte and idle
//! timeouts.
//!
//! A bare hyper client (with rustls for HTTPS, HTTP/2 by ALPN) rather than reqwest: a
//! gateway sends one fixed kind of request, and reqwest's URL re-parsing and redirect and
//! retry layers cost a third more CPU a proxied request in `sluice bench overhead --floor`.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::uri::{Scheme, Uri};
use http_body_util::Full;
use hyper_rustls::{HttpsConnectorBuilder, MaybeHttpsStream};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use sluice_core::{ErrorKind, GatewayError, UpstreamReply};
use tower::util::BoxCloneSyncService;

use crate::{UpstreamCall, ratelimit};
use tokio::time::{Instant, timeout_at};

mod body;

pub use body::{Chunks, TimedBody};

/// Connection and timeout settings of one upstream, as `[providers.NAME]` writes them
/// (every field optional).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct HttpSettings {
    /// Limit on opening a connection.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Limit from sending the request to the first byte of the answer.
    #[serde(with = "humantime_serde")]
    pub first_byte_timeout: Duration,
    /// Limit on silence between two chunks of an answer.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Idle connections kept per host.
    pub pool_max_idle: usize,
    /// How long an idle connection is kept.
    #[serde(with = "humantime_serde")]
    pub pool_idle_timeout: Duration,
}

impl HttpSettings {
    /// What is wrong with it, if anything: (field, message).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        [
            ("connect_timeout", self.connect_timeout),
            ("first_byte_timeout", self.first_byte_timeout),
            ("idle_timeout", self.idle_timeout),
        ]
        .into_iter()
        .filter(|(_, d)| d.is_zero())
        .map(|(field, _)| (field, "must be longer than zero".to_string()))
        .collect()
    }
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            first_byte_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(30),
            pool_max_idle: 64,
            pool_idle_timeout: Duration::from_secs(90),
        }
    }
}

/// Largest error body kept for pass-through.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// Largest complete answer read.
const MAX_BODY: usize = 64 * 1024 * 1024;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// A connection to an upstream, direct or through a proxy's tunnel, TLS or not.
type Connection = MaybeHttpsStream<TokioIo<tokio::net::TcpStream>>;
type Connector = BoxCloneSyncService<Uri, Connection, BoxError>;

fn config_error(what: impl std::fmt::Display) -> GatewayError {
    GatewayError::new(ErrorKind::Internal, what.to_string())
}

/// One upstream endpoint: its URL, the headers every request to it carries, and its pool.
#[derive(Clone, Debug)]
pub struct Endpoint {
    url: Uri,
    headers: HeaderMap,
    client: Client<Connector, Full<Bytes>>,
}

impl Endpoint {
    /// `base` joined with `path`, parsed once, with `headers` (name, value, whether secret)
    /// checked once, and a pooled client. HTTPS endpoints go through the proxy that
    /// `HTTPS_PROXY`/`ALL_PROXY` name (unless `NO_PROXY` exempts them), by `CONNECT`; plain
    /// HTTP endpoints (self-hosted servers) are always reached directly.
    pub fn new(
        settings: &HttpSettings,
        base: &str,
        path: &str,
        headers: &[(&str, &str, bool)],
    ) -> Result<Self, GatewayError> {
        Self::with_proxies(settings, base, path, headers, &Matcher::from_env())
    }

    /// As [`Endpoint::new`], with the proxies given rather than read from the environment.
    fn with_proxies(
        settings: &HttpSettings,
        base: &str,
        path: &str,
        headers: &[(&str, &str, bool)],
        proxies: &Matcher,
    ) -> Result<Self, GatewayError> {
        let url = format!("{}/{path}", base.trim_end_matches('/'));
        let url: Uri = url
            .parse()
            .map_err(|e| config_error(format!("base_url `{url}`: {e}")))?;
        let mut fixed = HeaderMap::new();
        for (name, value, secret) in headers {
            let n = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| config_error(format!("header name `{name}`: {e}")))?;
            let mut v = HeaderValue::from_str(value)
                .map_err(|e| config_error(format!("header `{name}`: {e}")))?;
            v.set_sensitive(*secret);
            fixed.append(n, v);
        }
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_max_idle_per_host(settings.pool_max_idle)
            .pool_idle_timeout(settings.pool_idle_timeout)
            .build(connector(settings, &url, proxies)?);
        Ok(Self {
            url,
            headers: fixed,
            client,
        })
    }

    /// The same upstream at another `url` (an Azure deployment's, say): its fixed headers
    /// and its pool shared.
    pub fn at(&self, url: &str) -> Result<Self, GatewayError> {
        Ok(Self {
            url: url
                .parse()
                .map_err(|e| config_error(format!("URL `{url}`: {e}")))?,
            headers: self.headers.clone(),
            client: self.client.clone(),
        })
    }

    /// The request of one call: `body` (JSON) with the fixed headers, `x-request-id`, and
    /// what is left of the client's deadline as `x-sluice-timeout-ms` (so an upstream that
    /// reads it can give up in time too).
    fn request(
        &self,
        body: Vec<u8>,
        request_id: &str,
        remaining_ms: Option<u64>,
        trace: Option<&crate::TraceHeaders>,
    ) -> http::Request<Full<Bytes>> {
        let mut req = http::Request::new(Full::new(Bytes::from(body)));
        *req.method_mut() = http::Method::POST;
        *req.uri_mut() = self.url.clone();
        // Sized once for the fixed headers and the three (five, traced) added here (a clone of
        // the fixed map would grow again on the first insert).
        let added = if trace.is_some() { 5 } else { 3 };
        let mut h = HeaderMap::with_capacity(self.headers.len() + added);
        for (name, value) in &self.headers {
            h.append(name.clone(), value.clone());
        }
        h.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Ok(id) = HeaderValue::from_str(request_id) {
            h.insert(crate::REQUEST_ID_HEADER, id);
        }
        if let Some(ms) = remaining_ms {
            h.insert(crate::TIMEOUT_HEADER_NAME, HeaderValue::from(ms));
        }
        if let Some(t) = trace {
            h.insert(TRACEPARENT, t.traceparent.clone());
            if let Some(state) = &t.tracestate {
                h.insert(TRACESTATE, state.clone());
            }
        }
        *req.headers_mut() = h;
        req
    }
}

/// TCP (no Nagle, bounded connect), then TLS for `https` URLs, through a proxy's tunnel
/// when `proxies` name one for an `https` `url`.
fn connector(
    settings: &HttpSettings,
    url: &Uri,
    proxies: &Matcher,
) -> Result<Connector, GatewayError> {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(settings.connect_timeout));
    let tls = HttpsConnectorBuilder::new()
        .try_with_platform_verifier()
        .map_err(|e| config_error(format!("TLS roots: {e}")))?
        .https_or_http()
        .enable_all_versions();
    let proxy = match url.scheme() {
        Some(s) if *s == Scheme::HTTPS => proxies.intercept(url),
        _ => None,
    };
    Ok(match proxy {
        Some(proxy) => {
            let mut tunnel = Tunnel::new(proxy.uri().clone(), tcp);
            if let Some(auth) = proxy.basic_auth() {
                tunnel = tunnel.with_auth(auth.clone());
            }
            BoxCloneSyncService::new(tls.wrap_connector(tunnel))
        }
        None => BoxCloneSyncService::new(tls.wrap_connector(tcp)),
    })
}

/// An accepted (2xx) answer, ready to be read.
pub struct Accepted {
    /// The body.
    pub body: TimedBody,
}

/// W3C Trace Context's header naming the caller's span.
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
/// W3C Trace Context's vendor entries.
const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// Renders an upstream's error body for OpenAI clients; `None` passes it through verbatim.
pub type TranslateError = fn(&[u8]) -> Option<Bytes>;

/// Sends `body` for `call` to `endpoint`, with `extra` headers (the client's own, of the
/// upstream's API), and waits for the status. Non-2xx answers become errors: 4xx pass
/// through (after `translate_error` renders the body for OpenAI clients), 5xx become 502.
pub async fn send(
    upstream: &str,
    settings: &HttpSettings,
    endpoint: &Endpoint,
    body: Vec<u8>,
    call: &UpstreamCall,
    translate_error: TranslateError,
    extra: &[(String, String)],
) -> Result<Accepted, GatewayError> {
    let mut request = endpoint.request(
        body,
        call.request_id.as_str(),
        call.remaining_ms(Instant::now()),
        call.trace.as_ref(),
    );
    // Headers of the client's own API that go with its request (they replace fixed ones).
    for (name, value) in extra {
        if let (Ok(n), Ok(mut v)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            v.set_sensitive(n == http::header::AUTHORIZATION);
            request.headers_mut().insert(n, v);
        }
    }
    let mut accepted = exchange(
        upstream,
        settings,
        endpoint,
        request,
        Some(&call.rate_report),
        translate_error,
    )
    .await?;
    accepted.body = accepted.body.for_call(call.deadline);
    Ok(accepted)
}

/// Sends `body` to `endpoint` for something other than a chat call (embeddings, say), as
/// [`send`] does: `request_id` forwarded, errors classified the same way.
pub async fn send_plain(
    upstream: &str,
    settings: &HttpSettings,
    endpoint: &Endpoint,
    body: Vec<u8>,
    request_id: &str,
) -> Result<Accepted, GatewayError> {
    let request = endpoint.request(body, request_id, None, None);
    exchange(upstream, settings, endpoint, request, None, |_| None).await
}

/// One request's exchange: sent, its status awaited under the first-byte timeout, what the
/// answer says of rate limits left in `rate_report`, non-2xx answers turned into errors.
async fn exchange(
    upstream: &str,
    settings: &HttpSettings,
    endpoint: &Endpoint,
    request: http::Request<Full<Bytes>>,
    rate_report: Option<&crate::RateReport>,
    translate_error: TranslateError,
) -> Result<Accepted, GatewayError> {
    let first_byte_deadline = Instant::now() + settings.first_byte_timeout;
    let request = endpoint.client.request(request);
    let response = match timeout_at(first_byte_deadline, request).await {
        Err(_) => {
            return Err(GatewayError::new(
                ErrorKind::UpstreamTimeout,
                format!(
                    "upstream {upstream} did not answer within {:?}",
                    settings.first_byte_timeout
                ),
            ));
        }
        Ok(Err(e)) => return Err(classify(upstream, &e)),
        Ok(Ok(r)) => r,
    };
    let status = response.status().as_u16();
    if let Some(report) = rate_report {
        report.set(ratelimit::parse(response.headers(), SystemTime::now()));
    }
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let content_type = header("content-type");
    let retry_after = header("retry-after");
    let mut body = TimedBody::new(
        response.into_body(),
        Some(first_byte_deadline),
        settings.idle_timeout,
        upstream.to_string(),
    );
    if (200..300).contains(&status) {
        return Ok(Accepted { body });
    }
    let raw = body.collect(MAX_ERROR_BODY).await.unwrap_or_default();
    if status >= 500 {
        let excerpt =
            String::from_utf8_lossy(raw.get(..raw.len().min(300)).unwrap_or(&raw)).into_owned();
        return Err(GatewayError::new(
            ErrorKind::UpstreamServerError,
            format!("upstream {upstream} answered {status}: {excerpt}"),
        )
        .with_upstream_status(status));
    }
    let (body, content_type) = match translate_error(&raw) {
        Some(translated) => (translated, Some("application/json".to_string())),
        None => (raw, content_type),
    };
    Err(GatewayError::rejected(UpstreamReply {
        status,
        body,
        content_type,
        retry_after,
    }))
}

/// Classifies a client error: a timeout anywhere in its chain (connecting, say) is a timeout;
/// everything else is a failed or lost connection.
pub fn classify(upstream: &str, e: &(dyn std::error::Error + 'static)) -> GatewayError {
    let mut detail = e.to_string();
    let mut timed_out = false;
    let mut source = e.source();
    while let Some(s) = source {
        detail.push_str(": ");
        detail.push_str(&s.to_string());
        timed_out |= s
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut);
        source = s.source();
    }
    if timed_out {
        GatewayError::new(
            ErrorKind::UpstreamTimeout,
            format!("upstream {upstream} timed out: {detail}"),
        )
    } else {
        GatewayError::new(
            ErrorKind::UpstreamConnect,
            format!("upstream {upstream} connection failed: {detail}"),
        )
    }
}

/// Reads a complete answer.
pub async fn read_complete(accepted: &mut Accepted) -> Result<(Bytes, Instant), GatewayError> {
    let body = accepted.body.collect(MAX_BODY).await?;
    let first = accepted.body.first_byte.unwrap_or_else(Instant::now);
    Ok((body, first))
}

#[cfg(test)]
pub(crate) mod tests;
