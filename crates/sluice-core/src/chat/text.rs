//! Bytes of text in a JSON value, read straight off its text, and the visitor arms the
//! readers of `messages` share.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Visitor arms for booleans and numbers: each reported as `out`.
macro_rules! numbers {
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
    };
}

/// Visitor arms for the scalars a shape does not look inside: each reported as `out`.
macro_rules! scalars {
    ($out:expr, $ty:ty) => {
        numbers!($out, $ty);
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
    /// The value is `null`.
    pub null: bool,
}

impl Text {
    pub(super) const NONE: Self = Self {
        bytes: 0,
        is_string: false,
        null: false,
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
            null: false,
        })
    }

    fn visit_unit<E: de::Error>(self) -> Result<Text, E> {
        Ok(Text {
            null: true,
            ..Text::NONE
        })
    }

    numbers!(Text::NONE, Text);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Text, A::Error> {
        let mut bytes = 0;
        while let Some(t) = seq.next_element::<Text>()? {
            bytes += t.bytes;
        }
        Ok(Text {
            bytes,
            ..Text::NONE
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Text, A::Error> {
        let mut bytes = 0;
        while map.next_key::<IgnoredAny>()?.is_some() {
            bytes += map.next_value::<Text>()?.bytes;
        }
        Ok(Text {
            bytes,
            ..Text::NONE
        })
    }
}
