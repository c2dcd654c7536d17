//! `POST /v1/analyses` and `GET /v1/analyses/{id}`.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Multipart, Path, Query, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_analysis::{Merger, Refused, Report, Reviewer, Summary};
use sluice_batch::input::document;
use sluice_batch::{Endpoint, Kind, NewFile, StoredBatch};
use sluice_core::{ErrorKind, GatewayError};

use super::{Analyses, Served, WalkReviewer};
use crate::batches::api::{Scope, describe, enqueue, failed, invalid, not_found, stored};
use crate::batches::{ms, now_ms};
use crate::walk::Walker;
use crate::walk::auth::{self, Identity};
use crate::walk::ingress::piece;

/// How a report is written.
#[derive(Debug, Default, Deserialize)]
pub struct Shape {
    /// `json` (the default) or `markdown`.
    format: Option<String>,
    /// Runs even one document as a job in the batch lane.
    #[serde(default)]
    batch: bool,
}

impl Shape {
    fn markdown(&self) -> Result<bool, GatewayError> {
        match self.format.as_deref() {
            None | Some("json") => Ok(false),
            Some("markdown") => Ok(true),
            Some(other) => Err(invalid(
                format!("format `{other}` is not `json` or `markdown`"),
                "format",
            )),
        }
    }
}

/// The caller and the gateway's analyses, or why not.
fn scope(served: &Served, headers: &HeaderMap) -> Result<(Identity, Arc<Analyses>), GatewayError> {
    let caller = auth::identify(&served.gw, headers)?;
    let analyses = served.analyses.clone().ok_or_else(|| {
        GatewayError::new(
            ErrorKind::RouteNotFound,
            "document analysis is off on this gateway: `[analysis] enabled = true` serves it",
        )
    })?;
    Ok((caller, analyses))
}

/// `POST /v1/analyses`: `file` fields of multipart form data, one document each. One
/// document is analysed while the caller waits (its report is the answer); several, or one
/// with `?batch=true`, become a job (202) to follow at `GET /v1/analyses/{id}`.
pub async fn create(
    State(served): State<Served>,
    headers: HeaderMap,
    Query(shape): Query<Shape>,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Response {
    match create_inner(served, headers, shape, multipart).await {
        Ok(r) => r,
        Err(e) => failed(e),
    }
}

async fn create_inner(
    served: Served,
    headers: HeaderMap,
    shape: Shape,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<Response, GatewayError> {
    let (caller, analyses) = scope(&served, &headers)?;
    let markdown = shape.markdown()?;
    let multipart = multipart.map_err(|e| {
        invalid(
            format!("the upload must be multipart/form-data with one `file` per document: {e}"),
            "file",
        )
    })?;
    let docs = take_files(&analyses, multipart, served.gw.body_stall).await?;
    if docs.len() == 1 && !shape.batch {
        let Some((name, bytes)) = docs.into_iter().next() else {
            return Err(invalid("`file` is required", "file"));
        };
        let lane = caller.default_lane(&served.gw);
        let walker = Walker::new(served.gw.clone());
        let reviewer: Arc<dyn Reviewer> = Arc::new(WalkReviewer::new(walker, caller, lane));
        let report = analyses
            .analyzer
            .analyze(&name, &bytes, &reviewer, &Merger::default())
            .await
            .map_err(|e| {
                GatewayError::new(ErrorKind::InvalidRequest, e.to_string()).with_param("file")
            })?;
        return Ok(if markdown {
            markdown_response(report.markdown())
        } else {
            Json(report_object(&report)).into_response()
        });
    }
    submit(&served, &headers, docs).await
}

/// Keeps `docs` as a batch job of documents in the batch store (one item each), answered
/// with a 202 and the job to follow.
async fn submit(
    served: &Served,
    headers: &HeaderMap,
    docs: Vec<(String, Vec<u8>)>,
) -> Result<Response, GatewayError> {
    if served.batches.is_none() {
        return Err(invalid(
            "a batch of documents is a batch job, kept in the batch store: it needs the \
             ledger's store ([ledger]) and `[batches] enabled = true` (one document at a time \
             is analysed without them)",
            "file",
        ));
    }
    let scope = Scope::of(&served.jobs(), headers)?;
    let (content, lines) = document::file(&docs);
    drop(docs);
    let limit = scope.batches.settings.max_file_bytes;
    if content.len() as u64 > limit {
        return Err(GatewayError::new(
            ErrorKind::PayloadTooLarge,
            format!(
                "the documents take {} bytes as a batch file (base64), over the batch file \
                 limit of {limit} bytes (`[batches] max_file_bytes`)",
                content.len()
            ),
        )
        .with_param("file"));
    }
    let jobs = &scope.batches.jobs;
    let created_ms = now_ms();
    let file = NewFile {
        id: format!("file-{}", uuid::Uuid::now_v7().simple()),
        tenant: scope.tenant.clone(),
        filename: "analyses.jsonl".into(),
        purpose: "batch".into(),
        content,
        created_ms,
        expires_ms: created_ms.saturating_add(ms(scope.batches.settings.keep)),
    };
    jobs.add_file(&file).await.map_err(stored)?;
    let job = match enqueue(&scope, Endpoint::Analyses, file.id.clone(), &lines, None).await {
        Ok(job) => job,
        Err(e) => {
            // Nothing of a refused upload is kept.
            if let Err(d) = jobs.delete_file(&scope.tenant, &file.id).await {
                tracing::error!(error = %d, file = %file.id, "batch store: an unused file could not be deleted");
            }
            return Err(e);
        }
    };
    scope.batches.submitted(Kind::Documents).notify_one();
    let v = job_object(&scope, &job, false).await?;
    Ok((StatusCode::ACCEPTED, Json(v)).into_response())
}

/// The documents of an upload, each a `file` field: at most `max_documents`, all of them
/// within `max_upload_bytes`.
async fn take_files(
    analyses: &Analyses,
    mut multipart: Multipart,
    stall: Duration,
) -> Result<Vec<(String, Vec<u8>)>, GatewayError> {
    let limit = analyses.settings.max_upload_bytes;
    let max_docs = analyses.settings.max_documents;
    let mut docs = Vec::new();
    let mut total = 0_u64;
    while let Some(mut field) = piece(stall, multipart.next_field())
        .await?
        .map_err(|e| invalid(format!("the upload could not be read: {e}"), "file"))?
    {
        if field.name() != Some("file") {
            continue;
        }
        if docs.len() == max_docs {
            return Err(invalid(
                format!("an upload holds at most {max_docs} documents"),
                "file",
            ));
        }
        let name = field
            .file_name()
            .map_or_else(|| format!("document-{}", docs.len() + 1), str::to_string);
        let mut bytes = Vec::new();
        while let Some(chunk) = piece(stall, field.chunk())
            .await?
            .map_err(|e| invalid(format!("`{name}` could not be read: {e}"), "file"))?
        {
            total += chunk.len() as u64;
            if total > limit {
                return Err(GatewayError::new(
                    ErrorKind::PayloadTooLarge,
                    format!("the upload is larger than the limit of {limit} bytes"),
                )
                .with_param("file"));
            }
            bytes.extend_from_slice(&chunk);
        }
        docs.push((name, bytes));
    }
    if docs.is_empty() {
        return Err(invalid("`file` is required: one per document", "file"));
    }
    Ok(docs)
}

/// `GET /v1/analyses/{id}`: where a job stands, and its reports once it has ended.
pub async fn retrieve(
    State(served): State<Served>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(shape): Query<Shape>,
) -> Response {
    retrieve_inner(served, headers, id, shape)
        .await
        .unwrap_or_else(failed)
}

async fn retrieve_inner(
    served: Served,
    headers: HeaderMap,
    id: String,
    shape: Shape,
) -> Result<Response, GatewayError> {
    scope(&served, &headers)?;
    let markdown = shape.markdown()?;
    if served.batches.is_none() {
        return Err(not_found("analysis", &id));
    }
    let scope = Scope::of(&served.jobs(), &headers)?;
    let job = scope.batch(&id).await?;
    if job.endpoint != Endpoint::Analyses {
        return Err(not_found("analysis", &id));
    }
    let v = job_object(&scope, &job, !markdown).await?;
    if !markdown {
        return Ok(Json(v).into_response());
    }
    let mut text = format!("{}\n\n", v["progress"].as_str().unwrap_or_default());
    if let Some((reports, summary)) = ended(&scope, &job.id, &v).await? {
        text.push_str(&summary.markdown());
        for r in reports {
            text.push_str("\n\n");
            text.push_str(&r.markdown());
        }
    }
    Ok(markdown_response(text))
}

/// The reports and summary of job `id` (whose object is `v`), once it has ended.
async fn ended(
    scope: &Scope,
    id: &str,
    v: &Value,
) -> Result<Option<(Vec<Report>, Summary)>, GatewayError> {
    // The job as it is now: describing it may have ended it.
    let job = scope.batch(id).await?;
    if job.ended.is_none() && !is_terminal(v) {
        return Ok(None);
    }
    let jobs = &scope.batches.jobs;
    let mut reports = Vec::new();
    let mut refused = Vec::new();
    for r in jobs.results(&job.id, false).await.map_err(stored)? {
        match r.response.as_deref().map(serde_json::from_str::<Report>) {
            Some(Ok(report)) => reports.push(report),
            other => {
                let why = match other {
                    Some(Err(e)) => format!("its report could not be read: {e}"),
                    _ => "it has no report".into(),
                };
                tracing::error!(analysis = %job.id, line = r.line, "{why}");
                refused.push(Refused {
                    document: r.custom_id,
                    error: why,
                });
            }
        }
    }
    for r in jobs.results(&job.id, true).await.map_err(stored)? {
        let said = r
            .response
            .as_deref()
            .and_then(|b| serde_json::from_str::<Value>(b).ok())
            .and_then(|b| b["error"]["message"].as_str().map(str::to_string));
        let error = said.or(r.error_message).unwrap_or_else(|| r.state.clone());
        refused.push(Refused {
            document: r.custom_id,
            error,
        });
    }
    // What made the batch is what made its reports (one gateway's configuration).
    let made_by = reports.first().and_then(|r| r.made_by.clone());
    let summary = Summary::of(made_by, &reports, refused);
    Ok(Some((reports, summary)))
}

fn is_terminal(v: &Value) -> bool {
    matches!(
        v["status"].as_str(),
        Some("completed" | "cancelled" | "expired" | "failed")
    )
}

fn markdown_response(text: String) -> Response {
    (
        [(header::CONTENT_TYPE, "text/markdown; charset=utf-8")],
        text,
    )
        .into_response()
}

/// A report as the API shows it.
pub(crate) fn report_object(r: &Report) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.insert("object".into(), json!("analysis.report"));
    }
    v
}

/// A job as the API shows it; with `full`, its reports and summary once ended.
async fn job_object(scope: &Scope, job: &StoredBatch, full: bool) -> Result<Value, GatewayError> {
    let batch = describe(&scope.gw, &scope.batches, job)
        .await
        .map_err(stored)?;
    let p = &batch["sluice"];
    let read = |k: &str| p[k].as_u64().unwrap_or(0);
    let (total, queued, running) = (read("total"), read("queued"), read("running"));
    let refused = read("failed") + read("cancelled");
    let done = read("done") + refused;
    let mut v = json!({
        "id": job.id,
        "object": "analysis",
        "created_at": job.created_ms / 1000,
        "status": batch["status"],
        "progress": format!("queued {queued}/{total}, running {running}, done {done}/{total}"),
        "counts": {
            "total": total,
            "queued": queued,
            "running": running,
            "done": done,
            "refused": refused,
        },
        "eta_seconds": p["eta_seconds"],
        "batch": batch,
    });
    if full && let Some((reports, summary)) = ended(scope, &job.id, &v).await? {
        v["summary"] = serde_json::to_value(&summary).unwrap_or(Value::Null);
        v["reports"] = Value::Array(reports.iter().map(report_object).collect());
    }
    Ok(v)
}
