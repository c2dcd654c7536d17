//! Guards against the classic false hits of a semantic cache: two questions whose embeddings
//! are close but whose answers differ because a number, a date, a negation or a named entity
//! differs ("Track order 48213" vs "48231"; "is it safe" vs "is it not safe"; "How do I learn
//! Python?" vs "How do I learn Java?"). What a text says of these is read once, when it is
//! stored or asked, and two texts may share an answer only when they say the same.
//!
//! The rules are lexical, so they are cheap and explainable, and they refuse rather than
//! guess: a word that reads as an entity on one side only is a mismatch.

use std::collections::BTreeSet;

/// Why two texts may not share an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// Their numbers (dates, amounts, ids with digits) differ.
    Number,
    /// One negates what the other does not.
    Negation,
    /// They name different entities (capitalised words inside a sentence, or words in
    /// another script's capitals).
    Entity,
    /// They say nearly the same words but swap one for another, or say the same words in
    /// another order ([`super::wording`]).
    Wording,
}

impl Mismatch {
    /// The label in metrics and the call record.
    pub fn label(self) -> &'static str {
        match self {
            Self::Number => "number",
            Self::Negation => "negation",
            Self::Entity => "entity",
            Self::Wording => "wording",
        }
    }
}

/// Words that negate (English), compared lowercased; `n't` endings count too.
const NEGATIONS: &[&str] = &[
    "not", "no", "never", "none", "nothing", "neither", "nor", "without", "cannot", "nobody",
    "nowhere",
];

/// Negating characters of CJK text (不 没 無 无 非 别 莫 未 ない).
const CJK_NEGATIONS: &[char] = &['不', '没', '無', '无', '非', '别', '莫', '未'];

/// What a text says that its answer depends on beyond its meaning.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// Every run of digits (with the letters glued to it: `48213`, `2026`, `v2`, `3pm`),
    /// lowercased, sorted.
    pub numbers: Vec<String>,
    /// How many negations it holds.
    pub negations: u32,
    /// Capitalised words not at the start of a sentence (and all-capital words anywhere),
    /// lowercased.
    pub entities: BTreeSet<String>,
    /// Its content words, in order ([`super::wording`]): compared pairwise, after the
    /// fingerprint.
    pub words: Vec<String>,
}

impl Facts {
    /// Reads `text`.
    pub fn of(text: &str) -> Self {
        let mut numbers = Vec::new();
        let mut negations = 0;
        let mut entities = BTreeSet::new();
        let mut sentence_start = true;
        for c in text.chars() {
            if CJK_NEGATIONS.contains(&c) {
                negations += 1;
            }
        }
        for raw in text.split(|c: char| c.is_whitespace()) {
            let word = raw.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'');
            let ends_sentence = raw.ends_with(['.', '?', '!', ':', '\n']);
            if word.is_empty() {
                sentence_start |= ends_sentence;
                continue;
            }
            let lower = word.to_lowercase();
            if word.chars().any(|c| c.is_ascii_digit()) {
                numbers.push(lower.clone());
            } else if NEGATIONS.contains(&lower.as_str()) || lower.ends_with("n't") {
                negations += 1;
            } else {
                let mut chars = word.chars();
                let first_upper = chars.next().is_some_and(char::is_uppercase);
                let letters = word.chars().count();
                let all_upper = letters > 1 && word.chars().all(char::is_uppercase);
                // A lone capital ("I", "A") names nothing.
                if letters > 1 && (all_upper || (first_upper && !sentence_start)) {
                    entities.insert(lower);
                }
            }
            sentence_start = ends_sentence;
        }
        numbers.sort();
        Self {
            numbers,
            negations,
            entities,
            words: super::wording::content_words(text),
        }
    }

    /// A digest that two facts share when they are [`Facts::compatible`] (the numbers, the
    /// negations' parity, the entities): a scan compares it before reading an entry.
    pub fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        self.numbers.hash(&mut h);
        (self.negations % 2).hash(&mut h);
        self.entities.hash(&mut h);
        h.finish()
    }

    /// Whether a question with these facts may be answered with `other`'s answer.
    pub fn compatible(&self, other: &Facts) -> Result<(), Mismatch> {
        if self.numbers != other.numbers {
            return Err(Mismatch::Number);
        }
        // "Not unlikely" reads as "likely": what counts is whether the negations cancel.
        if self.negations % 2 != other.negations % 2 {
            return Err(Mismatch::Negation);
        }
        if self.entities != other.entities {
            return Err(Mismatch::Entity);
        }
        Ok(())
    }

    /// [`Facts::compatible`], and then whether their wording allows it (a pairwise test, not
    /// in the fingerprint).
    pub fn allowed(&self, other: &Facts) -> Result<(), Mismatch> {
        self.compatible(other)?;
        if super::wording::differ(&other.words, &self.words) {
            return Err(Mismatch::Wording);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(a: &str, b: &str) -> Result<(), Mismatch> {
        let (fa, fb) = (Facts::of(a), Facts::of(b));
        let verdict = fa.compatible(&fb);
        assert_eq!(
            verdict.is_ok(),
            fa.fingerprint() == fb.fingerprint(),
            "the fingerprint agrees with the guards: {a} / {b}"
        );
        verdict
    }

    #[test]
    fn paraphrases_pass() {
        assert_eq!(
            check(
                "How do I reset my password?",
                "What is the way to reset my password?"
            ),
            Ok(())
        );
        assert_eq!(
            check(
                "What is the capital of France?",
                "Tell me the capital city of France."
            ),
            Ok(()),
            "the same entity, wherever it stands"
        );
        assert_eq!(
            check(
                "Is it safe to swim after eating?",
                "Can I swim safely right after a meal?"
            ),
            Ok(())
        );
        assert_eq!(
            check("Where is order 48213?", "What's the status of order 48213?"),
            Ok(())
        );
    }

    #[test]
    fn numbers_and_dates_must_agree() {
        assert_eq!(
            check("Track order 48213", "Track order 48231"),
            Err(Mismatch::Number)
        );
        assert_eq!(
            check(
                "What happened on 2024-03-01?",
                "What happened on 2024-03-02?"
            ),
            Err(Mismatch::Number)
        );
        assert_eq!(
            check("Convert 5 km to miles", "Convert 50 km to miles"),
            Err(Mismatch::Number)
        );
        assert_eq!(
            check("Convert 5 km to miles", "Convert km to miles"),
            Err(Mismatch::Number)
        );
    }

    #[test]
    fn a_negation_on_one_side_only_is_refused() {
        assert_eq!(
            check(
                "Is it safe to mix it with alcohol?",
                "Is it not safe to mix it with alcohol?"
            ),
            Err(Mismatch::Negation)
        );
        assert_eq!(
            check("Why does it work?", "Why doesn't it work?"),
            Err(Mismatch::Negation)
        );
        assert_eq!(
            check("Can I travel with a visa?", "Can I travel without a visa?"),
            Err(Mismatch::Negation)
        );
        assert_eq!(
            check("这个药安全吗", "这个药不安全吗"),
            Err(Mismatch::Negation)
        );
    }

    #[test]
    fn different_entities_are_refused() {
        assert_eq!(
            check("How do I learn Python?", "How do I learn Java?"),
            Err(Mismatch::Entity)
        );
        assert_eq!(
            check("Is AWS cheaper than GCP?", "Is AWS cheaper than Azure?"),
            Err(Mismatch::Entity)
        );
        assert_eq!(
            check("Who founded Microsoft?", "Who founded Apple?"),
            Err(Mismatch::Entity)
        );
        assert_eq!(Mismatch::Entity.label(), "entity");
    }
}
