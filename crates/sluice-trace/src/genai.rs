//! The well-known `gen_ai.provider.name` of an upstream, as the OpenTelemetry GenAI
//! conventions list them: told by the wire protocol it speaks, refined by the host it is
//! reached at (an OpenAI-protocol endpoint at `api.deepseek.com` is `deepseek`).

/// The `gen_ai.provider.name` of a provider speaking `protocol` (its `kind`) at
/// `host`.
pub fn provider_name(protocol: &str, host: Option<&str>) -> &'static str {
    let host = host.unwrap_or("").to_ascii_lowercase();
    let at = |domain: &str| host == domain || host.ends_with(&format!(".{domain}"));
    if at("openai.azure.com") {
        "azure.ai.openai"
    } else if at("services.ai.azure.com") || at("inference.ai.azure.com") {
        "azure.ai.inference"
    } else if at("deepseek.com") {
        "deepseek"
    } else if at("x.ai") {
        "x_ai"
    } else if at("mistral.ai") {
        "mistral_ai"
    } else if at("groq.com") {
        "groq"
    } else if at("perplexity.ai") {
        "perplexity"
    } else if at("cohere.com") || at("cohere.ai") {
        "cohere"
    } else if at("generativelanguage.googleapis.com") {
        "gcp.gemini"
    } else if at("aiplatform.googleapis.com") || host.ends_with("-aiplatform.googleapis.com") {
        // Vertex AI's regional hosts are `{location}-aiplatform.googleapis.com`.
        "gcp.vertex_ai"
    } else if host.starts_with("bedrock-runtime.") && host.ends_with(".amazonaws.com") {
        "aws.bedrock"
    } else if protocol == "anthropic" {
        "anthropic"
    } else if protocol == "gemini" {
        "gcp.gemini"
    } else if protocol == "bedrock" {
        "aws.bedrock"
    } else {
        "openai"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protocol_names_it_unless_the_host_is_known() {
        assert_eq!(provider_name("openai", Some("api.openai.com")), "openai");
        assert_eq!(provider_name("gemini", Some("127.0.0.1")), "gcp.gemini");
        assert_eq!(provider_name("bedrock", Some("127.0.0.1")), "aws.bedrock");
        assert_eq!(
            provider_name("gemini", Some("us-central1-aiplatform.googleapis.com")),
            "gcp.vertex_ai"
        );
        assert_eq!(
            provider_name("anthropic", Some("api.anthropic.com")),
            "anthropic"
        );
        assert_eq!(
            provider_name("openai", Some("api.deepseek.com")),
            "deepseek"
        );
        assert_eq!(
            provider_name("openai", Some("my-res.openai.azure.com")),
            "azure.ai.openai"
        );
        assert_eq!(
            provider_name("openai", Some("bedrock-runtime.us-east-1.amazonaws.com")),
            "aws.bedrock"
        );
        assert_eq!(provider_name("openai", Some("127.0.0.1")), "openai");
        assert_eq!(provider_name("anthropic", None), "anthropic");
        // A lookalike is not the provider.
        assert_eq!(provider_name("openai", Some("notdeepseek.com")), "openai");
    }
}
