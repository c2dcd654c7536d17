//! The simulated reviewer: a model that answers document analysis' clause reviews (requests
//! whose JSON schema is named `sluice_clause_review`) with a verdict that is a pure function
//! of the clause's text: a risk drawn by its hash (35% high, 30% medium, 20% low, 15% none),
//! its first words as the quote, and a reason of about sixty words naming the rules that
//! flagged it (a verdict of about a hundred tokens, as a model's is). The same
//! clause always gets the same verdict, so analyses run offline and repeat.

use serde_json::{Map, Value, json};
use sluice_routing::ticket_hash;

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
    let risk = match ticket_hash(0x5eed_c1a5, 0, clause) % 100 {
        0..35 => "high",
        35..65 => "medium",
        65..85 => "low",
        _ => "none",
    };
    let quote: Vec<&str> = clause.split_whitespace().take(QUOTED_WORDS).collect();
    let rules: Vec<&str> = flagged
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| w.len() > 1 && w.contains('-') && !w.starts_with('('))
        .take(3)
        .collect();
    Some(
        json!({
            "risk": risk,
            "quote": quote.join(" "),
            "reason": format!(
                "{risk} risk under {}: as written, the clause leaves the signing party exposed \
                 beyond what is usual for an agreement of this kind, and the wording quoted is \
                 where the exposure sits; a reviewer should weigh it against the rest of the \
                 agreement before signing.",
                rules.join(", ")
            ),
        })
        .to_string(),
    )
}
