//! `GET /admin/diagnose?window=300&baseline=1800`: the incident explainer over the calls kept
//! in memory: the last `window` seconds against the `baseline` seconds before them. Also the
//! ring those calls are kept in, fed when each call settles.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use sluice_core::{ErrorKind, GatewayError};
use sluice_telemetry::diagnose::explain;
use tokio::time::Instant;

use crate::Gateway;

fn seconds(
    params: &HashMap<String, String>,
    name: &'static str,
    default: u64,
) -> Result<Duration, GatewayError> {
    match params.get(name) {
        None => Ok(Duration::from_secs(default)),
        Some(v) => match v.parse::<u64>() {
            Ok(s) if s > 0 => Ok(Duration::from_secs(s)),
            _ => Err(GatewayError::new(
                ErrorKind::InvalidRequest,
                format!("{name}: {v:?} is not a whole number of seconds above 0"),
            )
            .with_param(name)),
        },
    }
}

/// `GET /admin/diagnose`.
pub async fn show(
    State(gw): State<Arc<Gateway>>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    if let Some(unknown) = params
        .keys()
        .find(|k| !["window", "baseline"].contains(&k.as_str()))
    {
        return super::refuse(
            &GatewayError::new(
                ErrorKind::InvalidRequest,
                format!("unknown parameter `{unknown}`; use window, baseline (seconds)"),
            )
            .with_param(unknown.clone()),
        );
    }
    let (window, baseline) = match (
        seconds(&params, "window", 300),
        seconds(&params, "baseline", 1_800),
    ) {
        (Ok(w), Ok(b)) => (w, b),
        (Err(e), _) | (_, Err(e)) => return super::refuse(&e),
    };
    let Some(recent) = &gw.observers.recent else {
        return super::refuse(&GatewayError::new(
            ErrorKind::NotFound,
            "the incident explainer keeps no calls: set [diagnose] keep above 0",
        ));
    };
    let now = Instant::now();
    let now_calls = recent.between(now, window, Duration::ZERO);
    let before = recent.between(now, window + baseline, window);
    let d = explain(&before, &now_calls);
    Json(serde_json::json!({
        "window_seconds": window.as_secs(),
        "baseline_seconds": baseline.as_secs(),
        "diagnosis": d,
    }))
    .into_response()
}
