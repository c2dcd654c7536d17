//! Reads what sluice checks and estimates in `messages` and `system` (each message as
//! [`super::message`] checks it; how many bytes of text there are) straight off their JSON
//! text, without building a tree of it.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::message::{BadMessage, Message};

/// `messages` as sluice checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Messages {
    /// Not an array.
    NotArray,
    /// An array of `count` messages holding `text` bytes of strings; the first bad one, if any.
    Items {
        count: usize,
        text: usize,
        first_bad: Option<(usize, BadMessage)>,
    },
}

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MessagesVisitor)
    }
}

struct MessagesVisitor;

impl<'de> Visitor<'de> for MessagesVisitor {
    type Value = Messages;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of messages")
    }

    other_shapes!(Messages::NotArray, Messages);

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Messages, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Messages::NotArray)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Messages, A::Error> {
        let (mut count, mut text, mut first_bad) = (0, 0, None);
        while let Some(m) = seq.next_element::<Message>()? {
            let bad = match m {
                Message::NotObject => Some(BadMessage::NotObject),
                Message::Object { text: t, fault } => {
                    text += t;
                    fault
                }
            };
            if let (Some(b), None) = (bad, first_bad) {
                first_bad = Some((count, b));
            }
            count += 1;
        }
        Ok(Messages::Items {
            count,
            text,
            first_bad,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::text::Text;

    fn text(s: &str) -> usize {
        serde_json::from_str::<Text>(s).unwrap().bytes
    }

    fn messages(s: &str) -> Messages {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn text_counts_every_string_but_not_names() {
        assert_eq!(text(r#""abc""#), 3);
        assert_eq!(
            text(r#"[{"type":"text","text":"héllo"},7,null,true,["ab"]]"#),
            4 + 6 + 2
        );
        assert_eq!(text(r#""\u00e9\n""#), 3, "unescaped bytes");
        assert_eq!(text("1.5"), 0);
        assert!(serde_json::from_str::<Text>(r#""""#).unwrap().is_string);
        assert!(!serde_json::from_str::<Text>("[]").unwrap().is_string);
    }

    #[test]
    fn messages_are_checked_and_counted() {
        assert_eq!(
            messages(
                r#"[{"role":"user","content":"abcd"},{"role":"assistant","content":[{"type":"text","text":"xy"}]}]"#
            ),
            Messages::Items {
                count: 2,
                text: 4 + 4 + 9 + 4 + 2,
                first_bad: None
            }
        );
        assert_eq!(messages(r#""hi""#), Messages::NotArray);
        assert_eq!(
            messages(r#"{"role":"user","content":"x"}"#),
            Messages::NotArray
        );
        let Messages::Items { first_bad, .. } =
            messages(r#"[{"role":"user","content":"x"},[1],{"content":"x"}]"#)
        else {
            panic!()
        };
        assert_eq!(first_bad, Some((1, BadMessage::NotObject)));
        for (body, bad) in [
            (r#"[{"content":"x"}]"#, BadMessage::Role),
            (r#"[{"role":5}]"#, BadMessage::Role),
            (r#"[{"role":null}]"#, BadMessage::Role),
            (r#"[{"role":["user"]}]"#, BadMessage::Role),
            (r#"[{"role":"user","role":1}]"#, BadMessage::Role),
            (r#"[7]"#, BadMessage::NotObject),
            (r#"["user"]"#, BadMessage::NotObject),
        ] {
            let Messages::Items { first_bad, .. } = messages(body) else {
                panic!("{body}")
            };
            assert_eq!(first_bad, Some((0, bad)), "{body}");
        }
    }
}
