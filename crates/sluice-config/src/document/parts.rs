//! One table read in parts: each part is its own type and takes the keys it knows, so a
//! table whose shape depends on one of its keys (a provider's `kind`) is read without a
//! type that knows every key. A key no part takes is reported once, after every part.

use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::DeValue;

use super::{Document, Seg, attempt};
use crate::diagnostic::Diagnostic;

/// A table being read in parts.
pub struct Parts<'d, 'a> {
    doc: &'d Document<'a>,
    path: Vec<Seg>,
    value: Spanned<DeValue<'a>>,
    /// The keys no part read so far took (`None` before the first part).
    untaken: Option<Vec<Vec<Seg>>>,
    /// The keys the parts read so far take, for suggestions.
    known: Vec<String>,
    diags: &'d mut Vec<Diagnostic>,
}

impl<'d, 'a> Parts<'d, 'a> {
    pub(super) fn new(
        doc: &'d Document<'a>,
        path: Vec<Seg>,
        value: Spanned<DeValue<'a>>,
        diags: &'d mut Vec<Diagnostic>,
    ) -> Self {
        Self {
            doc,
            path,
            value,
            untaken: None,
            known: Vec::new(),
            diags,
        }
    }

    /// Reads the part `T`, reporting its errors where they stand.
    pub fn read<T: DeserializeOwned>(&mut self) -> Option<T> {
        let (t, unknown) = self.doc.item_collect(&self.path, &self.value, self.diags);
        self.known
            .extend(fields_of::<T>().iter().map(|f| (*f).to_string()));
        self.untaken = Some(match self.untaken.take() {
            None => unknown,
            Some(before) => before.into_iter().filter(|k| unknown.contains(k)).collect(),
        });
        t
    }

    /// Whether the part `T` takes the table's key `key` (read alone, its errors unreported).
    pub fn takes<T: DeserializeOwned>(&self, key: &str) -> bool {
        let DeValue::Table(table) = self.value.get_ref() else {
            return false;
        };
        let Some((k, v)) = table.get_key_value(key) else {
            return false;
        };
        let mut alone = toml::de::DeTable::new();
        alone.insert(k.clone(), v.clone());
        let one = Spanned::new(self.value.span(), DeValue::Table(alone));
        let (result, unknown) = attempt::<T>(&one);
        let refused = result.is_err_and(|e| {
            super::words::Problem::read(&super::first_line(e.inner().message())).is_unknown_key()
        });
        !refused && unknown.is_empty()
    }

    /// Reports each key no part took as unknown, unless `why` says why it is not taken here.
    pub fn finish(&mut self, why: impl Fn(&Self, &str) -> Option<String>) {
        let mut out = Vec::new();
        let untaken = self.untaken.take().unwrap_or_default();
        for rel in &untaken {
            let mut full = self.path.clone();
            full.extend(rel.iter().cloned());
            let name = match rel.as_slice() {
                [Seg::Key(k)] => k.clone(),
                _ => super::render_path(rel),
            };
            let message = why(self, &name).unwrap_or_else(|| {
                let near = super::words::closest(&name, &self.known);
                match near {
                    Some(near) => format!("unknown key `{name}`; did you mean `{near}`?"),
                    None => format!("unknown key `{name}`"),
                }
            });
            out.push(self.doc.diag(&full, message));
        }
        self.diags.extend(out);
    }
}

/// The keys a struct `T` takes, as its `Deserialize` names them (none for other types).
fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut names = FieldNames(&[]);
    // The struct's visitor is never called: reading stops once the names are seen.
    let _ = T::deserialize(&mut names);
    names.0
}

/// A deserializer that only notes the fields a struct asks for.
struct FieldNames(&'static [&'static str]);

impl<'de> serde::Deserializer<'de> for &mut FieldNames {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom("field names only"))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        self.0 = fields;
        Err(serde::de::Error::custom("field names only"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Two {
        base_url: String,
        api_key_env: Option<String>,
    }

    #[test]
    fn a_structs_fields_are_read_from_its_deserialize() {
        assert_eq!(fields_of::<Two>(), ["base_url", "api_key_env"]);
        assert!(fields_of::<u64>().is_empty());
    }
}
