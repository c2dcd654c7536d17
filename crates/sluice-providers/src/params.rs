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
use crate::openai::OpenAiParams;
use crate::{Anthropic, AnthropicSettings, HttpSettings, OpenAiCompat, OpenAiSettings, Provider};

/// Which API an upstream speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI chat completions: OpenAI, DeepSeek, GLM, Kimi, MiniMax, Hunyuan, vLLM, SGLang,
    /// Ollama and anything else that speaks it.
    Openai,
    /// Anthropic Messages.
    Anthropic,
}

/// Reads one part of a provider's table (the configuration's reader, which reports errors
/// and unknown keys where they stand).
pub trait ReadPart {
    /// The part, when it could be read.
    fn read<T: serde::de::DeserializeOwned>(&mut self) -> Option<T>;
}

impl ProviderKind {
    /// Every kind.
    pub const ALL: [Self; 2] = [Self::Openai, Self::Anthropic];

    /// Its name as written in `kind`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
        }
    }

    /// This kind's own settings, read by `r`.
    pub fn read(self, r: &mut impl ReadPart) -> Option<KindParams> {
        Some(match self {
            Self::Openai => KindParams::Openai(r.read()?),
            Self::Anthropic => KindParams::Anthropic(r.read()?),
        })
    }
}

/// Where an upstream is and who it is (every kind has these).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
pub struct Upstream {
    /// Which API it speaks.
    pub kind: ProviderKind,
    /// Base URL, up to and including the version (`https://api.openai.com/v1`).
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
}

impl KindParams {
    /// What is wrong with them, if anything: (field, message).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        match self {
            Self::Openai(_) => Vec::new(),
            Self::Anthropic(a) => a.problems(),
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
        out.extend(self.settings.problems());
        out
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
            KindParams::Anthropic(_) => None,
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

    /// The adapter for it, named `name`, with `api_key`.
    pub fn provider(
        &self,
        name: &str,
        api_key: Option<String>,
    ) -> Result<Arc<dyn Provider>, GatewayError> {
        Ok(match &self.settings {
            KindParams::Openai(o) => Arc::new(OpenAiCompat::new(name, self.openai(o, api_key))?),
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
