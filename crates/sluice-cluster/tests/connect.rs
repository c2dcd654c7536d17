//! Connecting: a URL that does not parse and a Redis that does not answer are errors that
//! name the cause, at start, within the connect timeout.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use sluice_cluster::{BudgetPolicy, Cluster, ClusterError, Settings};

fn settings(url: &str) -> Settings {
    Settings {
        url: url.into(),
        url_from: "SLUICE_REDIS_URL".into(),
        key_prefix: "sluice:".into(),
        connect_timeout: Duration::from_millis(500),
        command_timeout: Duration::from_millis(500),
        connections: 2,
        budgets: BudgetPolicy::FailClosed,
        per_instance_share: 0.25,
        hold_ttl: Duration::from_secs(60),
        probe_every: Duration::from_millis(500),
    }
}

#[tokio::test]
async fn a_url_that_does_not_parse_is_named() {
    let e = Cluster::connect(settings("http//nowhere"))
        .await
        .unwrap_err();
    assert!(matches!(e, ClusterError::Url { .. }), "{e:?}");
    assert!(e.to_string().contains("$SLUICE_REDIS_URL"), "{e}");
}

#[tokio::test]
async fn a_redis_that_does_not_answer_is_named_at_start() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = Cluster::connect(settings(&format!("redis://127.0.0.1:{port}")))
        .await
        .unwrap_err();
    assert!(matches!(e, ClusterError::Unreachable { .. }), "{e:?}");
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
}
