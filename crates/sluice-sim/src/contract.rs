//! Documents shaped like contracts, for rehearsing long-document requests: numbered articles
//! and clauses, a header and a footer on every page, 20 to 200 pages, and one fact per topic
//! written as a needle ("the X is V.") inside an ordinary clause, among clauses that share
//! its words. Seeded: the same seed and length always give the same document.

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};

/// Characters of clause text per page (about 700 tokens).
const PAGE_CHARS: usize = 2_800;

/// The topics a contract states one fact about: what a question asks, the article it sits
/// in, and how its value is drawn.
const TOPICS: [(&str, usize, Value); 16] = [
    (
        "notice period for termination for convenience",
        3,
        Value::Days,
    ),
    ("cure period for a material breach", 3, Value::Days),
    ("cap on aggregate liability", 5, Value::Money),
    (
        "cap on liability for data protection claims",
        5,
        Value::Money,
    ),
    ("interest rate on late payments", 2, Value::Percent),
    ("payment term for undisputed invoices", 2, Value::Days),
    ("warranty period for deliverables", 4, Value::Months),
    ("service credit for missed availability", 7, Value::Percent),
    (
        "availability target for the production service",
        7,
        Value::Percent,
    ),
    (
        "minimum insurance cover for professional indemnity",
        8,
        Value::Money,
    ),
    ("retention period for audit records", 9, Value::Months),
    ("notice period for an audit", 9, Value::Days),
    ("initial term of this agreement", 3, Value::Months),
    ("response time for a severity one incident", 7, Value::Hours),
    ("annual fee increase cap", 2, Value::Percent),
    (
        "period for returning confidential information",
        6,
        Value::Days,
    ),
];

const ARTICLES: [&str; 12] = [
    "DEFINITIONS AND INTERPRETATION",
    "SERVICES",
    "FEES AND PAYMENT",
    "TERM AND TERMINATION",
    "WARRANTIES",
    "LIMITATION OF LIABILITY",
    "CONFIDENTIALITY",
    "SERVICE LEVELS",
    "INSURANCE",
    "AUDIT AND RECORDS",
    "DISPUTE RESOLUTION",
    "GENERAL PROVISIONS",
];

#[derive(Clone, Copy)]
enum Value {
    Days,
    Months,
    Hours,
    Percent,
    Money,
}

impl Value {
    fn draw(self, rng: &mut StdRng) -> String {
        match self {
            Self::Days => format!("{} days", rng.random_range(5..=120)),
            Self::Months => format!("{} months", rng.random_range(3..=60)),
            Self::Hours => format!("{} hours", rng.random_range(1..=48)),
            Self::Percent => format!(
                "{}.{} percent",
                rng.random_range(1..=20),
                rng.random_range(0..=9)
            ),
            Self::Money => format!(
                "EUR {},{:03},000",
                rng.random_range(1..=20),
                rng.random_range(0..=999)
            ),
        }
    }
}

const SUBJECTS: [&str; 8] = [
    "The Supplier",
    "The Customer",
    "Each party",
    "Neither party",
    "The receiving party",
    "The Supplier's personnel",
    "Any subcontractor",
    "The disclosing party",
];
const VERBS: [&str; 10] = [
    "shall give written notice of",
    "may request an extension of",
    "shall keep records of",
    "shall not unreasonably delay",
    "shall bear its own costs of",
    "may suspend performance pending",
    "shall promptly inform the other party of",
    "shall use reasonable efforts to limit",
    "shall cooperate in good faith on",
    "may refer to the steering committee",
];
const OBJECTS: [&str; 16] = [
    "any termination for convenience",
    "a material breach of its obligations",
    "claims for liability under this agreement",
    "late payments and disputed invoices",
    "defects in the deliverables during any warranty",
    "missed availability of the production service",
    "data protection claims and security incidents",
    "the renewal or extension of the term",
    "professional indemnity and other insurance",
    "audit requests and the retention of records",
    "confidential information and its return",
    "incidents of any severity",
    "changes to the fees and annual increases",
    "the service levels and service credits",
    "the notice period for any renewal",
    "the cure of any breach",
];
const QUALIFIERS: [&str; 8] = [
    "in accordance with this agreement",
    "within a reasonable time",
    "subject to the limitations in this agreement",
    "as set out in the relevant schedule",
    "save as otherwise agreed in writing",
    "without prejudice to its other rights",
    "to the extent permitted by applicable law",
    "in a manner consistent with good industry practice",
];

/// A generated contract and the question it answers.
#[derive(Clone, Debug)]
pub struct Contract {
    /// The whole text.
    pub text: String,
    /// A question whose answer sits in one clause.
    pub question: String,
    /// The answer the reader gives when that clause is in its prompt.
    pub answer: String,
    /// The clause's number ("5.3"), as it opens its paragraph.
    pub clause: String,
    /// Pages.
    pub pages: usize,
}

fn sentence(rng: &mut StdRng) -> String {
    format!(
        "{} {} {} {}.",
        SUBJECTS.choose(rng).copied().unwrap_or("Each party"),
        VERBS
            .choose(rng)
            .copied()
            .unwrap_or("shall keep records of"),
        OBJECTS.choose(rng).copied().unwrap_or("the term"),
        QUALIFIERS.choose(rng).copied().unwrap_or("in writing"),
    )
}

/// A contract of `pages` pages (20 to 200) from `seed`.
pub fn contract(seed: u64, pages: usize) -> Contract {
    let pages = pages.clamp(20, 200);
    let mut rng = StdRng::seed_from_u64(seed);
    let parties = ["NORTHWIND SYSTEMS LTD", "CONTOSO HOLDINGS SA"];
    // Every topic's fact, and which is asked.
    let facts: Vec<(usize, String)> = TOPICS
        .iter()
        .map(|(_, art, v)| (*art, v.draw(&mut rng)))
        .collect();
    let asked = rng.random_range(0..TOPICS.len());
    // Clauses per article, the fact clauses placed at random among them.
    let clauses_total = pages * PAGE_CHARS / 660;
    let per_article = (clauses_total / ARTICLES.len()).max(2);
    let mut body: Vec<String> = Vec::new();
    let mut answer_clause = String::new();
    for (a, title) in ARTICLES.iter().enumerate() {
        body.push(format!("ARTICLE {} - {title}", a + 1));
        let mine: Vec<usize> = (0..TOPICS.len()).filter(|t| facts[*t].0 == a).collect();
        let slots: Vec<usize> = mine
            .iter()
            .map(|_| rng.random_range(0..per_article))
            .collect();
        for c in 0..per_article {
            let number = format!("{}.{}", a + 1, c + 1);
            let mut s = format!("{number} ");
            let n = rng.random_range(3..=6);
            let fact_here: Vec<usize> = mine
                .iter()
                .zip(&slots)
                .filter(|(_, slot)| **slot == c)
                .map(|(t, _)| *t)
                .collect();
            for k in 0..n {
                if k > 0 {
                    s.push(' ');
                }
                s.push_str(&sentence(&mut rng));
                if k == 1 {
                    for t in &fact_here {
                        s.push_str(&format!(
                            " For the purposes of this agreement, the {} is {}.",
                            TOPICS[*t].0, facts[*t].1
                        ));
                        if *t == asked {
                            answer_clause.clone_from(&number);
                        }
                    }
                }
            }
            body.push(s);
        }
    }
    // Pages: a header, clause text up to a page's worth, a footer.
    let mut text = String::new();
    let mut page = 1;
    let mut on_page = 0;
    let header = format!(
        "MASTER SERVICES AGREEMENT BETWEEN {} AND {} - CONFIDENTIAL",
        parties[0], parties[1]
    );
    let mut chunks: Vec<String> = Vec::new();
    chunks.push(header.clone());
    for p in body {
        if on_page + p.len() > PAGE_CHARS && on_page > 0 {
            chunks.push(format!("Page {page} of [[PAGES]]"));
            page += 1;
            chunks.push(header.clone());
            on_page = 0;
        }
        on_page += p.len();
        chunks.push(p);
    }
    chunks.push(format!("Page {page} of [[PAGES]]"));
    for c in &chunks {
        text.push_str(c);
        text.push_str("\n\n");
    }
    let text = text.trim_end().replace("[[PAGES]]", &page.to_string());
    let (subject, _, _) = TOPICS[asked];
    Contract {
        text,
        question: format!("Under this agreement, what is the {subject}?"),
        answer: format!("The {subject} is {}.", facts[asked].1),
        clause: answer_clause,
        pages: page,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::reader;

    #[test]
    fn a_contract_has_pages_clauses_and_one_needle_the_reader_finds() {
        let c = contract(3, 80);
        assert!(
            (68..=92).contains(&c.pages),
            "{} pages for 80 asked",
            c.pages
        );
        assert!(c.text.len() / 4 > 50_000, "{} tokens", c.text.len() / 4);
        assert_eq!(c.text.matches("MASTER SERVICES AGREEMENT").count(), c.pages);
        assert!(c.text.contains(&format!("Page {} of {}", c.pages, c.pages)));
        let prompt = format!("{}\n\n{}", c.text, c.question);
        assert_eq!(
            reader::read(prompt.as_bytes()).as_deref(),
            Some(c.answer.as_str())
        );
        let clause = c
            .text
            .split("\n\n")
            .find(|p| p.starts_with(&format!("{} ", c.clause)))
            .unwrap();
        let subject = &c.question["Under this agreement, what is the ".len()..c.question.len() - 1];
        assert!(clause.contains(&format!("the {subject} is ")), "{clause}");
        assert_eq!(reader::read(c.question.as_bytes()), None);
    }

    #[test]
    fn the_same_seed_gives_the_same_contract() {
        assert_eq!(contract(9, 20).text, contract(9, 20).text);
        assert_ne!(contract(9, 20).text, contract(10, 20).text);
    }
}
