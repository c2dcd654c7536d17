//! One message of `messages` as sluice checks it before anything goes upstream, as OpenAI
//! does: a known `role`; `content` for user, system and developer messages; content or tool
//! calls for an assistant; `tool_call_id` for a tool's answer; a URL in every image part.
//! Read straight off the JSON text, counting its text's bytes on the way.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::fields::Name;
use super::text::Text;

/// What is wrong with one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadMessage {
    /// It is not a JSON object.
    NotObject,
    /// Its `role` is missing or not a string.
    Role,
    /// Its `role` is a string that names no role.
    UnknownRole,
    /// A user, system or developer message without `content`.
    NoContent,
    /// An assistant message with neither `content` nor tool calls.
    NoAnswer,
    /// A tool message without `tool_call_id`.
    NoToolCallId,
    /// Content part `j` is an image without a URL.
    ImageWithoutUrl(usize),
}

/// One message: an object (its text's bytes and what is wrong with it, if anything), or not.
pub enum Message {
    NotObject,
    Object {
        text: usize,
        fault: Option<BadMessage>,
    },
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
        let mut role = Role::Missing;
        let (mut text, mut content, mut answer, mut call_id) = (0, false, false, false);
        let mut bad_image = None;
        while let Some(Name(name)) = map.next_key()? {
            match &*name {
                // The last `role` counts, as in a JSON map.
                "role" => {
                    let r: RoleText = map.next_value()?;
                    text += r.bytes;
                    role = r.role;
                }
                "content" => {
                    let c: Content = map.next_value()?;
                    text += c.bytes;
                    content = !c.null;
                    bad_image = c.bad_image;
                }
                "tool_calls" | "function_call" | "refusal" | "audio" => {
                    let t: Text = map.next_value()?;
                    text += t.bytes;
                    answer |= !t.null;
                }
                "tool_call_id" => {
                    let t: Text = map.next_value()?;
                    text += t.bytes;
                    call_id = t.is_string;
                }
                _ => text += map.next_value::<Text>()?.bytes,
            }
        }
        let fault = match role {
            Role::Missing => Some(BadMessage::Role),
            Role::Unknown => Some(BadMessage::UnknownRole),
            Role::Asks if !content => Some(BadMessage::NoContent),
            Role::Assistant if !content && !answer => Some(BadMessage::NoAnswer),
            Role::Tool if !call_id => Some(BadMessage::NoToolCallId),
            _ => bad_image.map(BadMessage::ImageWithoutUrl),
        };
        Ok(Message::Object { text, fault })
    }
}

/// A message's role, as far as checking it goes.
#[derive(Clone, Copy)]
enum Role {
    /// Missing, or not a string.
    Missing,
    /// A string that is no role.
    Unknown,
    /// `user`, `system` or `developer`: content required.
    Asks,
    Assistant,
    Tool,
    /// The deprecated `function` role: passed on as it is.
    Function,
}

struct RoleText {
    bytes: usize,
    role: Role,
}

impl<'de> Deserialize<'de> for RoleText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RoleVisitor)
    }
}

struct RoleVisitor;

const NOT_A_ROLE: RoleText = RoleText {
    bytes: 0,
    role: Role::Missing,
};

impl<'de> Visitor<'de> for RoleVisitor {
    type Value = RoleText;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a role")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<RoleText, E> {
        let role = match v {
            "user" | "system" | "developer" => Role::Asks,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            "function" => Role::Function,
            _ => Role::Unknown,
        };
        Ok(RoleText {
            bytes: v.len(),
            role,
        })
    }

    scalars!(NOT_A_ROLE, RoleText);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RoleText, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(NOT_A_ROLE)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RoleText, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(NOT_A_ROLE)
    }
}

/// A message's `content`: its text's bytes, whether it is `null`, and the first image part
/// without a URL.
struct Content {
    bytes: usize,
    null: bool,
    bad_image: Option<usize>,
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ContentVisitor)
    }
}

struct ContentVisitor;

const NO_TEXT: Content = Content {
    bytes: 0,
    null: false,
    bad_image: None,
};

impl<'de> Visitor<'de> for ContentVisitor {
    type Value = Content;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("message content")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Content, E> {
        Ok(Content {
            bytes: v.len(),
            ..NO_TEXT
        })
    }

    fn visit_unit<E: de::Error>(self) -> Result<Content, E> {
        Ok(Content {
            null: true,
            ..NO_TEXT
        })
    }

    numbers!(NO_TEXT, Content);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
        let (mut bytes, mut bad_image, mut j) = (0, None, 0);
        while let Some(p) = seq.next_element::<Part>()? {
            bytes += p.bytes;
            if p.bad_image && bad_image.is_none() {
                bad_image = Some(j);
            }
            j += 1;
        }
        Ok(Content {
            bytes,
            bad_image,
            ..NO_TEXT
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Content, A::Error> {
        let mut bytes = 0;
        while map.next_key::<IgnoredAny>()?.is_some() {
            bytes += map.next_value::<Text>()?.bytes;
        }
        Ok(Content { bytes, ..NO_TEXT })
    }
}

/// One content part: its text's bytes, and whether it is an image without a URL.
struct Part {
    bytes: usize,
    bad_image: bool,
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(PartVisitor)
    }
}

struct PartVisitor;

const PLAIN: Part = Part {
    bytes: 0,
    bad_image: false,
};

impl<'de> Visitor<'de> for PartVisitor {
    type Value = Part;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content part")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Part, E> {
        Ok(Part {
            bytes: v.len(),
            bad_image: false,
        })
    }

    scalars!(PLAIN, Part);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Part, A::Error> {
        let mut bytes = 0;
        while let Some(t) = seq.next_element::<Text>()? {
            bytes += t.bytes;
        }
        Ok(Part {
            bytes,
            bad_image: false,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Part, A::Error> {
        let (mut bytes, mut image, mut url) = (0, false, false);
        while let Some(Name(name)) = map.next_key()? {
            match &*name {
                "type" => {
                    let t: KindText = map.next_value()?;
                    bytes += t.bytes;
                    image = t.image;
                }
                "image_url" => {
                    let u: ImageUrl = map.next_value()?;
                    bytes += u.bytes;
                    url = u.url;
                }
                _ => bytes += map.next_value::<Text>()?.bytes,
            }
        }
        Ok(Part {
            bytes,
            bad_image: image && !url,
        })
    }
}

/// A part's `type`: its bytes, and whether it is `image_url`.
struct KindText {
    bytes: usize,
    image: bool,
}

impl<'de> Deserialize<'de> for KindText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(KindVisitor)
    }
}

struct KindVisitor;

const NO_KIND: KindText = KindText {
    bytes: 0,
    image: false,
};

impl<'de> Visitor<'de> for KindVisitor {
    type Value = KindText;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a part type")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<KindText, E> {
        Ok(KindText {
            bytes: v.len(),
            image: v == "image_url",
        })
    }

    scalars!(NO_KIND, KindText);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<KindText, A::Error> {
        let mut bytes = 0;
        while let Some(t) = seq.next_element::<Text>()? {
            bytes += t.bytes;
        }
        Ok(KindText {
            bytes,
            image: false,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KindText, A::Error> {
        let mut bytes = 0;
        while map.next_key::<IgnoredAny>()?.is_some() {
            bytes += map.next_value::<Text>()?.bytes;
        }
        Ok(KindText {
            bytes,
            image: false,
        })
    }
}

/// A part's `image_url`: its bytes, and whether it holds a non-empty URL (as `url`, or as
/// the string itself).
struct ImageUrl {
    bytes: usize,
    url: bool,
}

impl<'de> Deserialize<'de> for ImageUrl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ImageUrlVisitor)
    }
}

struct ImageUrlVisitor;

const NO_URL: ImageUrl = ImageUrl {
    bytes: 0,
    url: false,
};

impl<'de> Visitor<'de> for ImageUrlVisitor {
    type Value = ImageUrl;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an image URL")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<ImageUrl, E> {
        Ok(ImageUrl {
            bytes: v.len(),
            url: !v.is_empty(),
        })
    }

    scalars!(NO_URL, ImageUrl);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ImageUrl, A::Error> {
        let mut bytes = 0;
        while let Some(t) = seq.next_element::<Text>()? {
            bytes += t.bytes;
        }
        Ok(ImageUrl { bytes, url: false })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ImageUrl, A::Error> {
        let (mut bytes, mut url) = (0, false);
        while let Some(Name(name)) = map.next_key()? {
            let t: Text = map.next_value()?;
            bytes += t.bytes;
            if name == "url" {
                url = t.is_string && t.bytes > 0;
            }
        }
        Ok(ImageUrl { bytes, url })
    }
}
