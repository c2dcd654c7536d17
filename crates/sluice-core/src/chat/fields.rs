//! A JSON object's top-level fields as spans of the bytes it came in: read in one pass that
//! checks the whole text is JSON but builds no tree, so fields sluice does not read are
//! forwarded exactly as the client wrote them, for the cost of a copy.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use bytes::Bytes;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// One field: where its name lies in [`Fields::names`] and its value's JSON text in the body.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Field {
    name: Range<usize>,
    value: Range<usize>,
}

/// The top-level fields of a JSON object, in the order the client first wrote each name. A
/// name written twice keeps its first place and its last value, as a JSON map does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fields {
    body: Bytes,
    /// Every field's unescaped name, one after another.
    names: String,
    list: Vec<Field>,
}

impl Fields {
    /// Reads `body`, which must be one JSON object. A body that is valid JSON but not an
    /// object fails with an error of category [`serde_json::error::Category::Data`].
    pub fn read(body: Bytes) -> Result<Self, serde_json::Error> {
        let top: Top<'_> = serde_json::from_slice(&body)?;
        let entries = top.0;
        let base = body.as_ptr() as usize;
        let chosen = last_values(&entries);
        let mut names = String::with_capacity(entries.iter().map(|(k, _)| k.len()).sum());
        let mut list = Vec::with_capacity(entries.len());
        for (i, (name, _)) in entries.iter().enumerate() {
            let Some(&Some(from)) = chosen.get(i) else {
                continue;
            };
            let Some((_, raw)) = entries.get(from) else {
                continue;
            };
            let start = names.len();
            names.push_str(name);
            // The raw value borrows from `body`: its offset is the distance between them.
            let text = raw.get();
            let at = (text.as_ptr() as usize).wrapping_sub(base);
            list.push(Field {
                name: start..names.len(),
                value: at..at + text.len(),
            });
        }
        drop(entries);
        Ok(Self { body, names, list })
    }

    /// The JSON text of field `name`'s value.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Every field's name and value's JSON text, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.list.iter().map(|f| {
            (
                self.names.get(f.name.clone()).unwrap_or_default(),
                self.body.get(f.value.clone()).unwrap_or_default(),
            )
        })
    }

    /// How many fields there are.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether the object is `{}`.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The body's length in bytes.
    pub fn body_len(&self) -> usize {
        self.body.len()
    }
}

/// For each entry, `Some(index of the entry whose value it takes)` if it is the first with
/// its name, `None` if an earlier entry has the same name. Sorting keeps this O(n log n)
/// for a body of many thousands of fields.
fn last_values(entries: &[(Cow<'_, str>, &RawValue)]) -> Vec<Option<usize>> {
    let mut chosen: Vec<Option<usize>> = (0..entries.len()).map(Some).collect();
    let name = |i: usize| entries.get(i).map(|(k, _)| k.as_ref());
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by(|&a, &b| name(a).cmp(&name(b)).then(a.cmp(&b)));
    for run in order.chunk_by(|&a, &b| name(a) == name(b)) {
        if let (Some(&first), Some(&last)) = (run.first(), run.last()) {
            for &later in run.iter().skip(1) {
                if let Some(c) = chosen.get_mut(later) {
                    *c = None;
                }
            }
            if let Some(c) = chosen.get_mut(first) {
                *c = Some(last);
            }
        }
    }
    chosen
}

/// The object's entries, names unescaped (borrowed when they had no escapes), values raw.
struct Top<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Top<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top<'de>, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some(Name(name)) = map.next_key()? {
            let value: &'de RawValue = map.next_value()?;
            entries.push((name, value));
        }
        Ok(Top(entries))
    }
}

/// A field name, borrowed from the input when it holds no escapes.
pub(super) struct Name<'a>(pub(super) Cow<'a, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(NameVisitor)
    }
}

struct NameVisitor;

impl<'de> Visitor<'de> for NameVisitor {
    type Value = Name<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Name<'de>, E> {
        Ok(Name(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Name<'de>, E> {
        Ok(Name(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Name<'de>, E> {
        Ok(Name(Cow::Owned(v)))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::error::Category;

    use super::*;

    fn read(s: &str) -> Result<Fields, serde_json::Error> {
        Fields::read(Bytes::copy_from_slice(s.as_bytes()))
    }

    fn pairs(f: &Fields) -> Vec<(String, String)> {
        f.iter()
            .map(|(k, v)| (k.to_string(), String::from_utf8(v.to_vec()).unwrap()))
            .collect()
    }

    #[test]
    fn values_are_the_exact_text_the_client_wrote() {
        let f = read(
            "{ \"model\" : \"m\" ,\n\"n\": 1.50e3, \"x\":{\"a\": [1, 2]},\"s\":\"\\u00e9\\n\" }",
        )
        .unwrap();
        assert_eq!(
            pairs(&f),
            [
                ("model", "\"m\""),
                ("n", "1.50e3"),
                ("x", "{\"a\": [1, 2]}"),
                ("s", "\"\\u00e9\\n\""),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
        assert_eq!(f.get("n"), Some(&b"1.50e3"[..]));
        assert_eq!(f.get("missing"), None);
        assert_eq!(f.len(), 4);
    }

    #[test]
    fn escaped_names_are_unescaped() {
        let f = read(r#"{"mo\u0064el":"m","\"q\"":true}"#).unwrap();
        assert_eq!(f.get("model"), Some(&b"\"m\""[..]));
        assert_eq!(f.get("\"q\""), Some(&b"true"[..]));
    }

    #[test]
    fn a_repeated_name_keeps_its_first_place_and_last_value() {
        let f = read(r#"{"a":1,"b":2,"a":3,"c":4,"b":5,"a":6}"#).unwrap();
        assert_eq!(
            pairs(&f),
            [("a", "6"), ("b", "5"), ("c", "4")].map(|(k, v)| (k.to_string(), v.to_string()))
        );
        // The same as a JSON map with its order kept.
        let map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"a":1,"b":2,"a":3,"c":4,"b":5,"a":6}"#).unwrap();
        let keys: Vec<_> = map.keys().cloned().collect();
        assert_eq!(keys, ["a", "b", "c"]);
    }

    #[test]
    fn many_fields_are_read_in_order() {
        let body = format!(
            "{{{}}}",
            (0..5_000)
                .map(|i| format!("\"k{i}\":{i}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        let f = read(&body).unwrap();
        assert_eq!(f.len(), 5_000);
        assert_eq!(f.iter().nth(4_321).unwrap(), ("k4321", &b"4321"[..]));
    }

    #[test]
    fn anything_but_an_object_is_a_data_error_and_bad_json_a_syntax_error() {
        for s in ["[1]", "\"x\"", "3", "null", "true"] {
            assert_eq!(read(s).unwrap_err().classify(), Category::Data, "{s}");
        }
        for s in ["{\"a\":}", "{\"a\":1} x", "{\"a\" 1}", "{'a':1}"] {
            assert_eq!(read(s).unwrap_err().classify(), Category::Syntax, "{s}");
        }
        for s in ["", "{\"a\":[1,"] {
            assert_eq!(read(s).unwrap_err().classify(), Category::Eof, "{s}");
        }
        // Invalid UTF-8 inside a string or a name is refused, not carried along.
        for b in [&b"{\"a\":\"\xff\"}"[..], b"{\"\xff\":1}"] {
            assert!(Fields::read(Bytes::copy_from_slice(b)).is_err());
        }
    }

    #[test]
    fn an_empty_object_has_no_fields() {
        let f = read(" {} ").unwrap();
        assert!(f.is_empty());
        assert_eq!(f.body_len(), 4);
    }
}
