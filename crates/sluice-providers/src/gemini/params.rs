//! What `[providers.NAME]` with `kind = "gemini"` says beyond where the upstream is: which of
//! Google's URL shapes it serves (the Gemini API's, or Vertex AI's with its project and
//! location), and where a rotating bearer token is read.

use std::path::PathBuf;

/// Which of Google's URL shapes a Gemini upstream is reached by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GeminiApi {
    /// The Gemini API: `{base_url}/models/{model}:generateContent`, `base_url` up to and
    /// including the version (`https://generativelanguage.googleapis.com/v1beta`), the key
    /// sent as `x-goog-api-key`.
    #[default]
    Gemini,
    /// Vertex AI: `{base_url}/v1/projects/{project}/locations/{location}/publishers/google/
    /// models/{model}:generateContent`, `base_url` the service's host
    /// (`https://us-central1-aiplatform.googleapis.com`), a bearer token sent.
    Vertex,
}

/// A Gemini provider's own settings (every field optional).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct GeminiParams {
    /// The URL shape.
    pub api: GeminiApi,
    /// Vertex AI's project.
    pub project: Option<String>,
    /// Vertex AI's location (`us-central1`, `global`).
    pub location: Option<String>,
    /// Environment variable holding a bearer token (an OAuth access token), sent as
    /// `Authorization: Bearer` rather than `x-goog-api-key`.
    pub token_env: Option<String>,
    /// File holding a bearer token, re-read within a second of its changing (access tokens
    /// expire within the hour); sent as `Authorization: Bearer`.
    pub token_file: Option<PathBuf>,
}

/// Whether `s` may stand as one segment of a Google resource name.
fn segment(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

impl GeminiParams {
    /// Whether the credential is sent as a bearer token.
    pub fn bearer(&self) -> bool {
        self.token_env.is_some() || self.token_file.is_some()
    }

    /// What is wrong with it, given whether `api_key_env` is also written: (field, message).
    pub fn problems(&self, api_key_env: bool) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        let ways = usize::from(api_key_env)
            + usize::from(self.token_env.is_some())
            + usize::from(self.token_file.is_some());
        match (self.api, ways) {
            (_, 2..) => out.push((
                "token_env",
                "write one of `api_key_env`, `token_env` and `token_file`".into(),
            )),
            (GeminiApi::Gemini, 0) => out.push((
                "api_key_env",
                "kind = \"gemini\" needs a credential: `api_key_env` (sent as \
                 `x-goog-api-key`), `token_env` or `token_file` (sent as a bearer token)"
                    .into(),
            )),
            (GeminiApi::Vertex, _) if api_key_env || ways == 0 => out.push((
                "token_env",
                "api = \"vertex\" is reached with a bearer token: write `token_env` or \
                 `token_file` (an OAuth access token)"
                    .into(),
            )),
            _ => {}
        }
        for (field, value) in [("project", &self.project), ("location", &self.location)] {
            match (self.api, value) {
                (GeminiApi::Vertex, None) => out.push((
                    field,
                    format!("api = \"vertex\" needs `{field}`: its URLs name it"),
                )),
                (GeminiApi::Vertex, Some(v)) if !segment(v) => out.push((
                    field,
                    format!("`{v}` is not a {field} name (letters, digits, `-`, `_`, `.`)"),
                )),
                (GeminiApi::Gemini, Some(_)) => out.push((
                    field,
                    format!("`{field}` is read only with api = \"vertex\""),
                )),
                _ => {}
            }
        }
        out
    }
}
