//! `kind = "gemini"` as `config check` reads it: the Gemini API with its key, Vertex AI with
//! its project, location and bearer token, each missing key named.

use super::*;

fn gemini(body: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[providers.g]\nkind = \"gemini\"\nbase_url = \"https://generativelanguage.googleapis.com/v1beta\"\n{body}"
    )
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn a_gemini_provider_reads_with_its_key() {
    let cfg = load(&gemini("api_key_env = \"K\"\n"), &env(&[("K", "k")]), &[]).unwrap();
    let sluice_providers::KindParams::Gemini(g) = &cfg.providers[0].1.settings else {
        panic!("read as another kind");
    };
    assert_eq!(g.api, sluice_providers::gemini::GeminiApi::Gemini);
    assert_eq!(cfg.providers[0].1.key_env(), Some("K"));
}

#[test]
fn vertex_needs_its_project_location_and_a_bearer() {
    let err = load(
        &gemini("api = \"vertex\"\napi_key_env = \"K\"\n"),
        &env(&[("K", "k")]),
        &[],
    )
    .unwrap_err();
    for field in ["token_env", "project", "location"] {
        assert!(
            err.iter().any(|d| d.path == format!("providers.g.{field}")),
            "{field}: {err}"
        );
    }
    let fine =
        "api = \"vertex\"\nproject = \"acme\"\nlocation = \"us-central1\"\ntoken_env = \"T\"\n";
    let cfg = load(&gemini(fine), &env(&[("T", "t")]), &[]).unwrap();
    assert_eq!(cfg.providers[0].1.key_env(), Some("T"));
    let err = load(&gemini(fine), &env(&[]), &[]).unwrap_err();
    assert!(
        err.iter()
            .any(|d| d.path == "providers.g.token_env" && d.message.contains("`T` is not set")),
        "{err}"
    );
    let err = load(
        &gemini("api = \"vertex\"\nproject = \"acme\"\nlocation = \"us-central1\"\ntoken_file = \"/nonexistent/sluice/token\"\n"),
        &env(&[]),
        &[],
    )
    .unwrap_err();
    assert!(
        err.iter().any(|d| d.path == "providers.g.token_file"),
        "{err}"
    );
}

#[test]
fn a_missing_key_is_named_and_vertex_keys_are_gemini_only() {
    let err = load(&gemini(""), &env(&[]), &[]).unwrap_err();
    assert!(
        err.iter().any(
            |d| d.path == "providers.g.api_key_env" && d.message.contains("needs a credential")
        ),
        "{err}"
    );
    let text = "[server]\nlisten = \"127.0.0.1:0\"\n[providers.p]\nkind = \"openai\"\nbase_url = \"http://localhost\"\nproject = \"acme\"\n";
    let err = load(text, &env(&[]), &[]).unwrap_err();
    assert!(
        err.iter()
            .any(|d| d.path == "providers.p.project"
                && d.message == "only applies to kind = \"gemini\""),
        "{err}"
    );
}
