//! `POST /v1/feedback {"request_id": "...", "score": 0..1}`: how good an answer an automatic
//! router chose, or the semantic cache served, was (1 good, 0 bad, a fraction in between). Its caller is identified as for
//! a chat request; an id no router answer has is a 404, another tenant's a 403, a second
//! explicit score a 409, a score out of range a 400 naming `score`; all OpenAI-shaped.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::HeaderMap;
use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError, RequestId};

use crate::Gateway;
use crate::learning::{ANSWERS_KEPT, Signal};
use crate::walk::{auth, rescue};

fn bad(message: impl Into<String>, param: &str) -> GatewayError {
    GatewayError::new(ErrorKind::InvalidRequest, message.into()).with_param(param.to_string())
}

/// The request id and score of a feedback body, or a 400 naming the field at fault.
fn parse(body: &[u8]) -> Result<(RequestId, f64), GatewayError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        GatewayError::new(ErrorKind::InvalidJson, format!("the body is not JSON: {e}"))
    })?;
    let Some(obj) = v.as_object() else {
        return Err(bad(
            "the body must be an object with `request_id` and `score`",
            "body",
        ));
    };
    if let Some(other) = obj.keys().find(|k| *k != "request_id" && *k != "score") {
        return Err(bad(
            format!("unknown field `{other}`: feedback takes `request_id` and `score`"),
            other,
        ));
    }
    let id = match obj.get("request_id") {
        Some(Value::String(s)) => RequestId::named(s).ok_or_else(|| {
            bad(
                "request_id must be 1 to 128 visible ASCII characters",
                "request_id",
            )
        })?,
        Some(_) => return Err(bad("request_id must be a string", "request_id")),
        None => {
            return Err(bad(
                "request_id is required: the x-request-id of the answer",
                "request_id",
            ));
        }
    };
    let score = match obj.get("score") {
        Some(Value::Number(n)) => n.as_f64().filter(|s| (0.0..=1.0).contains(s)),
        Some(Value::Bool(b)) => Some(if *b { 1.0 } else { 0.0 }),
        None => return Err(bad("score is required: a number from 0 to 1", "score")),
        Some(_) => None,
    };
    let score = score.ok_or_else(|| {
        bad(
            format!(
                "score must be a number from 0 (bad) to 1 (good); got {}",
                obj["score"]
            ),
            "score",
        )
    })?;
    Ok((id, score))
}

/// `POST /v1/feedback`.
pub async fn feedback(State(gw): State<Arc<Gateway>>, headers: HeaderMap, body: Bytes) -> Response {
    match give(&gw, &headers, &body) {
        Ok(v) => Json(v).into_response(),
        Err(e) => rescue::error_response(
            &e,
            &RequestId::generate(),
            None,
            sluice_ingress::Dialect::Chat,
        ),
    }
}

fn give(gw: &Gateway, headers: &HeaderMap, body: &[u8]) -> Result<Value, GatewayError> {
    let caller = auth::identify(gw, headers)?;
    let (id, score) = parse(body)?;
    if let Some(v) = semantic_hit(gw, &caller, &id, score)? {
        return Ok(v);
    }
    let Some(routed) = gw.learning.answer(&id) else {
        return Err(GatewayError::new(
            ErrorKind::NotFound,
            format!(
                "no answer chosen by a router has request id `{}` (feedback is taken for the last {} such answers)",
                id.as_str(),
                ANSWERS_KEPT
            ),
        )
        .with_param("request_id"));
    };
    if routed.tenant != caller.tenant {
        return Err(GatewayError::new(
            ErrorKind::PermissionDenied,
            format!("request `{}` is another tenant's", id.as_str()),
        )
        .with_param("request_id"));
    }
    if let Some((_, Signal::Explicit)) = routed.scored {
        return Err(GatewayError::new(
            ErrorKind::Conflict,
            format!("request `{}` already has feedback", id.as_str()),
        )
        .with_param("request_id"));
    }
    let replaced = routed.scored.map(|(_, s)| s.label());
    let group = gw
        .routes
        .router(&routed.router)
        .and_then(|r| r.lock().candidates.get(routed.candidate).cloned());
    let (router, task) = (routed.router.clone(), routed.task.clone());
    gw.learning
        .score(&gw.routes, gw.telemetry(), &id, routed, score);
    Ok(json!({
        "object": "feedback",
        "request_id": id.as_str(),
        "router": &*router,
        "task": &*task,
        "group": group.as_deref(),
        "score": score,
        "replaced": replaced,
    }))
}

/// Feedback on an answer the semantic cache served: a score below one half says the entry's
/// answer was wrong for that question (a measured error it learns from), else right.
fn semantic_hit(
    gw: &Gateway,
    caller: &auth::Identity,
    id: &RequestId,
    score: f64,
) -> Result<Option<Value>, GatewayError> {
    let Some(sem) = &gw.caches.semantic else {
        return Ok(None);
    };
    let Some(hit) = sem.served.get(id) else {
        return Ok(None);
    };
    if hit.tenant != caller.tenant {
        return Err(GatewayError::new(
            ErrorKind::PermissionDenied,
            format!("request `{}` is another tenant's", id.as_str()),
        )
        .with_param("request_id"));
    }
    sem.served.invalidate(id);
    let right = score >= 0.5;
    sem.cache
        .observe(hit.partition, hit.entry, hit.similarity, right);
    gw.observers.telemetry.semantic_reported(&hit.group, right);
    Ok(Some(json!({
        "object": "feedback",
        "request_id": id.as_str(),
        "semantic_entry": hit.entry,
        "similarity": hit.similarity,
        "score": score,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_body_is_refused_naming_the_field() {
        let param = |b: &str| parse(b.as_bytes()).err().and_then(|e| e.param.clone());
        assert_eq!(
            param(r#"{"request_id":"r","score":1.5}"#).as_deref(),
            Some("score")
        );
        assert_eq!(
            param(r#"{"request_id":"r","score":-0.1}"#).as_deref(),
            Some("score")
        );
        assert_eq!(
            param(r#"{"request_id":"r","score":"good"}"#).as_deref(),
            Some("score")
        );
        assert_eq!(param(r#"{"request_id":"r"}"#).as_deref(), Some("score"));
        assert_eq!(param(r#"{"score":1}"#).as_deref(), Some("request_id"));
        assert_eq!(
            param(r#"{"request_id":"","score":1}"#).as_deref(),
            Some("request_id")
        );
        assert_eq!(
            param(r#"{"request_id":"r","score":1,"note":"x"}"#).as_deref(),
            Some("note")
        );
        assert!(matches!(
            parse(b"{").map_err(|e| e.kind),
            Err(ErrorKind::InvalidJson)
        ));
        let (id, s) =
            parse(br#"{"request_id":"r-1","score":0.25}"#).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((id.as_str(), s), ("r-1", 0.25));
        assert_eq!(
            parse(br#"{"request_id":"r","score":true}"#)
                .map(|p| p.1)
                .ok(),
            Some(1.0)
        );
    }
}
