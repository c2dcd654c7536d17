//! `POST /v1/analyses` and `GET /v1/analyses/{id}`.

use std::sync::{Arc, OnceLock};

use axum::Json;
use axum::extract::{Multipart, Path, Query, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_analysis::{Merger, Progress, Report, Reviewer, Summary};
use sluice_core::{ErrorKind, GatewayError};

use super::{Analyses, Job, WalkReviewer};
use crate::Gateway;
use crate::batches::api::{failed, invalid, not_found};
use crate::batches::now_ms;
use crate::walk::auth::{self, Caller};

/// The most jobs kept in memory, ended ones included (the oldest ended go first).
const KEPT_JOBS: usize = 1_000;

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
fn scope(gw: &Arc<Gateway>, headers: &HeaderMap) -> Result<(Caller, Arc<Analyses>), GatewayError> {
    let caller = auth::identify(gw, headers)?;
    let analyses = gw.analyses.clone().ok_or_else(|| {
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
    State(gw): State<Arc<Gateway>>,
    headers: HeaderMap,
    Query(shape): Query<Shape>,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Response {
    match create_inner(gw, headers, shape, multipart).await {
        Ok(r) => r,
        Err(e) => failed(e),
    }
}

async fn create_inner(
    gw: Arc<Gateway>,
    headers: HeaderMap,
    shape: Shape,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<Response, GatewayError> {
    let (caller, analyses) = scope(&gw, &headers)?;
    let markdown = shape.markdown()?;
    let multipart = multipart.map_err(|e| {
        invalid(
            format!("the upload must be multipart/form-data with one `file` per document: {e}"),
            "file",
        )
    })?;
    let docs = take_files(&analyses, multipart).await?;
    if docs.len() == 1 && !shape.batch {
        let Some((name, bytes)) = docs.into_iter().next() else {
            return Err(invalid("`file` is required", "file"));
        };
        let lane = caller.default_lane(&gw);
        let reviewer: Arc<dyn Reviewer> = Arc::new(WalkReviewer::new(gw.clone(), caller, lane));
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
    let tenant = caller.tenant.as_deref().unwrap_or_default().to_string();
    let job = Arc::new(Job {
        id: format!("anl_{}", uuid::Uuid::new_v4().simple()),
        tenant,
        created_ms: now_ms(),
        progress: Progress::default(),
        result: OnceLock::new(),
    });
    job.progress
        .total
        .store(docs.len(), std::sync::atomic::Ordering::Relaxed);
    {
        let mut jobs = analyses.jobs.lock();
        // The oldest ended jobs make room: memory holds at most `KEPT_JOBS`.
        while jobs.len() >= KEPT_JOBS {
            let oldest = jobs
                .values()
                .filter(|j| j.result.get().is_some())
                .min_by_key(|j| j.created_ms)
                .map(|j| j.id.clone());
            match oldest {
                Some(id) => jobs.remove(&id),
                None => {
                    return Err(GatewayError::new(
                        ErrorKind::Overloaded,
                        format!("{KEPT_JOBS} analyses are running; submit again when one ends"),
                    ));
                }
            };
        }
        jobs.insert(job.id.clone(), job.clone());
    }
    let reviewer: Arc<dyn Reviewer> = Arc::new(WalkReviewer::new(
        gw.clone(),
        caller,
        analyses.settings.batch_lane,
    ));
    let running = job.clone();
    let concurrency = analyses.settings.concurrency;
    tokio::spawn(async move {
        let done = analyses
            .analyzer
            .analyze_batch(docs, &reviewer, concurrency, &running.progress)
            .await;
        let _ = running.result.set(done);
    });
    Ok((StatusCode::ACCEPTED, Json(job_object(&job, false))).into_response())
}

/// The documents of an upload, each a `file` field: at most `max_documents`, all of them
/// within `max_upload_bytes`.
async fn take_files(
    analyses: &Analyses,
    mut multipart: Multipart,
) -> Result<Vec<(String, Vec<u8>)>, GatewayError> {
    let limit = analyses.settings.max_upload_bytes;
    let max_docs = analyses.settings.max_documents;
    let mut docs = Vec::new();
    let mut total = 0_u64;
    while let Some(mut field) = multipart
        .next_field()
        .await
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
        while let Some(chunk) = field
            .chunk()
            .await
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
    State(gw): State<Arc<Gateway>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(shape): Query<Shape>,
) -> Response {
    let inner = || -> Result<Response, GatewayError> {
        let (caller, analyses) = scope(&gw, &headers)?;
        let markdown = shape.markdown()?;
        let tenant = caller.tenant.as_deref().unwrap_or_default();
        let job = analyses
            .jobs
            .lock()
            .get(&id)
            .filter(|j| j.tenant == tenant)
            .cloned()
            .ok_or_else(|| not_found("analysis", &id))?;
        if markdown {
            let mut text = format!("{}\n\n", job.progress.line());
            if let Some((reports, summary)) = job.result.get() {
                text.push_str(&summary.markdown());
                for r in reports {
                    text.push_str("\n\n");
                    text.push_str(&r.markdown());
                }
            }
            return Ok(markdown_response(text));
        }
        Ok(Json(job_object(&job, true)).into_response())
    };
    inner().unwrap_or_else(failed)
}

fn markdown_response(text: String) -> Response {
    (
        [(header::CONTENT_TYPE, "text/markdown; charset=utf-8")],
        text,
    )
        .into_response()
}

fn report_object(r: &Report) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.insert("object".into(), json!("analysis.report"));
    }
    v
}

/// A job as the API shows it; with `full`, its reports and summary once ended.
fn job_object(job: &Job, full: bool) -> Value {
    use std::sync::atomic::Ordering::Relaxed;
    let p = &job.progress;
    let (total, done, running) = (
        p.total.load(Relaxed),
        p.done.load(Relaxed),
        p.running.load(Relaxed),
    );
    let ended: Option<&(Vec<Report>, Summary)> = job.result.get();
    let mut v = json!({
        "id": job.id,
        "object": "analysis",
        "created_at": job.created_ms / 1000,
        "status": if ended.is_some() { "completed" } else if done + running == 0 { "queued" } else { "in_progress" },
        "progress": p.line(),
        "counts": {
            "total": total,
            "queued": total.saturating_sub(done + running),
            "running": running,
            "done": done,
            "refused": p.refused.load(Relaxed),
        },
    });
    if full && let Some((reports, summary)) = ended {
        v["summary"] = serde_json::to_value(summary).unwrap_or(Value::Null);
        v["reports"] = Value::Array(reports.iter().map(report_object).collect());
    }
    v
}
