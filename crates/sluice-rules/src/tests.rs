#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

const RULES: &str = r#"
[[rule]]
id = "liability-uncapped"
severity = "critical"
explanation = "Liability with no cap exposes the party to unlimited damages."
phrases = ["unlimited liability"]
regex = ['liab\w* (?:shall|will) not be (?:limited|capped)']
unless = ["except for gross negligence"]

[[rule]]
id = "auto-renewal"
severity = "medium"
explanation = "The term renews by itself unless notice is given."
keywords = ["renews", "renewal"]
near = { terms = ["automatic", "renew"], within = 4 }
kinds = ["clause"]

[[rule]]
id = "governing-law-zh"
severity = "low"
explanation = "适用法律条款。"
phrases = ["适用法律"]
"#;

fn clause(text: &str) -> Clause<'_> {
    Clause {
        kind: "clause",
        text,
    }
}

fn ids(e: &Engine, text: &str) -> Vec<String> {
    e.rule(clause(text))
        .iter()
        .map(|h| e.rules()[h.rule].id.clone())
        .collect()
}

#[test]
fn literals_and_regexes_trip_their_rules_with_the_match_located() {
    let e = Engine::load(RULES).unwrap();
    let text = "The Supplier's liability shall not be limited in any way.";
    let hits = e.rule(clause(text));
    assert_eq!(hits.len(), 1);
    assert_eq!(e.rules()[hits[0].rule].id, "liability-uncapped");
    assert_eq!(
        &text[hits[0].start..hits[0].end],
        "liability shall not be limited"
    );
    // Case does not matter; an `unless` term takes the rule back.
    assert_eq!(
        ids(&e, "UNLIMITED LIABILITY applies."),
        ["liability-uncapped"]
    );
    assert!(ids(&e, "Unlimited liability, except for gross negligence.").is_empty());
    // Chinese, with no word boundaries.
    assert_eq!(
        ids(&e, "第十二条 适用法律：本合同受中华人民共和国法律管辖。"),
        ["governing-law-zh"]
    );
}

#[test]
fn keywords_are_whole_words_and_near_and_kinds_are_conditions() {
    let e = Engine::load(RULES).unwrap();
    // "renewals" is not the keyword "renewal"; "renews" is, but only near "automatic".
    assert!(ids(&e, "It renews each year.").is_empty());
    assert_eq!(
        ids(&e, "This agreement renews by automatic renew at each term."),
        ["auto-renewal"]
    );
    assert!(
        ids(
            &e,
            "Renewal is automatic after a notice period of thirty days, then we renew."
        )
        .is_empty()
    );
    assert!(ids(&e, "renewals automatic renew").is_empty());
    // Only clauses of its kinds.
    let heading = Clause {
        kind: "heading",
        text: "Renewal: automatic renew",
    };
    assert!(e.rule(heading).is_empty());
}

#[test]
fn a_file_with_errors_is_refused_with_every_error_and_its_rule() {
    let bad = r#"
[[rule]]
id = "a"
severity = "high"
explanation = "no matcher"

[[rule]]
id = "a"
severity = "severe"
explanation = "bad severity"
keywords = ["x"]

[[rule]]
severity = "low"
explanation = "no id"
keywords = [""]

[[rule]]
id = "near"
severity = "low"
explanation = "near of nothing"
keywords = ["x"]
near = { terms = ["a", "b"], within = 0 }
"#;
    let Err(LoadError::Rules(errors)) = Engine::load(bad) else {
        panic!("accepted");
    };
    let said: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 4, "{said:#?}");
    assert!(
        said[0].starts_with("rule a: it has no keywords"),
        "{said:#?}"
    );
    assert!(
        said[1].starts_with("rule a: ") && said[1].contains("severe"),
        "{said:#?}"
    );
    assert!(said[2].starts_with("rule #3: "), "{said:#?}");
    assert!(said[3].contains("near.within"), "{said:#?}");
    let regex = r#"
[[rule]]
id = "r1"
severity = "low"
explanation = "x"
regex = ["(unclosed"]

[[rule]]
id = "r2"
severity = "low"
explanation = "x"
regex = ["[z-a]"]
"#;
    let Err(LoadError::Rules(errors)) = Engine::load(regex) else {
        panic!("accepted");
    };
    let rules: Vec<&str> = errors.iter().map(|e| e.rule.as_str()).collect();
    assert_eq!(rules, ["r1", "r2"]);
    assert!(matches!(Engine::load("rule = 3"), Err(LoadError::Toml(_))));
}

#[test]
fn clauses_ruled_across_threads_are_ruled_as_one_by_one() {
    let e = Engine::load(RULES).unwrap();
    let texts: Vec<String> = (0..500)
        .map(|i| match i % 3 {
            0 => format!("Clause {i}: unlimited liability applies."),
            1 => format!("Clause {i}: renews by automatic renew."),
            _ => format!("Clause {i}: nothing of note."),
        })
        .collect();
    let clauses: Vec<Clause<'_>> = texts.iter().map(|t| clause(t)).collect();
    let one: Vec<Vec<Hit>> = clauses.iter().map(|c| e.rule(*c)).collect();
    assert_eq!(e.rule_all(&clauses, 4), one);
    assert_eq!(one.iter().filter(|h| !h.is_empty()).count(), 334);
}
