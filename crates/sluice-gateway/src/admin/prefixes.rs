//! `GET /admin/prefixes`: what the prefix watch saw, per tenant and group: requests sampled,
//! how many shared a stable prefix seen before, how many said something else, and churn by
//! cause with the latest offset and the token's shape; never the prompt's text.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::Gateway;

/// `GET /admin/prefixes`.
pub async fn show(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    let Some(w) = &gw.shaping.prefixes else {
        return Json(json!({"enabled": false}));
    };
    let watch = w.watch.lock();
    let watched: Vec<Value> = watch
        .report()
        .into_iter()
        .map(|(tenant, group, tally)| {
            json!({
                "tenant": tenant,
                "group": group,
                "sampled": tally.sampled,
                "shared": tally.shared,
                "changed": tally.changed,
                "churn": tally.churn,
            })
        })
        .collect();
    Json(json!({
        "enabled": true,
        "sampled_share": w.share,
        "not_watched": watch.overflow,
        "watched": watched,
    }))
}
