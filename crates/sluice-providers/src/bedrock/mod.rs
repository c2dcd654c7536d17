//! The AWS Bedrock adapter: chat-completions requests translated to the Converse API
//! (`/model/{modelId}/converse`, and `/converse-stream`, whose binary event stream
//! [`crate::eventstream`] decodes), answers and events back to chat completions with usage
//! (cache reads and writes) read; each request signed with SigV4 (`aws-sigv4`) for the
//! provider's region with credentials from the environment or a profile, or sent with a
//! Bedrock API key as a bearer. Throttling is the 429 it is.

mod params;
mod request;
mod response;
mod stream;

pub use params::{BedrockParams, Credentials};
pub use request::translate_request;
pub use response::translate_response;
pub use stream::StreamTranslator;

use std::sync::Arc;
use std::time::SystemTime;

use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use hashbrown::HashMap;
use parking_lot::RwLock;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError, Original};

use crate::eventstream::EventStreamDecoder;
use crate::http::{self, Endpoint, HttpSettings};
use crate::{Completion, Provider, UpstreamCall, UpstreamResponse, pump};

/// How a Bedrock request is authenticated.
#[derive(Clone, Debug)]
pub enum BedrockAuth {
    /// A Bedrock API key, sent as `Authorization: Bearer`.
    ApiKey(String),
    /// AWS credentials, each request signed with SigV4.
    SigV4(Credentials),
}

/// How a Bedrock upstream is reached.
#[derive(Clone, Debug)]
pub struct BedrockSettings {
    /// The runtime endpoint, `https://bedrock-runtime.{region}.amazonaws.com`.
    pub base_url: String,
    /// The region requests are signed for.
    pub region: String,
    /// The credential.
    pub auth: BedrockAuth,
    /// Extra headers for every request (not signed).
    pub headers: Vec<(String, String)>,
    /// Connection and timeout settings.
    pub http: HttpSettings,
}

/// What a model id keeps as it is in a URL path; AWS's SDKs encode the rest (`:` as `%3A`).
const PATH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The endpoint and the URL of each (model, streamed).
type Endpoints = HashMap<(Arc<str>, bool), (Arc<Endpoint>, Arc<str>)>;

/// A Bedrock upstream with its own connection pool.
pub struct Bedrock {
    name: Arc<str>,
    settings: BedrockSettings,
    pool: Endpoint,
    endpoints: RwLock<Endpoints>,
}

impl Bedrock {
    /// Builds the adapter and its pooled client.
    pub fn new(name: &str, settings: BedrockSettings) -> Result<Self, GatewayError> {
        let headers: Vec<(&str, &str, bool)> = settings
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str(), false))
            .collect();
        let pool = Endpoint::new(&settings.http, &settings.base_url, "model", &headers)?;
        Ok(Self {
            name: Arc::from(name),
            pool,
            endpoints: RwLock::default(),
            settings,
        })
    }

    /// The URL of `model`'s Converse (or, `streamed`, ConverseStream).
    pub fn url(&self, model: &str, streamed: bool) -> String {
        let op = if streamed {
            "converse-stream"
        } else {
            "converse"
        };
        format!(
            "{}/model/{}/{op}",
            self.settings.base_url.trim_end_matches('/'),
            utf8_percent_encode(model, PATH)
        )
    }

    fn endpoint(
        &self,
        model: &Arc<str>,
        streamed: bool,
    ) -> Result<(Arc<Endpoint>, Arc<str>), GatewayError> {
        let key = (model.clone(), streamed);
        if let Some(e) = self.endpoints.read().get(&key) {
            return Ok(e.clone());
        }
        let url: Arc<str> = Arc::from(self.url(model, streamed));
        let made = (Arc::new(self.pool.at(&url)?), url);
        Ok(self.endpoints.write().entry(key).or_insert(made).clone())
    }

    /// The headers that authenticate a POST of `body` to `url`: a bearer, or SigV4's
    /// (`authorization`, `x-amz-date`, and `x-amz-security-token` for temporary credentials),
    /// signed over the host and the content type.
    pub fn authenticate(
        &self,
        url: &str,
        body: &[u8],
        now: SystemTime,
    ) -> Result<Vec<(String, String)>, GatewayError> {
        let creds = match &self.settings.auth {
            BedrockAuth::ApiKey(k) => {
                return Ok(vec![("authorization".into(), format!("Bearer {k}"))]);
            }
            BedrockAuth::SigV4(c) => c,
        };
        signed(url, body, now, creds, &self.settings.region).map_err(|e| {
            GatewayError::new(
                ErrorKind::Internal,
                format!("signing for upstream {}: {e}", self.name),
            )
        })
    }
}

/// SigV4's headers for a POST of `body` to `url`, for service `bedrock` in `region`.
pub fn signed(
    url: &str,
    body: &[u8],
    now: SystemTime,
    creds: &Credentials,
    region: &str,
) -> Result<Vec<(String, String)>, String> {
    let uri: ::http::Uri = url.parse().map_err(|e| format!("URL `{url}`: {e}"))?;
    let host = uri
        .authority()
        .map(|a| a.as_str().to_string())
        .unwrap_or_default();
    let identity = aws_credential_types::Credentials::new(
        creds.access_key.clone(),
        creds.secret_key.clone(),
        creds.session_token.clone(),
        None,
        "sluice",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("bedrock")
        .time(now)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let headers = [
        ("host", host.as_str()),
        ("content-type", "application/json"),
    ];
    let request = SignableRequest::new("POST", url, headers.into_iter(), SignableBody::Bytes(body))
        .map_err(|e| e.to_string())?;
    let (instructions, _) = sign(request, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

impl Provider for Bedrock {
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
                format!("upstream {} (Bedrock) serves no embeddings here", self.name),
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
            .and_then(|body| {
                let (endpoint, url) = self.endpoint(&call.model, streamed)?;
                let auth = self.authenticate(&url, &body, SystemTime::now())?;
                Ok((body, endpoint, auth))
            });
        let (body, endpoint, auth) = match prepared {
            Ok(p) => p,
            Err(e) => return futures::future::ready(Err(e)).boxed(),
        };
        let (name, http) = (self.name.clone(), self.settings.http.clone());
        async move {
            let mut accepted =
                http::send(&name, &http, &endpoint, body, &call, error_to_openai, &auth).await?;
            if streamed {
                let translator = StreamTranslator::new(
                    name.clone(),
                    call.model.clone(),
                    call.request.include_usage,
                );
                return Ok(UpstreamResponse::Stream(pump::pump_with::<
                    _,
                    _,
                    EventStreamDecoder,
                >(
                    accepted.body, translator, name
                )));
            }
            let (raw, first_byte) = http::read_complete(&mut accepted).await?;
            completion(&raw, first_byte, &name, &call.model).map(UpstreamResponse::Complete)
        }
        .boxed()
    }
}

/// A complete answer as a chat completion, its usage read.
pub(crate) fn completion(
    raw: &[u8],
    first_byte: tokio::time::Instant,
    name: &str,
    model: &str,
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
    let (body, usage) = translate_response(raw, name, model)?;
    Ok(Completion {
        body,
        usage: Some(usage),
        first_byte,
        native: None,
    })
}

/// Renders Bedrock's `{"message": ...}` error in OpenAI's shape.
fn error_to_openai(raw: &[u8]) -> Option<Bytes> {
    let v: Value = serde_json::from_slice(raw).ok()?;
    let message = v
        .get("message")
        .or_else(|| v.get("Message"))
        .and_then(Value::as_str)?;
    let out = json!({
        "error": {"message": message, "type": "bedrock_error", "param": null, "code": null}
    });
    Some(Bytes::from(out.to_string()))
}

#[cfg(test)]
mod tests;
