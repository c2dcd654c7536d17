//! Progressive loading of a long document: the first call carries the passages most relevant
//! to the question (as many as a round's tokens allow) with an instruction to answer with a
//! sentinel when they do not suffice; when the answer is that sentinel, the next call carries
//! the conversation so far, the model's answer, and the next passages by relevance, up to a
//! number of rounds. Each round's prompt starts with the previous round's, so the provider's
//! prompt cache serves what was already sent, at its cached price; the rounds stop before
//! they would cost more than the whole document sent once. State and decisions only: the
//! caller makes the calls.

use std::sync::Arc;

use serde_json::{Map, Value};
use sluice_core::ChatRequest;

use crate::count::Count;
use crate::document::{self, Found};
use crate::passages::Passages;

/// The sentinel a model answers with when the excerpts do not hold the answer.
pub const DEFAULT_SENTINEL: &str = "INSUFFICIENT_CONTEXT";

/// How a group loads documents progressively: `progressive = { ... }` of a
/// `[models.GROUP]`; a document longer than `round_tokens` is sent a round at a time, most
/// relevant passages first, while the answer is `sentinel` (every field optional, unknown
/// fields refused).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Progressive {
    /// Tokens of document passages each round sends.
    pub round_tokens: u64,
    /// Calls at most, the first included.
    pub rounds: u32,
    /// What an answer says when the excerpts did not suffice.
    pub sentinel: String,
}

impl Default for Progressive {
    fn default() -> Self {
        Self {
            round_tokens: 8_000,
            rounds: 3,
            sentinel: DEFAULT_SENTINEL.into(),
        }
    }
}

impl Progressive {
    /// What is wrong with it, if anything: (field, message).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if self.rounds == 0 {
            out.push(("rounds", "must be at least 1".into()));
        }
        if self.round_tokens < 100 {
            out.push(("round_tokens", "must be at least 100 tokens".into()));
        }
        if self.sentinel.trim().is_empty() {
            out.push(("sentinel", "must not be empty".into()));
        }
        out
    }
}

/// One document's rounds: what was sent, and what is left.
#[derive(Clone)]
pub struct Rounds {
    cfg: Progressive,
    /// Counts the document's tokens.
    count: Arc<dyn Count>,
    /// What a token sent again (a prefix the provider's cache holds) costs, as a share of
    /// a token sent the first time: the cached input price over the input price.
    resend: f64,
    original: ChatRequest,
    found: Found,
    /// Body passages by relevance, not yet sent.
    left: Vec<usize>,
    /// Every passage's tokens, counted once.
    passage_tokens: Vec<u64>,
    /// The messages of the last call.
    messages: Vec<Value>,
    /// Calls made so far.
    round: u32,
    /// Tokens of the whole document.
    document_tokens: u64,
    /// Document tokens already in the conversation (each later round sends them again).
    in_conversation: u64,
    /// What the rounds so far cost, in document tokens at full price (a token sent again
    /// counts at `resend`).
    spent: u64,
    /// Document tokens the rounds so far sent, again or not.
    sent: u64,
}

impl std::fmt::Debug for Rounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rounds")
            .field("round", &self.round)
            .field("document_tokens", &self.document_tokens)
            .field("spent", &self.spent)
            .finish()
    }
}

fn instruction(sentinel: &str) -> String {
    format!(
        "Excerpts of a longer document follow, the passages most relevant to the question first chosen. \
If they do not hold what the question needs, answer with exactly {sentinel} and more of the document will follow."
    )
}

/// The text of a complete OpenAI answer's first choice, when it has one.
pub fn answer_text(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    v.pointer("/choices/0/message/content")?
        .as_str()
        .map(str::to_string)
}

/// The next passages of `left` (by relevance) that fit `tokens`, taken out of it and written
/// in document order.
fn take_excerpt(left: &mut Vec<usize>, passages: &Passages<'_>, tokens: u64) -> String {
    let chosen = passages.fill(left, tokens);
    let taken: hashbrown::HashSet<usize> = chosen.iter().copied().collect();
    left.retain(|i| !taken.contains(i));
    passages.write(&chosen)
}

impl Rounds {
    /// The rounds of `request` and its first call, when its newest user message holds a
    /// document longer than a round (otherwise it goes whole: `None`). `count` counts
    /// tokens; `resend` is what a token sent again costs as a share of a new one (the
    /// cached input price over the input price; 1 where nothing is known of a cache).
    pub fn start(
        request: &ChatRequest,
        cfg: &Progressive,
        count: Arc<dyn Count>,
        resend: f64,
    ) -> Option<(Self, ChatRequest)> {
        let Some(Value::Array(messages)) = request.value("messages") else {
            return None;
        };
        let found = document::find(&messages)?;
        // Counted once, passage by passage (the blank lines between them left out: the
        // bound errs on the strict side).
        let passages = Passages::of(&found.document, &*count);
        let document_tokens = passages.tokens();
        if document_tokens <= cfg.round_tokens {
            return None;
        }
        let mut left = passages.ranked(&found.question);
        let excerpt = take_excerpt(&mut left, &passages, cfg.round_tokens);
        let first_tokens = count.tokens(&excerpt);
        let text = format!("{}\n\n{excerpt}", instruction(&cfg.sentinel));
        let messages = document::replace(&messages, &found, &text);
        let resend = if resend.is_finite() {
            resend.clamp(0.0, 1.0)
        } else {
            1.0
        };
        let me = Self {
            cfg: cfg.clone(),
            count: Arc::clone(&count),
            resend,
            passage_tokens: passages.token_counts(),
            original: request.clone(),
            found,
            left,
            messages,
            round: 1,
            document_tokens,
            in_conversation: first_tokens,
            spent: first_tokens,
            sent: first_tokens,
        };
        let first = me.request()?;
        Some((me, first))
    }

    /// The request as the client sent it (the whole document).
    pub fn original(&self) -> &ChatRequest {
        &self.original
    }

    /// Calls made so far.
    pub fn round(&self) -> u32 {
        self.round
    }

    /// Tokens of the whole document.
    pub fn document_tokens(&self) -> u64 {
        self.document_tokens
    }

    /// Whether `answer` (a complete answer's body) says the excerpts did not suffice.
    pub fn insufficient(&self, answer: &[u8]) -> bool {
        answer_text(answer).is_some_and(|t| t.contains(&self.cfg.sentinel))
    }

    /// What the rounds so far cost, in document tokens at full price: each new token at
    /// full price, each token sent again at the cached share (`resend`).
    pub fn spent(&self) -> u64 {
        self.spent
    }

    /// Document tokens the rounds so far sent, again or not.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// The next call after `answer`, when it said the excerpts did not suffice, rounds and
    /// passages are left, and the next round would not take the rounds' cost past the whole
    /// document's; `None`: the answer stands.
    pub fn next(&mut self, answer: &[u8]) -> Option<ChatRequest> {
        if self.round >= self.cfg.rounds || self.left.is_empty() {
            return None;
        }
        let said = answer_text(answer).filter(|t| t.contains(&self.cfg.sentinel))?;
        let passages = Passages::recut(&self.found.document, &*self.count, &self.passage_tokens);
        let mut left = self.left.clone();
        let excerpt = take_excerpt(&mut left, &passages, self.cfg.round_tokens);
        if excerpt.is_empty() {
            return None;
        }
        let new = self.count.tokens(&excerpt);
        let again = (self.in_conversation as f64 * self.resend).ceil() as u64;
        let cost = again + new;
        if self.spent + cost > self.document_tokens {
            return None;
        }
        self.left = left;
        self.sent += self.in_conversation + new;
        self.in_conversation += new;
        self.spent += cost;
        let mut assistant = Map::new();
        assistant.insert("role".into(), Value::from("assistant"));
        assistant.insert("content".into(), Value::from(said));
        let mut user = Map::new();
        user.insert("role".into(), Value::from("user"));
        user.insert(
            "content".into(),
            Value::from(format!(
                "More of the document:\n\n{excerpt}\n\n{}",
                self.found.question
            )),
        );
        self.messages.push(Value::Object(assistant));
        self.messages.push(Value::Object(user));
        self.round += 1;
        self.request()
    }

    fn request(&self) -> Option<ChatRequest> {
        let raw = serde_json::to_vec(&Value::Array(self.messages.clone())).ok()?;
        self.original.with_fields(&[("messages", &raw)]).ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use serde_json::json;

    use super::*;
    use crate::count::FourBytes;

    fn four() -> Arc<dyn Count> {
        Arc::new(FourBytes)
    }

    fn doc() -> String {
        let mut s = String::new();
        for a in 1..=40 {
            s.push_str(&format!(
                "ARTICLE {a} - MATTER {a}\n\n{a}.1 Topic word{a} and more word{a} text about matter {a} goes here at some length.\n\n"
            ));
        }
        s
    }

    fn request(question: &str) -> ChatRequest {
        let body = json!({"model": "m", "messages": [
            {"role": "system", "content": "Review."},
            {"role": "user", "content": format!("{}\n\n{question}", doc())}
        ]});
        ChatRequest::parse(body.to_string().as_bytes()).unwrap()
    }

    fn answer(text: &str) -> Vec<u8> {
        json!({"choices": [{"message": {"role": "assistant", "content": text}}]})
            .to_string()
            .into_bytes()
    }

    fn cfg() -> Progressive {
        Progressive {
            round_tokens: 60,
            rounds: 3,
            sentinel: DEFAULT_SENTINEL.into(),
        }
    }

    fn user_text(r: &ChatRequest, i: usize) -> String {
        r.value("messages").unwrap()[i]["content"]
            .as_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn the_first_round_sends_the_most_relevant_passages_and_the_instruction() {
        let (rounds, first) =
            Rounds::start(&request("What about word7?"), &cfg(), four(), 1.0).unwrap();
        let u = user_text(&first, 1);
        assert!(u.contains("7.1 Topic word7"), "{u}");
        assert!(u.contains(DEFAULT_SENTINEL));
        assert!(u.ends_with("What about word7?"));
        assert!(first.prompt_estimate() < request("What about word7?").prompt_estimate() / 4);
        assert_eq!(rounds.round(), 1);
    }

    #[test]
    fn an_insufficient_answer_brings_the_next_passages_after_the_conversation_so_far() {
        let (mut rounds, first) =
            Rounds::start(&request("What about word7?"), &cfg(), four(), 1.0).unwrap();
        assert!(rounds.insufficient(&answer(DEFAULT_SENTINEL)));
        let second = rounds.next(&answer(DEFAULT_SENTINEL)).unwrap();
        let m1 = first.value("messages").unwrap();
        let m2 = second.value("messages").unwrap();
        // The first round's messages are the second's prefix, byte for byte.
        assert_eq!(m2.as_array().unwrap()[..2], m1.as_array().unwrap()[..]);
        assert_eq!(m2[2]["role"], "assistant");
        let more = user_text(&second, 3);
        assert!(more.starts_with("More of the document:"));
        assert!(!more.contains("7.1 Topic word7"), "a passage is sent once");
        assert!(more.ends_with("What about word7?"));
        assert_eq!(rounds.round(), 2);
        assert!(rounds.next(&answer(DEFAULT_SENTINEL)).is_some());
        assert!(
            rounds.next(&answer(DEFAULT_SENTINEL)).is_none(),
            "three rounds at most"
        );
    }

    #[test]
    fn a_real_answer_stands_and_a_short_document_goes_whole() {
        let (mut rounds, _) =
            Rounds::start(&request("What about word7?"), &cfg(), four(), 1.0).unwrap();
        assert!(!rounds.insufficient(&answer("It is word7.")));
        assert!(rounds.next(&answer("It is word7.")).is_none());
        let big = Progressive {
            round_tokens: 1_000_000,
            ..cfg()
        };
        assert!(Rounds::start(&request("What?"), &big, four(), 1.0).is_none());
    }

    #[test]
    fn rounds_stop_before_they_cost_more_than_the_whole_document() {
        let many = Progressive {
            rounds: 100,
            ..cfg()
        };
        let (mut rounds, _) =
            Rounds::start(&request("What about word39?"), &many, four(), 1.0).unwrap();
        let whole = rounds.document_tokens();
        let mut calls = 1;
        while rounds.next(&answer(DEFAULT_SENTINEL)).is_some() {
            calls += 1;
            assert!(rounds.spent() <= whole, "{} > {whole}", rounds.spent());
        }
        // Each round sends again what the ones before sent: the rounds stop well before the
        // passages run out.
        assert!(calls > 1 && calls < 40, "{calls} rounds");
        assert!(rounds.spent() <= whole);
        assert_eq!(
            rounds.sent(),
            rounds.spent(),
            "at full price, spent is sent"
        );
        // Where the provider's cache bills a token sent again at a tenth, more rounds fit
        // in the same bound, and what they sent passes what they cost.
        let (mut cheap, _) =
            Rounds::start(&request("What about word39?"), &many, four(), 0.1).unwrap();
        let mut cheap_calls = 1;
        while cheap.next(&answer(DEFAULT_SENTINEL)).is_some() {
            cheap_calls += 1;
            assert!(cheap.spent() <= whole);
        }
        assert!(cheap_calls > calls, "{cheap_calls} rounds against {calls}");
        assert!(cheap.sent() > cheap.spent());
    }
}
