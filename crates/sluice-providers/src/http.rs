//! The pooled HTTP client of one upstream, and reading its answers under first-byte and idle
//! timeouts.

use std::error::Error as _;
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use futures::stream::BoxStream;
use sluice_core::{ErrorKind, GatewayError, UpstreamReply};

use crate::{RateReport, UpstreamCall, ratelimit};
use tokio::time::{Instant, timeout_at};

/// Connection and timeout settings of one upstream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpSettings {
    /// Limit on opening a connection.
    pub connect_timeout: Duration,
    /// Limit from sending the request to the first byte of the answer.
    pub first_byte_timeout: Duration,
    /// Limit on silence between two chunks.
    pub idle_timeout: Duration,
    /// Idle connections kept per host.
    pub pool_max_idle: usize,
    /// How long an idle connection is kept.
    pub pool_idle_timeout: Duration,
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

/// `base` joined with `path`, parsed once (parsing a URL per request showed up in profiles).
pub fn endpoint(base: &str, path: &str) -> Result<reqwest::Url, GatewayError> {
    let url = format!("{}/{path}", base.trim_end_matches('/'));
    reqwest::Url::parse(&url)
        .map_err(|e| GatewayError::new(ErrorKind::Internal, format!("base_url `{url}`: {e}")))
}

/// Adds the headers every upstream request carries: `x-request-id`, and what is left of the
/// client's deadline as `x-sluice-timeout-ms` (so an upstream that reads it can give up in
/// time too).
pub fn identify(req: reqwest::RequestBuilder, call: &UpstreamCall) -> reqwest::RequestBuilder {
    let req = req.header("x-request-id", call.request_id.as_str());
    match call.remaining_ms(Instant::now()) {
        Some(ms) => req.header(crate::TIMEOUT_HEADER, ms),
        None => req,
    }
}

/// Builds the pooled client of one upstream.
pub fn client(settings: &HttpSettings) -> Result<reqwest::Client, GatewayError> {
    reqwest::Client::builder()
        .connect_timeout(settings.connect_timeout)
        .pool_max_idle_per_host(settings.pool_max_idle)
        .pool_idle_timeout(settings.pool_idle_timeout)
        .tcp_nodelay(true)
        .build()
        .map_err(|e| GatewayError::new(ErrorKind::Internal, format!("building HTTP client: {e}")))
}

/// An answer's body, read chunk by chunk under the first-byte and idle timeouts.
pub struct TimedBody {
    chunks: BoxStream<'static, reqwest::Result<Bytes>>,
    first_byte_deadline: Option<Instant>,
    idle: Duration,
    upstream: String,
    /// When the first chunk arrived.
    pub first_byte: Option<Instant>,
}

impl TimedBody {
    /// Which phase a timeout hit, for the message.
    fn deadline(&self) -> (Instant, &'static str) {
        match self.first_byte_deadline {
            Some(d) if self.first_byte.is_none() => (d, "first byte"),
            _ => (Instant::now() + self.idle, "next chunk"),
        }
    }

    /// The next chunk, `None` at the end.
    pub async fn next(&mut self) -> Result<Option<Bytes>, GatewayError> {
        let (deadline, what) = self.deadline();
        match timeout_at(deadline, self.chunks.next()).await {
            Err(_) => Err(GatewayError::new(
                ErrorKind::UpstreamTimeout,
                format!("upstream {} sent no {what} in time", self.upstream),
            )),
            Ok(None) => Ok(None),
            Ok(Some(Err(e))) => Err(classify(&self.upstream, &e)),
            Ok(Some(Ok(chunk))) => {
                if self.first_byte.is_none() {
                    self.first_byte = Some(Instant::now());
                }
                Ok(Some(chunk))
            }
        }
    }

    /// Reads everything up to `limit` bytes.
    pub async fn collect(&mut self, limit: usize) -> Result<Bytes, GatewayError> {
        let mut all = BytesMut::new();
        while let Some(chunk) = self.next().await? {
            if all.len() + chunk.len() > limit {
                return Err(GatewayError::new(
                    ErrorKind::UpstreamProtocol,
                    format!(
                        "upstream {} answered more than {limit} bytes",
                        self.upstream
                    ),
                ));
            }
            all.extend_from_slice(&chunk);
        }
        Ok(all.freeze())
    }
}

/// An accepted (2xx) answer, ready to be read.
pub struct Accepted {
    /// The body.
    pub body: TimedBody,
}

/// Renders an upstream's error body for OpenAI clients; `None` passes it through verbatim.
pub type TranslateError = fn(&[u8]) -> Option<Bytes>;

/// Sends `request` and waits for the status. Non-2xx answers become errors: 4xx pass through
/// (after `translate_error` renders the body for OpenAI clients), 5xx become 502.
pub async fn send(
    upstream: &str,
    settings: &HttpSettings,
    request: reqwest::RequestBuilder,
    translate_error: TranslateError,
    report: &RateReport,
) -> Result<Accepted, GatewayError> {
    let first_byte_deadline = Instant::now() + settings.first_byte_timeout;
    let response = match timeout_at(first_byte_deadline, request.send()).await {
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
    report.set(ratelimit::parse(response.headers(), SystemTime::now()));
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let content_type = header("content-type");
    let retry_after = header("retry-after");
    let mut body = TimedBody {
        chunks: response.bytes_stream().boxed(),
        first_byte_deadline: Some(first_byte_deadline),
        idle: settings.idle_timeout,
        upstream: upstream.to_string(),
        first_byte: None,
    };
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
        ));
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

/// Classifies a client error: timeouts, connection failures, everything else a lost connection.
pub fn classify(upstream: &str, e: &reqwest::Error) -> GatewayError {
    let mut detail = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        detail.push_str(": ");
        detail.push_str(&s.to_string());
        source = s.source();
    }
    if e.is_timeout() {
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
