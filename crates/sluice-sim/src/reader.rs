//! A simulated model that reads: it answers a question of the form "what is the X?" only
//! when its prompt holds the sentence "the X is V." (the needle), and otherwise says that
//! the context was insufficient. Rehearses compression and progressive loading, where what
//! matters is whether the passage that holds the answer reached the model.

/// What the reader answers when its prompt does not hold the needle.
pub const DEFAULT_SENTINEL: &str = "INSUFFICIENT_CONTEXT";

/// The answer to the prompt's last question: `Some("The X is V.")` when the prompt holds the
/// needle, `None` when it does not (or asks no question the reader understands).
pub fn read(prompt: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(prompt).to_ascii_lowercase();
    let q = text.rfind("what is the ")?;
    let asked = &text[q + "what is the ".len()..];
    let subject = asked[..asked.find('?')?].trim();
    if subject.is_empty() {
        return None;
    }
    let needle = format!("the {subject} is ");
    let at = text[..q].find(&needle)?;
    let rest = &text[at + needle.len()..];
    // The value runs to the sentence's end: a full stop before a space or the end of text (a
    // decimal point is not one), or the line's end.
    let end = rest
        .char_indices()
        .find(|(i, c)| {
            *c == '\n'
                || (*c == '.' && rest[i + 1..].chars().next().is_none_or(char::is_whitespace))
        })
        .map_or(rest.len(), |(i, _)| i);
    let value = rest[..end].trim();
    // The value as the document wrote it (case kept).
    let start = at + needle.len() + (rest.len() - rest.trim_start().len());
    let original = String::from_utf8_lossy(prompt);
    let value = original
        .get(start..start + value.len())
        .unwrap_or(value)
        .to_string();
    Some(format!("The {subject} is {value}."))
}

/// What the reader says to `prompt`: the answer, or `sentinel`.
pub fn answer(prompt: &[u8], sentinel: &str) -> String {
    read(prompt).unwrap_or_else(|| sentinel.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_needle_in_the_prompt_is_the_answer() {
        let p = b"user:... For this Agreement the cap on aggregate liability is EUR 2,450,000. More. the rate is 9.5 percent.\n\nWhat is the cap on aggregate liability?";
        assert_eq!(
            read(p).as_deref(),
            Some("The cap on aggregate liability is EUR 2,450,000.")
        );
        let p = b"the rate is 9.5 percent. What is the rate?";
        assert_eq!(read(p).as_deref(), Some("The rate is 9.5 percent."));
    }

    #[test]
    fn without_the_needle_the_context_is_insufficient() {
        let p = b"user:the cap on liability applies.\n\nWhat is the cap on aggregate liability?";
        assert_eq!(read(p), None);
        assert_eq!(answer(p, DEFAULT_SENTINEL), DEFAULT_SENTINEL);
        assert_eq!(read(b"no question here"), None);
    }

    #[test]
    fn the_last_question_is_the_one_answered() {
        let p = b"the term is 3 years. What is the fee? the fee is EUR 10. What is the term?";
        assert_eq!(read(p).as_deref(), Some("The term is 3 years."));
    }
}
