//! Compression and progressive loading on real legal text and on Chinese contracts, counted
//! with the gateway's tokenizer: the clause a question needs is kept at a quarter of the
//! document's tokens, and progressive loading answers while spending at most half of what
//! sending the whole document once would cost (re-sent passages at a cached price of a
//! tenth, as Anthropic bills a cache read). Documents "a" and "b" are Debian's licence texts
//! end to end, with the questions in `bench/legal-questions.tsv`; the Chinese contracts are
//! generated here (no package ships a Chinese contract corpus).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use serde_json::json;
use sluice_context::compress::{Outcome, compress};
use sluice_context::count::{Count, FourBytes};
use sluice_context::progressive::{DEFAULT_SENTINEL, Progressive, Rounds};
use sluice_core::ChatRequest;
use sluice_economy::estimate::Tokenizer;

/// The gateway's tokenizer as a counter.
struct Cl100k(Tokenizer);

impl Count for Cl100k {
    fn tokens(&self, text: &str) -> u64 {
        self.0.tokens(text)
    }
}

/// A document, and its questions with the line each needs.
struct Case {
    name: String,
    text: String,
    questions: Vec<(String, String)>,
}

/// Debian's licence texts, documents "a" and "b"; `None`, said aloud, where they are missing.
fn licences() -> Option<Vec<Case>> {
    let files = [
        (
            "a",
            ["Apache-2.0", "GPL-3", "MPL-2.0", "Artistic", "LGPL-2.1"],
        ),
        ("b", ["GFDL-1.3", "MPL-1.1", "GPL-2", "CC0-1.0", "LGPL-2"]),
    ];
    let tsv = include_str!("../../../bench/legal-questions.tsv");
    let mut out = Vec::new();
    for (name, parts) in files {
        let mut text = Vec::new();
        for p in parts {
            let path = format!("/usr/share/common-licenses/{p}");
            match std::fs::read_to_string(&path) {
                Ok(t) => text.push(t),
                Err(e) => {
                    eprintln!(
                        "skipped: {path} cannot be read ({e}); this part needs Debian's licence texts"
                    );
                    return None;
                }
            }
        }
        let questions = tsv
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                (f.len() == 4 && f[0] == name).then(|| (f[2].to_string(), f[3].to_string()))
            })
            .collect();
        out.push(Case {
            name: format!("licences {name}"),
            text: text.join("\n\n"),
            questions,
        });
    }
    Some(out)
}

/// Topics of a generated Chinese contract: a clause title, its needle (a fact only that
/// clause states) and a question put the way a reviewer would.
const TOPICS: [(&str, &str, &str); 12] = [
    (
        "违约责任",
        "违约金为合同总价款的百分之{n}",
        "一方违约时违约金是多少？",
    ),
    (
        "付款方式",
        "甲方应于验收合格后{n}个工作日内支付全部价款",
        "验收合格后甲方多久内付款？",
    ),
    (
        "保密义务",
        "保密期限为本合同终止后{n}年",
        "合同终止后保密义务持续多久？",
    ),
    (
        "争议解决",
        "提交{city}仲裁委员会按照其仲裁规则进行仲裁",
        "发生争议时由哪个仲裁机构仲裁？",
    ),
    (
        "合同解除",
        "任何一方可提前{n}日书面通知对方解除本合同",
        "解除合同需要提前多少天通知？",
    ),
    (
        "知识产权",
        "交付成果的著作权自交付之日起归{party}所有",
        "交付成果的著作权归谁？",
    ),
    (
        "不可抗力",
        "受不可抗力影响的一方应在{n}日内通知对方并提供证明",
        "遇到不可抗力应在几日内通知对方？",
    ),
    (
        "质量保证",
        "质保期为自验收合格之日起{n}个月",
        "质保期是多长时间？",
    ),
    (
        "数据保护",
        "个人信息应存储于中华人民共和国境内且保存不超过{n}年",
        "个人信息可以保存多久、存在哪里？",
    ),
    (
        "责任限制",
        "乙方累计赔偿责任以不超过合同总价款的{n}倍为限",
        "乙方的赔偿责任上限是多少？",
    ),
    (
        "自动续约",
        "期满前{n}日内双方均未提出异议的本合同自动续期一年",
        "合同到期后会自动续约吗？",
    ),
    (
        "转让",
        "未经对方书面同意任何一方不得将本合同项下权利义务转让给第三方",
        "可以把合同权利转让给第三方吗？",
    ),
];

const NUMERALS: [&str; 10] = ["一", "二", "三", "四", "五", "六", "七", "八", "九", "十"];

/// A Chinese numeral for 1..=199.
fn numeral(n: usize) -> String {
    match n {
        0 => "零".into(),
        1..=10 => NUMERALS[n - 1].to_string(),
        11..=19 => format!("十{}", NUMERALS[n - 11]),
        20..=99 if n.is_multiple_of(10) => format!("{}十", NUMERALS[n / 10 - 1]),
        20..=99 => format!("{}十{}", NUMERALS[n / 10 - 1], NUMERALS[n % 10 - 1]),
        _ if n.is_multiple_of(100) => format!("{}百", NUMERALS[n / 100 - 1]),
        _ if n % 100 < 10 => format!("{}百零{}", NUMERALS[n / 100 - 1], numeral(n % 100)),
        _ if n % 100 < 20 => format!("{}百一{}", NUMERALS[n / 100 - 1], numeral(n % 100)),
        _ => format!("{}百{}", NUMERALS[n / 100 - 1], numeral(n % 100)),
    }
}

/// A service contract of `articles` clauses (第…条): the twelve topics spread among them
/// (where, set by `seed`), every other clause boilerplate of the same register, and a page
/// break with a footer and a header every four clauses.
fn chinese_contract(seed: usize, articles: usize) -> Case {
    let mut text = format!(
        "技术服务合同（编号 HT-{seed:04}）\n\n甲方：华东某科技有限公司\n乙方：某信息技术服务有限公司\n\n"
    );
    let cities = ["上海", "北京", "深圳", "杭州"];
    let parties = ["甲方", "乙方"];
    let stride = articles / TOPICS.len();
    let mut questions = Vec::new();
    for a in 1..=articles {
        let slot = (a - 1) / stride;
        let at = (a - 1) % stride == (seed * 5 + slot * 3) % stride;
        if at && slot < TOPICS.len() {
            let (title, needle, question) = TOPICS[slot];
            let needle = needle
                .replace("{n}", &numeral((seed * 3 + slot) % 20 + 2))
                .replace("{city}", cities[(seed + slot) % cities.len()])
                .replace("{party}", parties[(seed + slot) % 2]);
            text.push_str(&format!(
                "第{}条 {title}\n\n{a}.1 双方同意就{title}事项作如下约定。{needle}。本条未尽事宜由双方另行协商并以书面形式确定。\n\n",
                numeral(a)
            ));
            questions.push((needle, question.to_string()));
        } else {
            text.push_str(&format!(
                "第{}条 一般约定\n\n{a}.1 双方应本着诚实信用原则履行本合同第{}条项下的各项义务，并就履行进展相互通报，相关费用由各自承担。\n\n{a}.2 本条所述事项如需变更，应经双方协商一致并签订补充协议。\n\n",
                numeral(a),
                numeral(a)
            ));
        }
        if a % 4 == 0 {
            text.push_str(&format!(
                "第 {} 页 共 {} 页\n\n\u{000C}\n技术服务合同 保密\n\n",
                a / 4,
                articles / 4
            ));
        }
    }
    Case {
        name: format!("chinese contract {seed}"),
        text,
        questions,
    }
}

fn request(doc: &str, question: &str) -> ChatRequest {
    let body = json!({"model": "m", "messages": [
        {"role": "system", "content": "You review contracts. Quote the clause you rely on."},
        {"role": "user", "content": format!("{doc}\n\n{question}")}
    ]});
    ChatRequest::parse(body.to_string().as_bytes()).unwrap()
}

/// Every user message's text in `r`.
fn user_text(r: &ChatRequest) -> String {
    r.value("messages")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// What one document's questions came to.
#[derive(Default)]
struct Tally {
    questions: usize,
    kept: usize,
    /// Kept at a tenth of the document's tokens (reported, not asserted).
    kept_tenth: usize,
    answered: usize,
    /// Progressive loading's spend and what it sent, over the whole document's tokens,
    /// summed over questions.
    spent: f64,
    sent: f64,
    rounds: usize,
}

fn run(case: &Case, count: &Arc<Cl100k>) -> Tally {
    let doc_tokens = count.tokens(&case.text);
    let mut t = Tally::default();
    let progressive = Progressive {
        round_tokens: doc_tokens / 16,
        rounds: 8,
        sentinel: DEFAULT_SENTINEL.into(),
    };
    let sentinel = json!({"choices": [{"message": {"content": DEFAULT_SENTINEL}}]}).to_string();
    for (needle, question) in &case.questions {
        t.questions += 1;
        let r = request(&case.text, question);
        // Compression to a quarter of the document's tokens.
        let budget = count.prompt(&r) - doc_tokens + doc_tokens / 4;
        match compress(&r, budget, &**count) {
            Outcome::Compressed(c) => {
                assert!(c.after <= budget, "{} > {budget}", c.after);
                if user_text(&c.request).contains(needle.as_str()) {
                    t.kept += 1;
                } else {
                    eprintln!(
                        "{}: compression lost {needle:?} for {question:?}",
                        case.name
                    );
                }
            }
            other => panic!("{}: not compressed: {other:?}", case.name),
        }
        let tenth = count.prompt(&r) - doc_tokens + doc_tokens / 10;
        if let Outcome::Compressed(c) = compress(&r, tenth, &**count)
            && user_text(&c.request).contains(needle.as_str())
        {
            t.kept_tenth += 1;
        }
        // Progressive loading: a reader who answers once the clause is in what it was sent.
        let counter: Arc<dyn Count> = count.clone();
        let (mut rounds, mut call) = Rounds::start(&r, &progressive, counter, 0.1).unwrap();
        loop {
            if user_text(&call).contains(needle.as_str()) {
                t.answered += 1;
                break;
            }
            match rounds.next(sentinel.as_bytes()) {
                Some(next) => call = next,
                None => {
                    eprintln!(
                        "{}: progressive never reached {needle:?} ({} rounds)",
                        case.name,
                        rounds.round()
                    );
                    break;
                }
            }
        }
        t.rounds += rounds.round() as usize;
        t.spent += rounds.spent() as f64 / doc_tokens as f64;
        t.sent += rounds.sent() as f64 / doc_tokens as f64;
    }
    let n = t.questions as f64;
    eprintln!(
        "{}: {doc_tokens} tokens ({} by four bytes a token), {} questions; compressed to a quarter, kept {} (to a tenth, \
         {}); progressive answered {}, spent {:.3}x and sent {:.3}x the document on average, \
         {:.1} rounds",
        case.name,
        FourBytes.tokens(&case.text),
        t.questions,
        t.kept,
        t.kept_tenth,
        t.answered,
        t.spent / n,
        t.sent / n,
        t.rounds as f64 / n
    );
    t
}

#[test]
fn chinese_numerals_read_as_written() {
    assert_eq!(numeral(7), "七");
    assert_eq!(numeral(14), "十四");
    assert_eq!(numeral(40), "四十");
    assert_eq!(numeral(57), "五十七");
    assert_eq!(numeral(105), "一百零五");
    assert_eq!(numeral(120), "一百二十");
    assert_eq!(numeral(113), "一百一十三");
}

#[test]
fn the_needed_clause_survives_in_real_licences_and_chinese_contracts() {
    let count = Arc::new(Cl100k(Tokenizer::load().unwrap()));
    let mut cases: Vec<Case> = (1..=4).map(|s| chinese_contract(s, 120)).collect();
    for c in &cases {
        assert_eq!(c.questions.len(), TOPICS.len(), "{}", c.name);
    }
    match licences() {
        Some(l) => cases.extend(l),
        None => eprintln!("the licence documents are left out"),
    }
    let mut all = Tally::default();
    for case in &cases {
        let t = run(case, &count);
        all.questions += t.questions;
        all.kept += t.kept;
        all.kept_tenth += t.kept_tenth;
        all.answered += t.answered;
        all.spent += t.spent;
        all.sent += t.sent;
    }
    let n = all.questions as f64;
    eprintln!(
        "all: {} questions; kept {:.3} (at a tenth, {:.3}); answered {:.3}; spent {:.3}x, \
         sent {:.3}x",
        all.questions,
        all.kept as f64 / n,
        all.kept_tenth as f64 / n,
        all.answered as f64 / n,
        all.spent / n,
        all.sent / n
    );
    assert!(
        all.kept as f64 >= 0.99 * n,
        "kept {} of {}",
        all.kept,
        all.questions
    );
    assert!(
        all.answered as f64 >= 0.99 * n,
        "answered {} of {}",
        all.answered,
        all.questions
    );
    assert!(all.spent / n <= 0.5, "spent {:.3}x", all.spent / n);
}
