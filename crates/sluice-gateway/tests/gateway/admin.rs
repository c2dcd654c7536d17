//! The read-only endpoints and OpenAI-shaped answers for unknown routes.

use serde_json::Value;

use crate::support::{body, start};

#[tokio::test]
async fn models_health_and_readiness() {
    let gw = start().await;
    let v: Value = gw
        .client
        .get(format!("{}/v1/models", gw.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["object"], "list");
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"ok") && ids.contains(&"claude"), "{ids:?}");
    assert_eq!(
        gw.client
            .get(format!("{}/healthz", gw.url))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        gw.client
            .get(format!("{}/readyz", gw.url))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

#[tokio::test]
async fn metrics_and_latency_report_read_the_call_records() {
    let gw = start().await;
    for _ in 0..5 {
        let _ = gw.chat(body("ok", false)).await.text().await.unwrap();
    }
    let _ = gw.chat(body("nope", false)).await.text().await.unwrap();
    let page = gw
        .client
        .get(format!("{}/metrics", gw.url))
        .send()
        .await
        .unwrap();
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text; version=1.0.0")
    );
    let page = page.text().await.unwrap();
    assert!(
        page.contains(
            r#"sluice_requests_total{group="ok",upstream="fake-ok",status="200",code="ok"} 5"#
        ),
        "{page}"
    );
    assert!(
        page.contains(
            r#"sluice_requests_total{group="-",upstream="-",status="404",code="model_not_found"} 1"#
        ),
        "{page}"
    );
    assert!(page.contains(r#"sluice_upstream_latency_window_seconds{group="ok",upstream="fake-ok",mode="complete",phase="ttfb",quantile="0.999"}"#));
    assert!(
        page.contains(
            r#"sluice_upstream_ttfb_seconds_bucket{le="1.19",group="ok",upstream="fake-ok",mode="complete"}"#
        ),
        "fine buckets:\n{page}"
    );
    assert!(page.trim_end().ends_with("# EOF"), "an OpenMetrics page");
    let report: Value = gw
        .client
        .get(format!("{}/admin/latency", gw.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(report["window_seconds"], 60.0);
    let up = &report["upstreams"][0];
    assert_eq!(up["group"], "ok");
    assert_eq!(up["ttfb"]["count"], 5);
    for k in ["p50", "p90", "p95", "p99", "p999", "max"] {
        assert!(up["total"][k].as_f64().unwrap() > 0.0, "{k}: {up}");
    }
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_in_openai_shape() {
    let gw = start().await;
    let resp = gw
        .client
        .get(format!("{}/v1/nothing", gw.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["code"], "route_not_found");
    let resp = gw
        .client
        .get(format!("{}/v1/chat/completions", gw.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["code"], "method_not_allowed");
}
