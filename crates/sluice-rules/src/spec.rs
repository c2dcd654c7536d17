//! A rule file as written: `[[rule]]` tables in TOML, each read on its own so that a file with
//! several bad rules is refused with every error and the id of the rule it is in.

use std::collections::HashSet;

use serde::Deserialize;

/// How much a finding matters.
#[derive(
    Clone, Copy, Debug, Deserialize, serde::Serialize, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth a look.
    Low,
    /// Worth a review.
    Medium,
    /// A real risk.
    High,
    /// Not to be signed as it is.
    Critical,
}

/// Two terms that must occur within `within` words of each other.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Near {
    /// The two terms (literals, matched as keywords are).
    pub terms: [String; 2],
    /// The most words apart they may be (for text without spaces, characters).
    pub within: usize,
}

/// One rule as written.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Its id, unique in the file.
    pub id: String,
    /// How much a finding matters.
    pub severity: Severity,
    /// What the risk is, in a sentence (it goes into the review's prompt).
    pub explanation: String,
    /// Words, each matched whole and regardless of case.
    #[serde(default)]
    pub keywords: Vec<String>,
    /// Phrases, matched as written regardless of case.
    #[serde(default)]
    pub phrases: Vec<String>,
    /// Regular expressions (no look-around, no back-references: linear-time).
    #[serde(default)]
    pub regex: Vec<String>,
    /// Two terms that must also occur near each other, when set.
    #[serde(default)]
    pub near: Option<Near>,
    /// Literals whose presence in the clause means the rule does not apply ("unless").
    #[serde(default)]
    pub unless: Vec<String>,
    /// The clause kinds it applies to (`heading`, `clause`, `definition`...); all when empty.
    #[serde(default)]
    pub kinds: Vec<String>,
}

/// What is wrong with one rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("rule {rule}: {problem}")]
pub struct RuleError {
    /// The rule's id, or `#N` (its place in the file) when it has none.
    pub rule: String,
    /// What is wrong.
    pub problem: String,
}

/// A rule file that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Not TOML, or not `[[rule]]` tables.
    #[error("the rule file is not TOML with [[rule]] tables: {0}")]
    Toml(String),
    /// One or more rules are wrong: every one of them, in file order.
    #[error("{} rules are wrong: {}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Rules(Vec<RuleError>),
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    rule: Vec<toml::Table>,
}

/// Reads `text`'s `[[rule]]` tables, each on its own: every rule that is wrong is named with
/// what is wrong with it; regular expressions are checked when compiled.
pub fn parse(text: &str) -> Result<Vec<RuleSpec>, LoadError> {
    let file: File = toml::from_str(text).map_err(|e| LoadError::Toml(e.to_string()))?;
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    let mut seen = HashSet::new();
    for (i, table) in file.rule.into_iter().enumerate() {
        let name = table
            .get("id")
            .and_then(|v| v.as_str())
            .map_or_else(|| format!("#{}", i + 1), str::to_string);
        let mut wrong = |problem: String| {
            errors.push(RuleError {
                rule: name.clone(),
                problem,
            });
        };
        let spec: RuleSpec = match table.try_into() {
            Ok(s) => s,
            Err(e) => {
                wrong(e.to_string().trim().to_string());
                continue;
            }
        };
        if spec.id.trim().is_empty() {
            wrong("its id is empty".into());
        } else if !seen.insert(spec.id.clone()) {
            wrong("another rule has this id".into());
        }
        if spec.keywords.is_empty() && spec.phrases.is_empty() && spec.regex.is_empty() {
            wrong("it has no keywords, phrases or regex: it could never match".into());
        }
        let literals = spec
            .keywords
            .iter()
            .chain(&spec.phrases)
            .chain(&spec.unless);
        if literals.clone().any(|l| l.trim().is_empty()) {
            wrong("an empty keyword, phrase or unless term matches everywhere".into());
        }
        if let Some(near) = &spec.near {
            if near.within == 0 {
                wrong("near.within must be at least 1".into());
            }
            if near.terms.iter().any(|t| t.trim().is_empty()) {
                wrong("near.terms must not be empty".into());
            }
        }
        rules.push(spec);
    }
    if errors.is_empty() {
        Ok(rules)
    } else {
        Err(LoadError::Rules(errors))
    }
}
