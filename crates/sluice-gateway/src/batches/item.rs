//! One item of a job, sent through the whole walk (admission in the batch lane, pacing,
//! routing, caches, shaping, hedging, retries, deadlines, billing, traces) as the job's
//! tenant and key, and how it ended.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use sluice_batch::{Claimed, Ending, StoredBatch};
use sluice_core::{ErrorKind, RequestId};
use sluice_ledger::Entry;

use super::Batches;
use crate::Gateway;
use crate::walk::{self, Known, auth::Caller};

/// How long an item refused before reaching an upstream waits, at least, before it is
/// queued again (a `Retry-After` longer than this is honoured).
const REQUEUE_WAIT: Duration = Duration::from_secs(1);

/// How an item's call went.
pub(crate) enum Outcome {
    /// It ended: how, and its ledger row (written with its end).
    Ended(Ending, Option<Entry>),
    /// Sluice refused it before any upstream saw it (its own overload, shutting down, or the
    /// tenant's rate quota for now): it goes back in the queue after `wait` (the refusal's
    /// `Retry-After`, a second at least), its refusal's row written as any other.
    Again {
        /// How long to wait first.
        wait: Duration,
        /// The refusal's ledger row.
        entry: Option<Entry>,
    },
}

/// An item ended without a call of its own: `code` and `message` say why.
fn unsent(code: ErrorKind, message: String) -> Outcome {
    Outcome::Ended(
        Ending::Failed {
            code: code.code().to_string(),
            message,
        },
        None,
    )
}

/// The caller a job's items run as: its key, if it is still the one the job was submitted
/// with (a key revoked, or replaced, since runs nothing more), else its tenant.
fn caller(gw: &Gateway, b: &StoredBatch) -> Result<Caller, String> {
    match (&b.api_key, &b.key_sha256) {
        (Some(name), Some(sha)) => match gw.tenants.keys.named(name) {
            Some((now, key)) if &now == sha => Ok(Caller {
                tenant: Some(key.spec.tenant.clone()),
                key: Some(key),
            }),
            _ => Err(format!(
                "the API key `{name}` that submitted this batch has been revoked"
            )),
        },
        _ => Ok(Caller {
            tenant: (!b.tenant.is_empty()).then(|| Arc::from(b.tenant.as_str())),
            key: None,
        }),
    }
}

/// Runs claimed item `c` of job `b`.
pub(crate) async fn run(
    gw: &Arc<Gateway>,
    batches: &Batches,
    b: &StoredBatch,
    c: &Claimed,
) -> Outcome {
    let caller = match caller(gw, b) {
        Ok(caller) => caller,
        Err(message) => return unsent(ErrorKind::Unauthorized, message),
    };
    let Some(dialect) = b.endpoint.dialect() else {
        // A document: analysed, not sent.
        return match batches.documents.get() {
            Some(documents) => {
                documents
                    .clone()
                    .run(gw.clone(), b.clone(), c.clone(), caller)
                    .await
            }
            None => unsent(
                ErrorKind::RouteNotFound,
                "document analysis is off on this gateway: `[analysis] enabled = true` serves it"
                    .into(),
            ),
        };
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let known = Known {
        caller,
        lane: batches.settings.lane,
        settles_to: tx,
        headers: http::HeaderMap::new(),
    };
    // Each try of the item its own id: `BATCH-LINE-TRY`.
    let id = RequestId::named(&format!("{}-{}-{}", b.id, c.line, c.tries))
        .unwrap_or_else(RequestId::generate);
    let resp = walk::serve_known(
        gw.clone(),
        Bytes::from(c.body.clone()),
        dialect,
        id.clone(),
        known,
    )
    .await;
    let status = resp.status().as_u16();
    let retry_after = walk::retry_after(&resp);
    let body = match resp.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return Outcome::Ended(
                Ending::Failed {
                    code: ErrorKind::Internal.code().to_string(),
                    message: format!("the answer could not be read: {e}"),
                },
                rx.await.ok(),
            );
        }
    };
    let entry = rx.await.ok();
    let unsent = entry.as_ref().is_some_and(|e| {
        let code = e.error.as_deref();
        e.attempts == 0
            && (code == Some(ErrorKind::Overloaded.code())
                || code == Some(ErrorKind::ShuttingDown.code())
                || code == Some(ErrorKind::QuotaExceeded.code()))
    });
    if unsent {
        return Outcome::Again {
            wait: retry_after.unwrap_or(REQUEUE_WAIT).max(REQUEUE_WAIT),
            entry,
        };
    }
    let tokens = entry.as_ref().map(|e| e.tokens).unwrap_or_default();
    Outcome::Ended(
        Ending::Answered {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
            request_id: id.as_str().to_string(),
            prompt_tokens: tokens.prompt,
            cached_tokens: tokens.cached,
            completion_tokens: tokens.completion,
        },
        entry,
    )
}
