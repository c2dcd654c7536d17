//! `/v1/batches`: OpenAI's Batch API over sluice's own runner. Jobs belong to the tenant
//! that submitted them (another tenant's id is a 404); every refusal is in OpenAI's error
//! shape, names the field (and the line), and keeps nothing.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use http::HeaderMap;
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_batch::state::{self, Facts};
use sluice_batch::{BatchError, Endpoint, NewBatch, Status, StoredBatch, input, objects, progress};
use sluice_core::{ErrorKind, GatewayError, RequestId};
use sluice_ingress::Dialect;
use sluice_telemetry::slo::JobEnd;

pub use super::files::upload as upload_file;
pub use super::files::{content, list as list_files, remove as delete_file, retrieve as file};
use super::{Batches, Served, now_ms};
use crate::Gateway;
use crate::walk::{auth, rescue};

mod create;

pub(crate) use create::enqueue;
pub use create::{CreateBody, create};

/// The only completion window OpenAI's API takes.
const WINDOW: &str = "24h";
const WINDOW_MS: i64 = 86_400_000;

/// How long a submission refused for a full queue is told to wait.
const FULL_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How often `/v1/batches/{id}/events` reports.
const EVENTS_EVERY: Duration = Duration::from_secs(1);

/// An error answered in OpenAI's shape.
pub(crate) fn failed(e: GatewayError) -> Response {
    rescue::error_response(&e, &RequestId::generate(), None, Dialect::Chat)
}

pub(crate) fn invalid(message: impl Into<String>, param: impl Into<String>) -> GatewayError {
    GatewayError::new(ErrorKind::InvalidRequest, message.into()).with_param(param.into())
}

pub(crate) fn not_found(what: &str, id: &str) -> GatewayError {
    GatewayError::new(ErrorKind::NotFound, format!("no {what} `{id}`"))
}

/// A page's size: `asked`, else `default`; a 400 naming `limit` outside 1 to `max`.
pub(crate) fn page_size(
    asked: Result<Option<u32>, ()>,
    default: u32,
    max: u32,
) -> Result<u32, GatewayError> {
    match asked {
        Err(()) => Err(invalid("`limit` must be a whole number", "limit")),
        Ok(n) => {
            let n = n.unwrap_or(default);
            if (1..=max).contains(&n) {
                Ok(n)
            } else {
                Err(invalid(format!("`limit` must be from 1 to {max}"), "limit"))
            }
        }
    }
}

/// OpenAI's list object for a page of `data` (objects with an `id`), fetched one row past
/// `limit` to learn whether more follow.
pub(crate) fn page(mut data: Vec<Value>, limit: u32) -> Value {
    let has_more = data.len() > limit as usize;
    data.truncate(limit as usize);
    let first = data.first().map(|v| v["id"].clone());
    let last = data.last().map(|v| v["id"].clone());
    json!({"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": has_more})
}

/// A store failure: logged, answered as sluice's own error.
pub(crate) fn stored(e: BatchError) -> GatewayError {
    tracing::error!(error = %e, "batch store");
    GatewayError::new(ErrorKind::Internal, format!("the batch store failed: {e}"))
}

/// Who asks, and the batch jobs they may see.
pub(crate) struct Scope {
    pub(crate) gw: Arc<Gateway>,
    pub(crate) batches: Arc<Batches>,
    /// Whether documents are analysed here.
    pub(crate) analyses: bool,
    pub(crate) caller: auth::Identity,
    /// The caller's tenant (`""` when requests name none).
    pub(crate) tenant: String,
    /// Its key's SHA-256 (hex), when it sent one.
    key_sha256: Option<String>,
}

impl Scope {
    /// The caller of a request with `headers`, where batch jobs are served; else the answer.
    pub(crate) fn of(served: &Served, headers: &HeaderMap) -> Result<Self, GatewayError> {
        let gw = &served.gw;
        // The caller first: a key that is not valid is a 401 whether batch jobs are on.
        let caller = auth::identify(gw, headers)?;
        let Some(batches) = served.batches.clone() else {
            return Err(GatewayError::new(
                ErrorKind::RouteNotFound,
                "batch jobs are off on this gateway: they need the ledger's store ([ledger]) \
                 and `[batches] enabled = true`",
            ));
        };
        let tenant = caller.tenant.as_deref().unwrap_or_default().to_string();
        let key_sha256 = caller
            .key
            .as_ref()
            .and_then(|k| gw.tenants.keys.named(&k.spec.name))
            .map(|(sha, _)| sha);
        Ok(Self {
            gw: gw.clone(),
            batches,
            analyses: served.analyses,
            caller,
            tenant,
            key_sha256,
        })
    }

    /// The caller's job `id` (404 for anyone else's).
    pub(crate) async fn batch(&self, id: &str) -> Result<StoredBatch, GatewayError> {
        self.batches
            .jobs
            .batch(Some(&self.tenant), id)
            .await
            .map_err(stored)?
            .ok_or_else(|| not_found("batch", id))
    }

    /// Job `b`'s output (`errors` false) or error file.
    pub(crate) async fn result_content(
        &self,
        b: &StoredBatch,
        errors: bool,
    ) -> Result<String, GatewayError> {
        let results = self
            .batches
            .jobs
            .results(&b.id, errors)
            .await
            .map_err(stored)?;
        Ok(objects::result_content(&b.id, &results))
    }
}

/// The `batch` object of `b` now.
///
/// A job whose items have all ended is ended here if the keeper has not yet done so (once,
/// whoever sees it first), so that its status, its end time and its files agree.
pub(crate) async fn describe(
    gw: &Gateway,
    batches: &Batches,
    b: &StoredBatch,
) -> Result<Value, BatchError> {
    let now = now_ms();
    let counts = batches.jobs.counts(&b.id).await?;
    let lane = batches.jobs.lane(b, now).await?;
    let status = state::status(facts(b, now), &counts);
    let ended;
    let b = if b.ended.is_none() && status.is_terminal() {
        end(gw, batches, &b.id, status, now).await?;
        ended = batches.jobs.batch(None, &b.id).await?;
        ended.as_ref().unwrap_or(b)
    } else {
        b
    };
    Ok(objects::batch(
        b,
        status,
        &counts,
        &progress::progress(&counts, lane),
    ))
}

/// Ends job `id` with `status` at `now`, once (whoever sees its end first: the keeper, or a
/// client reading it); the gateway whose write ended it counts it for the batch-window SLOs.
pub(crate) async fn end(
    gw: &Gateway,
    batches: &Batches,
    id: &str,
    status: Status,
    now: i64,
) -> Result<(), BatchError> {
    if batches.jobs.end_batch(id, status, now).await? {
        let end = match status {
            Status::Completed => Some(JobEnd::Completed),
            Status::Expired => Some(JobEnd::Expired),
            Status::Cancelled => Some(JobEnd::Cancelled),
            Status::InProgress | Status::Cancelling => None,
        };
        if let Some(end) = end {
            gw.observers.job_ended(end);
        }
    }
    Ok(())
}

/// What a job's status is decided from, at `now`.
pub(crate) fn facts(b: &StoredBatch, now: i64) -> Facts {
    Facts {
        ended: b.ended.map(|(s, _)| s),
        cancel_asked: b.cancel_ms.is_some(),
        window_closed: now >= b.expires_ms,
    }
}

/// `GET /v1/batches/{id}`: OpenAI's object, with the job's progress under `sluice`.
pub async fn retrieve(
    State(served): State<Served>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let scope = match Scope::of(&served, &headers) {
        Ok(s) => s,
        Err(e) => return failed(e),
    };
    match scope.batch(&id).await {
        Ok(b) => match describe(&scope.gw, &scope.batches, &b).await {
            Ok(v) => Json(v).into_response(),
            Err(e) => failed(stored(e)),
        },
        Err(e) => failed(e),
    }
}

/// `POST /v1/batches/{id}/cancel`: queued items end at once, and so do those claimed and
/// still waiting for a slot; items already sent finish and are billed.
pub async fn cancel(
    State(served): State<Served>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let scope = match Scope::of(&served, &headers) {
        Ok(s) => s,
        Err(e) => return failed(e),
    };
    let cancelled = async {
        let b = scope.batch(&id).await?;
        if b.ended.is_some() {
            return Err(GatewayError::new(
                ErrorKind::Conflict,
                format!("batch `{id}` has already ended; it cannot be cancelled"),
            ));
        }
        let jobs = &scope.batches.jobs;
        let b = jobs
            .cancel(&scope.tenant, &id, now_ms())
            .await
            .map_err(stored)?
            .ok_or_else(|| not_found("batch", &id))?;
        // Its items this gateway holds unsent end at once; other gateways' keepers see the
        // cancel in the store.
        scope.batches.withdrawals.withdraw(&id);
        describe(&scope.gw, &scope.batches, &b)
            .await
            .map_err(stored)
    };
    match cancelled.await {
        Ok(v) => Json(v).into_response(),
        Err(e) => failed(e),
    }
}

/// `GET /v1/batches` query.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    after: Option<String>,
    limit: Option<u32>,
}

/// `GET /v1/batches`: the tenant's jobs, newest first, by pages (`after`, `limit` 1-100).
pub async fn list(
    State(served): State<Served>,
    headers: HeaderMap,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let scope = match Scope::of(&served, &headers) {
        Ok(s) => s,
        Err(e) => return failed(e),
    };
    let q = query.map(|Query(q)| q).map_err(|_| ());
    let limit = match page_size(q.as_ref().map(|q| q.limit).map_err(|_| ()), 20, 100) {
        Ok(n) => n,
        Err(e) => return failed(e),
    };
    let after = q.ok().and_then(|q| q.after);
    let listed = async {
        let mut rows = scope
            .batches
            .jobs
            .batches(&scope.tenant, after.as_deref(), limit + 1)
            .await?;
        // The extra row only says that more follow: it is not described.
        rows.truncate(limit as usize + 1);
        let mut data = Vec::with_capacity(rows.len());
        for (i, b) in rows.iter().enumerate() {
            data.push(if i < limit as usize {
                describe(&scope.gw, &scope.batches, b).await?
            } else {
                json!({"id": b.id})
            });
        }
        Ok::<_, BatchError>(page(data, limit))
    };
    match listed.await {
        Ok(v) => Json(v).into_response(),
        Err(e) => failed(stored(e)),
    }
}

/// `GET /v1/batches/{id}/events`: the job's object as an SSE `progress` event every second,
/// until it ends (the last event has its final status).
pub async fn events(
    State(served): State<Served>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let scope = match Scope::of(&served, &headers) {
        Ok(s) => s,
        Err(e) => return failed(e),
    };
    if let Err(e) = scope.batch(&id).await {
        return failed(e);
    }
    let stream = futures::stream::unfold(Some(scope), move |scope| {
        let id = id.clone();
        async move {
            let scope = scope?;
            let b = scope.batch(&id).await.ok()?;
            let v = describe(&scope.gw, &scope.batches, &b).await.ok()?;
            let ended = v["status"]
                .as_str()
                .and_then(Status::parse)
                .is_some_and(Status::is_terminal);
            let event = Event::default().event("progress").data(v.to_string());
            let next = if ended {
                None
            } else {
                tokio::time::sleep(EVENTS_EVERY).await;
                Some(scope)
            };
            Some((Ok::<_, Infallible>(event), next))
        }
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// `GET /admin/batches`: every tenant's jobs that have not ended, each with its tenant and
/// progress (for the dashboard's bars). 404 where batch jobs are off.
pub async fn open_jobs(State(served): State<Served>) -> Response {
    let gw = served.gw;
    let Some(batches) = served.batches else {
        return failed(GatewayError::new(
            ErrorKind::RouteNotFound,
            "batch jobs are off on this gateway",
        ));
    };
    let listed = async {
        let mut data = Vec::new();
        for b in batches.jobs.open_batches().await? {
            let mut v = describe(&gw, &batches, &b).await?;
            v["tenant"] = json!(b.tenant);
            data.push(v);
        }
        Ok::<_, BatchError>(json!({"object": "list", "data": data}))
    };
    match listed.await {
        Ok(v) => Json(v).into_response(),
        Err(e) => failed(stored(e)),
    }
}
