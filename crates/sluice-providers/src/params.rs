//! `[providers.NAME]` as it is written: which API the upstream speaks (`kind`), where it is
//! and how it is reached ([`Upstream`], [`HttpSettings`]), and that kind's own settings
//! ([`KindParams`], one struct per kind in the kind's folder). A new kind is one variant
//! here and one folder.
//!
//! The three parts are read from the same table; [`ProviderKind::read`] reads the kind's
//! part through whatever reader the configuration uses, so a key no part takes is reported
//! where it stands.

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_core::GatewayError;

use crate::anthropic::AnthropicParams;
use crate::azure::AzureParams;
use crate::bedrock::{Bedrock, BedrockSettings};
use crate::bedrock::{BedrockAuth, BedrockParams};
use crate::gemini::GeminiParams;
use crate::openai::OpenAiParams;
use crate::{
    Anthropic, AnthropicSettings, Azure, AzureSettings, Gemini, GeminiSettings, HttpSettings,
    OpenAiCompat, OpenAiSettings, Provider,
};

/// Which API an upstream speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI chat completions: OpenAI, DeepSeek, GLM, Kimi, MiniMax, Hunyuan, vLLM, SGLang,
    /// Ollama and anything else that speaks it.
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// Azure OpenAI: chat completions at a resource's deployment (or v1) URLs.
    Azure,
    /// Google Gemini's `generateContent`, at the Gemini API's URLs or Vertex AI's.
    Gemini,
    /// AWS Bedrock's Converse API, signed with SigV4.
    Bedrock,
}

/// Reads one part of a provider's table (the configuration's reader, which reports errors
/// and unknown keys where they stand).
pub trait ReadPart {
    /// The part, when it could be read.
    fn read<T: serde::de::DeserializeOwned>(&mut self) -> Option<T>;
}

impl ProviderKind {
    /// Every kind.
    pub const ALL: [Self; 5] = [
        Self::Openai,
        Self::Anthropic,
        Self::Azure,
        Self::Gemini,
        Self::Bedrock,
    ];

    /// Its name as written in `kind`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
            Self::Azure => "azure",
            Self::Gemini => "gemini",
            Self::Bedrock => "bedrock",
        }
    }

    /// This kind's own settings, read by `r`.
    pub fn read(self, r: &mut impl ReadPart) -> Option<KindParams> {
        Some(match self {
            Self::Openai => KindParams::Openai(r.read()?),
            Self::Anthropic => KindParams::Anthropic(r.read()?),
            Self::Azure => KindParams::Azure(r.read()?),
            Self::Gemini => KindParams::Gemini(r.read()?),
            Self::Bedrock => KindParams::Bedrock(r.read()?),
        })
    }
}

/// Where an upstream is and who it is (every kind has these).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
pub struct Upstream {
    /// Which API it speaks.
    pub kind: ProviderKind,
    /// Base URL, up to and including the version (`https://api.openai.com/v1`); for Azure
    /// the resource (`https://NAME.openai.azure.com`); for Vertex AI its host.
    pub base_url: String,
    /// Name of the environment variable holding the API key. Keys never live in the file.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Extra headers sent on every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// One kind's own settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KindParams {
    /// `kind = "openai"`.
    Openai(OpenAiParams),
    /// `kind = "anthropic"`.
    Anthropic(AnthropicParams),
    /// `kind = "azure"`.
    Azure(AzureParams),
    /// `kind = "gemini"`.
    Gemini(GeminiParams),
    /// `kind = "bedrock"`.
    Bedrock(BedrockParams),
}

impl KindParams {
    /// What is wrong with them, given where the upstream is, if anything: (field, message).
    pub fn problems(&self, upstream: &Upstream) -> Vec<(&'static str, String)> {
        match self {
            Self::Openai(_) => Vec::new(),
            Self::Anthropic(a) => a.problems(),
            Self::Azure(a) => a.problems(upstream.api_key_env.is_some()),
            Self::Gemini(g) => g.problems(upstream.api_key_env.is_some()),
            Self::Bedrock(b) => b.problems(),
        }
    }
}

/// `[providers.NAME]`: one upstream endpoint with its own connection pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderParams {
    /// Where it is.
    pub upstream: Upstream,
    /// How it is reached: timeouts and the connection pool.
    pub http: HttpSettings,
    /// Its kind's own settings.
    pub settings: KindParams,
}

impl ProviderParams {
    /// Which API it speaks.
    pub fn kind(&self) -> ProviderKind {
        self.upstream.kind
    }

    /// What is wrong with it beyond its URL and key, if anything: (field, message).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = self.http.problems();
        out.extend(self.settings.problems(&self.upstream));
        out
    }

    /// The environment variable holding its credential: `api_key_env`, or an Azure or
    /// Gemini provider's `token_env`.
    pub fn key_env(&self) -> Option<&str> {
        match (&self.upstream.api_key_env, &self.settings) {
            (Some(var), _) => Some(var),
            (None, KindParams::Azure(a)) => a.token_env.as_deref(),
            (None, KindParams::Gemini(g)) => g.token_env.as_deref(),
            (None, _) => None,
        }
    }

    /// The file holding a rotating bearer token, when one is written.
    pub fn token_file(&self) -> Option<&std::path::Path> {
        match &self.settings {
            KindParams::Azure(a) => a.token_file.as_deref(),
            KindParams::Gemini(g) => g.token_file.as_deref(),
            _ => None,
        }
    }

    fn headers(&self) -> Vec<(String, String)> {
        self.upstream
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// How to reach it as an OpenAI-compatible upstream (for its chat adapter, or for an
    /// embeddings endpoint), with `api_key`; `None` when it speaks another API.
    pub fn openai_settings(&self, api_key: Option<String>) -> Option<OpenAiSettings> {
        match &self.settings {
            KindParams::Openai(o) => Some(self.openai(o, api_key)),
            KindParams::Anthropic(_)
            | KindParams::Azure(_)
            | KindParams::Gemini(_)
            | KindParams::Bedrock(_) => None,
        }
    }

    fn openai(&self, o: &OpenAiParams, api_key: Option<String>) -> OpenAiSettings {
        OpenAiSettings {
            base_url: self.upstream.base_url.clone(),
            api_key,
            headers: self.headers(),
            http: self.http.clone(),
            responses: o.responses,
        }
    }

    /// The credential a Bedrock provider signs with, looked up in `env` (its API key when
    /// `api_key` is given); `None` for another kind.
    pub fn bedrock_auth(
        &self,
        api_key: Option<String>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<Result<BedrockAuth, String>> {
        let KindParams::Bedrock(b) = &self.settings else {
            return None;
        };
        Some(match api_key {
            Some(k) => Ok(BedrockAuth::ApiKey(k)),
            None => b.credentials(env).map(BedrockAuth::SigV4),
        })
    }

    /// The adapter for it, named `name`, with `api_key` (and, for Bedrock, the AWS
    /// credentials `env` holds).
    pub fn provider(
        &self,
        name: &str,
        api_key: Option<String>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Arc<dyn Provider>, GatewayError> {
        Ok(match &self.settings {
            KindParams::Bedrock(b) => {
                let auth = match api_key {
                    Some(k) => BedrockAuth::ApiKey(k),
                    None => b.credentials(env).map(BedrockAuth::SigV4).map_err(|why| {
                        GatewayError::new(
                            sluice_core::ErrorKind::Internal,
                            format!("provider {name} has no AWS credentials: {why}"),
                        )
                    })?,
                };
                Arc::new(Bedrock::new(
                    name,
                    BedrockSettings {
                        base_url: self.upstream.base_url.clone(),
                        region: b.region.clone().unwrap_or_default(),
                        auth,
                        headers: self.headers(),
                        http: self.http.clone(),
                    },
                )?)
            }
            KindParams::Openai(o) => Arc::new(OpenAiCompat::new(name, self.openai(o, api_key))?),
            KindParams::Azure(a) => Arc::new(Azure::new(
                name,
                AzureSettings {
                    base_url: self.upstream.base_url.clone(),
                    params: a.clone(),
                    api_key,
                    headers: self.headers(),
                    http: self.http.clone(),
                },
            )?),
            KindParams::Gemini(g) => Arc::new(Gemini::new(
                name,
                GeminiSettings {
                    base_url: self.upstream.base_url.clone(),
                    params: g.clone(),
                    api_key,
                    headers: self.headers(),
                    http: self.http.clone(),
                },
            )?),
            KindParams::Anthropic(a) => Arc::new(Anthropic::new(
                name,
                AnthropicSettings {
                    base_url: self.upstream.base_url.clone(),
                    api_key,
                    version: a.anthropic_version.clone(),
                    default_max_tokens: a.default_max_tokens,
                    cache_breakpoints: a.cache_breakpoints.then_some(a.cache_min_tokens),
                    cache_ttl: a.cache_ttl,
                    headers: self.headers(),
                    http: self.http.clone(),
                },
            )?),
        })
    }
}
