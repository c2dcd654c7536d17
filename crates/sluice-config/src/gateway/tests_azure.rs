//! `kind = "azure"` as `config check` reads it: the credential it needs, named when missing,
//! unset or unreadable, and its keys refused on other kinds.

use super::*;

fn azure(body: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[providers.az]\nkind = \"azure\"\nbase_url = \"https://r.openai.azure.com\"\n{body}"
    )
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn an_azure_provider_reads_with_its_defaults() {
    let cfg = load(&azure("api_key_env = \"K\"\n"), &env(&[("K", "k")]), &[]).unwrap();
    let sluice_providers::KindParams::Azure(a) = &cfg.providers[0].1.settings else {
        panic!("read as another kind");
    };
    assert_eq!(a.api, sluice_providers::azure::AzureApi::Deployments);
    assert_eq!(a.version(), Some("2024-10-21"));
    let v1 = load(
        &azure("api = \"v1\"\ntoken_env = \"T\"\n"),
        &env(&[("T", "t")]),
        &[],
    )
    .unwrap();
    assert_eq!(v1.providers[0].1.key_env(), Some("T"));
    let sluice_providers::KindParams::Azure(a) = &v1.providers[0].1.settings else {
        panic!("read as another kind");
    };
    assert_eq!(a.version(), None, "the v1 URLs need no api-version");
}

#[test]
fn a_missing_unset_or_unreadable_credential_is_named() {
    let err = load(&azure(""), &env(&[]), &[]).unwrap_err();
    assert!(
        err.iter()
            .any(|d| d.path == "providers.az.api_key_env"
                && d.message.contains("needs a credential")),
        "{err}"
    );
    let err = load(&azure("token_env = \"T\"\n"), &env(&[]), &[]).unwrap_err();
    assert!(
        err.iter()
            .any(|d| d.path == "providers.az.token_env" && d.message.contains("`T` is not set")),
        "{err}"
    );
    let err = load(
        &azure("token_file = \"/nonexistent/sluice/token\"\n"),
        &env(&[]),
        &[],
    )
    .unwrap_err();
    assert!(
        err.iter().any(|d| d.path == "providers.az.token_file"),
        "{err}"
    );
    let err = load(
        &azure("api_key_env = \"K\"\ntoken_env = \"T\"\n"),
        &env(&[("K", "k"), ("T", "t")]),
        &[],
    )
    .unwrap_err();
    assert!(
        err.iter().any(|d| d.message.contains("write one of")),
        "{err}"
    );
    let err = load(
        &azure("api_key_env = \"K\"\napi_version = \"\"\n"),
        &env(&[("K", "k")]),
        &[],
    )
    .unwrap_err();
    assert!(
        err.iter().any(|d| d.path == "providers.az.api_version"),
        "{err}"
    );
}

#[test]
fn azure_keys_are_azure_only() {
    let text = "[server]\nlisten = \"127.0.0.1:0\"\n[providers.p]\nkind = \"openai\"\nbase_url = \"http://localhost\"\napi_version = \"2024-10-21\"\n";
    let err = load(text, &env(&[]), &[]).unwrap_err();
    assert!(
        err.iter().any(|d| d.path == "providers.p.api_version"
            && d.message == "only applies to kind = \"azure\""),
        "{err}"
    );
}
