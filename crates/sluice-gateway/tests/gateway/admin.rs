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
        .header(
            "accept",
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
        )
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
            r#"sluice_requests_total{lane="interactive",group="ok",upstream="fake-ok",status="200",code="ok"} 5"#
        ),
        "{page}"
    );
    assert!(
        page.contains(
            r#"sluice_requests_total{lane="interactive",group="-",upstream="-",status="404",code="model_not_found"} 1"#
        ),
        "{page}"
    );
    assert!(page.contains(r#"sluice_upstream_latency_window_p999_seconds{group="ok",upstream="fake-ok",mode="complete",phase="ttfb"}"#));
    assert!(
        page.contains(
            r#"sluice_upstream_ttfb_seconds_bucket{le="1.19",group="ok",upstream="fake-ok",mode="complete"}"#
        ),
        "fine buckets:\n{page}"
    );
    assert!(page.trim_end().ends_with("# EOF"), "an OpenMetrics page");
    assert!(page.contains("# TYPE sluice_requests counter"), "{page}");
    // A scraper that asks for the text format (or for nothing) gets 0.0.4.
    for accept in [Some("text/plain;version=0.0.4"), None] {
        let mut req = gw.client.get(format!("{}/metrics", gw.url));
        if let Some(a) = accept {
            req = req.header("accept", a);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(
            resp.headers()["content-type"],
            "text/plain; version=0.0.4; charset=utf-8"
        );
        let text = resp.text().await.unwrap();
        assert!(
            text.contains("# TYPE sluice_requests_total counter"),
            "{text}"
        );
        assert!(
            !text.contains("# EOF") && !text.contains("# UNIT"),
            "{text}"
        );
        assert!(
            text.contains(
                r#"sluice_request_ttfb_seconds_count{lane="interactive",group="ok",class="-"} 5"#
            ),
            "{text}"
        );
    }
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
    // What callers waited, apart from what the upstream's attempts took.
    let client = report["clients"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["group"] == "ok")
        .unwrap();
    assert_eq!(
        (&client["lane"], &client["group"], &client["class"]),
        (
            &Value::from("interactive"),
            &Value::from("ok"),
            &Value::from("-")
        )
    );
    assert_eq!(client["total"]["count"], 5);
    assert!(client["total"]["p99"].as_f64().unwrap() > 0.0, "{client}");
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
