//! Reading a request: the request id, the body under its size limit, the parsed view, and
//! the tenant, lane and time budget its headers ask for.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use http::{HeaderMap, HeaderName};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use sluice_core::{ChatRequest, ErrorKind, GatewayError, RequestId};
use sluice_ingress::Dialect;
use sluice_providers::{REQUEST_ID_HEADER, TIMEOUT_HEADER, TIMEOUT_HEADER_NAME};
use sluice_tail::admission::LaneSpec;

// Header names built at compile time: a lookup by `&str` parses the name on every request.
pub(crate) const LANE: HeaderName = HeaderName::from_static("x-sluice-lane");
const TENANT: HeaderName = HeaderName::from_static(TENANT_HEADER);

/// The request id: the client's `x-request-id` when sane, else a fresh one.
pub fn request_id(headers: &HeaderMap) -> RequestId {
    let client = headers
        .get(&REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok());
    RequestId::from_client_or_generate(client)
}

/// A request's body.
#[derive(Debug)]
pub enum Body {
    /// Already in memory (an internal caller's), in its dialect.
    Ready(Bytes),
    /// Still arriving from a client, with the length it declared: read by the walk's first
    /// step under the gateway's limit.
    Arriving {
        /// The body.
        body: axum::body::Body,
        /// Its `content-length`, when declared.
        declared: Option<u64>,
    },
}

fn too_large(limit: usize) -> GatewayError {
    GatewayError::new(
        ErrorKind::PayloadTooLarge,
        format!("request body is larger than the limit of {limit} bytes"),
    )
}

/// The request's lane: the index of the one it names (`x-sluice-lane`) among `lanes`,
/// `default` (its tenant's lane, else the first) when it names none, a 400 naming the header
/// and the lanes when the name is no lane.
pub fn lane(
    named: Option<&str>,
    lanes: &[LaneSpec],
    default: usize,
) -> Result<usize, GatewayError> {
    let Some(name) = named else {
        return Ok(default);
    };
    lanes.iter().position(|l| &*l.name == name).ok_or_else(|| {
        let known: Vec<&str> = lanes.iter().map(|l| &*l.name).collect();
        GatewayError::new(
            ErrorKind::InvalidRequest,
            format!(
                "x-sluice-lane `{name}` is not a lane; lanes: {}",
                known.join(", ")
            ),
        )
        .with_param("x-sluice-lane")
    })
}

/// The header naming the tenant a request is for.
pub const TENANT_HEADER: &str = "x-sluice-tenant";

/// The request's tenant, `x-sluice-tenant`: `None` when absent, a 400 naming the header when
/// it is not 1 to 64 letters, digits, `.`, `_` or `-`.
pub fn tenant(headers: &HeaderMap) -> Result<Option<Arc<str>>, GatewayError> {
    let Some(value) = headers.get(&TENANT) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or_default();
    let fine = (1..=64).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if fine {
        Ok(Some(Arc::from(text)))
    } else {
        Err(GatewayError::new(
            ErrorKind::InvalidRequest,
            format!(
                "{TENANT_HEADER} `{}` must be 1 to 64 letters, digits, `.`, `_` or `-`",
                text.chars().take(80).collect::<String>()
            ),
        )
        .with_param(TENANT_HEADER))
    }
}

/// The longest deadline a client may ask for (a day): anything longer is a mistake, not a
/// budget.
const MAX_TIMEOUT_MS: u64 = 86_400_000;

/// The request's own time budget, `x-sluice-timeout-ms` (whole milliseconds, 1 to a day):
/// `None` when absent, a 400 naming the header when it is not such a number.
pub fn timeout(headers: &HeaderMap) -> Result<Option<Duration>, GatewayError> {
    let Some(value) = headers.get(&TIMEOUT_HEADER_NAME) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or_default().trim();
    match text.parse::<u64>() {
        Ok(ms) if (1..=MAX_TIMEOUT_MS).contains(&ms) => Ok(Some(Duration::from_millis(ms))),
        _ => Err(GatewayError::new(
            ErrorKind::InvalidRequest,
            format!(
                "{TIMEOUT_HEADER} `{text}` is not a whole number of milliseconds from 1 to \
                 {MAX_TIMEOUT_MS}"
            ),
        )
        .with_param(TIMEOUT_HEADER)),
    }
}

/// Reads the whole body, refusing more than `limit` bytes (up front when its declared
/// length says so, else as soon as the limit is crossed), and a client that pauses longer
/// than `stall` between two pieces of it (408); a body already in memory is held to the
/// same limit.
pub async fn read_body(body: Body, limit: usize, stall: Duration) -> Result<Bytes, GatewayError> {
    let (body, declared) = match body {
        Body::Ready(bytes) if bytes.len() > limit => return Err(too_large(limit)),
        Body::Ready(bytes) => return Ok(bytes),
        Body::Arriving { body, declared } => (body, declared),
    };
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large(limit));
    }
    let mut body = Limited::new(body, limit);
    let mut pieces: Vec<Bytes> = Vec::new();
    loop {
        // The clock is set only when a piece is not there yet: most bodies arrive with their
        // head and never wait.
        match piece(stall, body.frame()).await? {
            None => break,
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    pieces.push(data);
                }
            }
            Some(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
                return Err(too_large(limit));
            }
            Some(Err(e)) => {
                return Err(GatewayError::new(
                    ErrorKind::InvalidRequest,
                    format!("could not read the request body: {e}"),
                ));
            }
        }
    }
    Ok(match pieces.len() {
        1 => pieces.pop().unwrap_or_default(),
        _ => Bytes::from(pieces.concat()),
    })
}

/// The next piece of a body being read (`fut`), or 408 when the client sends nothing of it
/// for `stall`; the clock is set only when the piece is not there yet.
pub async fn piece<F: std::future::Future>(
    stall: Duration,
    fut: F,
) -> Result<F::Output, GatewayError> {
    let mut fut = std::pin::pin!(fut);
    if let Some(out) = fut.as_mut().now_or_never() {
        return Ok(out);
    }
    tokio::time::timeout(stall, fut)
        .await
        .map_err(|_| stalled(stall))
}

/// A body the client stopped sending.
fn stalled(stall: Duration) -> GatewayError {
    GatewayError::new(
        ErrorKind::ClientTimeout,
        format!(
            "the request body stopped arriving: nothing came for {}s ([server] stall_timeout)",
            stall.as_secs_f64()
        ),
    )
}

/// Parses and checks a body in the client's dialect (`url_model`: the model its URL names,
/// for an API that names it there), as a chat-completions request; a request of another API
/// keeps its original (for an upstream that speaks that API).
pub fn parse(
    bytes: Bytes,
    dialect: Dialect,
    forwarded: &[(String, String)],
    url_model: Option<&str>,
) -> Result<ChatRequest, GatewayError> {
    let original = dialect.original(&bytes, |name| {
        forwarded
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    });
    let request = ChatRequest::from_bytes(dialect.request(bytes, url_model)?)?;
    Ok(match original {
        Some(o) => request.with_original(o),
        None => request,
    })
}
