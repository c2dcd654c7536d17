//! A gateway's batch API as a client calls it: the `sluice batch` command and the batch
//! benchmark.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::{Value, json};

/// The gateway a batch command talks to.
#[derive(clap::Args)]
pub struct Gateway {
    /// The gateway's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080", global = true)]
    pub url: String,
    /// The API key the job runs as (else SLUICE_API_KEY).
    #[arg(long, env = "SLUICE_API_KEY", global = true, hide_env_values = true)]
    pub key: Option<String>,
    /// The tenant, for a gateway that requires no keys (`x-sluice-tenant`).
    #[arg(long, global = true)]
    pub tenant: Option<String>,
}

/// A gateway's batch API, as `sluice batch` and the batch benchmark call it.
pub struct Client {
    http: reqwest::Client,
    base: String,
    key: Option<String>,
    tenant: Option<String>,
}

impl Client {
    /// The gateway at `url`, asked with no key and no tenant.
    pub fn at(url: &str) -> Self {
        Self::new(&Gateway {
            url: url.to_string(),
            key: None,
            tenant: None,
        })
    }

    pub fn new(g: &Gateway) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: g.url.trim_end_matches('/').to_string(),
            key: g.key.clone(),
            tenant: g.tenant.clone(),
        }
    }

    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(k) = &self.key {
            r = r.bearer_auth(k);
        }
        if let Some(t) = &self.tenant {
            r = r.header("x-sluice-tenant", t);
        }
        r
    }

    /// Sends `r`; the JSON answer, or the gateway's error message.
    pub async fn json(&self, r: reqwest::RequestBuilder) -> anyhow::Result<Value> {
        let resp = r
            .send()
            .await
            .with_context(|| format!("asking {}", self.base))?;
        let status = resp.status();
        let body: Value = resp.json().await.context("reading the answer")?;
        if !status.is_success() {
            let message = body["error"]["message"].as_str().unwrap_or("no message");
            anyhow::bail!("{status}: {message}");
        }
        Ok(body)
    }

    pub async fn batch(&self, id: &str) -> anyhow::Result<Value> {
        self.json(self.req(reqwest::Method::GET, &format!("/v1/batches/{id}")))
            .await
    }

    pub async fn submit(&self, file: &PathBuf, endpoint: &str) -> anyhow::Result<Value> {
        let content = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let name = file
            .file_name()
            .map_or("batch.jsonl".into(), |n| n.to_string_lossy().into_owned());
        self.submit_content(&name, &content, endpoint).await
    }

    /// Uploads `content` as file `name` and submits it as a job calling `endpoint`: the
    /// job's object.
    pub async fn submit_content(
        &self,
        name: &str,
        content: &[u8],
        endpoint: &str,
    ) -> anyhow::Result<Value> {
        let boundary = format!("sluice-{}", std::process::id());
        let mut body = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
             Content-Type: application/jsonl\r\n\r\n"
        )
        .into_bytes();
        body.extend_from_slice(content);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let uploaded = self
            .json(
                self.req(reqwest::Method::POST, "/v1/files")
                    .header(
                        "content-type",
                        format!("multipart/form-data; boundary={boundary}"),
                    )
                    .body(body),
            )
            .await
            .context("uploading the file")?;
        self.json(self.req(reqwest::Method::POST, "/v1/batches").json(&json!({
            "input_file_id": uploaded["id"],
            "endpoint": endpoint,
            "completion_window": "24h",
        })))
        .await
        .context("submitting the job")
    }

    pub async fn text(&self, path: &str) -> anyhow::Result<String> {
        let resp = self.req(reqwest::Method::GET, path).send().await?;
        let status = resp.status();
        let text = resp.text().await?;
        if !status.is_success() {
            anyhow::bail!("{status}: {text}");
        }
        Ok(text)
    }
}
