//! What made a report: the rule set (its name, a version taken from its text, its size) and
//! who reviewed the flagged clauses (a model group and its deployments, or sluice's simulated
//! reviewer, or nobody), so that a report read later says whose verdicts it holds.

use serde::{Deserialize, Serialize};

/// The rule set and the reviewer behind a report.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MadeBy {
    /// Who reviewed; absent when nothing was reviewed (`--no-review`, `review = false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<ReviewedBy>,
    /// The rules that flagged the clauses.
    pub rules: RuleSet,
}

/// Who reviewed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewedBy {
    /// Whether the reviewer is sluice's simulation (no model: its verdicts are not advice).
    pub simulated: bool,
    /// The model group reviews were sent to.
    pub group: String,
    /// Its deployments (`provider/model`).
    pub deployments: Vec<String>,
}

/// A rule set as a report names it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleSet {
    /// Its name: the rule file's stem, or `contract-risks` for the shipped set.
    pub name: String,
    /// The first 12 hex digits of the SHA-256 of its text: the same text, the same version.
    pub version: String,
    /// How many rules it has.
    pub rules: usize,
}

impl RuleSet {
    /// The rule set called `name` whose file reads `text` and holds `rules` rules.
    pub fn of(name: &str, text: &str, rules: usize) -> Self {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(text.as_bytes());
        let version: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
        Self {
            name: name.to_owned(),
            version,
            rules,
        }
    }
}

impl MadeBy {
    /// The lines a Markdown report opens with: the reviewer (a simulated one in bold) and
    /// the rules.
    pub fn markdown(&self) -> String {
        let r = &self.rules;
        let rules = format!(
            "Rules: {}, version {}, {} rules.",
            r.name, r.version, r.rules
        );
        match &self.reviewer {
            None => format!("{rules} Not reviewed: the findings are the rules' matches.\n\n"),
            Some(by) if by.simulated => format!(
                "**Reviewer: simulated.** The verdicts below come from sluice's simulated \
                 reviewer (model group `{}`), not from a model: they follow the rules' \
                 severity and show the report's shape, not advice. {rules}\n\n",
                by.group
            ),
            Some(by) => format!(
                "Reviewer: model group `{}` ({}). {rules}\n\n",
                by.group,
                by.deployments.join(", ")
            ),
        }
    }
}
