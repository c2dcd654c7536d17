//! Where a request's document and question are: in the newest user message only, since
//! everything before it (tools, system prompt, earlier turns) is the prefix a provider's
//! prompt cache may hold and must stay byte for byte. The document is that message's longest
//! text; the question is a later text part of it, or else the document's last paragraph.

use serde_json::Value;

/// Where in the messages the document sits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The newest user message's index.
    pub message: usize,
    /// The content part holding the document (`None`: the content is a string).
    pub part: Option<usize>,
    /// The document's text.
    pub document: String,
    /// The question's text.
    pub question: String,
    /// Whether the question was cut off the document's end (and must be written back after
    /// it); otherwise it is a later content part and stays where it is.
    pub trailing: bool,
}

/// The last paragraph of `text` as the question, when what comes before it is longer.
fn cut_question(text: &str) -> Option<(String, String)> {
    let trimmed = text.trim_end();
    let at = trimmed.rfind("\n\n")?;
    let (doc, q) = (&trimmed[..at], trimmed[at..].trim());
    (!q.is_empty() && doc.len() > q.len()).then(|| (doc.to_string(), q.to_string()))
}

/// The document and question of `messages`, when the newest user message has both.
pub fn find(messages: &[Value]) -> Option<Found> {
    let message = messages
        .iter()
        .rposition(|m| m.get("role").and_then(Value::as_str) == Some("user"))?;
    match messages[message].get("content")? {
        Value::String(s) => {
            let (document, question) = cut_question(s)?;
            Some(Found {
                message,
                part: None,
                document,
                question,
                trailing: true,
            })
        }
        Value::Array(parts) => {
            let texts: Vec<(usize, &str)> = parts
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    (p.get("type").and_then(Value::as_str) == Some("text"))
                        .then(|| p.get("text").and_then(Value::as_str).map(|t| (i, t)))
                        .flatten()
                })
                .collect();
            let (longest, doc) = texts
                .iter()
                .copied()
                .max_by_key(|(i, t)| (t.len(), std::cmp::Reverse(*i)))?;
            match texts.last() {
                Some((last, q)) if *last > longest => Some(Found {
                    message,
                    part: Some(longest),
                    document: doc.to_string(),
                    question: (*q).to_string(),
                    trailing: false,
                }),
                _ => {
                    let (document, question) = cut_question(doc)?;
                    Some(Found {
                        message,
                        part: Some(longest),
                        document,
                        question,
                        trailing: true,
                    })
                }
            }
        }
        _ => None,
    }
}

/// `messages` with the document `found` replaced by `text` (the question written back after
/// it when it was cut off its end).
pub fn replace(messages: &[Value], found: &Found, text: &str) -> Vec<Value> {
    let mut out = messages.to_vec();
    let written = if found.trailing {
        format!("{text}\n\n{}", found.question)
    } else {
        text.to_string()
    };
    if let Some(m) = out.get_mut(found.message).and_then(Value::as_object_mut) {
        match found.part {
            None => {
                m.insert("content".into(), Value::from(written));
            }
            Some(i) => {
                if let Some(part) = m
                    .get_mut("content")
                    .and_then(|c| c.get_mut(i))
                    .and_then(Value::as_object_mut)
                {
                    part.insert("text".into(), Value::from(written));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use serde_json::json;

    use super::*;

    #[test]
    fn a_string_message_gives_its_last_paragraph_as_the_question() {
        let m = vec![
            json!({"role": "system", "content": "You review contracts."}),
            json!({"role": "user", "content": "Clause one.\n\nClause two.\n\nWhat is the term?"}),
        ];
        let f = find(&m).unwrap();
        assert_eq!(f.message, 1);
        assert_eq!(f.document, "Clause one.\n\nClause two.");
        assert_eq!(f.question, "What is the term?");
        let back = replace(&m, &f, "Clause two.");
        assert_eq!(back[1]["content"], "Clause two.\n\nWhat is the term?");
        assert_eq!(back[0], m[0]);
    }

    #[test]
    fn parts_give_the_longest_as_the_document_and_a_later_one_as_the_question() {
        let m = vec![json!({"role": "user", "content": [
            {"type": "text", "text": "A long document text here."},
            {"type": "text", "text": "Which term?"}
        ]})];
        let f = find(&m).unwrap();
        assert_eq!((f.part, f.trailing), (Some(0), false));
        assert_eq!(f.question, "Which term?");
        let back = replace(&m, &f, "short");
        assert_eq!(back[0]["content"][0]["text"], "short");
        assert_eq!(back[0]["content"][1]["text"], "Which term?");
    }

    #[test]
    fn no_document_without_a_user_message_or_a_paragraph_break() {
        assert!(find(&[json!({"role": "system", "content": "a\n\nb"})]).is_none());
        assert!(find(&[json!({"role": "user", "content": "just a question"})]).is_none());
        assert!(find(&[json!({"role": "user", "content": "q\n\nlonger question"})]).is_none());
    }
}
