//! `/admin/keys`: making, listing and revoking API keys. A key is shown once,
//! in the answer that makes it; sluice keeps only its hash, in memory and, with a ledger, in
//! the ledger's store, so keys made here outlive a restart.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError};
use sluice_economy::{KeySpec, keys};
use sluice_ledger::{RevokedKey, Store, StoredKey};

use super::{kept, managing, refuse};
use crate::Gateway;

/// `POST /admin/keys` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewKey {
    name: String,
    tenant: String,
    #[serde(default)]
    lane: Option<String>,
    #[serde(default)]
    models: Vec<String>,
}

pub(crate) fn invalid(message: String, param: &'static str) -> GatewayError {
    GatewayError::new(ErrorKind::InvalidRequest, message).with_param(param)
}

pub(crate) fn is_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn check(gw: &Gateway, k: &NewKey) -> Result<(), GatewayError> {
    if !is_name(&k.name) {
        return Err(invalid(
            "`name` must be 1 to 64 letters, digits, `.`, `_` or `-`".into(),
            "name",
        ));
    }
    if !is_name(&k.tenant) {
        return Err(invalid(
            "`tenant` must be 1 to 64 letters, digits, `.`, `_` or `-`".into(),
            "tenant",
        ));
    }
    if let Some(lane) = &k.lane
        && !gw.lanes.iter().any(|l| &*l.name == lane.as_str())
    {
        return Err(invalid(format!("`{lane}` is not a lane"), "lane"));
    }
    for m in &k.models {
        if gw.routes.group(m).is_err() {
            return Err(invalid(format!("`{m}` is not a model group"), "models"));
        }
    }
    Ok(())
}

/// `POST /admin/keys`: makes a key; the answer is the only place it ever appears.
pub async fn create(State(gw): State<Arc<Gateway>>, body: axum::body::Bytes) -> Response {
    let _one_change_at_a_time = gw.tenants.admin_writes.lock().await;
    let made = (|| {
        managing(&gw)?;
        let k: NewKey = serde_json::from_slice(&body).map_err(|e| {
            GatewayError::new(ErrorKind::InvalidRequest, format!("bad key request: {e}"))
        })?;
        check(&gw, &k)?;
        let spec = KeySpec {
            name: k.name,
            tenant: Arc::from(k.tenant.as_str()),
            lane: k.lane,
            models: k.models,
        };
        let secret = gw
            .tenants
            .keys
            .create(spec.clone())
            .map_err(|e| invalid(e.to_string(), "name"))?;
        Ok::<_, GatewayError>((spec, secret))
    })();
    // Kept across restarts in the ledger's store, when there is one; a key the store could
    // not keep is not handed out.
    let made = match (made, gw.usage_store()) {
        (Ok((spec, secret)), Some(store)) => {
            let stored = StoredKey {
                name: spec.name.clone(),
                tenant: spec.tenant.to_string(),
                sha256: keys::hash_hex(&secret),
                lane: spec.lane.clone(),
                models: spec.models.clone(),
            };
            match kept(store, "keep the key", store.save_key(&stored)).await {
                Ok(()) => {
                    crate::cluster::announce(&gw).await;
                    Ok((spec, secret))
                }
                Err(e) => {
                    gw.tenants.keys.revoke(&spec.name);
                    Err(e)
                }
            }
        }
        (made, _) => made,
    };
    match made {
        Ok((spec, secret)) => (
            StatusCode::CREATED,
            Json(json!({
                "name": spec.name,
                "tenant": &*spec.tenant,
                "lane": spec.lane,
                "models": spec.models,
                "key": secret,
                "note": "this is the only time the key is shown; sluice keeps its hash",
            })),
        )
            .into_response(),
        Err(e) => refuse(&e),
    }
}

/// `GET /admin/keys`: every key, without its secret.
pub async fn list(State(gw): State<Arc<Gateway>>) -> Response {
    if let Err(e) = managing(&gw) {
        return refuse(&e);
    }
    let keys: Vec<Value> = gw
        .tenants
        .keys
        .list()
        .iter()
        .map(|k| {
            json!({
                "name": k.spec.name,
                "tenant": &*k.spec.tenant,
                "lane": k.spec.lane,
                "models": k.spec.models,
                "fingerprint": k.fingerprint,
            })
        })
        .collect();
    Json(json!({ "keys": keys })).into_response()
}

/// Revokes `keys` (name, SHA-256 in hex, tenant) in the ledger's store first, when there is
/// one, then here: a revocation the store could not keep is not made. Whether it is durable
/// (there is a store), and how far the other instances were told.
pub(crate) async fn revoke_all(
    gw: &Gateway,
    keys: &[(String, String, String)],
) -> Result<(bool, Value), GatewayError> {
    let durable = match gw.usage_store() {
        Some(store) => {
            let at_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            let revoked: Vec<RevokedKey> = keys
                .iter()
                .map(|(name, sha256, tenant)| RevokedKey {
                    sha256: sha256.clone(),
                    name: name.clone(),
                    tenant: tenant.clone(),
                    revoked_ms: at_ms,
                })
                .collect();
            kept(store, "keep the revocation", store.revoke_keys(&revoked)).await?;
            true
        }
        None => false,
    };
    for (name, _, _) in keys {
        gw.tenants.keys.revoke(name);
    }
    let told = if keys.is_empty() {
        Value::Null
    } else {
        crate::cluster::announce(gw).await
    };
    Ok((durable, told))
}

/// What an answer says of a revocation without a store to keep it.
pub(crate) const NOT_DURABLE: &str = "no ledger store keeps this revocation: a key the \
    configuration defines comes back after a restart; remove it from the configuration, or \
    set [ledger] store";

/// `DELETE /admin/keys/{name}`: revokes the key at once, everywhere it could be used; with a
/// ledger store the revocation is kept, and wins over the configuration's definition of the
/// key after a restart (until the configuration gives the key another hash).
pub async fn revoke(State(gw): State<Arc<Gateway>>, Path(name): Path<String>) -> Response {
    let _one_change_at_a_time = gw.tenants.admin_writes.lock().await;
    if let Err(e) = managing(&gw) {
        return refuse(&e);
    }
    let Some((sha256, key)) = gw.tenants.keys.named(&name) else {
        return refuse(
            &GatewayError::new(ErrorKind::NotFound, format!("no key named `{name}`"))
                .with_param("name"),
        );
    };
    let revoked = [(name.clone(), sha256, key.spec.tenant.to_string())];
    match revoke_all(&gw, &revoked).await {
        Ok((durable, told)) => {
            let mut v = json!({ "revoked": name, "tenant": &*key.spec.tenant, "durable": durable, "told": told });
            if !durable {
                v["note"] = json!(NOT_DURABLE);
            }
            Json(v).into_response()
        }
        Err(e) => refuse(&e),
    }
}
