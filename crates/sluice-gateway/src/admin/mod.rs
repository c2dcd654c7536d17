//! The admin API (`/admin/*`): the guard every route of it passes (the admin token, when one
//! is configured), what the tail policies think (`upstreams`), latency percentiles, and the
//! APIs that change keys, tenants and the answer cache, or read usage. `/v1/models`,
//! `/healthz`, `/readyz` and `/metrics` are not admin: see `public`.

pub mod cache;
pub mod diagnose;
pub mod keys;
pub mod prefixes;
pub mod router;
pub mod slo;
pub mod tenants;
pub mod upstreams;
pub mod usage;

use std::sync::Arc;

use axum::Json;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use sluice_core::{ErrorKind, GatewayError, RequestId};

use tokio::time::Instant;

use crate::Gateway;
use crate::walk::{auth, rescue};

pub(crate) fn refuse(e: &GatewayError) -> Response {
    rescue::error_response(
        e,
        &RequestId::generate(),
        None,
        sluice_ingress::Dialect::Chat,
    )
}

/// Lets an `/admin/*` request through when no admin token is configured, or when it carries
/// it as `Authorization: Bearer`; 401 otherwise.
pub async fn guard(State(gw): State<Arc<Gateway>>, req: Request, next: Next) -> Response {
    if let Some(token) = &gw.tenants.admin_token
        && !auth::carries(req.headers(), [token.as_str()])
    {
        let e = GatewayError::new(
            ErrorKind::Unauthorized,
            "the admin API needs the admin token: send `Authorization: Bearer <token>`",
        );
        return refuse(&e);
    }
    next.run(req).await
}

/// How long an admin write waits for the ledger's store before it is refused.
pub(crate) const STORE_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// `write` to the ledger's `store`, within [`STORE_WITHIN`]: a store that fails or does not
/// answer in time is a 503 naming it (`store_unavailable`, retry after a second), and the
/// caller changes nothing here. A write that timed out may still have reached the store:
/// every instance then follows it from there as from any other change.
pub(crate) async fn kept<T>(
    store: &sluice_ledger::AnyStore,
    what: &str,
    write: impl std::future::Future<Output = Result<T, sluice_ledger::LedgerError>>,
) -> Result<T, GatewayError> {
    let name = store.name();
    let cause = match tokio::time::timeout(STORE_WITHIN, write).await {
        Ok(Ok(v)) => return Ok(v),
        Ok(Err(e)) => format!("{e}; nothing was changed"),
        Err(_) => format!(
            "no answer within {} s; nothing was changed here, and should the write still \
             land, every instance takes it from the store",
            STORE_WITHIN.as_secs()
        ),
    };
    tracing::error!(store = name, cause = %cause, "an admin write to the ledger's store failed: {what}");
    Err(GatewayError::new(
        ErrorKind::StoreUnavailable,
        format!("the ledger's store ({name}) could not {what}: {cause}"),
    )
    .with_retry_after(std::time::Duration::from_secs(1)))
}

/// The admin routes that change something (keys, tenants, the answer cache) are off unless
/// an admin token protects them.
pub(crate) fn managing(gw: &Gateway) -> Result<(), GatewayError> {
    if gw.tenants.admin_token.is_some() {
        Ok(())
    } else {
        Err(GatewayError::new(
            ErrorKind::PermissionDenied,
            "changing keys, tenants or the cache needs an admin token: set [server] admin_token_env",
        ))
    }
}

/// `GET /admin/latency`: P50/P90/P95/P99/P999/max per (model group, upstream).
pub async fn latency(State(gw): State<Arc<Gateway>>) -> Json<sluice_telemetry::LatencyReport> {
    Json(gw.telemetry().latency_report(Instant::now()))
}

/// `GET /admin/features`: which of the gateway's features are on, so that a screen can say
/// "off" of one rather than "none yet".
pub async fn features(
    State(gw): State<Arc<Gateway>>,
    State(jobs): State<crate::batches::Served>,
) -> Json<serde_json::Value> {
    let groups: Vec<_> = gw
        .routes()
        .names()
        .iter()
        .filter_map(|n| gw.routes().group(n).ok())
        .collect();
    let any = |f: &dyn Fn(&sluice_routing::Deployment) -> bool| {
        groups.iter().any(|g| g.deployments.iter().any(f))
    };
    Json(serde_json::json!({
        "answer_cache": gw.caches.exact.is_some(),
        "semantic_cache": gw.caches.semantic.is_some(),
        "admission": any(&|d| d.limiter.is_some()),
        "breakers": any(&|d| d.breaker.is_some()),
        "hedging": groups.iter().any(|g| g.hedging.is_some()),
        "retries": groups.iter().any(|g| g.retrying.is_some()),
        "slos": !gw.observers.slos.is_empty(),
        "ledger": gw.ledger.is_some(),
        "batches": jobs.batches.is_some(),
        "traces": gw.observers.traces.is_some(),
        "history": gw.observers.recent.is_some(),
    }))
}
