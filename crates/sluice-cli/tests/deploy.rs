//! The Kubernetes manifests in `deploy/kubernetes` parse, and agree with sluice: the
//! ConfigMap's configuration passes `config check` with exactly the environment the
//! Deployment gives it (every variable from a key the example Secret has, its placeholders
//! refused until they are replaced), the probes name
//! paths a running gateway answers on the port it listens on, the config is mounted where
//! the container's arguments read it, and the pod's grace period covers the preStop pause,
//! the shutdown notice and the shutdown grace.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use sluice_config::gateway::{Secrets, check};

fn manifest(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/kubernetes")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test]
async fn the_kubernetes_manifests_agree_with_the_configuration_and_the_server() {
    let config_map = manifest("configmap.yaml");
    let deployment = manifest("deployment.yaml");
    let secret = manifest("secret.example.yaml");
    let service = manifest("service.yaml");
    assert_eq!(config_map["kind"], "ConfigMap");
    assert_eq!(deployment["kind"], "Deployment");
    assert_eq!(secret["kind"], "Secret");
    assert_eq!(service["kind"], "Service");

    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    // Every variable comes from a key of the Secret.
    let secret_keys = secret["stringData"].as_object().unwrap();
    let mut env = BTreeMap::new();
    for e in container["env"].as_array().unwrap() {
        let r = &e["valueFrom"]["secretKeyRef"];
        assert_eq!(r["name"], secret["metadata"]["name"], "{e}");
        let key = r["key"].as_str().unwrap();
        let value = secret_keys
            .get(key)
            .unwrap_or_else(|| panic!("the Secret has no key `{key}`"));
        env.insert(
            e["name"].as_str().unwrap().to_string(),
            value.as_str().unwrap().to_string(),
        );
    }
    // The example's placeholders are refused as they stand: no default credential runs.
    let toml = config_map["data"]["sluice.toml"].as_str().unwrap();
    let as_shipped = check(toml, &env, &[], Secrets::Required);
    assert!(
        as_shipped.config.is_none(),
        "the example Secret's placeholders were taken"
    );
    assert!(
        as_shipped.errors.to_string().contains("CHANGE-ME"),
        "{}",
        as_shipped.errors
    );
    // Each placeholder replaced by a secret of the operator's: the configuration passes with
    // exactly that environment, and uses all of it.
    for value in env.values_mut() {
        *value = value.replace("CHANGE-ME", "a-secret-of-the-operators-own");
    }
    let checked = check(toml, &env, &[], Secrets::Required);
    let cfg = checked
        .config
        .unwrap_or_else(|| panic!("the ConfigMap's sluice.toml: {}", checked.errors));
    for name in env.keys() {
        assert!(
            toml.contains(&format!("\"{name}\"")),
            "{name} is given but not read"
        );
    }
    assert!(
        cfg.cluster.enabled(),
        "the replicas share state through Redis"
    );

    // Mounted where the arguments read it.
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let mount = container["volumeMounts"][0]["mountPath"].as_str().unwrap();
    assert_eq!(args, ["serve", "--config", &format!("{mount}/sluice.toml")]);
    assert_eq!(
        pod["volumes"][0]["configMap"]["name"],
        config_map["metadata"]["name"]
    );

    // The port the probes and the Service use is the one sluice listens on.
    assert_eq!(
        container["ports"][0]["containerPort"].as_u64().unwrap(),
        u64::from(cfg.listen.port())
    );
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "http");
    assert_eq!(
        service["spec"]["selector"],
        deployment["spec"]["selector"]["matchLabels"]
    );

    // The grace period covers the preStop pause, the notice and the drain.
    let pre_stop = &container["lifecycle"]["preStop"]["exec"]["command"];
    assert_eq!(pre_stop[0], "sleep");
    let pause: u64 = pre_stop[1].as_str().unwrap().parse().unwrap();
    let needed =
        Duration::from_secs(pause) + cfg.server.shutdown_notice + cfg.server.shutdown_grace;
    let grace = Duration::from_secs(pod["terminationGracePeriodSeconds"].as_u64().unwrap());
    assert!(
        grace > needed,
        "terminationGracePeriodSeconds {grace:?} <= {needed:?}"
    );

    // A running gateway answers the probes' paths with 200.
    let readiness = container["readinessProbe"]["httpGet"]["path"]
        .as_str()
        .unwrap();
    let liveness = container["livenessProbe"]["httpGet"]["path"]
        .as_str()
        .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gw.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\n[ledger]\nstore = \"off\"\n\
             [providers.up]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
             [models.chat]\ndeployments = [{{ provider = \"up\", model = \"m\" }}]\n"
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--config"])
        .arg(&path)
        .env("SLUICE_LOG", "error")
        .spawn()
        .unwrap();
    let client = reqwest::Client::new();
    let mut answered = false;
    for _ in 0..200 {
        let get = |p: &str| client.get(format!("http://127.0.0.1:{port}{p}")).send();
        if let (Ok(r), Ok(l)) = (get(readiness).await, get(liveness).await) {
            assert_eq!((r.status().as_u16(), l.status().as_u16()), (200, 200));
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(answered, "the gateway never answered its probes");
}
