#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::count::FourBytes;

fn page(n: usize, of: usize, body: &str) -> String {
    format!("ACME SERVICES AGREEMENT - CONFIDENTIAL\n\n{body}\n\nPage {n} of {of}\n\n")
}

fn contract() -> String {
    let mut s = String::new();
    s.push_str(&page(
        1,
        3,
        "ARTICLE 1 - DEFINITIONS\n\n1.1 Terms used here have the meanings given in the schedule.\n\n1.2 Headings are for convenience only.",
    ));
    s.push_str(&page(
        2,
        3,
        "ARTICLE 2 - TERMINATION\n\n2.1 Either party may terminate for material breach.\n\n2.2 The notice period for termination for convenience is 90 days.",
    ));
    s.push_str(&page(
        3,
        3,
        "ARTICLE 3 - LIABILITY\n\n3.1 The cap on aggregate liability is EUR 2,000,000.\n\n1.2 Headings are for convenience only.",
    ));
    s
}

#[test]
fn headers_and_footers_are_boilerplate_after_their_first_occurrence() {
    let text = contract();
    let p = Passages::of(&text, &FourBytes);
    let headers: Vec<Kind> = p
        .list()
        .iter()
        .enumerate()
        .filter(|(i, _)| p.text(*i).starts_with("ACME"))
        .map(|(_, x)| x.kind)
        .collect();
    assert_eq!(headers, [Kind::Body, Kind::Boilerplate, Kind::Boilerplate]);
    let footers: Vec<Kind> = p
        .list()
        .iter()
        .enumerate()
        .filter(|(i, _)| p.text(*i).starts_with("Page"))
        .map(|(_, x)| x.kind)
        .collect();
    assert_eq!(footers, [Kind::Body, Kind::Boilerplate, Kind::Boilerplate]);
}

#[test]
fn clauses_are_passages_under_their_article_and_repeats_are_duplicates() {
    let text = contract();
    let p = Passages::of(&text, &FourBytes);
    let i = (0..p.list().len())
        .find(|i| p.text(*i).starts_with("2.2 "))
        .unwrap();
    assert_eq!(
        p.text(i),
        "2.2 The notice period for termination for convenience is 90 days."
    );
    let h = p.list()[i].heading.unwrap();
    assert_eq!(p.text(h), "ARTICLE 2 - TERMINATION");
    assert_eq!(p.list()[h].kind, Kind::Heading);
    let repeats: Vec<Kind> = (0..p.list().len())
        .filter(|i| p.text(*i).starts_with("1.2 "))
        .map(|i| p.list()[i].kind)
        .collect();
    assert_eq!(repeats, [Kind::Body, Kind::Duplicate]);
}

#[test]
fn the_clause_that_answers_ranks_first_and_is_written_under_its_heading() {
    let text = contract();
    let p = Passages::of(&text, &FourBytes);
    let ranked = p.ranked("What is the notice period for termination for convenience?");
    assert!(
        p.text(ranked[0]).starts_with("2.2 "),
        "{}",
        p.text(ranked[0])
    );
    let liability = p.ranked("What is the cap on aggregate liability?");
    assert!(p.text(liability[0]).starts_with("3.1 "));
    let out = p.write(&[ranked[0]]);
    assert_eq!(
        out,
        "ARTICLE 2 - TERMINATION\n\n[...]\n\n2.2 The notice period for termination for convenience is 90 days."
    );
}

#[test]
fn fill_respects_the_budget_and_written_text_keeps_document_order() {
    let text = contract();
    let p = Passages::of(&text, &FourBytes);
    let ranked = p.ranked("termination liability");
    for budget in [10, 30, 60, 200] {
        let chosen = p.fill(&ranked, budget);
        let written = p.write(&chosen);
        assert!(FourBytes.tokens(&written) <= budget, "{budget}: {written}");
        // Document order: every chosen passage's text appears in the order of the text.
        let mut at = 0;
        let mut sorted = chosen.clone();
        sorted.sort();
        for i in sorted {
            let found = written[at..].find(p.text(i)).unwrap();
            at += found;
        }
    }
    assert!(p.fill(&ranked, 0).is_empty());
}

#[test]
fn a_long_paragraph_is_cut_at_sentence_ends() {
    let sentence = "The supplier shall keep records of every service it provides. ";
    let text = sentence.repeat(80);
    let p = Passages::of(&text, &FourBytes);
    assert!(p.list().len() >= 3);
    for (i, x) in p.list().iter().enumerate() {
        assert!(x.end - x.start <= MAX_PASSAGE_BYTES);
        assert!(p.text(i).ends_with('.'), "{:?}", p.text(i));
    }
    let total: usize = p.list().iter().map(|x| x.end - x.start).sum();
    assert!(total + p.list().len() >= text.trim().len());
}

#[test]
fn a_sentence_longer_than_a_passage_is_cut_at_a_space_and_multibyte_text_is_safe() {
    let text = "é".repeat(500) + " " + &"ü".repeat(1200);
    let p = Passages::of(&text, &FourBytes);
    let joined: String = (0..p.list().len()).map(|i| p.text(i)).collect();
    assert_eq!(joined.chars().filter(|c| *c == 'ü').count(), 1200);
}

#[test]
fn headings_are_recognised_and_sentences_are_not() {
    assert!(looks_like_heading("ARTICLE 7 - LIMITATION OF LIABILITY"));
    assert!(looks_like_heading("7. Term and Termination"));
    assert!(looks_like_heading("# Overview"));
    assert!(looks_like_heading("PAYMENT TERMS"));
    assert!(!looks_like_heading("The supplier shall pay."));
    assert!(!looks_like_heading(
        "7.3 the parties agree that this applies"
    ));
    assert!(!looks_like_heading(""));
}

#[test]
fn terms_drop_stop_words_and_case() {
    let t: Vec<String> = terms("What is the Notice-Period of a 90 day term?").collect();
    assert_eq!(t, ["notice", "period", "90", "day", "term"]);
}

#[test]
fn ranking_is_the_same_every_time() {
    let text = contract();
    let a = Passages::of(&text, &FourBytes).ranked("convenience termination notice");
    let b = Passages::of(&text, &FourBytes).ranked("convenience termination notice");
    assert_eq!(a, b);
}

#[test]
fn rows_that_differ_in_their_numbers_are_kept() {
    let text = "Fee for year 1: EUR 100\nFee for year 2: EUR 120\nFee for year 3: EUR 140\n\n\
                The fee for year 1 is due in March.\n\nThe fee for year 2 is due in March.";
    let p = Passages::of(text, &FourBytes);
    assert!(
        p.list().iter().all(|x| x.kind == Kind::Body),
        "{:?}",
        p.list()
    );
    assert_eq!(p.bodies().count(), 3);
}

/// The passage of `p` whose text holds `needle`, with its kind.
fn holding<'a>(p: &'a Passages<'_>, needle: &str) -> Vec<(&'a str, Kind)> {
    p.list()
        .iter()
        .enumerate()
        .filter(|(i, _)| p.text(*i).contains(needle))
        .map(|(i, x)| (p.text(i), x.kind))
        .collect()
}

#[test]
fn a_wrapped_line_that_starts_with_a_number_stays_in_its_sentence() {
    let text = "8. Termination.\n\nYou may not propagate or modify it except as expressly provided under Section\n2.1 of this License shall terminate your rights.\n\n9. Acceptance.\n\n9.1 You are not required to accept this License.";
    let p = Passages::of(text, &FourBytes);
    let found = holding(&p, "2.1 of this License");
    assert_eq!(found.len(), 1);
    assert!(found[0].0.starts_with("You may not propagate"), "{found:?}");
    // A numbered line after a sentence's end still opens a clause.
    assert!(holding(&p, "9.1 You are")[0].0.starts_with("9.1"));
}

#[test]
fn a_sentence_said_in_three_places_is_text_and_a_page_footer_is_not() {
    let said = "The Licensor provides the Work on an AS IS basis.";
    let mut text = String::new();
    for n in 1..=3 {
        text.push_str(&format!(
            "Clause {n} says this and more about the work, at some length.\n\n{said}\n\nPage {n} of 3\n\n"
        ));
    }
    let p = Passages::of(&text, &FourBytes);
    let kinds: Vec<Kind> = holding(&p, said).iter().map(|(_, k)| *k).collect();
    assert_eq!(kinds[0], Kind::Body, "{kinds:?}");
    assert!(!kinds.contains(&Kind::Boilerplate), "{kinds:?}");
    let footers: Vec<Kind> = holding(&p, "Page ").iter().map(|(_, k)| *k).collect();
    assert_eq!(
        footers.iter().filter(|k| **k == Kind::Boilerplate).count(),
        2
    );
}

#[test]
fn a_paragraph_in_capitals_is_text_and_a_line_in_capitals_alone_a_heading() {
    let text = "LIMITATION OF LIABILITY\n\nIN NO EVENT UNLESS REQUIRED BY APPLICABLE LAW OR AGREED TO IN\nWRITING WILL ANY COPYRIGHT HOLDER BE LIABLE TO YOU FOR DAMAGES\nARISING OUT OF THE USE OR INABILITY TO USE THE PROGRAM\n\nThe rest of the terms.";
    let p = Passages::of(text, &FourBytes);
    assert_eq!(holding(&p, "LIMITATION OF")[0].1, Kind::Heading);
    let body = holding(&p, "WILL ANY COPYRIGHT HOLDER");
    assert_eq!(body.len(), 1);
    assert_eq!(body[0].1, Kind::Body);
    assert!(body[0].0.starts_with("IN NO EVENT") && body[0].0.ends_with("THE PROGRAM"));
    // It is ranked like any text.
    let ranked = p.ranked("is a copyright holder liable for damages?");
    assert_eq!(p.text(ranked[0]), body[0].0);
}

#[test]
fn chinese_is_ranked_by_pairs_of_characters() {
    let t: Vec<String> = terms("违约责任 liability 第5条").collect();
    assert_eq!(
        t,
        ["违约", "约责", "责任", "liability", "第", "条"].map(String::from)
    );
    let text = "第一条 定义\n\n本合同所称服务是指乙方提供的技术服务。\n\n第二条 违约责任\n\n任何一方违反本合同约定的，应当向对方支付违约金。";
    let p = Passages::of(text, &FourBytes);
    let ranked = p.ranked("违约金是多少？");
    assert!(
        p.text(ranked[0]).contains("支付违约金"),
        "{}",
        p.text(ranked[0])
    );
}

/// Debian's copy of licence `name` (`/usr/share/common-licenses`, every Debian system has
/// it); `None`, said aloud, elsewhere.
fn licence(name: &str) -> Option<String> {
    let path = format!("/usr/share/common-licenses/{name}");
    match std::fs::read_to_string(&path) {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!(
                "skipped: {path} cannot be read ({e}); this test needs Debian's licence texts"
            );
            None
        }
    }
}

#[test]
fn real_licences_keep_their_wrapped_sentences_and_their_disclaimers() {
    if let Some(mpl) = licence("MPL-2.0") {
        let p = Passages::of(&mpl, &FourBytes);
        let found = holding(&p, "2.1 of this License shall terminate");
        assert!(
            found.len() == 1 && found[0].0.contains("alleging that a Contributor Version"),
            "{found:?}"
        );
    }
    if let Some(gpl) = licence("GPL-3") {
        let p = Passages::of(&gpl, &FourBytes);
        let found = holding(&p, "11 of the WIPO copyright treaty");
        assert!(
            found.len() == 1 && found[0].0.contains("No covered work shall be deemed"),
            "{found:?}"
        );
        let ranked = p.ranked("Is there any warranty for the program?");
        assert!(
            ranked[..3]
                .iter()
                .any(|&i| p.text(i).contains("THERE IS NO WARRANTY FOR THE PROGRAM")),
            "{:?}",
            ranked[..3].iter().map(|&i| p.text(i)).collect::<Vec<_>>()
        );
        assert!(
            !p.list().iter().any(|x| x.kind == Kind::Boilerplate),
            "no page furniture in a licence without pages"
        );
    }
}

#[test]
fn a_comment_in_a_code_block_is_code_and_every_line_can_be_sent() {
    let text = "# 部署说明\n\n以下脚本设置服务的端口。\n\n```bash\n# 设置端口为 8443\nexport PORT=8443\n# 启动服务\n./serve --port $PORT\n```\n\n## Deployment\n\n```python\n# the retry limit is 7\nRETRIES = 7\n```";
    let p = Passages::of(text, &FourBytes);
    for (line, kind) in [
        ("# 设置端口为 8443", Kind::Body),
        ("# the retry limit is 7", Kind::Body),
        ("# 部署说明", Kind::Heading),
    ] {
        let found = holding(&p, line);
        assert_eq!(found.len(), 1, "{line}: {found:?}");
        assert_eq!(found[0].1, kind, "{line}: {found:?}");
    }
    // The block is one passage, ranked and sent with the heading it sits under.
    let ranked = p.ranked("设置端口为多少？");
    assert!(
        p.text(ranked[0]).contains("export PORT=8443"),
        "{}",
        p.text(ranked[0])
    );
    let sent = p.write(&ranked[..1]);
    assert!(sent.starts_with("# 部署说明"), "{sent}");
    let ranked = p.ranked("what is the retry limit?");
    assert!(
        p.text(ranked[0]).contains("RETRIES = 7"),
        "{}",
        p.text(ranked[0])
    );
    let sent = p.write(&ranked[..1]);
    assert!(sent.starts_with("## Deployment"), "{sent}");
}

#[test]
fn a_heading_that_heads_nothing_is_a_passage_of_its_own() {
    for text in [
        "# Overview\n## Port 8443 is the default\n## Limits\n\nAt most 7 retries.",
        "# 概述\n# 默认端口是 8443\n# 限制\n\n最多重试七次。",
    ] {
        let p = Passages::of(text, &FourBytes);
        let port = holding(&p, "8443");
        assert_eq!(port.len(), 1, "{port:?}");
        assert_eq!(port[0].1, Kind::Body, "sendable: {port:?}");
        let i = p.bodies().find(|i| p.text(*i).contains("8443")).unwrap();
        assert!(p.ranked("8443").contains(&i));
        assert!(p.write(&[i]).contains("8443"));
        // A heading with a body under it stays a heading.
        let heads: Vec<Kind> = p
            .list()
            .iter()
            .filter(|x| x.kind == Kind::Heading)
            .map(|x| x.kind)
            .collect();
        assert_eq!(heads.len(), 1, "{:?}", p.list());
    }
}
