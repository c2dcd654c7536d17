//! `/admin/cache`: what the answer cache and the semantic cache hold, and emptying both (an
//! answer that should not have been cached must not be served until its time to live runs
//! out).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sluice_core::{ErrorKind, GatewayError};

use crate::Gateway;
use crate::admin::{managing, refuse};

/// `GET /admin/cache`: whether answers are cached, how many are held and what they weigh.
pub async fn show(State(gw): State<Arc<Gateway>>) -> Json<serde_json::Value> {
    let mut v = match &gw.caches.exact {
        None => json!({"enabled": false}),
        Some(c) => {
            let (entries, bytes) = c.size();
            json!({
                "enabled": true,
                "entries": entries,
                "bytes": bytes,
                "max_bytes": c.max_bytes(),
                "ttl_seconds": c.ttl().as_secs_f64(),
            })
        }
    };
    v["semantic"] = match &gw.caches.semantic {
        None => json!({"enabled": false}),
        Some(s) => {
            let (entries, bytes) = s.cache.size();
            let p = s.cache.policy();
            json!({
                "enabled": true,
                "entries": entries,
                "bytes": bytes,
                "max_bytes": p.max_bytes,
                "ttl_seconds": p.ttl.as_secs_f64(),
                "embedder": s.embedder.name(),
                "temperature_ceiling": s.cache.ceiling(),
                "error_estimates": s.cache.estimates().into_iter().map(|(group, estimate, evidence)| {
                    json!({"group": &*group, "estimate": estimate, "recent_verifications": evidence})
                }).collect::<Vec<_>>(),
                "verification": s.cache.stopped().into_iter().map(|(group, stopped)| {
                    json!({"group": &*group, "stopped": stopped})
                }).collect::<Vec<_>>(),
            })
        }
    };
    Json(v)
}

/// `DELETE /admin/cache`: drops every cached answer (needs an admin token configured).
pub async fn purge(State(gw): State<Arc<Gateway>>) -> Response {
    if let Err(e) = managing(&gw) {
        return refuse(&e);
    }
    if gw.caches.exact.is_none() && gw.caches.semantic.is_none() {
        return refuse(&GatewayError::new(
            ErrorKind::NotFound,
            "the answer cache is off: set [cache] enabled = true",
        ));
    }
    let exact = gw.caches.exact.as_ref().map_or(0, |c| c.purge());
    let semantic = gw.caches.semantic.as_ref().map_or(0, |s| s.cache.purge());
    Json(json!({"purged": exact, "purged_semantic": semantic})).into_response()
}
