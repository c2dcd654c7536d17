//! `GET /admin/slo`: each SLO, what it promises, its good and bad events since the gateway
//! started, and the share of its error budget left.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::Gateway;
use crate::observers::Judged;

/// `GET /admin/slo`.
pub async fn show(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    let slos: Vec<Value> = gw.observers.slos.iter().map(Judged::report).collect();
    Json(json!({ "slos": slos }))
}
