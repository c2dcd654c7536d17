//! Read-only endpoints: models, health, readiness, metrics and the latency report; plus the
//! OpenAI-shaped answers for unknown routes and methods.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::json;
use sluice_core::{ErrorKind, GatewayError, RequestId};
use tokio::time::Instant;

use crate::Gateway;
use sluice_ingress::Dialect;

use crate::walk::{auth, ingress, rescue};

/// `GET /v1/models`: the model names a client may send, in OpenAI's list shape: the model
/// groups, then the task routes and automatic routers (`auto`, say), each marked with what
/// it is. Where keys are required it needs one (401 without), and a key limited to some
/// models sees those only.
pub async fn models(State(gw): State<Arc<Gateway>>, headers: http::HeaderMap) -> Response {
    let caller = match auth::identify(&gw, &headers) {
        Ok(c) => c,
        Err(e) => return rescue::error_response(&e, &RequestId::generate(), None, Dialect::Chat),
    };
    let routes = gw.routes();
    let groups = routes.names().iter().map(|n| (n, "group"));
    let choosers = routes.chooser_names().into_iter().map(|n| {
        let kind = if routes.router(n).is_some() {
            "router"
        } else {
            "route"
        };
        (n, kind)
    });
    let data: Vec<_> = groups
        .chain(choosers)
        .filter(|(name, _)| caller.may_use(name).is_ok())
        .map(|(name, kind)| {
            json!({"id": &**name, "object": "model", "created": 0, "owned_by": "sluice", "sluice_kind": kind})
        })
        .collect();
    Json(json!({"object": "list", "data": data})).into_response()
}

/// `POST /v1/messages/count_tokens`: the prompt's tokens as sluice counts them for credits
/// and limits (cl100k plus a few a message), in Messages' shape; refusals in its error shape.
pub async fn count_tokens(State(gw): State<Arc<Gateway>>, req: axum::extract::Request) -> Response {
    let (parts, body) = req.into_parts();
    let id = ingress::request_id(&parts.headers);
    let counted = async {
        let caller = auth::identify(&gw, &parts.headers)?;
        let bytes = ingress::read_body(
            crate::walk::http::arriving(&parts.headers, body),
            gw.max_body_bytes,
            gw.body_stall,
        )
        .await?;
        let chat = sluice_ingress::anthropic::count_request(&bytes)?;
        let request = sluice_core::ChatRequest::from_bytes(bytes::Bytes::from(chat))?;
        caller.may_use(&request.model)?;
        Ok::<_, GatewayError>(gw.tenants.tokenizer.prompt_tokens(&request))
    };
    match counted.await {
        Ok(n) => Json(json!({"input_tokens": n})).into_response(),
        Err(e) => rescue::error_response(&e, &id, None, Dialect::Anthropic),
    }
}

/// `GET /healthz`: the process is up.
pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// `GET /readyz`: 200 while taking work, 503 once draining for shutdown.
pub async fn readyz(State(gw): State<Arc<Gateway>>) -> Response {
    if gw.is_draining() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "draining"})),
        )
            .into_response()
    } else {
        let mut v = json!({"status": "ready"});
        if let Some(c) = crate::cluster::readiness(&gw) {
            v["cluster"] = c;
        }
        if let Some(l) = crate::cluster::store_readiness(&gw) {
            v["ledger"] = l;
        }
        Json(v).into_response()
    }
}

/// A 401 when `/metrics` needs a token (`[server] metrics_token_env`) and the request
/// carries neither it nor the admin token.
fn metrics_refusal(gw: &Gateway, headers: &http::HeaderMap) -> Option<Response> {
    let needed = gw.tenants.metrics_token.as_deref()?;
    let taken = [Some(needed), gw.tenants.admin_token.as_deref()];
    (!crate::walk::auth::carries(headers, taken.into_iter().flatten())).then(refuse_metrics)
}

/// `/metrics` without its token.
fn refuse_metrics() -> Response {
    let e = GatewayError::new(
        ErrorKind::Unauthorized,
        "/metrics needs the metrics token (or the admin token): send `Authorization: Bearer \
         <token>`",
    );
    crate::walk::rescue::error_response(&e, &RequestId::generate(), None, Dialect::Chat)
}

/// `GET /metrics`: OpenMetrics or the text format 0.0.4, as `Accept` asks; admission and
/// breaker gauges read at the moment of the scrape.
pub async fn metrics(State(gw): State<Arc<Gateway>>, headers: http::HeaderMap) -> Response {
    if let Some(refusal) = metrics_refusal(&gw, &headers) {
        return refusal;
    }
    let tasks = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    gw.telemetry().set_runtime_tasks(tasks);
    if let Some(ledger) = gw.ledger() {
        let s = ledger.stats();
        gw.telemetry()
            .set_ledger(s.committed, s.pending(), s.failures);
    }
    if let Some(c) = &gw.cluster {
        let h = c.health();
        for kind in sluice_cluster::Kind::ALL {
            gw.telemetry()
                .set_cluster(kind.name(), h.is_down(), h.errors(kind));
        }
    }
    if let Some(sem) = &gw.caches.semantic {
        for (group, estimate, _) in sem.cache.estimates() {
            gw.telemetry().set_semantic_error(&group, estimate);
        }
        for (group, stopped) in sem.cache.stopped() {
            gw.telemetry().set_semantic_stopped(&group, stopped);
        }
    }
    for name in gw.routes().names() {
        let Ok(group) = gw.routes().group(name) else {
            continue;
        };
        for d in &group.deployments {
            if let Some(b) = &d.breaker {
                let snapshot = b.lock().snapshot(Instant::now());
                gw.telemetry().set_breaker(&group.name, &d.name, &snapshot);
            }
            if let Some(limiter) = &d.limiter {
                let stats = limiter.stats();
                let lanes: Vec<(&str, usize, usize)> =
                    stats.lanes.iter().map(|(l, i, q)| (&**l, *i, *q)).collect();
                gw.telemetry()
                    .set_admission(&group.name, &d.name, stats.limit, &lanes);
                gw.telemetry().set_admission_refusals(
                    &group.name,
                    &d.name,
                    stats.refused_at_arrival,
                    stats.timed_out,
                );
            }
        }
    }
    // Negotiated by `Accept`: OpenMetrics (counters' families without `_total`, a closing
    // `# EOF`) when the scraper asks for it, as Prometheus does; else the text format 0.0.4.
    let open_metrics = headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    let now = Instant::now();
    let (page, kind) = if open_metrics {
        (
            gw.telemetry().render(now),
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )
    } else {
        (
            gw.telemetry().render_text(now),
            "text/plain; version=0.0.4; charset=utf-8",
        )
    };
    let mut resp = page.into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    resp
}

/// Any other path.
pub async fn not_found(uri: http::Uri) -> Response {
    let e = GatewayError::new(
        ErrorKind::RouteNotFound,
        format!("no route for {}", uri.path()),
    );
    // In the shape of the API the path is under (Google's for Gemini's URLs).
    rescue::error_response(
        &e,
        &RequestId::generate(),
        None,
        crate::server::dialect_of(&uri),
    )
}

/// A known path with the wrong method.
pub async fn method_not_allowed(method: http::Method, uri: http::Uri) -> Response {
    let e = GatewayError::new(
        ErrorKind::MethodNotAllowed,
        format!("{} does not accept {method}", uri.path()),
    );
    rescue::error_response(
        &e,
        &RequestId::generate(),
        None,
        crate::server::dialect_of(&uri),
    )
}
