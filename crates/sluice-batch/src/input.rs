//! A batch input file: JSON lines of requests, checked line by line before anything of it is
//! kept. Every bad line is reported with its number and what is wrong; a file with any bad
//! line is refused whole.

use std::collections::HashMap;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use sluice_core::ChatRequest;
use sluice_ingress::Dialect;

/// The APIs a batch's lines may call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/embeddings`.
    Embeddings,
    /// `/v1/responses` (stateless).
    Responses,
    /// `/v1/messages` (Anthropic Messages).
    Messages,
    /// `/v1/analyses`: a document to analyse (its lines name a file and carry its bytes).
    Analyses,
}

impl Endpoint {
    /// Every endpoint, in the order error messages list them.
    pub const ALL: [Self; 5] = [
        Self::Chat,
        Self::Embeddings,
        Self::Responses,
        Self::Messages,
        Self::Analyses,
    ];

    /// Its path, as lines and batches name it.
    pub fn path(self) -> &'static str {
        match self {
            Self::Chat => "/v1/chat/completions",
            Self::Embeddings => "/v1/embeddings",
            Self::Responses => "/v1/responses",
            Self::Messages => "/v1/messages",
            Self::Analyses => "/v1/analyses",
        }
    }

    /// The endpoint at `path`.
    pub fn parse(path: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.path() == path)
    }

    /// The API its requests are written in; none for documents, which are not calls.
    pub fn dialect(self) -> Option<Dialect> {
        match self {
            Self::Chat => Some(Dialect::Chat),
            Self::Embeddings => Some(Dialect::Embeddings),
            Self::Responses => Some(Dialect::Responses),
            Self::Messages => Some(Dialect::Anthropic),
            Self::Analyses => None,
        }
    }

    /// The paths, comma-separated, for messages.
    pub fn listed() -> String {
        Self::ALL.map(Self::path).join(", ")
    }
}

/// How much one file may hold.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Lines (requests) at most.
    pub max_lines: usize,
    /// Characters of a `custom_id` at most.
    pub max_custom_id: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_lines: 50_000,
            max_custom_id: 512,
        }
    }
}

/// One checked request line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// Its number in the file, from 1.
    pub number: u64,
    /// The client's id for it, unique in the file.
    pub custom_id: String,
    /// The API it calls.
    pub endpoint: Endpoint,
    /// The request body, as the client wrote it.
    pub body: String,
    /// A hash of what its requests share with others (system prompt, instructions, tools):
    /// lines with the same hash are sent one after another, so prompt caches hit.
    pub prefix: u32,
}

/// What is wrong with one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineError {
    /// Its number in the file, from 1 (0 for the file as a whole).
    pub line: u64,
    /// The field at fault (`custom_id`, `body.messages`...), if one is.
    pub param: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.message)
        } else {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }
}

#[derive(Deserialize)]
struct Raw<'a> {
    #[serde(borrow)]
    custom_id: Option<&'a RawValue>,
    method: Option<&'a str>,
    url: Option<&'a str>,
    #[serde(borrow)]
    body: Option<&'a RawValue>,
}

/// Checks every line of `content` (blank lines are skipped; every other line is a request),
/// returning the lines or every error found, in line order.
pub fn check(content: &str, limits: Limits) -> Result<Vec<Line>, Vec<LineError>> {
    let mut lines = Vec::new();
    let mut errors = Vec::new();
    let mut seen: HashMap<String, u64> = HashMap::new();
    for (i, text) in content.lines().enumerate() {
        let number = i as u64 + 1;
        if text.trim().is_empty() {
            continue;
        }
        if lines.len() + errors.len() >= limits.max_lines {
            errors.push(LineError {
                line: 0,
                param: None,
                message: format!("a batch file holds at most {} requests", limits.max_lines),
            });
            break;
        }
        match line(number, text, limits) {
            Ok(l) => {
                if let Some(first) = seen.insert(l.custom_id.clone(), number) {
                    errors.push(fault(
                        number,
                        "custom_id",
                        format!(
                            "custom_id `{}` is already used by line {first}",
                            l.custom_id
                        ),
                    ));
                } else {
                    lines.push(l);
                }
            }
            Err(e) => errors.push(e),
        }
    }
    if lines.is_empty() && errors.is_empty() {
        errors.push(LineError {
            line: 0,
            param: None,
            message: "the file holds no requests".into(),
        });
    }
    if errors.is_empty() {
        Ok(lines)
    } else {
        Err(errors)
    }
}

fn fault(line: u64, param: &str, message: String) -> LineError {
    LineError {
        line,
        param: Some(param.into()),
        message,
    }
}

fn line(number: u64, text: &str, limits: Limits) -> Result<Line, LineError> {
    let raw: Raw<'_> = serde_json::from_str(text).map_err(|e| LineError {
        line: number,
        param: None,
        message: format!("not a JSON object: {e}"),
    })?;
    let custom_id = match raw
        .custom_id
        .map(|v| serde_json::from_str::<String>(v.get()))
    {
        None => return Err(fault(number, "custom_id", "custom_id is required".into())),
        Some(Err(_)) => {
            return Err(fault(
                number,
                "custom_id",
                "custom_id must be a string".into(),
            ));
        }
        Some(Ok(id)) if id.is_empty() || id.chars().count() > limits.max_custom_id => {
            return Err(fault(
                number,
                "custom_id",
                format!("custom_id must be 1 to {} characters", limits.max_custom_id),
            ));
        }
        Some(Ok(id)) => id,
    };
    match raw.method {
        Some("POST") => {}
        None => {
            return Err(fault(
                number,
                "method",
                "method is required (`POST`)".into(),
            ));
        }
        Some(m) => {
            return Err(fault(
                number,
                "method",
                format!("method `{m}` is not supported; use `POST`"),
            ));
        }
    }
    let endpoint = match raw.url {
        None => return Err(fault(number, "url", "url is required".into())),
        Some(url) => Endpoint::parse(url).ok_or_else(|| {
            fault(
                number,
                "url",
                format!(
                    "url `{url}` is not one a batch can call: {}",
                    Endpoint::listed()
                ),
            )
        })?,
    };
    let Some(body) = raw.body else {
        return Err(fault(number, "body", "body is required".into()));
    };
    let Some(dialect) = endpoint.dialect() else {
        document::read(body.get()).map_err(|e| fault(number, e.param, e.message))?;
        return Ok(Line {
            number,
            custom_id,
            endpoint,
            body: body.get().to_string(),
            prefix: prefix_hash(endpoint, &serde_json::Value::Null),
        });
    };
    let (request, value) = checked_body(body.get(), dialect)
        .map_err(|(param, message)| fault(number, &param, message))?;
    if request.stream {
        return Err(fault(
            number,
            "body.stream",
            "a batch's requests cannot stream".into(),
        ));
    }
    Ok(Line {
        number,
        custom_id,
        endpoint,
        body: body.get().to_string(),
        prefix: prefix_hash(endpoint, &value),
    })
}

/// Reads `body` as a request in `dialect`, with its API's checks: the request, and the body as
/// a JSON value; or the field at fault and what is wrong.
fn checked_body(
    body: &str,
    dialect: Dialect,
) -> Result<(ChatRequest, serde_json::Value), (String, String)> {
    let value: serde_json::Value = serde_json::from_str(body)
        .map_err(|e| ("body".to_string(), format!("body is not JSON: {e}")))?;
    if !value.is_object() {
        return Err(("body".into(), "body must be a JSON object".into()));
    }
    let refused = |e: sluice_core::GatewayError| {
        let param = e
            .param
            .as_deref()
            .map_or_else(|| "body".to_string(), |p| format!("body.{p}"));
        (param, e.message.into_owned())
    };
    let chat = dialect
        .request(Bytes::copy_from_slice(body.as_bytes()), None)
        .map_err(refused)?;
    let request = ChatRequest::from_bytes(chat).map_err(refused)?;
    Ok((request, value))
}

/// The hash of what a request shares with the others of its kind: its system prompt (or
/// instructions) and tools, as written.
fn prefix_hash(endpoint: Endpoint, body: &serde_json::Value) -> u32 {
    let mut h = Sha256::new();
    h.update(endpoint.path());
    let mut part = |v: Option<&serde_json::Value>| {
        if let Some(v) = v {
            h.update(v.to_string());
        }
        h.update([0]);
    };
    match endpoint {
        Endpoint::Chat => {
            let system = body
                .get("messages")
                .and_then(|m| m.as_array())
                .and_then(|m| m.first())
                .filter(|m| {
                    matches!(
                        m.get("role").and_then(|r| r.as_str()),
                        Some("system" | "developer")
                    )
                });
            part(system);
        }
        Endpoint::Messages => part(body.get("system")),
        Endpoint::Responses => part(body.get("instructions")),
        // Documents share the one review prompt.
        Endpoint::Embeddings | Endpoint::Analyses => part(None),
    }
    part(body.get("tools"));
    part(body.get("model"));
    let d = h.finalize();
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

pub mod document;
#[cfg(test)]
mod tests;
