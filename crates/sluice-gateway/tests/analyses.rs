//! Document reviews through the walk, in virtual time: a review the gateway refuses unsent
//! (the tenant's rate quota, for now) waits its `Retry-After` and is sent again while the
//! document's deadline allows, so accepted work is slowed, not dropped; past the deadline it
//! is reported as failed with the refusal's reason.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt;
use serde_json::Value;
use sluice_analysis::{Analyzer, Options};
use sluice_economy::Limits;
use sluice_gateway::analyses::AnalysisSettings;
use tokio::time::Instant;
use tower::ServiceExt;

use crate::scripted::rig_with;

const CONTRACT: &str = "1. This Agreement shall automatically renew for successive periods.\n\n\
2. In no event shall the Supplier be liable for any loss of profits.\n\n\
3. Late payments bear interest at 2% per month.\n";

/// A verdict as the model writes it.
const VERDICT: &str = r#"{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"{\"risk\":\"high\",\"quote\":\"automatically renew\",\"reason\":\"It renews unless cancelled.\"}"}}]}"#;

const BOUNDARY: &str = "sluice-review-boundary";

/// A gateway where tenant `acme` may make two requests a minute, analysing with `deadline`.
fn quota_rig(deadline: Duration) -> scripted::Rig {
    let engine =
        sluice_rules::Engine::compile(sluice_rules::shipped::contract_risks().unwrap()).unwrap();
    let options = Options {
        deadline: Some(deadline),
        model: "chat".into(),
        ..Options::default()
    };
    let settings = AnalysisSettings {
        batch_lane: 1,
        concurrency: 2,
        max_documents: 10,
        max_upload_bytes: 1 << 20,
    };
    let limits = Limits {
        rpm: Some(2),
        ..Limits::default()
    };
    let r = rig_with(
        |b| b.tenant_limits("acme", limits),
        |app| app.analyses(Analyzer::new(Arc::new(engine), options), settings, None),
    );
    *r.a.answer.lock() = Some(bytes::Bytes::from_static(VERDICT.as_bytes()));
    r
}

async fn analyse(r: &scripted::Rig) -> Value {
    let body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"msa.txt\"\r\n\r\n{CONTRACT}\r\n--{BOUNDARY}--\r\n"
    );
    let req = http::Request::post("/v1/analyses")
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .header("x-sluice-tenant", "acme")
        .body(Body::from(body))
        .unwrap();
    let resp = r.router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_review_refused_by_the_quota_waits_and_is_sent_again() {
    let r = quota_rig(Duration::from_secs(120));
    let start = Instant::now();
    let report = analyse(&r).await;
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 3, "{report}");
    for f in findings {
        assert_eq!(f["review"]["status"], "reviewed", "{f}");
    }
    assert_eq!(report["calls"]["failed"], 0, "{report}");
    assert_eq!(r.a.calls(), 3, "each review reached the upstream once");
    // Two a minute: the third waited for the quota's next window.
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(30) && waited < Duration::from_secs(120),
        "{waited:?}"
    );
    assert_eq!(report["on_time"], true);
}

#[tokio::test(start_paused = true)]
async fn past_the_deadline_a_refused_review_fails_with_the_refusal() {
    let r = quota_rig(Duration::from_secs(10));
    let report = analyse(&r).await;
    let failed: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["review"]["status"] == "failed")
        .map(|f| f["review"]["why"].as_str().unwrap())
        .collect();
    assert_eq!(failed.len(), 1, "{report}");
    for why in failed {
        assert_eq!(why, "429: refused by the gateway (quota_exceeded)");
    }
    assert_eq!(r.a.calls(), 2);
    assert_eq!(report["calls"]["answered"], 2);
}
