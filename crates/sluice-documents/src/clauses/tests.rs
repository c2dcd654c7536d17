//! Clauses of real texts (every licence Debian ships) and of made-up ones: numbering,
//! furniture, wrapped lines, capitals, Chinese, long paragraphs, Markdown.

use super::*;

const LICENCES: &str = "/usr/share/common-licenses";

fn pages(text: &str) -> Vec<String> {
    text.split('\x0c').map(str::to_string).collect()
}

fn licence(name: &str) -> (String, Vec<Clause>) {
    let text = std::fs::read_to_string(format!("{LICENCES}/{name}")).unwrap();
    let clauses = split_pages(name, &pages(&text), false);
    (text, clauses)
}

/// The distinct top-level section numbers, in order of first appearance.
fn sections(clauses: &[Clause]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in clauses {
        if let Some(n) = &c.number {
            let top = n.split(['.', '(']).next().unwrap().to_string();
            if !top.is_empty() && !out.contains(&top) {
                out.push(top);
            }
        }
    }
    out
}

fn count(clauses: &[Clause], kind: ClauseKind) -> usize {
    clauses.iter().filter(|c| c.kind == kind).count()
}

#[test]
fn licences_split_into_their_numbered_sections() {
    let (_, apache) = licence("Apache-2.0");
    let want: Vec<String> = (1..=9).map(|n| n.to_string()).collect();
    assert_eq!(sections(&apache), want);
    assert_eq!(
        count(&apache, ClauseKind::Definition),
        10,
        "Apache's ten definitions"
    );
    let lettered: Vec<_> = apache
        .iter()
        .filter_map(|c| c.number.as_deref())
        .filter(|n| n.starts_with("4("))
        .collect();
    assert_eq!(lettered, ["4(a)", "4(b)", "4(c)", "4(d)"]);

    let (_, gpl) = licence("GPL-3");
    let want: Vec<String> = (0..=17).map(|n| n.to_string()).collect();
    assert_eq!(sections(&gpl), want);
    let titled = gpl
        .iter()
        .filter(|c| c.kind == ClauseKind::Heading && c.text.ends_with("Definitions."))
        .count();
    assert_eq!(titled, 1, "`0. Definitions.` is a heading");

    let (_, mpl) = licence("MPL-2.0");
    let want: Vec<String> = (1..=10).map(|n| n.to_string()).collect();
    assert_eq!(
        sections(&mpl),
        want,
        "sections 6 and 7 sit in a box of stars"
    );
    let defs: Vec<_> = mpl
        .iter()
        .filter(|c| c.kind == ClauseKind::Definition)
        .collect();
    assert_eq!(defs.len(), 14, "1.1 to 1.14");
    assert!(
        mpl.iter()
            .any(|c| c.kind == ClauseKind::Heading && c.text == "1. Definitions"),
        "an underlined title"
    );
}

#[test]
fn every_licence_splits_with_ids_that_point_into_its_text() {
    let mut total = 0;
    for entry in std::fs::read_dir(LICENCES).unwrap() {
        let path = entry.unwrap().path();
        if path.is_symlink() {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let (text, clauses) = licence(&name);
        assert!(clauses.len() >= 5, "{name}: {} clauses", clauses.len());
        let joined = &text;
        for c in &clauses {
            let first = c.text.split_whitespace().next().unwrap();
            assert!(
                joined[c.offset..].starts_with(first),
                "{name}: {} does not start at {}",
                c.id,
                c.offset
            );
            assert!(
                c.text.len() <= MAX_CLAUSE_BYTES || !c.text[..c.text.len() - 1].contains(". "),
                "{name}: {} too long",
                c.id
            );
        }
        let mut ids: Vec<_> = clauses.iter().map(|c| &c.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), clauses.len(), "{name}: ids are unique");
        assert_eq!(
            split_pages(&name, &pages(&text), false),
            clauses,
            "{name}: stable"
        );
        total += clauses.len();
    }
    assert!(total > 700, "{total} clauses in all");
}

#[test]
fn a_wrapped_line_that_starts_with_a_number_is_the_rest_of_its_sentence() {
    let text = "5.2. If You initiate litigation, the rights granted to You under Section\n\
                2.1 of this License shall terminate.\n\
                5.3. In the event of termination, all end user licenses survive.\n";
    let c = split_pages("t", &pages(text), false);
    assert_eq!(c.len(), 2, "{c:#?}");
    assert!(
        c[0].text
            .ends_with("under Section 2.1 of this License shall terminate.")
    );
    assert_eq!(c[1].number.as_deref(), Some("5.3"));
}

#[test]
fn footers_are_what_repeats_at_page_edges_and_real_sentences_stay() {
    let body = "The Supplier shall not be liable for indirect loss.";
    let mut pages = Vec::new();
    for p in 1..=4 {
        pages.push(format!(
            "ACME Corp - Confidential\n\n{p}.1 Text of page {p}. {body}\n\nMore text on page {p}.\n\nPage {p} of 4\n"
        ));
    }
    let c = split_pages("t", &pages, false);
    assert!(
        c.iter().all(|c| !c.text.contains("Confidential")),
        "the header is dropped"
    );
    assert!(
        c.iter().all(|c| !c.text.starts_with("Page ")),
        "page numbers are dropped"
    );
    assert_eq!(
        c.iter().filter(|c| c.text.contains(body)).count(),
        4,
        "a repeated sentence is content"
    );
    assert_eq!(c.iter().map(|c| c.page).max(), Some(4));
    // One page: the same line is not at an edge of several pages, so it stays.
    let one = split_pages(
        "t",
        &["ACME Corp - Confidential\n\nText.\n".to_string()],
        false,
    );
    assert_eq!(one.len(), 2);
}

#[test]
fn capitals_are_a_clause_unless_short() {
    let text = "NO WARRANTY\n\n\
                THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR\n\
                IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY.\n";
    let c = split_pages("t", &pages(text), false);
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].kind, ClauseKind::Heading);
    assert_eq!(c[1].kind, ClauseKind::Clause);
}

#[test]
fn chinese_contracts_split_by_their_numbering() {
    let text = "技术服务合同\n\n第一章 总则\n\
                第一条 本合同所称“服务”是指乙方向甲方提供的软件维护服务。\n\
                第二条 乙方应当在收到通知后二十四小时内响应，\n并在七日内解决问题。\n\
                第三条 付款方式如下：\n（一）甲方应在签约后十日内支付首期款；\n（二）余款在验收后支付。\n\
                第四条 本合同适用中华人民共和国法律。\n";
    let c = split_pages("合同", &pages(text), false);
    let numbers: Vec<_> = c
        .iter()
        .map(|c| c.number.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        numbers,
        [
            "",
            "第一章",
            "第一条",
            "第二条",
            "第三条",
            "第三条(一)",
            "第三条(二)",
            "第四条"
        ],
        "{c:#?}"
    );
    assert_eq!(c[0].kind, ClauseKind::Heading);
    assert_eq!(c[1].kind, ClauseKind::Heading);
    assert_eq!(c[2].kind, ClauseKind::Definition);
    assert_eq!(
        c[3].text, "第二条 乙方应当在收到通知后二十四小时内响应，并在七日内解决问题。",
        "joined without a space"
    );
    assert_eq!(c[7].id, format!("合同#第四条@{}", c[7].offset));
}

#[test]
fn long_paragraphs_are_cut_at_sentence_ends_not_abbreviations() {
    let sentence = "The Customer, e.g. a subsidiary of ACME Inc. or its affiliates, shall pay the fees set out in Sec. 4 within thirty days. ";
    let text = sentence.repeat(30);
    let c = split_pages("t", &pages(&text), false);
    assert!(c.len() > 1);
    for c in &c {
        assert!(c.text.len() <= MAX_CLAUSE_BYTES);
        assert!(
            c.text.starts_with("The Customer") && c.text.ends_with("days."),
            "{}",
            c.text
        );
    }
}

#[test]
fn markdown_headings_and_lists() {
    let text = "# Master Services Agreement\n\n## 1. Fees\n\n- The fees are due monthly.\n- Late fees apply.\n";
    let c = split_pages("t.md", &pages(text), true);
    let kinds: Vec<_> = c.iter().map(|c| c.kind).collect();
    assert_eq!(
        kinds,
        [
            ClauseKind::Heading,
            ClauseKind::Heading,
            ClauseKind::Clause,
            ClauseKind::Clause
        ]
    );
    assert_eq!(c[1].text, "1. Fees");
    assert_eq!(c[3].number.as_deref(), Some("1"));
}
