use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::Uri;
use axum::routing::post;
use bytes::Bytes;
use parking_lot::Mutex;
use sluice_core::{ChatRequest, RequestId, UpstreamReply};

use super::*;
use crate::RateReport;

/// What the capturing upstream saw: (path and query, api-key, authorization).
type Seen = Arc<Mutex<Vec<(String, Option<String>, Option<String>)>>>;

const ANSWER: &str = r#"{"id":"c","object":"chat.completion","model":"gpt-4o-2024-08-06","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}],"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop","content_filter_results":{}}],"usage":{"prompt_tokens":1200,"completion_tokens":3,"total_tokens":1203,"prompt_tokens_details":{"cached_tokens":1024}}}"#;

async fn capture(
    State(seen): State<Seen>,
    uri: Uri,
    headers: HeaderMap,
    _body: Bytes,
) -> axum::response::Response {
    let h = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    seen.lock()
        .push((uri.to_string(), h("api-key"), h("authorization")));
    axum::response::IntoResponse::into_response(([("content-type", "application/json")], ANSWER))
}

async fn upstream() -> (String, Seen) {
    let seen = Seen::default();
    let app = Router::new()
        .fallback(post(capture))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

fn settings(base: &str, params: AzureParams, key: Option<&str>) -> AzureSettings {
    AzureSettings {
        base_url: base.to_string(),
        params,
        api_key: key.map(str::to_string),
        headers: Vec::new(),
        http: HttpSettings::default(),
    }
}

fn call(model: &str) -> UpstreamCall {
    let request =
        ChatRequest::parse(br#"{"model":"chat","messages":[{"role":"user","content":"hi"}]}"#)
            .unwrap();
    UpstreamCall {
        request: Arc::new(request),
        model: Arc::from(model),
        request_id: RequestId::from_client_or_generate(Some("req-1")),
        deadline: None,
        rate_report: RateReport::default(),
        trace: None,
    }
}

#[tokio::test]
async fn a_deployment_url_carries_the_deployment_and_version_and_the_key_as_api_key() {
    let (base, seen) = upstream().await;
    let az = Azure::new("az", settings(&base, AzureParams::default(), Some("k-1"))).unwrap();
    let UpstreamResponse::Complete(c) = az.call(call("gpt-4o prod")).await.unwrap() else {
        panic!("a complete answer")
    };
    let u = c.usage.unwrap();
    assert_eq!((u.prompt_tokens, u.cached_tokens), (1200, 1024));
    az.call(call("gpt-4o prod")).await.unwrap();
    az.call(call("mini")).await.unwrap();
    let seen = seen.lock().clone();
    assert_eq!(
        seen[0],
        (
            "/openai/deployments/gpt-4o%20prod/chat/completions?api-version=2024-10-21".into(),
            Some("k-1".into()),
            None
        )
    );
    assert_eq!(seen[1].0, seen[0].0);
    assert_eq!(
        seen[2].0,
        "/openai/deployments/mini/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(az.endpoints.read().len(), 2, "one endpoint a deployment");
}

#[tokio::test]
async fn the_v1_shape_has_one_url_and_a_token_env_goes_as_a_bearer() {
    let (base, seen) = upstream().await;
    let params = AzureParams {
        api: AzureApi::V1,
        token_env: Some("AZ_TOKEN".into()),
        ..AzureParams::default()
    };
    let az = Azure::new("az", settings(&base, params, Some("tok"))).unwrap();
    az.call(call("a")).await.unwrap();
    az.call(call("b")).await.unwrap();
    let seen = seen.lock().clone();
    for s in &seen {
        assert_eq!(
            s,
            &(
                "/openai/v1/chat/completions".to_string(),
                None,
                Some("Bearer tok".into())
            )
        );
    }
}

fn token_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-azure-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("token")
}

#[tokio::test]
async fn a_token_file_is_read_again_after_it_changes() {
    let path = token_path("rotate");
    std::fs::write(&path, "first-token\n").unwrap();
    let (base, seen) = upstream().await;
    let params = AzureParams {
        token_file: Some(path.clone()),
        ..AzureParams::default()
    };
    let az = Azure::new("az", settings(&base, params, None)).unwrap();
    az.call(call("d")).await.unwrap();
    std::fs::write(&path, "second-token-longer\n").unwrap();
    // Within the recheck interval the file is not looked at again.
    let t = az.token.as_ref().unwrap();
    let now = Instant::now();
    assert_eq!(&*t.bearer(now), "Bearer first-token");
    assert_eq!(&*t.bearer(now + RECHECK), "Bearer second-token-longer");
    // A file that can no longer be read keeps the last token.
    std::fs::remove_file(&path).unwrap();
    assert_eq!(&*t.bearer(now + RECHECK * 3), "Bearer second-token-longer");
    tokio::time::sleep(Duration::ZERO).await;
    az.call(call("d")).await.unwrap();
    let seen = seen.lock().clone();
    assert_eq!(seen[0].2.as_deref(), Some("Bearer first-token"));
    assert_eq!(seen[0].1, None, "no api-key");
    assert_eq!(seen[1].2.as_deref(), Some("Bearer second-token-longer"));
}

#[test]
fn a_token_file_that_holds_no_token_is_refused() {
    let path = token_path("empty");
    std::fs::write(&path, "  \n").unwrap();
    assert!(check_token_file(&path).unwrap_err().contains("no token"));
    std::fs::write(&path, "two\nlines").unwrap();
    assert!(check_token_file(&path).is_err());
    assert!(check_token_file(&path.with_extension("missing")).is_err());
    std::fs::write(&path, "eyJ0eXAi.x-y_z\n").unwrap();
    assert!(check_token_file(&path).is_ok());
    std::fs::write(&path, "a".repeat(70_000)).unwrap();
    assert!(check_token_file(&path).unwrap_err().contains("longer than"));
    let dev_zero = std::path::Path::new("/dev/zero");
    assert!(
        check_token_file(dev_zero)
            .unwrap_err()
            .contains("regular file")
    );
}

#[test]
fn the_credential_is_required_once() {
    let none = AzureParams::default().problems(false);
    assert_eq!(none.len(), 1);
    assert_eq!(none[0].0, "api_key_env");
    assert!(AzureParams::default().problems(true).is_empty());
    let two = AzureParams {
        token_file: Some("/x".into()),
        ..AzureParams::default()
    };
    assert!(two.problems(false).is_empty());
    assert_eq!(two.problems(true)[0].0, "token_env");
    let bad = AzureParams {
        api_version: Some("2024/10".into()),
        ..AzureParams::default()
    };
    assert_eq!(bad.problems(true)[0].0, "api_version");
}

#[test]
fn only_the_content_filter_refusal_is_content_filtered() {
    let reply = |status: u16, body: &str| {
        GatewayError::rejected(UpstreamReply {
            status,
            body: Bytes::from(body.to_string()),
            content_type: Some("application/json".into()),
            retry_after: None,
        })
    };
    let filter = r#"{"error":{"code":"content_filter","message":"filtered","status":400}}"#;
    let e = filtered(reply(400, filter), "az");
    assert_eq!(e.kind, ErrorKind::ContentFiltered);
    assert_eq!(e.status(), 400);
    assert_eq!(e.upstream.unwrap().body, Bytes::from(filter));
    assert!(!e.kind.retryable());
    let other = r#"{"error":{"code":"invalid_request","message":"x"}}"#;
    assert_eq!(
        filtered(reply(400, other), "az").kind,
        ErrorKind::UpstreamRejected
    );
    assert_eq!(
        filtered(reply(429, filter), "az").kind,
        ErrorKind::UpstreamRejected
    );
    assert_eq!(
        filtered(reply(400, "not json"), "az").kind,
        ErrorKind::UpstreamRejected
    );
}
