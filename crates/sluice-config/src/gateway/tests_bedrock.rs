//! `kind = "bedrock"` as `config check` reads it: its region, and AWS credentials named
//! where they are missing.

use super::*;

fn bedrock(body: &str) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[providers.b]\nkind = \"bedrock\"\nbase_url = \"https://bedrock-runtime.us-east-1.amazonaws.com\"\n{body}"
    )
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn a_bedrock_provider_reads_with_its_region_and_credentials_from_the_environment() {
    let keys = env(&[
        ("AWS_ACCESS_KEY_ID", "AKID"),
        ("AWS_SECRET_ACCESS_KEY", "s"),
    ]);
    let cfg = load(&bedrock("region = \"us-east-1\"\n"), &keys, &[]).unwrap();
    let sluice_providers::KindParams::Bedrock(b) = &cfg.providers[0].1.settings else {
        panic!("read as another kind");
    };
    assert_eq!(b.region.as_deref(), Some("us-east-1"));
    let err = load(&bedrock(""), &keys, &[]).unwrap_err();
    assert!(err.iter().any(|d| d.path == "providers.b.region"), "{err}");
}

#[test]
fn missing_credentials_are_named_and_an_api_key_is_enough() {
    let missing = format!(
        "region = \"us-east-1\"\ncredentials_file = \"{}\"\n",
        std::env::temp_dir()
            .join("sluice-no-such-credentials")
            .display()
    );
    let err = load(&bedrock(&missing), &env(&[]), &[]).unwrap_err();
    assert!(
        err.iter().any(|d| d.path == "providers.b.kind"
            && d.message.contains("no AWS credentials")
            && d.message.contains("AWS_ACCESS_KEY_ID")),
        "{err}"
    );
    let keyed = format!("{missing}api_key_env = \"BEDROCK_KEY\"\n");
    assert!(load(&bedrock(&keyed), &env(&[("BEDROCK_KEY", "k")]), &[]).is_ok());
    let text = "[server]\nlisten = \"127.0.0.1:0\"\n[providers.p]\nkind = \"openai\"\nbase_url = \"http://localhost\"\nregion = \"us-east-1\"\n";
    let err = load(text, &env(&[]), &[]).unwrap_err();
    assert!(
        err.iter()
            .any(|d| d.path == "providers.p.region"
                && d.message == "only applies to kind = \"bedrock\""),
        "{err}"
    );
}
