//! One review: the request a flagged clause becomes, laid out so that everything stable
//! (instructions, the answer's schema, the rule set's catalogue) is one prefix that a
//! provider's prompt cache keeps, with only the clause and the rules it tripped after it;
//! and the model's verdict read from its structured answer, or reported unreadable.

use std::time::Duration;

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{Value, json};
use sluice_rules::RuleSpec;

/// The name of the answer's schema (a simulated reviewer answers requests that name it).
pub const SCHEMA_NAME: &str = "sluice_clause_review";
/// The task reviews are routed as (`x-sluice-task`).
pub const TASK: &str = "contract-review";
/// The largest catalogue of rules put in the prefix, in bytes; a larger rule set sends only
/// the rules each clause tripped.
pub const CATALOGUE_BYTES: usize = 24_000;

/// What the reviewer is told, before any clause.
const INSTRUCTIONS: &str = "You review clauses of a contract for the party that will sign \
it. Each clause comes with the rules that flagged it. Decide whether the clause is a real \
risk for the signing party, how serious, quote the words that carry the risk exactly as \
they are written in the clause, and say why in one sentence. Answer with the JSON the \
schema asks for and nothing else. risk is none when the rule fired on words that carry \
no risk here.";

/// A review to send: a chat-completions request, where it may go, and how long it may take.
#[derive(Clone, Debug)]
pub struct ReviewCall {
    /// The request's body (OpenAI chat completions).
    pub body: Value,
    /// The time left before the document's deadline, when it has one.
    pub timeout: Option<Duration>,
    /// An id for the call (the clause's id).
    pub id: String,
}

/// What a reviewer answered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Reviewed {
    /// The answer's text (the message content).
    pub content: String,
    /// Tokens the prompt had.
    pub prompt_tokens: u64,
    /// Of which the provider's prompt cache served.
    pub cached_tokens: u64,
    /// Tokens the answer had.
    pub completion_tokens: u64,
}

/// Why a review has no answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("{0}")]
pub struct ReviewFailed(pub String);

/// Who reviews: the gateway's own walk, or anything else that answers chat completions.
pub trait Reviewer: Send + Sync {
    /// Sends `call` and waits for its answer.
    fn review(&self, call: ReviewCall) -> BoxFuture<'static, Result<Reviewed, ReviewFailed>>;
}

/// The model's verdict on a clause.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Verdict {
    /// `high`, `medium`, `low` or `none`.
    pub risk: String,
    /// The words that carry the risk, as written in the clause.
    pub quote: String,
    /// Why, in a sentence.
    pub reason: String,
}

/// The parts of a review request that are the same for every clause of a rule set.
#[derive(Clone, Debug)]
pub struct Prompt {
    /// The system message: instructions and, when it is small enough, the rules' catalogue.
    system: String,
    /// Whether the catalogue is in it (else each clause's rules are spelled out).
    catalogued: bool,
    /// The model asked for.
    model: String,
}

impl Prompt {
    /// The stable prefix for `rules`, asking `model`.
    pub fn new(rules: &[RuleSpec], model: &str) -> Self {
        let mut catalogue = String::new();
        for r in rules {
            catalogue.push_str(&format!(
                "- {} ({:?}): {}\n",
                r.id, r.severity, r.explanation
            ));
        }
        let catalogued = catalogue.len() <= CATALOGUE_BYTES;
        let system = if catalogued {
            format!("{INSTRUCTIONS}\n\nThe rules:\n{catalogue}")
        } else {
            INSTRUCTIONS.to_string()
        };
        Self {
            system,
            catalogued,
            model: model.to_string(),
        }
    }

    /// The bytes of the stable prefix.
    pub fn prefix_bytes(&self) -> usize {
        self.system.len()
    }

    /// Whether the rule set's catalogue is in the prefix.
    pub fn catalogued(&self) -> bool {
        self.catalogued
    }

    /// The request reviewing clause `text` (`id`) that tripped `rules`.
    pub fn request(&self, id: &str, text: &str, rules: &[&RuleSpec]) -> Value {
        let mut user = format!("Clause {id}:\n{text}\n\nFlagged by:");
        for r in rules {
            if self.catalogued {
                user.push_str(&format!(" {}", r.id));
            } else {
                user.push_str(&format!(
                    "\n- {} ({:?}): {}",
                    r.id, r.severity, r.explanation
                ));
            }
        }
        json!({
            "model": self.model,
            "temperature": 0,
            "max_tokens": 300,
            "messages": [
                {"role": "system", "content": self.system},
                {"role": "user", "content": user},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": SCHEMA_NAME,
                    "strict": true,
                    "schema": {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["risk", "quote", "reason"],
                        "properties": {
                            "risk": {"type": "string", "enum": ["high", "medium", "low", "none"]},
                            "quote": {"type": "string"},
                            "reason": {"type": "string"},
                        },
                    },
                },
            },
        })
    }
}

/// The verdict in a model's answer: the JSON object in it (a code fence or words around it
/// are tolerated), with a risk the schema allows; else why it could not be read.
pub fn verdict(content: &str) -> Result<Verdict, String> {
    let start = content.find('{');
    let end = content.rfind('}');
    let json = match (start, end) {
        (Some(s), Some(e)) if s < e => &content[s..=e],
        _ => return Err("the answer holds no JSON object".into()),
    };
    let v: Verdict = serde_json::from_str(json)
        .map_err(|e| format!("the answer's JSON is not a verdict: {e}"))?;
    if !["high", "medium", "low", "none"].contains(&v.risk.as_str()) {
        return Err(format!(
            "risk `{}` is not high, medium, low or none",
            v.risk
        ));
    }
    Ok(v)
}
