//! Reads what sluice checks and estimates in `messages` and `system` (each message is an
//! object with a string `role`; how many bytes of text there are) straight off their JSON
//! text, without building a tree of it.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::fields::Name;

/// Visitor arms for the scalars a shape does not look inside: each reported as `out`.
macro_rules! scalars {
    ($out:expr, $ty:ty) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<$ty, E> {
            Ok($out)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<$ty, E> {
            Ok($out)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<$ty, E> {
            Ok($out)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<$ty, E> {
            Ok($out)
        }
        fn visit_unit<E: de::Error>(self) -> Result<$ty, E> {
            Ok($out)
        }
    };
}

/// A value that is not the shape looked for (a scalar or a string): reported as `out`.
macro_rules! other_shapes {
    ($out:expr, $ty:ty) => {
        scalars!($out, $ty);
        fn visit_str<E: de::Error>(self, _: &str) -> Result<$ty, E> {
            Ok($out)
        }
    };
}

/// Bytes of text in every string of a JSON value (names of fields not counted), and
/// whether the value is itself a string.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Text {
    pub bytes: usize,
    pub is_string: bool,
}

impl Text {
    const NONE: Self = Self {
        bytes: 0,
        is_string: false,
    };
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Text, E> {
        Ok(Text {
            bytes: v.len(),
            is_string: true,
        })
    }

    scalars!(Text::NONE, Text);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Text, A::Error> {
        let mut bytes = 0;
        while let Some(t) = seq.next_element::<Text>()? {
            bytes += t.bytes;
        }
        Ok(Text {
            bytes,
            is_string: false,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Text, A::Error> {
        let mut bytes = 0;
        while map.next_key::<IgnoredAny>()?.is_some() {
            bytes += map.next_value::<Text>()?.bytes;
        }
        Ok(Text {
            bytes,
            is_string: false,
        })
    }
}

/// What is wrong with one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadMessage {
    /// It is not a JSON object.
    NotObject,
    /// Its `role` is missing or not a string.
    Role,
}

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
                Message::Object { role, text: t } => {
                    text += t;
                    (!role).then_some(BadMessage::Role)
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

/// One message: whether it is an object whose `role` is a string, and its text's bytes.
enum Message {
    NotObject,
    Object { role: bool, text: usize },
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MessageVisitor)
    }
}

struct MessageVisitor;

impl<'de> Visitor<'de> for MessageVisitor {
    type Value = Message;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message")
    }

    other_shapes!(Message::NotObject, Message);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Message, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Message::NotObject)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message, A::Error> {
        let (mut role, mut text) = (false, 0);
        while let Some(Name(name)) = map.next_key()? {
            let t: Text = map.next_value()?;
            text += t.bytes;
            if name == "role" {
                // The last `role` counts, as in a JSON map.
                role = t.is_string;
            }
        }
        Ok(Message::Object { role, text })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(messages(r#"{"role":"user"}"#), Messages::NotArray);
        let Messages::Items { first_bad, .. } =
            messages(r#"[{"role":"user"},[1],{"content":"x"}]"#)
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
