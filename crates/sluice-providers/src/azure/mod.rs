//! The Azure OpenAI adapter: OpenAI's chat completions and embeddings at a resource's
//! deployment URLs (or its v1 URLs), with `api-key` or a bearer token that may rotate. The
//! bodies and answers are OpenAI's, so the OpenAI adapter's reading is used; a refusal by
//! Azure's content filter becomes [`ErrorKind::ContentFiltered`], its body passed through.

mod params;

pub use crate::token::{RECHECK, TokenFile, check as check_token_file};
pub use params::{AzureApi, AzureParams, DEFAULT_API_VERSION};

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use hashbrown::HashMap;
use parking_lot::RwLock;
use sluice_core::{ErrorKind, GatewayError, Original};
use tokio::time::Instant;

use crate::http::{self, Endpoint, HttpSettings};
use crate::openai::{self, embed};
use crate::{Provider, UpstreamCall, UpstreamResponse};

/// How an Azure resource is reached.
#[derive(Clone, Debug)]
pub struct AzureSettings {
    /// The resource, `https://NAME.openai.azure.com` (no path).
    pub base_url: String,
    /// Its settings.
    pub params: AzureParams,
    /// `api_key_env`'s key (sent as `api-key`) or `token_env`'s token (sent as a bearer).
    pub api_key: Option<String>,
    /// Extra headers for every request.
    pub headers: Vec<(String, String)>,
    /// Connection and timeout settings.
    pub http: HttpSettings,
}

/// The two operations sluice sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Op {
    Chat,
    Embeddings,
}

impl Op {
    fn path(self) -> &'static str {
        match self {
            Self::Chat => "chat/completions",
            Self::Embeddings => "embeddings",
        }
    }
}

/// The endpoint of each (deployment, operation).
type Endpoints = HashMap<(Arc<str>, Op), Arc<Endpoint>>;

/// An Azure OpenAI resource with its own connection pool.
pub struct Azure {
    name: Arc<str>,
    settings: AzureSettings,
    /// Holds the pool and the fixed headers; each URL is this endpoint elsewhere.
    pool: Endpoint,
    /// The endpoint of each (deployment, operation) met so far (the v1 shape has one per
    /// operation, under the deployment `""`).
    endpoints: RwLock<Endpoints>,
    /// The rotating bearer token, when `token_file` is written.
    token: Option<TokenFile>,
}

impl Azure {
    /// Builds the adapter and its pooled client; reads `token_file` now, when written.
    pub fn new(name: &str, settings: AzureSettings) -> Result<Self, GatewayError> {
        let p = &settings.params;
        let fixed = match (&settings.api_key, p.token_env.is_some()) {
            (Some(k), false) => Some(("api-key", k.clone())),
            (Some(t), true) => Some(("authorization", format!("Bearer {t}"))),
            (None, _) => None,
        };
        let mut headers: Vec<(&str, &str, bool)> =
            fixed.iter().map(|(n, v)| (*n, v.as_str(), true)).collect();
        headers.extend(
            settings
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str(), false)),
        );
        let pool = Endpoint::new(&settings.http, &settings.base_url, "openai", &headers)?;
        let token = match &p.token_file {
            Some(path) => Some(TokenFile::open(path, Instant::now())?),
            None => None,
        };
        Ok(Self {
            name: Arc::from(name),
            pool,
            endpoints: RwLock::default(),
            token,
            settings,
        })
    }

    /// The URL of `op` for `model` (the deployment's name, a path segment of its own).
    fn url(&self, model: &str, op: Op) -> Result<String, GatewayError> {
        let p = &self.settings.params;
        let bad = |e: String| {
            GatewayError::new(
                ErrorKind::Internal,
                format!("base_url `{}`: {e}", self.settings.base_url),
            )
        };
        let mut url = url::Url::parse(&self.settings.base_url).map_err(|e| bad(e.to_string()))?;
        {
            let mut path = url
                .path_segments_mut()
                .map_err(|()| bad("not a base".into()))?;
            path.pop_if_empty().push("openai");
            match p.api {
                AzureApi::Deployments => path.extend(["deployments", model]),
                AzureApi::V1 => path.push("v1"),
            };
            path.extend(op.path().split('/'));
        }
        if let Some(v) = p.version() {
            url.query_pairs_mut().append_pair("api-version", v);
        }
        Ok(url.into())
    }

    /// The endpoint of `op` for `model`, made on first use.
    fn endpoint(&self, model: &Arc<str>, op: Op) -> Result<Arc<Endpoint>, GatewayError> {
        let key = match self.settings.params.api {
            AzureApi::Deployments => model.clone(),
            AzureApi::V1 => Arc::from(""),
        };
        if let Some(e) = self.endpoints.read().get(&(key.clone(), op)) {
            return Ok(e.clone());
        }
        let made = Arc::new(self.pool.at(&self.url(model, op)?)?);
        Ok(self
            .endpoints
            .write()
            .entry((key, op))
            .or_insert(made)
            .clone())
    }

    /// The headers of this call beyond the fixed ones: the token file's bearer.
    fn extra(&self) -> Vec<(String, String)> {
        self.token
            .iter()
            .map(|t| {
                (
                    "authorization".to_string(),
                    t.bearer(Instant::now()).to_string(),
                )
            })
            .collect()
    }
}

impl Provider for Azure {
    fn call(
        &self,
        call: UpstreamCall,
    ) -> BoxFuture<'static, Result<UpstreamResponse, GatewayError>> {
        let embeddings = call
            .request
            .original()
            .filter(|o| o.api == Original::OPENAI_EMBEDDINGS)
            .map(|o| embed::body(&o.body, &call.model));
        let op = match embeddings {
            Some(_) => Op::Embeddings,
            None => Op::Chat,
        };
        let endpoint = match self.endpoint(&call.model, op) {
            Ok(e) => e,
            Err(e) => return futures::future::ready(Err(e)).boxed(),
        };
        let (name, http, extra) = (self.name.clone(), self.settings.http.clone(), self.extra());
        if let Some(body) = embeddings {
            return async move {
                embed::send(name.clone(), http, endpoint, body, call, extra)
                    .await
                    .map_err(|e| filtered(e, &name))
            }
            .boxed();
        }
        let body = match openai::outgoing_body(&call.request, &call.model) {
            Ok(b) => b,
            Err(e) => {
                let err = GatewayError::new(ErrorKind::Internal, format!("encoding request: {e}"));
                return futures::future::ready(Err(err)).boxed();
            }
        };
        async move {
            let accepted = http::send(&name, &http, &endpoint, body, &call, |_| None, &extra)
                .await
                .map_err(|e| filtered(e, &name))?;
            openai::answer(accepted, name, &call).await
        }
        .boxed()
    }
}

/// `e` as [`ErrorKind::ContentFiltered`] when it is Azure's content filter refusing the
/// prompt (a 400 whose `error.code` is `content_filter`), its body kept to pass through.
pub fn filtered(e: GatewayError, upstream: &str) -> GatewayError {
    let says = e.kind == ErrorKind::UpstreamRejected
        && e.upstream
            .as_deref()
            .filter(|r| r.status == 400)
            .and_then(|r| serde_json::from_slice::<serde_json::Value>(&r.body).ok())
            .is_some_and(|v| v["error"]["code"] == "content_filter");
    if !says {
        return e;
    }
    GatewayError {
        kind: ErrorKind::ContentFiltered,
        message: format!("upstream {upstream}'s content filter refused the prompt").into(),
        ..e
    }
}

#[cfg(test)]
mod tests;
