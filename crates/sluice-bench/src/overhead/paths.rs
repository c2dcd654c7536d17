//! The benchmark's paths: direct, through sluice, through the bare forwarder; the schedule
//! that interleaves them and the target that sends each request down its own.

use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::Full;
use sluice_sim::load::{HttpTarget, Target, Traffic, Workload};

/// Lane names of the paths.
pub(super) const DIRECT: &str = "direct";
pub(super) const SLUICE: &str = "sluice";
pub(super) const FLOOR: &str = "forwarder";

/// Direct requests and requests on `path`, at `rate` each, their arrivals interleaved in one
/// schedule: both see the same machine at the same moments, so the difference of their
/// percentiles is not drowned by a noisy neighbour that happened to hit only one phase.
pub(super) fn workload(
    rate: f64,
    duration: Duration,
    seed: u64,
    path: &str,
    stream: bool,
) -> Workload {
    let lane = |lane: &str| Traffic {
        lane: lane.into(),
        model: "bench".into(),
        rate,
        prompt_tokens: 200,
        stream,
        ..Traffic::default()
    };
    Workload::build(&[lane(DIRECT), lane(path)], &[], duration, seed)
}

pub(super) fn placeholder() -> http::Uri {
    http::Uri::from_static("http://bench.invalid/")
}

/// Sends each request to the upstream directly, through sluice or through the bare
/// forwarder, by its lane.
#[derive(Clone, Debug)]
pub(super) struct Split {
    pub(super) inner: HttpTarget,
    pub(super) direct: http::Uri,
    pub(super) through: http::Uri,
    pub(super) floor: http::Uri,
    /// The tenant requests through sluice are sent as, if any.
    pub(super) tenant: Option<http::HeaderValue>,
}

impl Target for Split {
    fn send(
        &self,
        mut req: http::Request<Full<Bytes>>,
    ) -> BoxFuture<'static, Result<http::Response<axum::body::Body>, String>> {
        // The lane names this benchmark's own two paths; it is not a gateway lane.
        let lane = req.headers_mut().remove("x-sluice-lane");
        *req.uri_mut() = match lane.as_ref().map(http::HeaderValue::as_bytes) {
            Some(l) if l == SLUICE.as_bytes() => {
                if let Some(t) = &self.tenant {
                    req.headers_mut().insert("x-sluice-tenant", t.clone());
                }
                self.through.clone()
            }
            Some(l) if l == FLOOR.as_bytes() => self.floor.clone(),
            _ => self.direct.clone(),
        };
        self.inner.send(req)
    }
}
