//! OpenAI's `file` and `batch` objects and the output file's lines, written from what the
//! store keeps; the job's progress goes beside OpenAI's fields, under `sluice`.

use serde_json::{Map, Value, json};

use crate::counts::Counts;
use crate::progress::Progress;
use crate::state::Status;
use crate::store::{ItemResult, StoredBatch, StoredFile};

/// Seconds from milliseconds, as OpenAI's timestamps are.
fn secs(ms: i64) -> i64 {
    ms.div_euclid(1000)
}

/// The id of job `batch`'s output file (its 2xx answers).
pub fn output_file_id(batch: &str) -> String {
    format!("file-{batch}-output")
}

/// The id of job `batch`'s error file (every other ending).
pub fn error_file_id(batch: &str) -> String {
    format!("file-{batch}-errors")
}

/// The job an output or error file id names, and whether it is the error file.
pub fn result_file(id: &str) -> Option<(&str, bool)> {
    let rest = id.strip_prefix("file-")?;
    rest.strip_suffix("-output")
        .map(|b| (b, false))
        .or_else(|| rest.strip_suffix("-errors").map(|b| (b, true)))
        .filter(|(b, _)| b.starts_with("batch_"))
}

/// A `file` object.
pub fn file(f: &StoredFile) -> Value {
    json!({
        "id": f.id,
        "object": "file",
        "bytes": f.bytes,
        "created_at": secs(f.created_ms),
        "expires_at": secs(f.expires_ms),
        "filename": f.filename,
        "purpose": f.purpose,
        "status": "processed",
        "status_details": null,
    })
}

/// The `file` object of a job's output or error file holding `bytes`, made when the job
/// ended.
pub fn result_file_object(b: &StoredBatch, errors: bool, bytes: u64, keep_ms: i64) -> Value {
    let made = b.ended.map_or(b.created_ms, |(_, at)| at);
    json!({
        "id": if errors { error_file_id(&b.id) } else { output_file_id(&b.id) },
        "object": "file",
        "bytes": bytes,
        "created_at": secs(made),
        "expires_at": secs(made + keep_ms),
        "filename": if errors { format!("{}_errors.jsonl", b.id) } else { format!("{}_output.jsonl", b.id) },
        "purpose": "batch_output",
        "status": "processed",
        "status_details": null,
    })
}

/// A `batch` object for `b`, whose status is `status`, with its `counts` and `progress`.
pub fn batch(b: &StoredBatch, status: Status, counts: &Counts, progress: &Progress) -> Value {
    let ended = |s: Status| b.ended.filter(|(e, _)| *e == s).map(|(_, at)| secs(at));
    let failed = counts.failed + counts.cancelled + counts.expired;
    let ended_any = b.ended.map(|(_, at)| secs(at));
    let metadata: Value = b
        .metadata
        .as_deref()
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or(Value::Null);
    let mut o = Map::new();
    o.insert("id".into(), json!(b.id));
    o.insert("object".into(), json!("batch"));
    o.insert("endpoint".into(), json!(b.endpoint.path()));
    o.insert("errors".into(), Value::Null);
    o.insert("input_file_id".into(), json!(b.input_file_id));
    o.insert("completion_window".into(), json!("24h"));
    o.insert("status".into(), json!(status.as_str()));
    let has = |n: u64| b.ended.is_some() && n > 0;
    o.insert(
        "output_file_id".into(),
        json!(has(counts.done).then(|| output_file_id(&b.id))),
    );
    o.insert(
        "error_file_id".into(),
        json!(has(failed).then(|| error_file_id(&b.id))),
    );
    o.insert("created_at".into(), json!(secs(b.created_ms)));
    o.insert("in_progress_at".into(), json!(secs(b.created_ms)));
    o.insert("expires_at".into(), json!(secs(b.expires_ms)));
    o.insert(
        "finalizing_at".into(),
        json!(ended_any.filter(|_| status == Status::Completed)),
    );
    o.insert("completed_at".into(), json!(ended(Status::Completed)));
    o.insert("failed_at".into(), Value::Null);
    o.insert("expired_at".into(), json!(ended(Status::Expired)));
    o.insert("cancelling_at".into(), json!(b.cancel_ms.map(secs)));
    o.insert("cancelled_at".into(), json!(ended(Status::Cancelled)));
    o.insert(
        "request_counts".into(),
        json!({"total": b.total, "completed": counts.done, "failed": failed}),
    );
    o.insert(
        "usage".into(),
        json!({
            "input_tokens": counts.prompt_tokens,
            "input_tokens_details": {"cached_tokens": counts.cached_tokens},
            "output_tokens": counts.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": counts.prompt_tokens + counts.completion_tokens,
        }),
    );
    o.insert("metadata".into(), metadata);
    o.insert("sluice".into(), json!(progress));
    Value::Object(o)
}

/// One line of a job's output or error file.
pub fn result_line(batch: &str, r: &ItemResult) -> String {
    let id = format!(
        "batch_req_{}_{}",
        batch.trim_start_matches("batch_"),
        r.line
    );
    let response = match (r.status_code, r.response.as_deref()) {
        (Some(status), Some(body)) => {
            let body: Value = serde_json::from_str(body).unwrap_or_else(|_| json!(body));
            json!({"status_code": status, "request_id": r.request_id, "body": body})
        }
        _ => Value::Null,
    };
    let error = match (&r.error_code, r.state.as_str()) {
        (Some(code), _) => {
            json!({"code": code, "message": r.error_message.as_deref().unwrap_or_default()})
        }
        (None, "cancelled") => {
            json!({"code": "batch_cancelled", "message": "the batch was cancelled before this request was sent"})
        }
        (None, "expired") => {
            json!({"code": "batch_expired", "message": "the batch's completion window closed before this request was sent"})
        }
        _ => Value::Null,
    };
    let mut line =
        json!({"id": id, "custom_id": r.custom_id, "response": response, "error": error})
            .to_string();
    line.push('\n');
    line
}

/// A job's output or error file, its lines in input order.
pub fn result_content(batch: &str, results: &[ItemResult]) -> String {
    results.iter().map(|r| result_line(batch, r)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_file_ids_name_their_job() {
        assert_eq!(
            result_file(&output_file_id("batch_1")),
            Some(("batch_1", false))
        );
        assert_eq!(
            result_file(&error_file_id("batch_1")),
            Some(("batch_1", true))
        );
        assert_eq!(result_file("file-abc"), None);
        assert_eq!(result_file("file-x-output"), None);
    }

    #[test]
    fn lines_carry_the_answer_or_the_error() {
        let answered = ItemResult {
            line: 3,
            custom_id: "doc-3".into(),
            state: "done".into(),
            status_code: Some(200),
            response: Some(r#"{"id":"c1"}"#.into()),
            error_code: None,
            error_message: None,
            request_id: Some("req-1".into()),
        };
        let v: Value = serde_json::from_str(&result_line("batch_ab", &answered)).unwrap();
        assert_eq!(v["id"], "batch_req_ab_3");
        assert_eq!(v["custom_id"], "doc-3");
        assert_eq!(v["response"]["status_code"], 200);
        assert_eq!(v["response"]["body"]["id"], "c1");
        assert_eq!(v["error"], Value::Null);
        let expired = ItemResult {
            state: "expired".into(),
            status_code: None,
            response: None,
            request_id: None,
            ..answered
        };
        let v: Value = serde_json::from_str(&result_line("batch_ab", &expired)).unwrap();
        assert_eq!(v["response"], Value::Null);
        assert_eq!(v["error"]["code"], "batch_expired");
    }
}
