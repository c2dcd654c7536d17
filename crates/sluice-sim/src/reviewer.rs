//! The simulated reviewer: a model that answers document analysis' clause reviews (requests
//! whose JSON schema is named `sluice_clause_review`) with a verdict that is a pure function
//! of the request: the risk follows the most severe rule that flagged the clause (critical
//! and high give `high`, medium `medium`, low `low`; the severities are read from the
//! request's rule catalogue), one step lower when the clause's words soften it (a mutual,
//! reasonable, capped or excepted obligation); its first words as the quote; and a reason of
//! about sixty words, written for its level, naming the rules (a verdict of about a hundred
//! tokens, as a model's is). The same request always gets the same verdict, so analyses run
//! offline and repeat.

use serde_json::{Map, Value, json};

/// The schema name reviews ask for.
const SCHEMA: &str = "sluice_clause_review";

/// Words of the clause quoted.
const QUOTED_WORDS: usize = 8;

/// The verdict (JSON text) for `body`, if it is a clause review.
pub fn verdict(body: &Map<String, Value>) -> Option<String> {
    let name = body
        .get("response_format")?
        .get("json_schema")?
        .get("name")?
        .as_str()?;
    if name != SCHEMA {
        return None;
    }
    let user = body
        .get("messages")?
        .as_array()?
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))?
        .get("content")?
        .as_str()?;
    // "Clause ID:\nTEXT\n\nFlagged by: ..."
    let after = user.split_once('\n').map_or(user, |(_, rest)| rest);
    let (clause, flagged) = after.split_once("\n\nFlagged by:").unwrap_or((after, ""));
    let rules: Vec<&str> = flagged
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| w.len() > 1 && w.contains('-') && !w.starts_with('('))
        .take(3)
        .collect();
    let system = body
        .get("messages")?
        .as_array()?
        .iter()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("system"))
        .and_then(|m| m.get("content")?.as_str())
        .unwrap_or("");
    let level = rules
        .iter()
        .filter_map(|id| severity(system, flagged, id))
        .max()
        .unwrap_or(1);
    let softened = softening(clause);
    let risk = RISKS[usize::from(level.saturating_sub(u8::from(softened.is_some())))];
    let quote: Vec<&str> = clause.split_whitespace().take(QUOTED_WORDS).collect();
    Some(
        json!({
            "risk": risk,
            "quote": quote.join(" "),
            "reason": reason(risk, &rules.join(", "), softened),
        })
        .to_string(),
    )
}

/// The levels a verdict may take, lowest first.
const RISKS: [&str; 4] = ["none", "low", "medium", "high"];

/// Rule `id`'s level (0 none to 3 high) as the request states its severity: in the user
/// message's list (`- id (High): ...`) or the system message's catalogue; a rule the request
/// gives no severity for counts as low.
fn severity(system: &str, flagged: &str, id: &str) -> Option<u8> {
    let mark = format!("- {id} (");
    let text = [flagged, system]
        .into_iter()
        .find_map(|t| t.split_once(mark.as_str()).map(|(_, rest)| rest))?;
    let word = text.split(')').next()?;
    Some(match word {
        "Critical" | "High" => 3,
        "Medium" => 2,
        "Low" => 1,
        _ => return None,
    })
}

/// Words that soften an obligation, English and Chinese.
const SOFTENERS: [&str; 12] = [
    "mutual",
    "mutually",
    "reasonable",
    "reasonably",
    "capped",
    "except",
    "unless",
    "gross negligence",
    "双方",
    "合理",
    "除外",
    "上限",
];

/// The first word of the clause that softens it, if any (English words whole, Chinese
/// terms anywhere).
fn softening(clause: &str) -> Option<&'static str> {
    let lower = clause.to_lowercase();
    let whole = |w: &str| {
        lower.match_indices(w).any(|(at, _)| {
            let before = lower[..at].chars().next_back();
            let after = lower[at + w.len()..].chars().next();
            !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
        })
    };
    SOFTENERS.into_iter().find(|w| {
        if w.is_ascii() {
            whole(w)
        } else {
            lower.contains(w)
        }
    })
}

/// A reason that says what its level says.
fn reason(risk: &str, rules: &str, softened: Option<&str>) -> String {
    let why = match softened {
        Some(w) => format!(
            " The wording \"{w}\" narrows it, so it weighs one step less than the rule alone."
        ),
        None => String::new(),
    };
    let body = match risk {
        "high" => {
            "as written, the clause leaves the signing party exposed beyond what is usual \
                   for an agreement of this kind, and the wording quoted is where the exposure \
                   sits; it should be negotiated or accepted knowingly before signing."
        }
        "medium" => {
            "the clause departs from the usual terms in the wording quoted; the exposure \
                     is real but bounded, and worth raising in negotiation rather than blocking \
                     the agreement."
        }
        "low" => {
            "the clause matches the rule, but the exposure it creates is small and common \
                  in agreements of this kind; note it and move on unless the rest of the \
                  agreement makes it matter."
        }
        _ => {
            "the rule fired on words that, in this clause, create no exposure for the signing \
              party; nothing needs to change."
        }
    };
    format!("{risk} risk under {rules}: {body}{why}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(system: &str, user: &str) -> Value {
        let body = json!({
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "response_format": {"type": "json_schema", "json_schema": {"name": SCHEMA}},
        });
        let text = verdict(body.as_object().unwrap()).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    const CATALOGUE: &str = "Review.\n\nThe rules:\n- liab-unlimited (Critical): unlimited.\n\
                             - ip-open-source (Medium): copyleft.\n- pay-late (Low): late fees.\n";

    #[test]
    fn the_risk_follows_the_most_severe_rule_and_the_reason_says_the_same() {
        let cases = [
            ("liab-unlimited", "high"),
            ("ip-open-source", "medium"),
            ("pay-late", "low"),
            ("pay-late, ip-open-source", "medium"),
        ];
        for (rules, want) in cases {
            let user = format!("Clause c1:\nThe Supplier bears all losses.\n\nFlagged by: {rules}");
            let v = ask(CATALOGUE, &user);
            assert_eq!(v["risk"], want, "{rules}");
            let reason = v["reason"].as_str().unwrap();
            assert!(
                reason.starts_with(&format!("{want} risk under")),
                "{reason}"
            );
            assert!(!reason.contains("narrows"), "{reason}");
        }
    }

    #[test]
    fn softening_words_lower_the_risk_one_step_and_say_so() {
        let v = ask(
            CATALOGUE,
            "Clause c2:\nEach party accepts mutual unlimited liability.\n\nFlagged by: liab-unlimited",
        );
        assert_eq!(v["risk"], "medium");
        assert!(
            v["reason"]
                .as_str()
                .unwrap()
                .contains("\"mutual\" narrows it")
        );
        let v = ask(
            CATALOGUE,
            "Clause c3:\n双方承担合理的费用。\n\nFlagged by: pay-late",
        );
        assert_eq!(v["risk"], "none");
        assert!(
            v["reason"]
                .as_str()
                .unwrap()
                .starts_with("none risk under pay-late: the rule fired")
        );
        // A word inside another is not the word: "unless" in "unlessened" does not soften.
        assert_eq!(softening("an unlessened duty"), None);
    }

    #[test]
    fn without_a_catalogue_the_severity_is_read_from_the_clauses_own_list() {
        let v = ask(
            "Review.",
            "Clause c4:\nThe fee is due.\n\nFlagged by:\n- pay-late (Low): late fees.",
        );
        assert_eq!(v["risk"], "low");
        let same = ask(
            "Review.",
            "Clause c4:\nThe fee is due.\n\nFlagged by:\n- pay-late (Low): late fees.",
        );
        assert_eq!(v, same);
    }
}
