//! The OpenAI-compatible adapter: OpenAI, DeepSeek, GLM, Kimi, MiniMax, Hunyuan, vLLM, SGLang,
//! Ollama. Bodies pass through; sluice only swaps the model name and asks streams for usage.

mod params;

pub use params::OpenAiParams;

use std::collections::VecDeque;
use std::sync::{Arc, LazyLock};

use memchr::memmem;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::{Map, Value};
use sluice_core::{ChatRequest, ErrorKind, GatewayError, Original};

use crate::http::{self, Accepted, HttpSettings};
use crate::pump::{self, Translate};
use crate::sse::{self, SseEvent};
use crate::usage;
use crate::{Completion, EventStream, Provider, StreamEvent, UpstreamCall, UpstreamResponse};

/// Where an OpenAI-compatible upstream lives and how to authenticate.
#[derive(Clone, Debug, Default)]
pub struct OpenAiSettings {
    /// Up to and including the version, e.g. `https://api.deepseek.com/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer KEY` when set.
    pub api_key: Option<String>,
    /// Extra headers for every request.
    pub headers: Vec<(String, String)>,
    /// Connection and timeout settings.
    pub http: HttpSettings,
    /// The upstream serves OpenAI's Responses API (`/responses`): a Responses client's
    /// request goes to it as it came, rather than translated to chat completions.
    pub responses: bool,
}

impl OpenAiSettings {
    /// The endpoint at `path` under the base URL, with the bearer key and the extra headers.
    pub fn endpoint(&self, path: &str) -> Result<http::Endpoint, GatewayError> {
        let bearer = self.api_key.as_ref().map(|k| format!("Bearer {k}"));
        let mut headers: Vec<(&str, &str, bool)> = bearer
            .iter()
            .map(|b| ("authorization", b.as_str(), true))
            .collect();
        headers.extend(
            self.headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str(), false)),
        );
        http::Endpoint::new(&self.http, &self.base_url, path, &headers)
    }
}

/// An OpenAI-compatible upstream with its own connection pool.
pub struct OpenAiCompat {
    name: Arc<str>,
    endpoint: Arc<http::Endpoint>,
    /// `/embeddings`, for requests whose client asked for embeddings.
    embeddings: Arc<http::Endpoint>,
    /// `/responses`, when the upstream serves the Responses API.
    responses: Option<Arc<http::Endpoint>>,
    settings: OpenAiSettings,
}

impl OpenAiCompat {
    /// Builds the adapter and its pooled client.
    pub fn new(name: &str, settings: OpenAiSettings) -> Result<Self, GatewayError> {
        let endpoint = settings.endpoint("chat/completions")?;
        let embeddings = settings.endpoint("embeddings")?;
        let responses = match settings.responses {
            true => Some(Arc::new(settings.endpoint("responses")?)),
            false => None,
        };
        Ok(Self {
            name: Arc::from(name),
            endpoint: Arc::new(endpoint),
            embeddings: Arc::new(embeddings),
            responses,
            settings,
        })
    }
}

impl Provider for OpenAiCompat {
    fn call(
        &self,
        call: UpstreamCall,
    ) -> BoxFuture<'static, Result<UpstreamResponse, GatewayError>> {
        if let Some(o) = call
            .request
            .original()
            .filter(|o| o.api == Original::OPENAI_EMBEDDINGS)
        {
            let body = embed::body(&o.body, &call.model);
            let (name, http) = (self.name.clone(), self.settings.http.clone());
            return embed::send(name, http, self.embeddings.clone(), body, call, Vec::new())
                .boxed();
        }
        if let (Some(o), Some(endpoint)) = (
            call.request
                .original()
                .filter(|o| o.api == Original::OPENAI_RESPONSES),
            &self.responses,
        ) {
            let body = crate::as_it_came(&o.body, &call.model);
            let (name, http) = (self.name.clone(), self.settings.http.clone());
            return responses::send(name, http, endpoint.clone(), body, call).boxed();
        }
        let body = match outgoing_body(&call.request, &call.model) {
            Ok(b) => b,
            Err(e) => {
                let err = GatewayError::new(ErrorKind::Internal, format!("encoding request: {e}"));
                return futures::future::ready(Err(err)).boxed();
            }
        };
        let name = self.name.clone();
        let http = self.settings.http.clone();
        let endpoint = self.endpoint.clone();
        async move {
            let accepted = http::send(&name, &http, &endpoint, body, &call, |_| None, &[]).await?;
            answer(accepted, name, &call).await
        }
        .boxed()
    }
}

/// An accepted chat answer as the call asked for it: a stream of chunks, or read whole.
pub(crate) async fn answer(
    mut accepted: Accepted,
    name: Arc<str>,
    call: &UpstreamCall,
) -> Result<UpstreamResponse, GatewayError> {
    if call.request.stream {
        Ok(UpstreamResponse::Stream(stream(
            accepted,
            name,
            call.request.include_usage,
        )))
    } else {
        complete(&mut accepted, &name)
            .await
            .map(UpstreamResponse::Complete)
    }
}

/// The client's body with the upstream model name, and `stream_options.include_usage` set on
/// streams so usage can be read from the last chunk. Every other field is copied as the
/// client wrote it: no JSON tree is built or written.
pub(crate) fn outgoing_body(
    request: &ChatRequest,
    model: &str,
) -> Result<Vec<u8>, serde_json::Error> {
    let stream = request.stream;
    let mut out = Vec::with_capacity(request.body_len() + model.len() + 48);
    out.push(b'{');
    let mut wrote_options = false;
    for (i, (k, v)) in request.fields().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, k)?;
        out.push(b':');
        match k {
            "model" => serde_json::to_writer(&mut out, model)?,
            "stream_options" if stream => {
                let opts = match serde_json::from_slice::<Value>(v) {
                    Ok(Value::Object(o)) => o,
                    _ => Map::new(),
                };
                serde_json::to_writer(&mut out, &with_usage(opts))?;
                wrote_options = true;
            }
            _ => out.extend_from_slice(v),
        }
    }
    if stream && !wrote_options {
        if request.fields().next().is_some() {
            out.push(b',');
        }
        out.extend_from_slice(b"\"stream_options\":");
        serde_json::to_writer(&mut out, &with_usage(Map::new()))?;
    }
    out.push(b'}');
    Ok(out)
}

fn with_usage(mut opts: Map<String, Value>) -> Map<String, Value> {
    opts.insert("include_usage".into(), Value::Bool(true));
    opts
}

/// What sluice reads of a complete answer (the rest is checked to be JSON and passed on as
/// it came): its `usage`, kept as raw text so that no tree is built and a usage object of an
/// unexpected shape costs the usage, not the answer.
#[derive(serde::Deserialize)]
struct UsageOnly<'a> {
    #[serde(default, borrow)]
    usage: Option<&'a serde_json::value::RawValue>,
    #[serde(default, borrow)]
    choices: Option<&'a serde_json::value::RawValue>,
    #[serde(default, borrow)]
    error: Option<&'a serde_json::value::RawValue>,
    #[serde(default, borrow)]
    object: Option<&'a serde_json::value::RawValue>,
}

impl UsageOnly<'_> {
    /// An error object in place of an answer (some servers send one with a 200), as the
    /// upstream's failure: retryable, its message kept.
    fn failure(&self, name: &str, what: &str) -> Option<GatewayError> {
        let errs = self.error.is_some_and(|e| e.get() != "null")
            || self.object.is_some_and(|o| o.get() == "\"error\"");
        if !errs || self.choices.is_some() {
            return None;
        }
        let said = self
            .error
            .and_then(|e| serde_json::from_str::<Value>(e.get()).ok())
            .and_then(|e| e.get("message").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| "no message".to_string());
        Some(GatewayError::new(
            ErrorKind::UpstreamServerError,
            format!("upstream {name} {what} an error: {said}"),
        ))
    }
}

/// Whether a chunk may be an error in place of a chunk: `"error"` among its first bytes.
fn may_be_error(data: &[u8]) -> bool {
    let head = data.get(..data.len().min(40)).unwrap_or(data);
    ERROR_KEY.find(head).is_some()
}

/// What sluice reads of a streamed chunk that names `usage`: the usage, and whether the chunk
/// has no choices (the usage-only chunk a client that did not ask for it is not sent).
#[derive(serde::Deserialize)]
struct UsageChunk<'a> {
    #[serde(default, borrow)]
    usage: Option<&'a serde_json::value::RawValue>,
    #[serde(default, borrow)]
    choices: Option<&'a serde_json::value::RawValue>,
}

async fn complete(accepted: &mut Accepted, name: &str) -> Result<Completion, GatewayError> {
    let (body, first_byte) = http::read_complete(accepted).await?;
    completion(body, first_byte, name)
}

/// A complete chat answer's body as a completion, its usage read.
pub(crate) fn completion(
    body: bytes::Bytes,
    first_byte: tokio::time::Instant,
    name: &str,
) -> Result<Completion, GatewayError> {
    let parsed: UsageOnly<'_> = serde_json::from_slice(&body).map_err(|e| {
        GatewayError::new(
            ErrorKind::UpstreamProtocol,
            format!("upstream {name} answered invalid JSON: {e}"),
        )
    })?;
    if let Some(e) = parsed.failure(name, "answered 200 with") {
        return Err(e);
    }
    Ok(Completion {
        usage: parsed
            .usage
            .and_then(|raw| usage::from_openai_text(raw.get())),
        body,
        first_byte,
        native: None,
    })
}

/// Turns the upstream's SSE into frames, reading usage on the way.
pub(crate) fn stream(accepted: Accepted, name: Arc<str>, client_wants_usage: bool) -> EventStream {
    pump::pump(
        accepted.body,
        Frames::new(name.clone(), client_wants_usage),
        name,
    )
}

/// What an OpenAI-compatible stream's events become: the same frames, usage read on the way.
pub(crate) struct Frames {
    name: Arc<str>,
    client_wants_usage: bool,
    saw_done: bool,
    saw_finish: bool,
}

impl Frames {
    /// Frames of upstream `name` for a client that asked for the usage chunk, or did not.
    pub(crate) fn new(name: Arc<str>, client_wants_usage: bool) -> Self {
        Self {
            name,
            client_wants_usage,
            saw_done: false,
            saw_finish: false,
        }
    }
}

impl Translate for Frames {
    fn event(&mut self, ev: SseEvent, out: &mut VecDeque<StreamEvent>) -> Result<(), GatewayError> {
        if self.saw_done {
            return Ok(());
        }
        let data = ev.data;
        if data.as_ref() == sse::DONE {
            self.saw_done = true;
            out.push_back(StreamEvent::Frame(sse::frame(sse::DONE)));
            return Ok(());
        }
        if may_be_error(&data)
            && let Ok(chunk) = serde_json::from_slice::<UsageOnly<'_>>(&data)
            && let Some(e) = chunk.failure(&self.name, "sent mid-stream")
        {
            return Err(e);
        }
        // Once one chunk has finished, the rest need not be searched for it.
        if !self.saw_finish && has_finish_reason(&data) {
            self.saw_finish = true;
        }
        // The chunk that gives usage (usually the last) is read for it, as raw text: no tree.
        // Servers that send `"usage": null` in every chunk cost no parse.
        let parsed = gives_usage(&data)
            .then(|| serde_json::from_slice::<UsageChunk<'_>>(&data).ok())
            .flatten();
        if let Some(chunk) = parsed
            && let Some(u) = chunk
                .usage
                .and_then(|raw| usage::from_openai_text(raw.get()))
        {
            out.push_back(StreamEvent::Usage(u));
            let usage_only = chunk
                .choices
                .is_some_and(|c| c.get().trim_start().starts_with("[]"));
            if usage_only && !self.client_wants_usage {
                // sluice asked for this chunk; the client did not.
                return Ok(());
            }
        }
        // Passed on as the upstream framed it, without a copy, when it was one line.
        let frame = ev.framed.unwrap_or_else(|| sse::frame(&data));
        out.push_back(StreamEvent::Frame(frame));
        Ok(())
    }

    fn finished(&self) -> bool {
        self.saw_done
    }

    fn closed(&mut self, out: &mut VecDeque<StreamEvent>) -> bool {
        if self.saw_finish {
            // Some servers end without [DONE] after a finish_reason; close politely.
            out.push_back(StreamEvent::Frame(sse::frame(sse::DONE)));
        }
        self.saw_finish
    }
}

/// Searchers built once: a stream looks for these keys in every chunk.
static USAGE_KEY: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"\"usage\""));
static ERROR_KEY: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"\"error\""));
static FINISH_KEY: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"\"finish_reason\""));

/// Whether a chunk carries a non-null `finish_reason`, without parsing it or allocating.
fn has_finish_reason(data: &[u8]) -> bool {
    key_with_value(data, &FINISH_KEY, |b| b == b'"')
}

/// Whether a chunk names a `usage` that is not `null`.
fn gives_usage(data: &[u8]) -> bool {
    key_with_value(data, &USAGE_KEY, |b| b != b'n')
}

/// Whether `key` (a quoted JSON key) appears in `data` with a value whose first byte passes
/// `wanted`. A key's quotes cannot occur unescaped inside a string, so a match is a key.
fn key_with_value(data: &[u8], key: &memmem::Finder<'_>, wanted: impl Fn(u8) -> bool) -> bool {
    let key_len = key.needle().len();
    let mut rest = data;
    while let Some(i) = key.find(rest) {
        rest = rest.get(i + key_len..).unwrap_or_default();
        let after = rest
            .iter()
            .find(|b| !(b.is_ascii_whitespace() || **b == b':'));
        if after.is_some_and(|b| wanted(*b)) {
            return true;
        }
    }
    false
}

/// Frames an error for a client mid-stream, in OpenAI's error shape.
pub fn error_frame(e: &GatewayError) -> Bytes {
    let v = serde_json::json!({
        "error": {
            "message": e.message,
            "type": e.kind.error_type(),
            "code": e.kind.code(),
        }
    });
    sse::frame(v.to_string().as_bytes())
}

pub(crate) mod embed;
pub(crate) mod responses;

#[cfg(test)]
mod tests;
