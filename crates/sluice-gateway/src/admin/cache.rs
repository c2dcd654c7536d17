//! `/admin/cache`: what the answer cache holds, and emptying it (an answer that should not
//! have been cached must not be served until its time to live runs out).

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
    Json(match &gw.cache {
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
    })
}

/// `DELETE /admin/cache`: drops every cached answer (needs an admin token configured).
pub async fn purge(State(gw): State<Arc<Gateway>>) -> Response {
    if let Err(e) = managing(&gw) {
        return refuse(&e);
    }
    match &gw.cache {
        Some(c) => Json(json!({"purged": c.purge()})).into_response(),
        None => refuse(&GatewayError::new(
            ErrorKind::RouteNotFound,
            "the answer cache is off: set [cache] enabled = true",
        )),
    }
}
