//! What `[providers.NAME]` with `kind = "azure"` says beyond where the resource is: which of
//! Azure OpenAI's URL shapes it serves, the `api-version`, and where a rotating bearer token
//! is read (else `api_key_env`'s key is sent as `api-key`).

use std::path::PathBuf;

/// The `api-version` of Azure OpenAI's deployment URLs when none is written: the newest
/// generally available one that takes `stream_options.include_usage`.
pub const DEFAULT_API_VERSION: &str = "2024-10-21";

/// Which of Azure OpenAI's URL shapes the resource is reached by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AzureApi {
    /// `{base_url}/openai/deployments/{deployment}/chat/completions?api-version=...`: the
    /// deployment's name is the group's `model`.
    #[default]
    Deployments,
    /// `{base_url}/openai/v1/chat/completions`: the model (a deployment's name) in the body,
    /// no `api-version` needed.
    V1,
}

/// An Azure OpenAI provider's own settings (every field optional).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct AzureParams {
    /// The URL shape.
    pub api: AzureApi,
    /// `api-version` of the deployment URLs (and of the v1 URLs, when written).
    pub api_version: Option<String>,
    /// Environment variable holding a bearer token (an Entra ID token), sent as
    /// `Authorization: Bearer` rather than `api-key`.
    pub token_env: Option<String>,
    /// File holding a bearer token, re-read within a second of its changing (a workload
    /// identity's token rotates); sent as `Authorization: Bearer`.
    pub token_file: Option<PathBuf>,
}

impl Default for AzureParams {
    fn default() -> Self {
        Self {
            api: AzureApi::Deployments,
            api_version: None,
            token_env: None,
            token_file: None,
        }
    }
}

impl AzureParams {
    /// The `api-version` the URLs carry, if any.
    pub fn version(&self) -> Option<&str> {
        match (self.api, self.api_version.as_deref()) {
            (AzureApi::Deployments, None) => Some(DEFAULT_API_VERSION),
            (_, v) => v,
        }
    }

    /// What is wrong with it, given whether `api_key_env` is also written: (field, message).
    pub fn problems(&self, api_key_env: bool) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if self.api_version.as_deref().is_some_and(|v| {
            v.is_empty() || !v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        }) {
            out.push((
                "api_version",
                "must be a version like 2024-10-21 or preview".into(),
            ));
        }
        let ways = usize::from(api_key_env)
            + usize::from(self.token_env.is_some())
            + usize::from(self.token_file.is_some());
        match ways {
            0 => out.push((
                "api_key_env",
                "kind = \"azure\" needs a credential: `api_key_env` (sent as `api-key`), \
                 `token_env` or `token_file` (sent as a bearer token)"
                    .into(),
            )),
            1 => {}
            _ => out.push((
                "token_env",
                "write one of `api_key_env`, `token_env` and `token_file`".into(),
            )),
        }
        out
    }
}
