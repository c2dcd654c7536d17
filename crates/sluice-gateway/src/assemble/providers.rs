//! Builds the HTTP upstream adapters named in `[providers]`.

use std::sync::Arc;

use sluice_config::gateway::{CacheTtlConfig, Env, ProviderConfig, ProviderKind};
use sluice_core::GatewayError;
use sluice_providers::anthropic::{
    CacheTtl, DEFAULT_CACHE_MIN_TOKENS, DEFAULT_MAX_TOKENS, DEFAULT_VERSION,
};
use sluice_providers::{
    Anthropic, AnthropicSettings, HttpSettings, OpenAiCompat, OpenAiSettings, Provider,
};

/// Where an OpenAI-compatible `[providers.NAME]` entry lives, with its key read from the
/// environment (for its chat adapter, or for an embeddings endpoint).
pub fn openai_settings(cfg: &ProviderConfig, env: &dyn Env) -> OpenAiSettings {
    let (api_key, headers, http) = common(cfg, env);
    OpenAiSettings {
        base_url: cfg.base_url.clone(),
        api_key,
        headers,
        http,
        responses: cfg.responses == Some(true),
    }
}

fn common(
    cfg: &ProviderConfig,
    env: &dyn Env,
) -> (Option<String>, Vec<(String, String)>, HttpSettings) {
    let http = HttpSettings {
        connect_timeout: cfg.connect_timeout,
        first_byte_timeout: cfg.first_byte_timeout,
        idle_timeout: cfg.idle_timeout,
        pool_max_idle: cfg.pool_max_idle,
        pool_idle_timeout: cfg.pool_idle_timeout,
    };
    let api_key = cfg.api_key_env.as_deref().and_then(|var| env.get(var));
    let headers: Vec<(String, String)> = cfg
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (api_key, headers, http)
}

/// The adapter for one `[providers.NAME]` entry, with its key read from the environment.
pub fn from_config(
    name: &str,
    cfg: &ProviderConfig,
    env: &dyn Env,
) -> Result<Arc<dyn Provider>, GatewayError> {
    Ok(match cfg.kind {
        ProviderKind::Openai => Arc::new(OpenAiCompat::new(name, openai_settings(cfg, env))?),
        ProviderKind::Anthropic => {
            let (api_key, headers, http) = common(cfg, env);
            Arc::new(Anthropic::new(
                name,
                AnthropicSettings {
                    base_url: cfg.base_url.clone(),
                    api_key,
                    version: cfg
                        .anthropic_version
                        .clone()
                        .unwrap_or_else(|| DEFAULT_VERSION.into()),
                    default_max_tokens: cfg.default_max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
                    cache_breakpoints: (cfg.cache_breakpoints != Some(false))
                        .then(|| cfg.cache_min_tokens.unwrap_or(DEFAULT_CACHE_MIN_TOKENS)),
                    cache_ttl: match cfg.cache_ttl {
                        None | Some(CacheTtlConfig::Auto) => CacheTtl::Auto,
                        Some(CacheTtlConfig::FiveMinutes) => CacheTtl::FiveMinutes,
                        Some(CacheTtlConfig::OneHour) => CacheTtl::OneHour,
                    },
                    headers,
                    http,
                },
            )?)
        }
    })
}
