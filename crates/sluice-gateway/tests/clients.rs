//! The official client SDKs against a running sluice, with only their base URL changed: the
//! `anthropic`, `openai`, `google-genai` and LangChain Python packages and the `openai` npm
//! package (installed by `scripts/install-clients` into a private environment, whose folder
//! `SLUICE_CLIENTS` names) run `tests/clients/sdk_check.py` and `sdk_check.mjs` against a
//! gateway in front of upstreams of both kinds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "gateway/support/mod.rs"]
mod support;

use std::path::PathBuf;

use sluice_economy::keys::hash_hex;

const KEY: &str = "sk-sluice-clients-test";
/// A key that may use the group `ok` only.
const NARROW_KEY: &str = "sk-sluice-clients-narrow";

const DIRECT: &str = r#"
[models.limited-direct]
deployments = [{ provider = "fake", model = "limited", name = "fake-limited-direct" }]
retry = false
limit = false

[models.limited-1s]
deployments = [{ provider = "fake", model = "limited-1s", name = "fake-limited-1s" }]
retry = false
limit = false

[models.embed]
deployments = [{ provider = "fake", model = "text-embed" }]
"#;

/// Runs `program script` against the gateway at `url` (`part` names a part of the script to
/// run alone); its output, once it passed.
async fn run(program: PathBuf, script: PathBuf, url: &str, part: &str) -> String {
    let (url, part) = (url.to_string(), part.to_string());
    let shown = format!("{} {}", program.display(), script.display());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(program)
            .arg(script)
            .env("SLUICE_URL", url)
            .env("SLUICE_KEY", KEY)
            .env("SLUICE_NARROW_KEY", NARROW_KEY)
            .env("SLUICE_PART", part)
            .output()
    })
    .await
    .unwrap()
    .unwrap_or_else(|e| panic!("{shown} does not run: {e}"));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{shown}\n{stdout}\n{stderr}");
    assert!(stdout.contains("checks passed"), "{stdout}");
    println!("{stdout}");
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdks_work_unchanged() {
    let env = PathBuf::from(std::env::var("SLUICE_CLIENTS").expect(
        "SLUICE_CLIENTS names the client SDKs' environment; scripts/test installs it (scripts/install-clients)",
    ));
    // A key (sent as `Authorization: Bearer` by one SDK, `x-api-key` by the other), and two
    // groups whose 429s reach the client at once (sluice's own retries off): one saying
    // "come back in 7 s", one "in 1 s" for the SDKs' own retries.
    let keys = format!(
        "\n[keys.clients]\ntenant = \"acme\"\nsha256 = \"{}\"\n\
         [keys.narrow]\ntenant = \"acme\"\nsha256 = \"{}\"\nmodels = [\"ok\"]\n{DIRECT}",
        hash_hex(KEY),
        hash_hex(NARROW_KEY)
    );
    let gw = support::start_with(&keys).await;
    let here = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients"));
    run(
        env.join("bin/python"),
        here.join("sdk_check.py"),
        &gw.url,
        "",
    )
    .await;
    // Each Python SDK sent its request and its two retries.
    let asked = gw
        .upstream
        .fake
        .bodies
        .lock()
        .iter()
        .filter(|b| b["model"] == "limited-1s")
        .count();
    assert_eq!(asked, 6, "two SDKs, three tries each");
    // google-genai's function answer reached the upstream as a tool message answering the
    // call the model turn before it made.
    let bodies = gw.upstream.fake.bodies.lock().clone();
    let answered = bodies.iter().any(|b| {
        let m = b["messages"].as_array().cloned().unwrap_or_default();
        m.windows(2).any(|w| {
            w[0]["tool_calls"][0]["function"]["name"] == "weather"
                && w[1]["role"] == "tool"
                && w[1]["tool_call_id"] == w[0]["tool_calls"][0]["id"]
                && w[1]["content"] == r#"{"temperature":"-3C"}"#
        })
    });
    assert!(
        answered,
        "the function's answer went upstream as a tool message"
    );

    // The JavaScript client, run from the folder that holds its node_modules.
    let script = env.join("node/sdk_check.mjs");
    std::fs::copy(here.join("sdk_check.mjs"), &script).unwrap();
    run(PathBuf::from("node"), script, &gw.url, "").await;

    // sluice's own refusals with `Retry-After`: a gateway draining for shutdown (its notice
    // long enough for the run) refuses every request, and each SDK retries as told.
    let draining = support::start_with(&format!(
        "shutdown_grace = \"60s\"\nshutdown_notice = \"60s\"\n{keys}"
    ))
    .await;
    draining.shutdown.trigger();
    while !draining.gw.is_draining() {
        tokio::task::yield_now().await;
    }
    let python = env.join("bin/python");
    run(python, here.join("sdk_check.py"), &draining.url, "draining").await;
    let mut refused = Vec::new();
    for _ in 0..6 {
        refused.push(draining.next_record().await.status);
    }
    refused.sort_unstable();
    assert_eq!(
        refused,
        [503, 503, 503, 529, 529, 529],
        "three tries from each SDK"
    );
}
