//! One item of a job, sent through the whole walk (admission in the batch lane, pacing,
//! routing, caches, shaping, hedging, retries, deadlines, billing, traces) as the job's
//! tenant and key, and how it ended.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sluice_batch::{Claimed, Ending, StoredBatch};
use sluice_core::{ErrorKind, RequestId};
use sluice_ledger::Entry;

use super::Batches;
use crate::Gateway;
use crate::walk::auth::Identity;
use crate::walk::entry::{Asks, Caller, Request, Walker};

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
fn caller(gw: &Gateway, b: &StoredBatch) -> Result<Identity, String> {
    match (&b.api_key, &b.key_sha256) {
        (Some(name), Some(sha)) => match gw.tenants.keys.named(name) {
            Some((now, key)) if &now == sha => Ok(Identity {
                tenant: Some(key.spec.tenant.clone()),
                key: Some(key),
            }),
            _ => Err(format!(
                "the API key `{name}` that submitted this batch has been revoked"
            )),
        },
        _ => Ok(Identity {
            tenant: (!b.tenant.is_empty()).then(|| Arc::from(b.tenant.as_str())),
            key: None,
        }),
    }
}

/// Runs claimed item `c` of job `b`.
pub(crate) async fn run(
    walker: &Walker,
    batches: &Batches,
    b: &StoredBatch,
    c: &Claimed,
) -> Outcome {
    let identity = match caller(walker.gateway(), b) {
        Ok(identity) => identity,
        Err(message) => return unsent(ErrorKind::Unauthorized, message),
    };
    let Some(dialect) = b.endpoint.dialect() else {
        // A document: analysed, not sent.
        return match batches.documents.get() {
            Some(documents) => {
                documents
                    .clone()
                    .run(walker.clone(), b.clone(), c.clone(), identity)
                    .await
            }
            None => unsent(
                ErrorKind::RouteNotFound,
                "document analysis is off on this gateway: `[analysis] enabled = true` serves it"
                    .into(),
            ),
        };
    };
    // Each try of the item its own id: `BATCH-LINE-TRY`.
    let id = RequestId::named(&format!("{}-{}-{}", b.id, c.line, c.tries))
        .unwrap_or_else(RequestId::generate);
    let known = Caller::Known {
        identity,
        lane: batches.settings.lane,
    };
    if b.cancel_ms.is_some() {
        return Outcome::Ended(Ending::Cancelled, None);
    }
    // Withdrawn, unsent and unbilled, if its job is cancelled while it waits for a slot.
    let asks = Asks::default().withdrawn_by(batches.withdrawals.token(&b.id));
    let request = Request::ready(id.clone(), dialect, Bytes::from(c.body.clone())).asking(asks);
    let (status, body, entry) = match walker.run(known, request).await {
        Ok(answered) => {
            let done = answered.complete().await;
            (200, done.body, done.entry)
        }
        Err(refused) if refused.kind() == ErrorKind::Withdrawn => {
            return Outcome::Ended(Ending::Cancelled, None);
        }
        Err(refused) => {
            if refused.unsent().is_some() {
                return Outcome::Again {
                    wait: refused
                        .retry_after()
                        .unwrap_or(REQUEUE_WAIT)
                        .max(REQUEUE_WAIT),
                    entry: refused.entry,
                };
            }
            (refused.status(), refused.body(), refused.entry)
        }
    };
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
