//! A policy that is on unless turned off: left out, sluice's default; `false`, off; `true`,
//! on with its defaults; a table, on with the table's keys over the defaults.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};

/// How a configuration sets a policy that protects by default.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Toggle<T> {
    /// Left out: sluice's default (on, for every policy of this kind).
    #[default]
    Default,
    /// `false`: turned off.
    Off,
    /// `true` or a table: on, set this way.
    On(T),
}

impl<T> Toggle<T> {
    /// The settings the file wrote out, if it wrote a table (or `true`).
    pub fn written(&self) -> Option<&T> {
        match self {
            Self::On(t) => Some(t),
            Self::Default | Self::Off => None,
        }
    }

    /// Whether the file turned the policy off.
    pub fn is_off(&self) -> bool {
        matches!(self, Self::Off)
    }
}

impl<T: Default + Clone> Toggle<T> {
    /// The settings in force: the default ones when left out, none when off.
    pub fn in_force(&self) -> Option<T> {
        match self {
            Self::Default => Some(T::default()),
            Self::Off => None,
            Self::On(t) => Some(t.clone()),
        }
    }
}

impl<'de, T> Deserialize<'de> for Toggle<T>
where
    T: Deserialize<'de> + Default,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ToggleVisitor(PhantomData))
    }
}

struct ToggleVisitor<T>(PhantomData<T>);

impl<'de, T> Visitor<'de> for ToggleVisitor<T>
where
    T: Deserialize<'de> + Default,
{
    type Value = Toggle<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("false, true or a table of settings")
    }

    fn visit_bool<E: de::Error>(self, on: bool) -> Result<Self::Value, E> {
        Ok(if on {
            Toggle::On(T::default())
        } else {
            Toggle::Off
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Toggle::On)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde::Deserialize;

    use super::*;

    #[derive(Clone, Debug, Default, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields, default)]
    struct Knobs {
        n: u32,
    }

    #[derive(Debug, Deserialize)]
    struct Holder {
        #[serde(default)]
        p: Toggle<Knobs>,
    }

    fn read(text: &str) -> Result<Toggle<Knobs>, toml::de::Error> {
        toml::from_str::<Holder>(text).map(|h| h.p)
    }

    #[test]
    fn left_out_is_the_default_false_is_off_and_a_table_is_on() {
        assert_eq!(read("").unwrap(), Toggle::Default);
        assert_eq!(read("p = false").unwrap(), Toggle::Off);
        assert_eq!(read("p = true").unwrap(), Toggle::On(Knobs::default()));
        assert_eq!(read("p = { n = 3 }").unwrap(), Toggle::On(Knobs { n: 3 }));
        assert_eq!(read("").unwrap().in_force(), Some(Knobs::default()));
        assert_eq!(read("p = false").unwrap().in_force(), None);
    }

    #[test]
    fn a_table_keeps_its_own_errors_and_other_shapes_are_refused() {
        let e = read("p = { m = 3 }").unwrap_err().to_string();
        assert!(e.contains("unknown field `m`"), "{e}");
        let e = read("p = 3").unwrap_err().to_string();
        assert!(e.contains("false, true or a table"), "{e}");
    }
}
