//! A parsed TOML document that deserialises section by section and reports every error.

use std::ops::Range;

use serde::de::{DeserializeOwned, IntoDeserializer};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::diagnostic::{Diagnostic, Diagnostics, line_col};

/// One step of a key path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    /// A table key.
    Key(String),
    /// An array index.
    Index(usize),
}

/// Renders a key path the way users write it: `models.chat.deployments[0].weight`.
pub fn render_path(segs: &[Seg]) -> String {
    let mut out = String::new();
    for seg in segs {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

/// A TOML document kept with its source, so errors can point at lines.
pub struct Document<'a> {
    text: &'a str,
    root: Spanned<DeTable<'a>>,
}

impl<'a> Document<'a> {
    /// Parses `text`, reporting every syntax error the parser can recover from.
    pub fn parse(text: &'a str) -> Result<Self, Diagnostics> {
        let (root, errors) = DeTable::parse_recoverable(text);
        if errors.is_empty() {
            return Ok(Self { text, root });
        }
        let diags = errors
            .iter()
            .map(|e| {
                let (line, column) = e.span().map(|s| line_col(text, s.start)).unzip();
                Diagnostic {
                    path: String::new(),
                    line,
                    column,
                    message: first_line(e.message()),
                }
            })
            .collect();
        Err(Diagnostics(diags))
    }

    /// Reports every top-level key not in `known`.
    pub fn reject_unknown_top_level(&self, known: &[&str], diags: &mut Vec<Diagnostic>) {
        for (key, _) in self.root.get_ref().iter() {
            let name: &str = key.get_ref();
            if !known.contains(&name) {
                let expected = known.join(", ");
                diags.push(self.diag_span(
                    name.to_string(),
                    key.span(),
                    format!("unknown section `{name}` (expected one of: {expected})"),
                ));
            }
        }
    }

    /// Deserialises the top-level table `key` into `T`; `T::default()` when absent.
    pub fn section<T>(&self, key: &str, diags: &mut Vec<Diagnostic>) -> Option<T>
    where
        T: DeserializeOwned + Default,
    {
        match self.root.get_ref().get(key) {
            None => Some(T::default()),
            Some(value) => self.item(&[Seg::Key(key.to_string())], value, diags),
        }
    }

    /// Deserialises each entry of the top-level table `key` into a `T`, in document order.
    /// An entry that fails is reported and skipped; the others are still read.
    pub fn map_section<T>(&self, key: &str, diags: &mut Vec<Diagnostic>) -> Vec<(String, T)>
    where
        T: DeserializeOwned,
    {
        let Some(value) = self.root.get_ref().get(key) else {
            return Vec::new();
        };
        let DeValue::Table(table) = value.get_ref() else {
            diags.push(self.diag_span(
                key.to_string(),
                value.span(),
                format!("`{key}` must be a table"),
            ));
            return Vec::new();
        };
        let mut entries: Vec<_> = table.iter().collect();
        entries.sort_by_key(|(k, _)| k.span().start);
        entries
            .into_iter()
            .filter_map(|(name, v)| {
                let path = [
                    Seg::Key(key.to_string()),
                    Seg::Key(name.get_ref().to_string()),
                ];
                self.item(&path, v, diags)
                    .map(|t| (name.get_ref().to_string(), t))
            })
            .collect()
    }

    /// Deserialises each element of the top-level array `key` (`[[key]]` tables) into a `T`.
    /// An element that fails is reported and skipped.
    pub fn list_section<T>(&self, key: &str, diags: &mut Vec<Diagnostic>) -> Vec<T>
    where
        T: DeserializeOwned,
    {
        let Some(value) = self.root.get_ref().get(key) else {
            return Vec::new();
        };
        let DeValue::Array(items) = value.get_ref() else {
            diags.push(self.diag_span(
                key.to_string(),
                value.span(),
                format!("`{key}` must be an array of tables ([[{key}]])"),
            ));
            return Vec::new();
        };
        items
            .iter()
            .enumerate()
            .filter_map(|(i, v)| self.item(&[Seg::Key(key.to_string()), Seg::Index(i)], v, diags))
            .collect()
    }

    /// A diagnostic for a semantic error at `path` (pointing at the key's line when found).
    pub fn diag(&self, path: &[Seg], message: impl Into<String>) -> Diagnostic {
        let span = self.lookup(path).map(|(key, _)| key);
        match span {
            Some(s) => self.diag_span(render_path(path), s, message.into()),
            None => Diagnostic {
                path: render_path(path),
                line: None,
                column: None,
                message: message.into(),
            },
        }
    }

    fn item<T: DeserializeOwned>(
        &self,
        path: &[Seg],
        value: &Spanned<DeValue<'a>>,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<T> {
        let mut unknown: Vec<Vec<Seg>> = Vec::new();
        let de = value.clone().into_deserializer();
        let mut on_unknown = |p: serde_ignored::Path<'_>| unknown.push(segments_of(&p));
        let ignored = serde_ignored::Deserializer::new(de, &mut on_unknown);
        let result: Result<T, serde_path_to_error::Error<toml::de::Error>> =
            serde_path_to_error::deserialize(ignored);
        for rel in unknown {
            let mut full = path.to_vec();
            full.extend(rel);
            let name = match full.last() {
                Some(Seg::Key(k)) => k.clone(),
                _ => render_path(&full),
            };
            diags.push(self.diag(&full, format!("unknown key `{name}`")));
        }
        match result {
            Ok(t) => Some(t),
            Err(err) => {
                let mut full = path.to_vec();
                full.extend(err.path().iter().filter_map(|s| match s {
                    serde_path_to_error::Segment::Map { key } => Some(Seg::Key(key.clone())),
                    serde_path_to_error::Segment::Seq { index } => Some(Seg::Index(*index)),
                    _ => None,
                }));
                let inner = err.inner();
                let span = inner
                    .span()
                    .or_else(|| self.lookup(&full).map(|(k, _)| k))
                    .unwrap_or_else(|| value.span());
                diags.push(self.diag_span(render_path(&full), span, first_line(inner.message())));
                None
            }
        }
    }

    fn diag_span(&self, path: String, span: Range<usize>, message: String) -> Diagnostic {
        let (line, column) = line_col(self.text, span.start);
        Diagnostic {
            path,
            line: Some(line),
            column: Some(column),
            message,
        }
    }

    /// Finds the spans of the key and the value at `path`.
    fn lookup(&self, path: &[Seg]) -> Option<(Range<usize>, Range<usize>)> {
        let (first, rest) = path.split_first()?;
        let Seg::Key(k) = first else { return None };
        let (ks, mut current) = self.root.get_ref().get_key_value(k.as_str())?;
        let mut key_span = ks.span();
        for seg in rest {
            match (seg, current.get_ref()) {
                (Seg::Key(k), DeValue::Table(t)) => {
                    let (ks, v) = t.get_key_value(k.as_str())?;
                    key_span = ks.span();
                    current = v;
                }
                (Seg::Index(i), DeValue::Array(a)) => {
                    current = a.get(*i)?;
                    key_span = current.span();
                }
                _ => return None,
            }
        }
        Some((key_span, current.span()))
    }
}

fn segments_of(p: &serde_ignored::Path<'_>) -> Vec<Seg> {
    let mut out = Vec::new();
    let mut cur = p;
    loop {
        match cur {
            serde_ignored::Path::Root => break,
            serde_ignored::Path::Seq { parent, index } => {
                out.push(Seg::Index(*index));
                cur = parent;
            }
            serde_ignored::Path::Map { parent, key } => {
                out.push(Seg::Key(key.clone()));
                cur = parent;
            }
            serde_ignored::Path::Some { parent }
            | serde_ignored::Path::NewtypeStruct { parent }
            | serde_ignored::Path::NewtypeVariant { parent } => cur = parent,
        }
    }
    out.reverse();
    out
}

fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or(message).trim().to_string()
}

#[cfg(test)]
mod tests;
