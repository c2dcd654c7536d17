//! `POST /v1/batches`: a job of every line of an uploaded file, checked whole before
//! anything is kept (each line's endpoint, model and key, the queue's room, the metadata).

use super::*;

/// `POST /v1/batches` body.
#[derive(Debug, Deserialize)]
pub struct CreateBody {
    input_file_id: Option<String>,
    endpoint: Option<String>,
    completion_window: Option<String>,
    metadata: Option<Value>,
}

/// `POST /v1/batches`: a job of every line of an uploaded file; refused whole (and nothing
/// kept) when a line calls another endpoint or a model the key may not use, or when the
/// queue has no room for it.
pub async fn create(
    State(served): State<Served>,
    headers: HeaderMap,
    body: Result<Json<CreateBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let scope = match Scope::of(&served, &headers) {
        Ok(s) => s,
        Err(e) => return failed(e),
    };
    let Json(body) = match body {
        Ok(b) => b,
        Err(e) => {
            return failed(invalid(
                format!("the body is not a batch request: {e}"),
                "body",
            ));
        }
    };
    match submit(&scope, body).await {
        Ok(b) => match describe(&scope.gw, &scope.batches, &b).await {
            Ok(v) => {
                scope.batches.submitted(b.endpoint.into()).notify_one();
                Json(v).into_response()
            }
            Err(e) => failed(stored(e)),
        },
        Err(e) => failed(e),
    }
}

async fn submit(scope: &Scope, body: CreateBody) -> Result<StoredBatch, GatewayError> {
    let Some(file_id) = body.input_file_id else {
        return Err(invalid("`input_file_id` is required", "input_file_id"));
    };
    let endpoint = match body.endpoint.as_deref() {
        None => return Err(invalid("`endpoint` is required", "endpoint")),
        Some(e) => Endpoint::parse(e).ok_or_else(|| {
            invalid(
                format!(
                    "endpoint `{e}` is not one a batch can call: {}",
                    Endpoint::listed()
                ),
                "endpoint",
            )
        })?,
    };
    if endpoint == Endpoint::Analyses && !scope.analyses {
        return Err(invalid(
            "document analysis is off on this gateway: `[analysis] enabled = true` serves it",
            "endpoint",
        ));
    }
    match body.completion_window.as_deref() {
        Some(WINDOW) => {}
        _ => {
            return Err(invalid(
                "`completion_window` must be `24h`",
                "completion_window",
            ));
        }
    }
    let metadata = metadata(body.metadata)?;
    let jobs = &scope.batches.jobs;
    let content = jobs
        .file_content(&scope.tenant, &file_id)
        .await
        .map_err(stored)?
        .ok_or_else(|| not_found("file", &file_id).with_param("input_file_id"))?;
    let lines = input::check(&content, sluice_batch::Limits::default()).map_err(|errors| {
        invalid(
            format!(
                "file `{file_id}` no longer reads as a batch file: {}",
                errors.first().map(ToString::to_string).unwrap_or_default()
            ),
            "input_file_id",
        )
    })?;
    let mut faults = Vec::new();
    for line in &lines {
        if line.endpoint != endpoint {
            faults.push(format!(
                "line {}: url `{}` is not the batch's endpoint `{}`",
                line.number,
                line.endpoint.path(),
                endpoint.path()
            ));
        } else if let Some(model) = model_of(&line.body)
            && let Err(e) = scope.caller.may_use(&model)
        {
            faults.push(format!("line {}: {}", line.number, e.message));
        }
    }
    if !faults.is_empty() {
        let n = faults.len();
        faults.truncate(20);
        return Err(invalid(
            format!(
                "{n} line{} of `{file_id}` cannot run in this batch: {}",
                if n == 1 { "" } else { "s" },
                faults.join("; ")
            ),
            "input_file_id",
        ));
    }
    enqueue(scope, endpoint, file_id, &lines, metadata).await
}

/// Keeps a job of `lines` (of file `file_id`, every one calling `endpoint`) for the caller,
/// when the queue has room for it.
pub(crate) async fn enqueue(
    scope: &Scope,
    endpoint: Endpoint,
    file_id: String,
    lines: &[sluice_batch::Line],
    metadata: Option<String>,
) -> Result<StoredBatch, GatewayError> {
    let jobs = &scope.batches.jobs;
    let queued = jobs.queued_items().await.map_err(stored)?;
    let room = scope
        .batches
        .settings
        .max_queued_items
        .saturating_sub(queued);
    if lines.len() as u64 > room {
        return Err(GatewayError::new(
            ErrorKind::Overloaded,
            format!(
                "the batch queue holds {queued} items of at most {}: a job of {} does not fit; \
                 try again later",
                scope.batches.settings.max_queued_items,
                lines.len()
            ),
        )
        .with_retry_after(FULL_RETRY_AFTER));
    }
    let key = scope.caller.key.as_ref().map(|k| k.spec.name.clone());
    let key_sha256 = scope.key_sha256.clone();
    let created_ms = now_ms();
    let new = NewBatch {
        id: format!("batch_{}", uuid::Uuid::now_v7().simple()),
        tenant: scope.tenant.clone(),
        api_key: key,
        key_sha256,
        endpoint,
        input_file_id: file_id,
        created_ms,
        expires_ms: created_ms.saturating_add(WINDOW_MS),
        metadata,
    };
    jobs.add_batch(&new, lines).await.map_err(stored)?;
    scope.batch(&new.id).await
}

/// The `model` a line's body names.
fn model_of(body: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Model {
        model: Option<String>,
    }
    serde_json::from_str::<Model>(body)
        .ok()
        .and_then(|m| m.model)
}

/// OpenAI's metadata: at most 16 string pairs, keys up to 64 characters, values up to 512.
fn metadata(m: Option<Value>) -> Result<Option<String>, GatewayError> {
    let Some(m) = m.filter(|m| !m.is_null()) else {
        return Ok(None);
    };
    let Some(map) = m.as_object() else {
        return Err(invalid(
            "`metadata` must be an object of strings",
            "metadata",
        ));
    };
    if map.len() > 16 {
        return Err(invalid("`metadata` holds at most 16 pairs", "metadata"));
    }
    for (k, v) in map {
        let fine = k.chars().count() <= 64 && v.as_str().is_some_and(|s| s.chars().count() <= 512);
        if !fine {
            return Err(invalid(
                format!("metadata `{k}`: keys are up to 64 characters, values strings up to 512"),
                "metadata",
            ));
        }
    }
    Ok(Some(m.to_string()))
}
