//! `GET /admin/diagnose?window=300&baseline=1800`: the incident explainer over the calls kept
//! in memory: the last `window` seconds against the `baseline` seconds before them. And
//! `GET /admin/latency/history?step=10`: the latency trend those calls hold, per lane.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use sluice_core::{ErrorKind, GatewayError};
use sluice_telemetry::diagnose::{Windows, explain};
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
    let d = explain(
        &before,
        &now_calls,
        Windows {
            baseline,
            recent: window,
        },
    );
    Json(serde_json::json!({
        "window_seconds": window.as_secs(),
        "baseline_seconds": baseline.as_secs(),
        "diagnosis": d,
    }))
    .into_response()
}

/// `GET /admin/latency/history?step=10`: per lane and step, what clients waited and what the
/// answering attempts took, from the calls the explainer keeps (404 when it keeps none).
pub async fn history(
    State(gw): State<Arc<Gateway>>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    if let Some(unknown) = params.keys().find(|k| k.as_str() != "step") {
        return super::refuse(
            &GatewayError::new(
                ErrorKind::InvalidRequest,
                format!("unknown parameter `{unknown}`; use step (seconds)"),
            )
            .with_param(unknown.clone()),
        );
    }
    let step = match seconds(&params, "step", 10) {
        Ok(s) => s,
        Err(e) => return super::refuse(&e),
    };
    let Some(recent) = &gw.observers.recent else {
        return super::refuse(&GatewayError::new(
            ErrorKind::NotFound,
            "no latency history: the gateway keeps no recent calls ([diagnose] keep = 0)",
        ));
    };
    let now = Instant::now();
    let calls: Vec<(Duration, sluice_telemetry::diagnose::Summary)> = recent
        .all()
        .into_iter()
        .map(|(at, s)| (now.saturating_duration_since(at), s))
        .collect();
    Json(sluice_telemetry::history::history(&calls, step)).into_response()
}
