//! The Google Gemini adapter: chat-completions requests translated to `generateContent` (and
//! `streamGenerateContent?alt=sse`), answers and streams back to chat completions with
//! `usageMetadata` read (cached tokens and thoughts included), at the Gemini API's URLs with
//! `x-goog-api-key` or at Vertex AI's with a bearer token that may rotate. Google's errors
//! are rendered in OpenAI's shape, a 429's `RetryInfo` read as its `Retry-After`.

mod params;
mod request;
pub(crate) mod response;
mod stream;

pub use params::{GeminiApi, GeminiParams};
pub use request::translate_request;
pub use response::translate_response;
pub use stream::StreamTranslator;

use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use hashbrown::HashMap;
use parking_lot::RwLock;
use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError, Original};
use tokio::time::Instant;

use crate::http::{self, Endpoint, HttpSettings};
use crate::token::TokenFile;
use crate::{Completion, Provider, UpstreamCall, UpstreamResponse};

/// How a Gemini upstream is reached.
#[derive(Clone, Debug)]
pub struct GeminiSettings {
    /// The Gemini API up to its version, or Vertex AI's host.
    pub base_url: String,
    /// Its settings.
    pub params: GeminiParams,
    /// `api_key_env`'s key (sent as `x-goog-api-key`) or `token_env`'s token (a bearer).
    pub api_key: Option<String>,
    /// Extra headers for every request.
    pub headers: Vec<(String, String)>,
    /// Connection and timeout settings.
    pub http: HttpSettings,
}

/// The endpoint of each (model, streamed).
type Endpoints = HashMap<(Arc<str>, bool), Arc<Endpoint>>;

/// A Gemini upstream with its own connection pool.
pub struct Gemini {
    name: Arc<str>,
    settings: GeminiSettings,
    /// Holds the pool and the fixed headers; each model's URL is this endpoint elsewhere.
    pool: Endpoint,
    endpoints: RwLock<Endpoints>,
    /// The rotating bearer token, when `token_file` is written.
    token: Option<TokenFile>,
}

impl Gemini {
    /// Builds the adapter and its pooled client; reads `token_file` now, when written.
    pub fn new(name: &str, settings: GeminiSettings) -> Result<Self, GatewayError> {
        let p = &settings.params;
        let fixed = match (&settings.api_key, p.bearer()) {
            (Some(k), false) => Some(("x-goog-api-key", k.clone())),
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
        let pool = Endpoint::new(&settings.http, &settings.base_url, "models", &headers)?;
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

    /// The URL of `model`'s `generateContent` (or, `streamed`, `streamGenerateContent`).
    pub fn url(&self, model: &str, streamed: bool) -> Result<String, GatewayError> {
        let p = &self.settings.params;
        let bad = |e: String| {
            GatewayError::new(
                ErrorKind::Internal,
                format!("base_url `{}`: {e}", self.settings.base_url),
            )
        };
        let mut url = url::Url::parse(&self.settings.base_url).map_err(|e| bad(e.to_string()))?;
        let op = if streamed {
            "streamGenerateContent"
        } else {
            "generateContent"
        };
        {
            let mut path = url
                .path_segments_mut()
                .map_err(|()| bad("not a base".into()))?;
            path.pop_if_empty();
            if p.api == GeminiApi::Vertex {
                let project = p.project.as_deref().unwrap_or_default();
                let location = p.location.as_deref().unwrap_or_default();
                path.extend(["v1", "projects", project, "locations", location]);
                path.extend(["publishers", "google"]);
            }
            path.extend(["models", &format!("{model}:{op}")]);
        }
        if streamed {
            url.query_pairs_mut().append_pair("alt", "sse");
        }
        Ok(url.into())
    }

    /// The endpoint of `model`, made on first use.
    fn endpoint(&self, model: &Arc<str>, streamed: bool) -> Result<Arc<Endpoint>, GatewayError> {
        let key = (model.clone(), streamed);
        if let Some(e) = self.endpoints.read().get(&key) {
            return Ok(e.clone());
        }
        let made = Arc::new(self.pool.at(&self.url(model, streamed)?)?);
        Ok(self.endpoints.write().entry(key).or_insert(made).clone())
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

impl Provider for Gemini {
    fn call(
        &self,
        call: UpstreamCall,
    ) -> BoxFuture<'static, Result<UpstreamResponse, GatewayError>> {
        if call
            .request
            .original()
            .is_some_and(|o| o.api == Original::OPENAI_EMBEDDINGS)
        {
            let e = GatewayError::new(
                ErrorKind::InvalidRequest,
                format!("upstream {} (Gemini) serves no embeddings here", self.name),
            )
            .with_param("model");
            return futures::future::ready(Err(e)).boxed();
        }
        let streamed = call.request.stream;
        let prepared = translate_request(&call.request)
            .and_then(|v| {
                serde_json::to_vec(&v).map_err(|e| {
                    GatewayError::new(ErrorKind::Internal, format!("encoding request: {e}"))
                })
            })
            .and_then(|body| Ok((body, self.endpoint(&call.model, streamed)?)));
        let (body, endpoint) = match prepared {
            Ok(p) => p,
            Err(e) => return futures::future::ready(Err(e)).boxed(),
        };
        let (name, http, extra) = (self.name.clone(), self.settings.http.clone(), self.extra());
        async move {
            let mut accepted = http::send(&name, &http, &endpoint, body, &call, |_| None, &extra)
                .await
                .map_err(google_error)?;
            if streamed {
                let translator = StreamTranslator::new(name, call.request.include_usage);
                return Ok(UpstreamResponse::Stream(stream::translate(
                    accepted.body,
                    translator,
                )));
            }
            let (raw, first_byte) = http::read_complete(&mut accepted).await?;
            completion(&raw, first_byte, &name).map(UpstreamResponse::Complete)
        }
        .boxed()
    }
}

/// A complete answer as a chat completion, its usage read.
pub(crate) fn completion(
    raw: &[u8],
    first_byte: Instant,
    name: &str,
) -> Result<Completion, GatewayError> {
    if !sluice_core::budget::within(raw) {
        return Err(GatewayError::new(
            ErrorKind::UpstreamProtocol,
            format!(
                "upstream {name}: {}",
                sluice_core::budget::refusal("its answer")
            ),
        ));
    }
    let (body, usage) = translate_response(raw, name)?;
    Ok(Completion {
        body,
        usage: Some(usage),
        first_byte,
        native: None,
    })
}

/// A Google error (`{"error": {"code", "message", "status", "details"}}`) rendered in
/// OpenAI's shape, a 429's `RetryInfo.retryDelay` kept as its `Retry-After` (Google sends no
/// such header). Anything else (a 5xx, a connection's failure) is left as it is.
pub fn google_error(mut e: GatewayError) -> GatewayError {
    let Some(reply) = e.upstream.as_deref_mut() else {
        return e;
    };
    let Ok(v) = serde_json::from_slice::<Value>(&reply.body) else {
        return e;
    };
    let err = &v["error"];
    let message = err["message"].as_str().unwrap_or("upstream error");
    let status = err["status"].as_str().unwrap_or("UNKNOWN");
    if reply.retry_after.is_none() {
        reply.retry_after = retry_delay(err).map(|s| s.to_string());
    }
    let openai = json!({
        "error": {"message": message, "type": status, "param": null, "code": status}
    });
    reply.body = Bytes::from(openai.to_string());
    reply.content_type = Some("application/json".into());
    e
}

/// Whole seconds of a `google.rpc.RetryInfo` in `details` (`"retryDelay": "27s"`), rounded
/// up.
fn retry_delay(err: &Value) -> Option<u64> {
    err["details"].as_array()?.iter().find_map(|d| {
        let delay = d.get("retryDelay")?.as_str()?.strip_suffix('s')?;
        let secs: f64 = delay.parse().ok()?;
        (secs.is_finite() && secs >= 0.0).then(|| secs.ceil() as u64)
    })
}

#[cfg(test)]
mod tests;
