//! Compression of a request over its token budget: only the document in the newest user
//! message is touched (never the prefix a provider's cache may hold); its boilerplate and
//! duplicated passages go, then the passages most relevant to the question are kept, in their
//! order and under their headings, as many as the budget leaves room for. A request under its
//! budget is not touched. The same request always compresses to the same bytes.

use serde_json::Value;
use sluice_core::ChatRequest;

use crate::count::Count;
use crate::document;
use crate::passages::Passages;

/// Room left for the JSON around the compressed document, in tokens.
const MARGIN: u64 = 16;

/// How a group compresses: `compress = { ... }` of a `[models.GROUP]`; over `budget` prompt
/// tokens, the document in the newest user message loses its boilerplate and duplicates
/// and keeps the passages most relevant to the question (unknown fields refused).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Compress {
    /// Prompt tokens a request may have before it is compressed; absent: what the group's
    /// smallest context window leaves after the request's `max_tokens`.
    pub budget: Option<u64>,
}

impl Compress {
    /// What is wrong with it, if anything: (field, message).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        if self.budget == Some(0) {
            return vec![("budget", "must be at least 1 token".into())];
        }
        Vec::new()
    }
}

/// A compressed request and what it saved.
#[derive(Debug)]
pub struct Compressed {
    /// The request as it is sent.
    pub request: ChatRequest,
    /// Prompt tokens before (counted).
    pub before: u64,
    /// Prompt tokens after (counted).
    pub after: u64,
}

/// Why a request over its budget went as it came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Its newest user message holds no document with a question.
    NoDocument,
    /// Everything but the document already exceeds the budget.
    PrefixOverBudget,
    /// The rewritten request could not be written (counted; the request goes as it came).
    Rewrite,
}

impl Skip {
    /// The label metrics use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoDocument => "no_document",
            Self::PrefixOverBudget => "prefix_over_budget",
            Self::Rewrite => "rewrite_failed",
        }
    }
}

/// What compressing a request came to.
#[derive(Debug)]
pub enum Outcome {
    /// Within its budget: passed through untouched.
    Under,
    /// Compressed.
    Compressed(Compressed),
    /// Over budget but left as it came, and why.
    Skipped(Skip),
}

/// `request` compressed to `budget` prompt tokens, as `count` counts them, when it is over
/// it.
pub fn compress(request: &ChatRequest, budget: u64, count: &dyn Count) -> Outcome {
    let before = count.prompt(request);
    if before <= budget {
        return Outcome::Under;
    }
    let Some(Value::Array(messages)) = request.value("messages") else {
        return Outcome::Skipped(Skip::NoDocument);
    };
    let Some(found) = document::find(&messages) else {
        return Outcome::Skipped(Skip::NoDocument);
    };
    // Counted once, passage by passage; the blank lines between passages left out make
    // the rest of the prompt, and so the room, err on the small side.
    let passages = Passages::of(&found.document, count);
    let rest = before.saturating_sub(passages.tokens());
    let Some(room) = budget.checked_sub(rest + MARGIN).filter(|r| *r > 0) else {
        return Outcome::Skipped(Skip::PrefixOverBudget);
    };
    let ranked = passages.ranked(&found.question);
    let chosen = passages.fill(&ranked, room);
    let text = passages.write(&chosen);
    let out = document::replace(&messages, &found, &text);
    let Ok(raw) = serde_json::to_vec(&Value::Array(out)) else {
        return Outcome::Skipped(Skip::Rewrite);
    };
    match request.with_fields(&[("messages", &raw)]) {
        Ok(request) => {
            let after = count.prompt(&request);
            Outcome::Compressed(Compressed {
                request,
                before,
                after,
            })
        }
        Err(_) => Outcome::Skipped(Skip::Rewrite),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use serde_json::json;

    use super::*;
    use crate::count::FourBytes;

    fn request(doc: &str, question: &str) -> ChatRequest {
        let body = json!({"model": "m", "temperature": 0.2, "messages": [
            {"role": "system", "content": "You review contracts. Cite the clause."},
            {"role": "user", "content": format!("{doc}\n\n{question}")}
        ]});
        ChatRequest::parse(body.to_string().as_bytes()).unwrap()
    }

    fn doc() -> String {
        let mut s = String::new();
        for a in 1..=30 {
            s.push_str(&format!("ARTICLE {a} - GENERAL MATTERS\n\n"));
            for c in 1..=6 {
                s.push_str(&format!(
                    "{a}.{c} The parties shall cooperate in good faith on the general matters of article {a}, and each shall keep the other informed of progress.\n\n"
                ));
            }
            s.push_str("HEADER OF EVERY PAGE - CONFIDENTIAL\n\n");
        }
        s.push_str(
            "ARTICLE 31 - TERMINATION\n\n31.1 The notice period for termination for convenience is 47 days.\n\n",
        );
        s
    }

    #[test]
    fn under_its_budget_a_request_is_untouched() {
        let r = request("short doc\n\nmore", "What?");
        assert!(matches!(compress(&r, 10_000, &FourBytes), Outcome::Under));
    }

    #[test]
    fn over_its_budget_the_document_shrinks_and_keeps_the_answer() {
        let q = "What is the notice period for termination for convenience?";
        let r = request(&doc(), q);
        let before = FourBytes.prompt(&r);
        let Outcome::Compressed(c) = compress(&r, 300, &FourBytes) else {
            panic!("not compressed")
        };
        assert_eq!(c.before, before);
        assert!(c.after <= 300, "{} tokens", c.after);
        assert!(c.after * 4 < before);
        let m = c.request.value("messages").unwrap();
        let user = m[1]["content"].as_str().unwrap();
        assert!(user.contains("31.1 The notice period"), "{user}");
        assert!(user.contains("ARTICLE 31 - TERMINATION"));
        assert!(user.ends_with(q));
        // The prefix and every other field are as the client sent them.
        assert_eq!(m[0], r.value("messages").unwrap()[0]);
        assert_eq!(c.request.field("temperature"), r.field("temperature"));
        assert_eq!(c.request.field("model"), r.field("model"));
    }

    #[test]
    fn compressing_twice_gives_the_same_bytes() {
        let q = "What is the notice period for termination for convenience?";
        let r = request(&doc(), q);
        let (Outcome::Compressed(a), Outcome::Compressed(b)) =
            (compress(&r, 400, &FourBytes), compress(&r, 400, &FourBytes))
        else {
            panic!("not compressed")
        };
        assert_eq!(a.request.field("messages"), b.request.field("messages"));
    }

    #[test]
    fn a_prefix_over_the_budget_or_no_document_is_skipped() {
        let r = request(&doc(), "What?");
        assert!(matches!(
            compress(&r, 10, &FourBytes),
            Outcome::Skipped(Skip::PrefixOverBudget)
        ));
        let body =
            json!({"model": "m", "messages": [{"role": "user", "content": "x".repeat(4000)}]});
        let r = ChatRequest::parse(body.to_string().as_bytes()).unwrap();
        assert!(matches!(
            compress(&r, 10, &FourBytes),
            Outcome::Skipped(Skip::NoDocument)
        ));
    }
}
