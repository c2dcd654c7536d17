//! Tests of `scenario`.

use super::*;

#[test]
fn every_builtin_scenario_parses() {
    for (name, _) in BUILTIN {
        match Scenario::builtin(name) {
            Some(Ok(s)) => assert_eq!(&s.meta.name, name),
            Some(Err(e)) => panic!("{name}: {e}"),
            None => panic!("{name} missing"),
        }
    }
}

#[test]
fn the_heavy_tail_scenario_has_the_documented_shape() {
    let s = Scenario::builtin("heavy-tail").unwrap().unwrap();
    let (_, up) = &s.upstreams[0];
    assert_eq!(up.ttft_median, Duration::from_millis(800));
    assert!((up.ttft_sigma - 0.5).abs() < 1e-9);
    assert!((up.stall_probability - 0.02).abs() < 1e-9);
    assert_eq!(up.stall, Duration::from_secs(8));
}

#[test]
fn bad_references_are_reported() {
    let text = r#"
[upstreams.a]
[models.chat]
deployments = [{ provider = "b", model = "m" }]
[[traffic]]
model = "nope"
[[bursts]]
model = "chat"
[[bursts]]
model = "missing"
"#;
    let err = Scenario::parse(text).unwrap_err();
    let paths: Vec<&str> = err.iter().map(|d| d.path.as_str()).collect();
    assert!(
        paths.contains(&"models.chat.deployments[0].provider"),
        "{err}"
    );
    assert!(paths.contains(&"traffic[0].model"), "{err}");
    assert!(paths.contains(&"bursts[1].model"), "{err}");
    assert_eq!(err.len(), 3, "{err}");
}

#[test]
fn a_semantic_cache_needs_an_upstream_that_embeds() {
    let with = |embeddings: &str| {
        format!(
            "[gateway.semantic]\nenabled = true\n{embeddings}\n[upstreams.a]\nfaq = true\n\
             [models.chat]\ndeployments = [{{ provider = \"a\", model = \"m\" }}]\n\
             [[traffic]]\nmodel = \"chat\"\nquestions = \"faq\"\n"
        )
    };
    let paths = |text: &str| -> Vec<String> {
        match Scenario::parse(text) {
            Ok(_) => Vec::new(),
            Err(e) => e.iter().map(|d| d.path.clone()).collect(),
        }
    };
    assert_eq!(paths(&with("")), ["gateway.semantic.embeddings"]);
    assert_eq!(
        paths(&with(
            "[gateway.semantic.embeddings]\nprovider = \"b\"\nmodel = \"e\""
        )),
        ["gateway.semantic.embeddings"]
    );
    let s = Scenario::parse(&with(
        "[gateway.semantic.embeddings]\nprovider = \"a\"\nmodel = \"e\"",
    ))
    .unwrap();
    assert_eq!(s.traffic[0].questions, Some(crate::load::Questions::Faq));
    assert!(s.upstreams[0].1.faq);
    // A source of questions it does not know is named.
    let bad = with("[gateway.semantic.embeddings]\nprovider = \"a\"\nmodel = \"e\"")
        .replace("\"faq\"\n", "\"quora\"\n");
    assert_eq!(paths(&bad), ["traffic[0].questions"]);
}
