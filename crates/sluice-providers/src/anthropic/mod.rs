//! The Anthropic Messages adapter: chat-completions requests are translated to Messages,
//! answers and streams back to chat completions, usage (cache reads and writes) included. A
//! request whose client spoke Messages goes as it came, and its answer and events are kept
//! as they came beside their chat form, for that client.

mod breakpoints;
mod params;
mod request;
pub(crate) mod response;
pub(crate) mod stream;
pub mod ttl;

use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use sluice_core::{ErrorKind, GatewayError, Original};

use crate::http::{self, HttpSettings};
use crate::{Completion, Provider, UpstreamCall, UpstreamResponse};

pub use params::AnthropicParams;
pub use request::translate_request;
pub use response::translate_response;
pub use stream::StreamTranslator;

/// The `anthropic-version` sent when none is configured.
pub const DEFAULT_VERSION: &str = "2023-06-01";
/// The `max_tokens` sent when the client gave none (Anthropic requires it).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// The shortest prefix given a prompt-cache breakpoint by default, in tokens (Sonnet's
/// minimum cacheable length).
pub const DEFAULT_CACHE_MIN_TOKENS: u64 = 1024;

/// A complete Messages answer as a chat completion, its usage read; the message itself is
/// kept when the client spoke Messages (`native`).
pub(crate) fn completion(
    raw: bytes::Bytes,
    first_byte: tokio::time::Instant,
    name: &str,
    native: bool,
) -> Result<Completion, GatewayError> {
    if !sluice_core::budget::within(&raw) {
        return Err(GatewayError::new(
            ErrorKind::UpstreamProtocol,
            format!(
                "upstream {name}: {}",
                sluice_core::budget::refusal("its answer")
            ),
        ));
    }
    let (body, usage) = translate_response(&raw).map_err(|e| {
        GatewayError::new(
            ErrorKind::UpstreamProtocol,
            format!("upstream {name} answered an unreadable message: {e}"),
        )
    })?;
    Ok(Completion {
        body,
        usage: Some(usage),
        first_byte,
        native: native.then_some(raw),
    })
}

/// Where the Anthropic API lives and how to authenticate.
#[derive(Clone, Debug)]
pub struct AnthropicSettings {
    /// Up to and including the version, e.g. `https://api.anthropic.com/v1`.
    pub base_url: String,
    /// Sent as `x-api-key`.
    pub api_key: Option<String>,
    /// The `anthropic-version` header.
    pub version: String,
    /// `max_tokens` when the client gave none.
    pub default_max_tokens: u32,
    /// Prompt-cache breakpoints placed for clients that mark none, on prefixes of at least
    /// this many tokens; `None`: never.
    pub cache_breakpoints: Option<u64>,
    /// How long a placed breakpoint asks the cache to keep its prefix.
    pub cache_ttl: CacheTtl,
    /// Extra headers for every request.
    pub headers: Vec<(String, String)>,
    /// Connection and timeout settings.
    pub http: HttpSettings,
}

/// How long placed breakpoints keep their prefix (`"auto"`, `"5m"` or `"1h"` as written).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
pub enum CacheTtl {
    /// Chosen per prefix from how often it is reused ([`ttl`]).
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// Always 5 minutes.
    #[serde(rename = "5m")]
    FiveMinutes,
    /// Always 1 hour.
    #[serde(rename = "1h")]
    OneHour,
}

impl Default for AnthropicSettings {
    fn default() -> Self {
        Self {
            base_url: "https://api.anthropic.com/v1".into(),
            api_key: None,
            version: DEFAULT_VERSION.into(),
            default_max_tokens: DEFAULT_MAX_TOKENS,
            cache_breakpoints: Some(DEFAULT_CACHE_MIN_TOKENS),
            cache_ttl: CacheTtl::Auto,
            headers: Vec::new(),
            http: HttpSettings::default(),
        }
    }
}

/// An Anthropic upstream with its own connection pool.
pub struct Anthropic {
    name: Arc<str>,
    endpoint: Arc<http::Endpoint>,
    settings: AnthropicSettings,
    /// Each prefix's reuse, when times to live are chosen.
    reuse: parking_lot::Mutex<ttl::Reuse>,
    hasher: hashbrown::DefaultHashBuilder,
}

impl Anthropic {
    /// Builds the adapter and its pooled client.
    pub fn new(name: &str, settings: AnthropicSettings) -> Result<Self, GatewayError> {
        let mut headers = vec![("anthropic-version", settings.version.as_str(), false)];
        if let Some(key) = &settings.api_key {
            headers.push(("x-api-key", key.as_str(), true));
        }
        headers.extend(
            settings
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str(), false)),
        );
        let endpoint =
            http::Endpoint::new(&settings.http, &settings.base_url, "messages", &headers)?;
        Ok(Self {
            name: Arc::from(name),
            endpoint: Arc::new(endpoint),
            settings,
            reuse: parking_lot::Mutex::new(ttl::Reuse::new()),
            hasher: hashbrown::DefaultHashBuilder::default(),
        })
    }
}

impl Anthropic {
    /// Places breakpoints, each kept as the settings say (per prefix, when `Auto`).
    fn place(&self, v: &mut serde_json::Value, min_tokens: u64) {
        let fixed = |t: ttl::Ttl| move |_: u64| t;
        match self.settings.cache_ttl {
            CacheTtl::Auto => {
                let now = tokio::time::Instant::now();
                // Locked per mark only: the prompt is hashed outside the lock.
                let mut choose = |d: u64| self.reuse.lock().observe(now, d);
                let choice = breakpoints::TtlChoice {
                    hasher: &self.hasher,
                    choose: &mut choose,
                };
                breakpoints::place(v, min_tokens, Some(choice));
            }
            CacheTtl::FiveMinutes => breakpoints::place(v, min_tokens, None),
            CacheTtl::OneHour => {
                let mut choose = fixed(ttl::Ttl::OneHour);
                let choice = breakpoints::TtlChoice {
                    hasher: &self.hasher,
                    choose: &mut choose,
                };
                breakpoints::place(v, min_tokens, Some(choice));
            }
        }
    }
}

impl Provider for Anthropic {
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
                format!("upstream {} (Anthropic) serves no embeddings", self.name),
            )
            .with_param("model");
            return futures::future::ready(Err(e)).boxed();
        }
        // A Messages client's own request goes as it came (its model swapped); any other is
        // translated from the chat form.
        let native = call
            .request
            .original()
            .filter(|o| o.api == Original::ANTHROPIC_MESSAGES);
        let built = match native {
            Some(o) => crate::as_it_came(&o.body, &call.model),
            None => translate_request(&call.request, &call.model, self.settings.default_max_tokens),
        };
        let extra = native.map(|o| o.headers.clone()).unwrap_or_default();
        let native = native.is_some();
        let body = built
            .map(|mut v| {
                if let Some(min_tokens) = self.settings.cache_breakpoints {
                    self.place(&mut v, min_tokens);
                }
                v
            })
            .and_then(|v| {
                serde_json::to_vec(&v).map_err(|e| {
                    GatewayError::new(ErrorKind::Internal, format!("encoding request: {e}"))
                })
            });
        let body = match body {
            Ok(b) => b,
            Err(e) => return futures::future::ready(Err(e)).boxed(),
        };
        let name = self.name.clone();
        let http = self.settings.http.clone();
        let endpoint = self.endpoint.clone();
        async move {
            let mut accepted = http::send(
                &name,
                &http,
                &endpoint,
                body,
                &call,
                error_to_openai,
                &extra,
            )
            .await?;
            if call.request.stream {
                let translator = StreamTranslator::new(call.request.include_usage).native(native);
                Ok(UpstreamResponse::Stream(stream::translate(
                    accepted.body,
                    translator,
                    name,
                )))
            } else {
                let (raw, first_byte) = http::read_complete(&mut accepted).await?;
                completion(raw, first_byte, &name, native).map(UpstreamResponse::Complete)
            }
        }
        .boxed()
    }
}

/// Renders Anthropic's `{"type":"error","error":{"type","message"}}` in OpenAI's error shape.
fn error_to_openai(raw: &[u8]) -> Option<Bytes> {
    let v: serde_json::Value = serde_json::from_slice(raw).ok()?;
    let err = v.get("error")?;
    let message = err
        .get("message")
        .and_then(|m| m.as_str())
        .unwrap_or("upstream error");
    let kind = err
        .get("type")
        .and_then(|t| t.as_str())
        .unwrap_or("api_error");
    let out = serde_json::json!({
        "error": {"message": message, "type": kind, "param": null, "code": kind}
    });
    Some(Bytes::from(out.to_string()))
}

#[cfg(test)]
mod tests;
