//! The wording guard: two questions that say nearly the same words but swap one of them
//! ("open" for "closed", "safe" for "unsafe", "men's" for "women's", "gift" for "gift card")
//! or the same words in another order ("from savings to current" for "from current to
//! savings") ask different things, however close their embeddings. An embedder scores these
//! near 1; a list of the words each question says catches them.
//!
//! Two questions' content words (lowercased; articles, pronouns, auxiliaries and question
//! words left out) are compared as multisets, typos (an edit or a transposition or two, the
//! first letter kept) counting as the same word. The same words in another order differ. A
//! near copy differs too: words swapped one for one beside at least one shared word, or
//! for more or fewer others beside at least as many shared (at most [`MAX_CHANGED`] changed
//! on both sides together), or a single word added or dropped beside two or more shared. More changes than that are a rewording, left to the
//! embedding. Text in a script without spaces between words (Chinese, Japanese) is
//! left out: its words cannot be told apart here.

/// Words that carry no meaning of their own in a question.
const FILLER: &[&str] = &[
    "a", "an", "the", "do", "does", "did", "can", "could", "would", "will", "shall", "may",
    "might", "must", "i", "im", "id", "ive", "ill", "me", "my", "mine", "you", "your", "yours",
    "we", "our", "us", "it", "its", "is", "are", "am", "was", "were", "be", "been", "being", "to",
    "of", "for", "and", "or", "please", "how", "what", "whats", "which", "who", "whom", "whose",
    "when", "where", "why", "there", "this", "that", "these", "those", "just", "so", "hi", "hello",
    "hey", "thanks", "thank",
];

/// Changed words, on both sides together, beyond which two questions are a rewording.
pub const MAX_CHANGED: usize = 4;

/// The content words of `text`, in order.
pub fn content_words(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || matches!(c, ',' | '?' | '!' | '.' | ';' | ':'))
        .map(|w| {
            w.chars()
                .filter(|c| c.is_alphanumeric() || *c == '-')
                .flat_map(char::to_lowercase)
                .collect::<String>()
        })
        .map(|w| w.trim_matches('-').to_string())
        .filter(|w| !w.is_empty() && !FILLER.contains(&w.as_str()) && !w.chars().any(is_cjk))
        .collect()
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF)
}

/// Whether a question saying `b` may not share an answer with one saying `a`: the same words
/// in another order, or a few words changed for others that are not typos of them.
pub fn differ(a: &[String], b: &[String]) -> bool {
    if a == b {
        return false;
    }
    let mut only_a: Vec<&str> = a.iter().map(String::as_str).collect();
    let mut only_b: Vec<&str> = Vec::new();
    for w in b {
        match only_a.iter().position(|x| x == w) {
            Some(i) => {
                only_a.swap_remove(i);
            }
            None => only_b.push(w),
        }
    }
    if only_a.is_empty() && only_b.is_empty() {
        return true; // the same words, another order
    }
    // Typos are the same word.
    let mut left_a = Vec::new();
    for w in only_a {
        match only_b.iter().position(|x| typo(w, x)) {
            Some(i) => {
                only_b.swap_remove(i);
            }
            None => left_a.push(w),
        }
    }
    let changed = left_a.len() + only_b.len();
    let swapped = left_a.len().max(only_b.len());
    let shared = a.len().max(b.len()) - swapped;
    match (left_a.is_empty(), only_b.is_empty()) {
        (true, true) => false,
        // Word for word ("included in" and "excluded from"), beside a word they share.
        (false, false) if left_a.len() == only_b.len() => changed <= MAX_CHANGED && shared >= 1,
        // Words for more or fewer others, in a near copy.
        (false, false) => changed <= MAX_CHANGED && shared >= swapped,
        // One word more or less ("a gift" and "a gift card").
        _ => changed == 1 && shared >= 2,
    }
}

/// Whether `x` and `y` are one word misspelt: the first letter kept, and at most one edit
/// (two for words of twelve letters or more), a transposition counting as one.
fn typo(x: &str, y: &str) -> bool {
    let (x, y): (Vec<char>, Vec<char>) = (x.chars().collect(), y.chars().collect());
    if x.first() != y.first() {
        return false;
    }
    let allowed = if x.len().max(y.len()) >= 12 { 2 } else { 1 };
    osa(&x, &y) <= allowed
}

/// The optimal-string-alignment distance (edits and adjacent transpositions).
fn osa(a: &[char], b: &[char]) -> usize {
    let (n, m) = (a.len(), b.len());
    let mut d = vec![vec![0usize; m + 1]; n + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=n {
        for j in 1..=m {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[n][m]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn differs(a: &str, b: &str) -> bool {
        differ(&content_words(a), &content_words(b))
    }

    #[test]
    fn a_swapped_word_or_order_differs() {
        assert!(differs(
            "Is the clinic open on Sundays?",
            "Is the clinic closed on Sundays?"
        ));
        assert!(differs(
            "Is it safe with alcohol?",
            "Is it unsafe with alcohol?"
        ));
        assert!(differs(
            "Is the deposit refundable?",
            "Is the deposit non-refundable?"
        ));
        assert!(differs(
            "Who won the men's final?",
            "Who won the women's final?"
        ));
        assert!(differs(
            "How do I get a refund on a gift?",
            "How do I get a refund on a gift card?"
        ));
        assert!(differs(
            "Transfer money from my savings to my current account",
            "Transfer money from my current account to my savings"
        ));
        assert!(differs(
            "What time does it close on weekdays?",
            "What time does it close on weekends?"
        ));
        assert!(differs(
            "Is it included in the quote?",
            "Is it excluded from the quote?"
        ));
    }

    #[test]
    fn typos_fillers_and_rewordings_do_not() {
        assert!(!differs(
            "How do I change the email address on my account?",
            "How do I chnage the email adress on my acount?"
        ));
        assert!(!differs(
            "Do you sell gift vouchers?",
            "do you sell gift vouchers??"
        ));
        assert!(!differs(
            "How do I apply for a residents' parking permit?",
            "How do I apply for a residents parking permit?"
        ));
        assert!(!differs(
            "How do I reset my password?",
            "How can I reset my password?"
        ));
        assert!(!differs(
            "How do I reset my password?",
            "Hi, how do I reset my password? Thanks!"
        ));
        assert!(!differs(
            "How do I cancel my subscription?",
            "I'd like to end my subscription, how do I do that?"
        ));
        assert!(
            !differs("这个药安全吗", "这个药物安全吗"),
            "left to the embedding"
        );
    }
}
