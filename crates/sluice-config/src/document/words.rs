//! What a deserialisation error means, in the words of someone writing the file: "a whole
//! number >= 0" rather than `u64`, "did you mean `openai`?" for a misspelt word or key, and
//! the stand-in values that let reading go on past it.

use std::borrow::Cow;

use toml::de::{DeTable, DeValue};

use super::Seg;

/// One error, as read from its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Problem {
    /// A required key is absent.
    Missing(String),
    /// A key the table does not have.
    UnknownKey { key: String, expected: Vec<String> },
    /// A word not among those allowed.
    UnknownWord { word: String, expected: Vec<String> },
    /// A value of the wrong shape or out of range.
    Invalid { found: String, expected: String },
    /// Anything else: the message as it was.
    Other(String),
}

impl Problem {
    /// Reads a serde or TOML error message.
    pub(crate) fn read(message: &str) -> Self {
        if let Some(rest) = message.strip_prefix("missing field ") {
            return Self::Missing(unquote(rest).to_string());
        }
        if let Some(rest) = message.strip_prefix("unknown field ") {
            let (key, expected) = named_and_expected(rest);
            return Self::UnknownKey { key, expected };
        }
        if let Some(rest) = message.strip_prefix("unknown variant ") {
            let (word, expected) = named_and_expected(rest);
            return Self::UnknownWord { word, expected };
        }
        for prefix in ["invalid type: ", "invalid value: "] {
            if let Some(rest) = message.strip_prefix(prefix)
                && let Some((found, expected)) = rest.rsplit_once(", expected ")
            {
                return Self::Invalid {
                    found: found_words(found),
                    expected: expected.to_string(),
                };
            }
        }
        Self::Other(message.to_string())
    }

    /// Where the problem is, given the path the error was raised at: a missing or unknown
    /// key is raised at its table.
    pub(crate) fn at(&self, raised: &[Seg]) -> Vec<Seg> {
        let mut at = raised.to_vec();
        if let Self::Missing(key) | Self::UnknownKey { key, .. } = self
            && at.last() != Some(&Seg::Key(key.clone()))
        {
            at.push(Seg::Key(key.clone()));
        }
        at
    }

    /// Whether a required key is absent.
    pub(crate) fn is_missing(&self) -> bool {
        matches!(self, Self::Missing(_))
    }

    /// Whether the key is not one the table has.
    pub(crate) fn is_unknown_key(&self) -> bool {
        matches!(self, Self::UnknownKey { .. })
    }

    /// The message for the user.
    pub(crate) fn explain(&self) -> String {
        match self {
            Self::Missing(_) => "is required".to_string(),
            Self::UnknownKey { key, expected } => {
                let mut out = format!("unknown key `{key}`");
                match closest(key, expected) {
                    Some(near) => out.push_str(&format!("; did you mean `{near}`?")),
                    None if !expected.is_empty() => {
                        out.push_str(&format!("; keys here: {}", expected.join(", ")));
                    }
                    None => {}
                }
                out
            }
            Self::UnknownWord { word, expected } => {
                let mut out = format!("`{word}` is not one of {}", expected.join(", "));
                if let Some(near) = closest(word, expected) {
                    out.push_str(&format!("; did you mean `{near}`?"));
                }
                out
            }
            Self::Invalid { found, expected } => {
                format!("expected {}, found {found}", expected_words(expected))
            }
            Self::Other(message) => message.clone(),
        }
    }

    /// Values to try in the problem's place, most plausible first.
    pub(crate) fn stand_ins(&self) -> Vec<DeValue<'static>> {
        let mut out = Vec::new();
        if let Self::UnknownWord { word, expected } = self {
            let mut words: Vec<&String> = expected.iter().collect();
            if let Some(near) = closest(word, expected) {
                words.retain(|w| *w != near);
                words.insert(0, near);
            }
            out.extend(
                words
                    .into_iter()
                    .map(|w| DeValue::String(Cow::Owned(w.clone()))),
            );
        }
        out.extend(STAND_INS.iter().filter_map(|src| parsed(src)));
        out
    }
}

/// Generic stand-ins, one of each shape a setting can take, as one-line documents.
const STAND_INS: &[&str] = &[
    "v = 1",
    "v = 1.0",
    "v = false",
    "v = \"1s\"",
    "v = \"http://localhost/\"",
    "v = \"x\"",
    "v = {}",
    "v = []",
];

fn parsed(text: &'static str) -> Option<DeValue<'static>> {
    let table: DeTable<'static> = DeTable::parse(text).ok()?.into_inner();
    table.get("v").map(|v| v.get_ref().clone())
}

/// The closest of `candidates` to `word`, when it is close enough to be a likely typo.
pub(crate) fn closest<'c>(word: &str, candidates: &'c [String]) -> Option<&'c String> {
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// "`x`, expected one of `a`, `b`" → ("x", ["a", "b"]).
fn named_and_expected(rest: &str) -> (String, Vec<String>) {
    let (named, expected) = rest.split_once(", ").unwrap_or((rest, ""));
    let words = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    (unquote(named).to_string(), words)
}

fn unquote(s: &str) -> &str {
    s.trim().trim_matches('`')
}

/// serde's description of the value found, as the user wrote it.
fn found_words(found: &str) -> String {
    for kind in [
        "integer ",
        "floating point ",
        "boolean ",
        "string ",
        "character ",
    ] {
        if let Some(v) = found.strip_prefix(kind) {
            return v.trim_matches('`').to_string();
        }
    }
    match found {
        "map" => "a table".to_string(),
        "sequence" => "a list".to_string(),
        other => other.to_string(),
    }
}

/// serde's description of what was expected, in the user's words.
fn expected_words(expected: &str) -> String {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a whole number >= 0".to_string(),
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "a whole number".to_string(),
        "f32" | "f64" => "a number".to_string(),
        "a boolean" => "true or false".to_string(),
        "a string" | "a borrowed string" | "a char" => "text in quotes".to_string(),
        "a sequence" => "a list in [brackets]".to_string(),
        e if e.starts_with("struct ") || e == "a map" => "a table".to_string(),
        e if e.contains("duration") => "a duration such as 30s or 2m".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_read_into_problems() {
        assert_eq!(
            Problem::read("missing field `output`"),
            Problem::Missing("output".into())
        );
        assert_eq!(
            Problem::read("unknown variant `opnai`, expected one of `openai`, `anthropic`"),
            Problem::UnknownWord {
                word: "opnai".into(),
                expected: vec!["openai".into(), "anthropic".into()]
            }
        );
        assert_eq!(
            Problem::read("unknown variant `x`, expected `a` or `b`"),
            Problem::UnknownWord {
                word: "x".into(),
                expected: vec!["a".into(), "b".into()]
            }
        );
        assert_eq!(
            Problem::read("invalid value: integer `-5`, expected u64"),
            Problem::Invalid {
                found: "-5".into(),
                expected: "u64".into()
            }
        );
        assert_eq!(Problem::read("odd"), Problem::Other("odd".into()));
    }

    #[test]
    fn problems_are_explained_in_words_a_user_knows() {
        let e = |m: &str| Problem::read(m).explain();
        assert_eq!(
            e("invalid value: integer `-5`, expected u64"),
            "expected a whole number >= 0, found -5"
        );
        assert_eq!(
            e("invalid type: string \"yes\", expected a boolean"),
            "expected true or false, found \"yes\""
        );
        assert_eq!(
            e("unknown variant `opnai`, expected one of `openai`, `anthropic`"),
            "`opnai` is not one of openai, anthropic; did you mean `openai`?"
        );
        assert_eq!(
            e("unknown field `qantile`, expected one of `enabled`, `quantile`"),
            "unknown key `qantile`; did you mean `quantile`?"
        );
        assert_eq!(
            e("unknown field `zzz`, expected one of `enabled`, `quantile`"),
            "unknown key `zzz`; keys here: enabled, quantile"
        );
        assert_eq!(e("missing field `output`"), "is required");
    }

    #[test]
    fn a_misspelt_word_is_stood_in_for_by_its_nearest_first() {
        let p = Problem::read("unknown variant `gradiant`, expected one of `aimd`, `gradient2`");
        let first = p.stand_ins().into_iter().next().unwrap();
        assert!(matches!(first, DeValue::String(s) if s == "gradient2"));
        assert!(Problem::Missing("x".into()).stand_ins().len() >= STAND_INS.len());
        assert_eq!(
            Problem::Missing("x".into()).at(&[Seg::Key("t".into())]),
            vec![Seg::Key("t".into()), Seg::Key("x".into())]
        );
    }
}
