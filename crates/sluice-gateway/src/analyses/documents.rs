//! A batch job's documents, as the batch runner hands them over: each item read back into
//! its file, analysed with its reviews in the batch lane (each review's ledger row keyed by
//! the item and clause, committed before the item ends), and ended with its report as the
//! item's answer, or with why the file could not be read.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::json;
use sluice_analysis::Reviewer;
use sluice_batch::input::document;
use sluice_batch::{Claimed, Ending, StoredBatch};
use sluice_core::ErrorKind;

use super::{Analyses, WalkReviewer, api};
use crate::batches::{Documents, Outcome};
use crate::walk::Walker;
use crate::walk::auth::Identity;

/// How long a document cut short (by a shutdown, or a bill that could not be written) waits
/// before it is queued again.
const AGAIN_AFTER: Duration = Duration::from_secs(1);

/// A document's failure, as the item's answer: OpenAI's error shape, with a 400.
fn refused(message: String, param: &str) -> Ending {
    let kind = ErrorKind::InvalidRequest;
    Ending::Answered {
        status: kind.status(),
        body: json!({"error": {
            "message": message,
            "type": kind.error_type(),
            "param": param,
            "code": kind.code(),
        }})
        .to_string(),
        request_id: String::new(),
        prompt_tokens: 0,
        cached_tokens: 0,
        completion_tokens: 0,
    }
}

impl Documents for Analyses {
    fn slots(&self) -> usize {
        self.settings.concurrency
    }

    fn run(
        self: Arc<Self>,
        walker: Walker,
        job: StoredBatch,
        item: Claimed,
        caller: Identity,
    ) -> BoxFuture<'static, Outcome> {
        async move {
            let up = match document::read(&item.body) {
                Ok(up) => up,
                Err(f) => return Outcome::Ended(refused(f.message, f.param), None),
            };
            let reviewer = Arc::new(
                WalkReviewer::new(walker, caller, self.settings.batch_lane)
                    .for_item(item.ledger_key()),
            );
            let dyn_reviewer: Arc<dyn Reviewer> = reviewer.clone();
            let merger = self.merger(&job.id);
            let analysed = self
                .analyzer
                .analyze(&up.filename, &up.bytes, &dyn_reviewer, &merger)
                .await;
            if reviewer.interrupted() {
                // Not a report to keep: the document is analysed again, here or elsewhere,
                // and its reviews already billed are not billed twice.
                return Outcome::Again {
                    wait: AGAIN_AFTER,
                    entry: None,
                };
            }
            let ending = match analysed {
                Ok(report) => Ending::Answered {
                    status: 200,
                    body: api::report_object(&report).to_string(),
                    request_id: item.ledger_key(),
                    prompt_tokens: report.calls.prompt_tokens,
                    cached_tokens: report.calls.cached_tokens,
                    completion_tokens: report.calls.completion_tokens,
                },
                Err(e) => refused(e.to_string(), "body.file_data"),
            };
            Outcome::Ended(ending, None)
        }
        .boxed()
    }
}
