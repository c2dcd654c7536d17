//! Contracts made up for measuring: pages with a running header and a page number, numbered
//! articles, ordinary clauses that trip no shipped rule, and risky clauses (about a clause in
//! twelve) drawn from templates with their own parties, numbers and subjects, so that two
//! risky clauses are rarely alike; a set share of them restate an earlier one word for word
//! (the same cap in the body and in a schedule), which is what merging saves. Seeded: the
//! same seed gives the same document.

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};

/// The share of clauses that are risky.
const RISKY_SHARE: f64 = 1.0 / 12.0;
/// Characters of clause text per page, at most.
const PAGE_CHARS: usize = 2_600;

const PARTIES: [&str; 6] = [
    "the Supplier",
    "the Customer",
    "the Provider",
    "the Licensor",
    "the Contractor",
    "the Client",
];
const SUBJECTS: [&str; 8] = [
    "the hosted platform",
    "the migration services",
    "the support services",
    "the analytics module",
    "the integration work",
    "the training services",
    "the mobile application",
    "the data warehouse",
];
const REGIONS: [&str; 4] = [
    "European Economic Area",
    "United Kingdom",
    "PRC",
    "United States",
];

/// Ordinary clause sentences: they trip none of the shipped rules.
const PLAIN: [&str; 12] = [
    "The project managers of both parties shall meet every {n} weeks to review progress on {s}.",
    "Each milestone for {s} is described in the project plan attached as Schedule {k}.",
    "The steering committee consists of {k} members appointed by each party.",
    "Status reports for {s} are delivered on the first working day of each month.",
    "The acceptance tests for {s} are agreed in the test plan before work starts.",
    "Each party names a contact person for {s} and informs the other of any change.",
    "Meetings may be held by video conference where both project managers agree.",
    "The documentation for {s} is written in English and kept up to date.",
    "Change requests for {s} are recorded in the change log kept by the project office.",
    "Training for up to {n} users of {s} takes place at the premises named in Schedule {k}.",
    "The parties shall cooperate in good faith in planning the rollout of {s}.",
    "Work on {s} follows the methodology described in Schedule {k}.",
];

/// Risky clause templates: each trips at least one shipped rule.
const RISKY: [&str; 16] = [
    "{P} may terminate this Agreement for convenience at any time on {n} days' written notice.",
    "This Agreement shall automatically renew for successive periods of {k} years unless either party gives notice of non-renewal at least {n} days before the end of the term.",
    "In no event shall {P} be liable for any indirect damages or loss of profits arising from {s}.",
    "The total liability of {P} for {s} shall not exceed the fees paid in the {k} months preceding the claim.",
    "{P} shall indemnify and hold harmless {Q} from any and all claims arising from {s}.",
    "Late payments for {s} bear interest at {k}% per month until paid in full.",
    "{P} may transfer personal data processed for {s} outside the {R} to its affiliates.",
    "This Agreement is governed by the laws of the State of New York and the courts of New York have exclusive jurisdiction over any dispute about {s}.",
    "{P} may assign this Agreement to any third party without the consent of {Q}.",
    "The obligations of confidentiality regarding {s} survive in perpetuity.",
    "{P} may use aggregated data from {s} to train and improve its machine learning models.",
    "{P} may suspend {s} for non-payment on {n} days' notice.",
    "{P} reserves the right to increase its fees for {s} by up to {k}% at each renewal.",
    "{Q} shall pay all invoices for {s} within {n} days of the date of invoice.",
    "Any security breach affecting {s} shall be notified to {Q} within {h} hours.",
    "{P} may subcontract any part of {s} to subcontractors of its choice.",
];

/// A contract of `pages` pages: its pages' text (joined with form feeds it is a text file).
pub fn contract(seed: u64, pages: usize, repeat_share: f64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let fill = |t: &str, rng: &mut StdRng| -> String {
        let p = *PARTIES.choose(rng).unwrap_or(&"the Supplier");
        let q = *PARTIES
            .iter()
            .filter(|x| **x != p)
            .collect::<Vec<_>>()
            .choose(rng)
            .copied()
            .unwrap_or(&"the Customer");
        let cap = |s: &str| {
            let mut c = s.chars();
            c.next()
                .map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
        };
        let out = t
            .replace("{P}", p)
            .replace("{Q}", q)
            .replace("{s}", SUBJECTS.choose(rng).unwrap_or(&"the services"))
            .replace("{R}", REGIONS.choose(rng).unwrap_or(&"EEA"))
            .replace("{n}", &rng.random_range(5..120).to_string())
            .replace("{k}", &rng.random_range(2..12).to_string())
            .replace("{h}", &rng.random_range(12..96).to_string());
        cap(&out)
    };
    let mut risky_seen: Vec<String> = Vec::new();
    let header = "MASTER SERVICES AGREEMENT - CONFIDENTIAL\n\n";
    let mut out: Vec<String> = Vec::new();
    let mut page = header.to_string();
    let (mut article, mut clause, mut on_page) = (0, 0, 0);
    loop {
        let mut next = Vec::new();
        if clause == 0 || clause > 8 {
            article += 1;
            clause = 1;
            let titles = ["SERVICES", "FEES", "TERM", "LIABILITY", "DATA", "GENERAL"];
            next.push(format!("ARTICLE {article} - {}", titles[article % 6]));
        }
        let mut text = format!("{article}.{clause} ");
        if rng.random_bool(RISKY_SHARE) {
            let risky = if !risky_seen.is_empty() && rng.random_bool(repeat_share) {
                risky_seen.choose(&mut rng).cloned().unwrap_or_default()
            } else {
                let t = *RISKY.choose(&mut rng).unwrap_or(&RISKY[0]);
                fill(t, &mut rng)
            };
            risky_seen.push(risky.clone());
            text.push_str(&risky);
        } else {
            for i in 0..rng.random_range(2..5) {
                if i > 0 {
                    text.push(' ');
                }
                let t = *PLAIN.choose(&mut rng).unwrap_or(&PLAIN[0]);
                text.push_str(&fill(t, &mut rng));
            }
        }
        next.push(text);
        clause += 1;
        let len: usize = next.iter().map(String::len).sum();
        if on_page + len > PAGE_CHARS && on_page > 0 {
            // A page is full: `pages` of them make the document.
            out.push(std::mem::replace(&mut page, header.to_string()));
            on_page = 0;
            if out.len() == pages.max(1) {
                break;
            }
        }
        for c in next {
            on_page += c.len();
            page.push_str(&c);
            page.push_str("\n\n");
        }
    }
    let n = out.len();
    for (i, p) in out.iter_mut().enumerate() {
        p.push_str(&format!("Page {} of {n}\n", i + 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use sluice_documents::clauses::split_pages;
    use sluice_rules::{Clause, Engine};

    use super::*;

    #[test]
    fn forty_seven_pages_hold_about_thirty_flagged_clauses_and_the_plain_ones_trip_nothing() {
        let engine = Engine::compile(sluice_rules::shipped::contract_risks().unwrap()).unwrap();
        let mut flagged = Vec::new();
        for seed in 0..20 {
            let pages = contract(seed, 47, 0.2);
            assert_eq!(pages.len(), 47);
            assert_eq!(pages, contract(seed, 47, 0.2), "seeded");
            let clauses = split_pages("c", &pages, false);
            assert!(
                clauses
                    .iter()
                    .all(|c| !c.text.contains("CONFIDENTIAL") && !c.text.starts_with("Page "))
            );
            let mut n = 0;
            for c in &clauses {
                let hits = engine.rule(Clause {
                    kind: c.kind.as_str(),
                    text: &c.text,
                });
                let risky = RISKY.iter().any(|t| {
                    let words: Vec<&str> = t
                        .split_whitespace()
                        .filter(|w| !w.contains('{'))
                        .take(4)
                        .collect();
                    words.iter().all(|w| c.text.contains(w))
                });
                if c.kind.as_str() == "clause" && !risky {
                    assert!(
                        hits.is_empty(),
                        "a plain clause tripped {:?}: {}",
                        hits.iter()
                            .map(|h| &engine.rules()[h.rule].id)
                            .collect::<Vec<_>>(),
                        c.text
                    );
                }
                n += usize::from(!hits.is_empty());
            }
            flagged.push(n);
        }
        let mean = flagged.iter().sum::<usize>() as f64 / flagged.len() as f64;
        assert!((22.0..=40.0).contains(&mean), "{flagged:?}");
    }
}
