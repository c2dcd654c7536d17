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

/// The ids of the shipped rules `text` trips, as a clause.
fn shipped_hits(engine: &Engine, text: &str) -> Vec<String> {
    engine
        .rule(Clause {
            kind: "clause",
            text,
        })
        .into_iter()
        .map(|h| engine.rules()[h.rule].id.clone())
        .collect()
}

#[test]
fn the_shipped_rules_load_and_trip_on_real_clauses() {
    let rules = shipped::contract_risks().unwrap();
    let zh = rules.iter().filter(|r| r.id.starts_with("zh-")).count();
    assert!(
        rules.len() >= 200 && zh >= 90 && rules.len() - zh >= 100,
        "{} rules, {zh} Chinese",
        rules.len()
    );
    let engine = Engine::compile(rules).unwrap();
    let apache = std::fs::read_to_string("/usr/share/common-licenses/Apache-2.0").unwrap();
    let para = |start: &str| {
        let at = apache.find(start).unwrap();
        let end = apache[at..].find("\n\n").map_or(apache.len(), |e| at + e);
        apache[at..end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let warranty = shipped_hits(&engine, &para("7. Disclaimer of Warranty."));
    assert!(
        warranty.contains(&"warranty-disclaimer".to_string()),
        "{warranty:?}"
    );
    let liability = shipped_hits(&engine, &para("8. Limitation of Liability."));
    for id in ["liab-excl-indirect", "liab-excl-lost-profits"] {
        assert!(liability.contains(&id.to_string()), "{id}: {liability:?}");
    }
    let patent = shipped_hits(&engine, &para("3. Grant of Patent License."));
    assert!(patent.contains(&"indem-patent".to_string()), "{patent:?}");
    let zh = |t: &str| shipped_hits(&engine, t);
    assert!(
        zh("第二条 合同期满前三十日内任何一方未书面提出异议的，本合同自动续期一年。")
            .contains(&"zh-renew-auto".to_string())
    );
    assert!(
        zh("第六条 未经甲方书面同意不得向第三方提供或者向境外传输。")
            .contains(&"zh-data-crossborder".to_string())
    );
    // Common wordings of a transfer abroad besides the listed phrases, one each.
    for variant in [
        "第七条 乙方不得将用户数据传输至境外。",
        "第七条 乙方不得将个人信息转移到境外。",
        "第七条 相关数据可存储于境外服务器。",
        "第七条 乙方可将数据提供给境外接收方。",
        "第七条 乙方不得向任何境外机构披露客户信息。",
    ] {
        assert!(
            zh(variant).contains(&"zh-data-crossborder".to_string()),
            "{variant}"
        );
    }
    // The other rules' common wordings, one test each, and a near miss that stays quiet.
    for (rule, variant) in [
        (
            "renew-auto",
            "This Agreement renews automatically for successive one-year terms.",
        ),
        (
            "renew-auto",
            "The Term shall be automatically extended by twelve months.",
        ),
        (
            "renew-auto",
            "The subscription automatically extends unless cancelled.",
        ),
        (
            "renew-auto",
            "Each order will roll over into a new term unless terminated.",
        ),
        (
            "data-transfer-abroad",
            "Processor may transfer Customer personal data outside the EEA.",
        ),
        (
            "data-transfer-abroad",
            "Personal data will be stored outside the United Kingdom.",
        ),
        (
            "data-transfer-abroad",
            "Supplier may process personal data in a third country.",
        ),
        (
            "data-transfer-abroad",
            "Customer data may be disclosed to affiliates overseas.",
        ),
        (
            "data-transfer-abroad",
            "Any cross-border transfer of personal data requires consent.",
        ),
        ("zh-term-convenience", "第九条 甲方有权单方解除本合同。"),
        (
            "zh-term-convenience",
            "第九条 甲方可以解除本合同，无需任何理由。",
        ),
        ("zh-term-no-refund", "第五条 已支付的费用不予退款。"),
        ("zh-term-no-refund", "第五条 合同解除后预付款不退款。"),
        ("zh-term-no-refund", "第五条 保证金不予返还。"),
        ("zh-renew-auto", "第二条 期满后本合同自动续签一年。"),
        (
            "zh-renew-auto",
            "第二条 双方未提出异议的，视为同意续期一年。",
        ),
        ("zh-law-governing", "第十条 本合同适用中国法律。"),
        (
            "zh-law-governing",
            "第十条 本合同依照中华人民共和国法律解释。",
        ),
    ] {
        assert!(zh(variant).contains(&rule.to_string()), "{rule}: {variant}");
    }
    for (rule, quiet) in [
        (
            "data-transfer-abroad",
            "Deliveries outside business hours incur a surcharge.",
        ),
        (
            "renew-auto",
            "The parties may agree to renew this Agreement.",
        ),
        ("zh-renew-auto", "第二条 逾期视为违约。"),
    ] {
        assert!(!zh(quiet).contains(&rule.to_string()), "{rule}: {quiet}");
    }
    // 境外 alone, with no transfer, is not one.
    assert!(!zh("第七条 本合同适用于境外分支机构。").contains(&"zh-data-crossborder".to_string()));
    assert!(zh("第十一条 提交甲方所在地人民法院诉讼解决。").contains(&"zh-law-court".to_string()));
    assert!(
        zh("第九条 任何一方可提前九十日书面通知对方解除本合同，无需说明理由。")
            .contains(&"zh-term-convenience".to_string())
    );
    assert!(zh("The parties met for lunch.").is_empty());
}

#[test]
fn the_generator_grows_the_shipped_set_to_distinct_rules_that_compile() {
    let rules = shipped::generated(2_000).unwrap();
    assert_eq!(rules.len(), 2_000);
    let ids: std::collections::HashSet<_> = rules.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids.len(), 2_000);
    let literals: std::collections::HashSet<_> = rules
        .iter()
        .flat_map(|r| r.phrases.iter().chain(&r.keywords))
        .collect();
    assert!(
        literals.len() > 1_500,
        "{} distinct literals",
        literals.len()
    );
    let engine = Engine::compile(rules).unwrap();
    // A variant trips where its qualified phrase is written, and its base does too.
    let hits = shipped_hits(&engine, "The software is provided as is hereunder.");
    assert!(hits.iter().any(|h| h == "warranty-disclaimer"), "{hits:?}");
}

#[test]
fn a_hedged_copy_gives_up_once_stopped() {
    let engine = Engine::load(
        r#"
[[rule]]
id = "renew"
severity = "high"
explanation = "x"
keywords = ["renew"]
"#,
    )
    .unwrap();
    let clauses = [Clause {
        kind: "clause",
        text: "shall renew",
    }; 3];
    let stop = std::sync::atomic::AtomicBool::new(false);
    let all = engine.rule_until(&clauses, &stop).unwrap();
    assert_eq!(all, engine.rule_all(&clauses, 1));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(engine.rule_until(&clauses, &stop).is_none());
}

#[test]
fn needed_words_never_change_what_matches() {
    let rules = shipped::generated(2_000).unwrap();
    let gated = Engine::compile(rules.clone()).unwrap();
    let every = Engine::compile(rules).unwrap().ungated();
    let mut texts: Vec<String> = Vec::new();
    for name in ["Apache-2.0", "GPL-3", "MPL-2.0", "LGPL-2.1"] {
        let t = std::fs::read_to_string(format!("/usr/share/common-licenses/{name}")).unwrap();
        texts.extend(
            t.split("\n\n")
                .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" ")),
        );
    }
    texts.extend(
        [
            "The total liability of the Supplier shall not exceed the fees paid in the 3 months preceding the claim.",
            "第四条 甲方逾期付款的，每逾期一日应按未付金额的千分之五支付违约金。",
            "乙方应在二十四小时内响应，可用性不低于99.9%。",
            "Payment is due within 90 days of the date of invoice.",
        ]
        .map(String::from),
    );
    let mut regex_hits = 0;
    for t in &texts {
        let c = Clause {
            kind: "clause",
            text: t,
        };
        let (a, b) = (gated.rule(c), every.rule(c));
        assert_eq!(a, b, "{t}");
        regex_hits += a
            .iter()
            .filter(|h| !gated.rules()[h.rule].regex.is_empty())
            .count();
    }
    assert!(
        regex_hits > 50,
        "{regex_hits} hits of rules with expressions"
    );
}
