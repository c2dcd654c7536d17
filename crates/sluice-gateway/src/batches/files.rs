//! `/v1/files`: OpenAI's Files API for batch input, and the output and error files of
//! jobs (made from their items when read, so a crash cannot leave one half-written).

use axum::Json;
use axum::extract::{Multipart, Path, Query, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, header};
use serde::Deserialize;
use serde_json::json;
use sluice_batch::{NewFile, input, objects};
use sluice_core::{ErrorKind, GatewayError};

use super::api::{Scope, failed, invalid, not_found, page, page_size, stored};
use super::{Served, ms, now_ms};
use crate::walk::ingress::piece;

/// The most bad lines an upload's error message lists one by one.
const LISTED_LINE_ERRORS: usize = 20;

/// `POST /v1/files`: a `batch` file of request lines, checked line by line; a file with any
/// bad line is refused whole, every bad line named.
pub async fn upload(
    State(served): State<Served>,
    headers: HeaderMap,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Response {
    let scope = match Scope::of(&served, &headers) {
        Ok(s) => s,
        Err(e) => return failed(e),
    };
    let multipart = match multipart {
        Ok(m) => m,
        Err(e) => {
            return failed(invalid(
                format!("the upload must be multipart/form-data with `file` and `purpose`: {e}"),
                "file",
            ));
        }
    };
    match take_file(&scope, multipart).await {
        Ok(file) => {
            let object = file_object(&file);
            match scope.batches.jobs.add_file(&file).await {
                Ok(()) => Json(object).into_response(),
                Err(e) => failed(stored(e)),
            }
        }
        Err(e) => failed(e),
    }
}

fn file_object(f: &NewFile) -> serde_json::Value {
    objects::file(&sluice_batch::StoredFile {
        id: f.id.clone(),
        tenant: f.tenant.clone(),
        filename: f.filename.clone(),
        purpose: f.purpose.clone(),
        bytes: f.content.len() as u64,
        created_ms: f.created_ms,
        expires_ms: f.expires_ms,
    })
}

async fn take_file(scope: &Scope, mut multipart: Multipart) -> Result<NewFile, GatewayError> {
    let limit = scope.batches.settings.max_file_bytes;
    let stall = scope.gw.body_stall;
    let (mut purpose, mut file) = (None, None);
    loop {
        let field = piece(stall, multipart.next_field())
            .await?
            .map_err(|e| invalid(format!("the upload could not be read: {e}"), "file"))?;
        let Some(mut field) = field else { break };
        match field.name() {
            Some("purpose") => {
                let text = piece(stall, field.text())
                    .await?
                    .map_err(|e| invalid(format!("`purpose` could not be read: {e}"), "purpose"))?;
                purpose = Some(text);
            }
            Some("file") => {
                let name = field.file_name().unwrap_or("upload.jsonl").to_string();
                let mut bytes = Vec::new();
                while let Some(chunk) = piece(stall, field.chunk())
                    .await?
                    .map_err(|e| invalid(format!("`file` could not be read: {e}"), "file"))?
                {
                    bytes.extend_from_slice(&chunk);
                    if bytes.len() as u64 > limit {
                        return Err(GatewayError::new(
                            ErrorKind::PayloadTooLarge,
                            format!("the file is larger than the limit of {limit} bytes"),
                        )
                        .with_param("file"));
                    }
                }
                file = Some((name, bytes));
            }
            _ => {}
        }
    }
    match purpose.as_deref() {
        Some("batch") => {}
        None => return Err(invalid("`purpose` is required: `batch`", "purpose")),
        Some(p) => {
            return Err(invalid(
                format!("purpose `{p}` is not supported; sluice keeps `batch` files"),
                "purpose",
            ));
        }
    }
    let Some((filename, bytes)) = file else {
        return Err(invalid("`file` is required", "file"));
    };
    let content = String::from_utf8(bytes)
        .map_err(|e| invalid(format!("the file is not UTF-8 text: {e}"), "file"))?;
    if let Err(errors) = input::check(&content, sluice_batch::Limits::default()) {
        let listed: Vec<String> = errors
            .iter()
            .take(LISTED_LINE_ERRORS)
            .map(ToString::to_string)
            .collect();
        let more = errors.len().saturating_sub(LISTED_LINE_ERRORS);
        let tail = if more > 0 {
            format!("; and {more} more")
        } else {
            String::new()
        };
        let param = match errors.as_slice() {
            [one] => one
                .param
                .as_ref()
                .map_or_else(|| "file".to_string(), |p| format!("line {}: {p}", one.line)),
            _ => "file".to_string(),
        };
        return Err(GatewayError::new(
            ErrorKind::InvalidRequest,
            format!(
                "the file has {} bad line{}, nothing of it was kept: {}{tail}",
                errors.len(),
                if errors.len() == 1 { "" } else { "s" },
                listed.join("; ")
            ),
        )
        .with_param(param));
    }
    let created_ms = now_ms();
    Ok(NewFile {
        id: format!("file-{}", uuid::Uuid::now_v7().simple()),
        tenant: scope.tenant.clone(),
        filename,
        purpose: "batch".into(),
        content,
        created_ms,
        expires_ms: created_ms.saturating_add(ms(scope.batches.settings.keep)),
    })
}

/// `GET /v1/files/{id}`.
pub async fn retrieve(
    State(served): State<Served>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let scope = match Scope::of(&served, &headers) {
        Ok(s) => s,
        Err(e) => return failed(e),
    };
    let found = async {
        if let Some((batch, errors)) = objects::result_file(&id) {
            let b = scope.batch(batch).await?;
            let content = scope.result_content(&b, errors).await?;
            let keep = ms(scope.batches.settings.keep);
            return Ok(objects::result_file_object(
                &b,
                errors,
                content.len() as u64,
                keep,
            ));
        }
        match scope
            .batches
            .jobs
            .file(&scope.tenant, &id)
            .await
            .map_err(stored)?
        {
            Some(f) => Ok(objects::file(&f)),
            None => Err(not_found("file", &id)),
        }
    };
    match found.await {
        Ok(v) => Json(v).into_response(),
        Err(e) => failed(e),
    }
}

/// `GET /v1/files/{id}/content`: the file's bytes as uploaded, or a job's output or error
/// file (one line per item, in input order).
pub async fn content(
    State(served): State<Served>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let scope = match Scope::of(&served, &headers) {
        Ok(s) => s,
        Err(e) => return failed(e),
    };
    let found = async {
        if let Some((batch, errors)) = objects::result_file(&id) {
            let b = scope.batch(batch).await?;
            return scope.result_content(&b, errors).await;
        }
        scope
            .batches
            .jobs
            .file_content(&scope.tenant, &id)
            .await
            .map_err(stored)?
            .ok_or_else(|| not_found("file", &id))
    };
    match found.await {
        Ok(text) => {
            let mut resp = text.into_response();
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/jsonl"),
            );
            resp
        }
        Err(e) => failed(e),
    }
}

/// `DELETE /v1/files/{id}`: an uploaded file (a job made from it keeps its items). A job's
/// output goes with the job, after the retention.
pub async fn remove(
    State(served): State<Served>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let scope = match Scope::of(&served, &headers) {
        Ok(s) => s,
        Err(e) => return failed(e),
    };
    if objects::result_file(&id).is_some() {
        return failed(invalid(
            format!("`{id}` is a job's output: it is deleted with its job, after the retention"),
            "file_id",
        ));
    }
    match scope.batches.jobs.delete_file(&scope.tenant, &id).await {
        Ok(true) => Json(json!({"id": id, "object": "file", "deleted": true})).into_response(),
        Ok(false) => failed(not_found("file", &id)),
        Err(e) => failed(stored(e)),
    }
}

/// `GET /v1/files` query.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    after: Option<String>,
    limit: Option<u32>,
    purpose: Option<String>,
}

/// `GET /v1/files`: the tenant's uploaded files, newest first, by pages.
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
    let limit = match page_size(q.as_ref().map(|q| q.limit).map_err(|_| ()), 10_000, 10_000) {
        Ok(n) => n,
        Err(e) => return failed(e),
    };
    let q = q.unwrap_or_default();
    if q.purpose.as_deref().is_some_and(|p| p != "batch") {
        return Json(page(Vec::new(), limit)).into_response();
    }
    match scope
        .batches
        .jobs
        .files(&scope.tenant, q.after.as_deref(), limit + 1)
        .await
    {
        Ok(files) => Json(page(files.iter().map(objects::file).collect(), limit)).into_response(),
        Err(e) => failed(stored(e)),
    }
}
