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
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default)]
    struct Server {
        port: u16,
        name: String,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Item {
        url: String,
        #[serde(default)]
        list: Vec<Sub>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Sub {
        w: u32,
    }

    #[test]
    fn reads_sections_and_defaults() {
        let doc = Document::parse("[server]\nport = 8080\n").unwrap();
        let mut diags = Vec::new();
        let s: Server = doc.section("server", &mut diags).unwrap();
        assert_eq!(s.port, 8080);
        let missing: Server = doc.section("other", &mut diags).unwrap();
        assert_eq!(missing, Server::default());
        assert!(diags.is_empty());
    }

    #[test]
    fn reports_every_error_with_path_and_line() {
        let text = "[server]\nport = \"x\"\nbogus = 1\nalso = 2\n\n[items.a]\nurl = 5\n\n[items.b]\nurl = \"ok\"\nlist = [{ w = 1 }, { w = -1 }]\n\n[items.c]\nurl = \"fine\"\n";
        let doc = Document::parse(text).unwrap();
        let mut diags = Vec::new();
        let s: Option<Server> = doc.section("server", &mut diags);
        assert!(s.is_none());
        let items: Vec<(String, Item)> = doc.map_section("items", &mut diags);
        assert_eq!(items.len(), 1, "only items.c is valid");
        assert_eq!(items[0].0, "c");
        let shown: Vec<String> = diags.iter().map(ToString::to_string).collect();
        let find = |needle: &str| {
            diags
                .iter()
                .find(|d| d.path == needle)
                .unwrap_or_else(|| panic!("no error for {needle}: {shown:?}"))
        };
        assert_eq!(find("server.bogus").line, Some(3));
        assert_eq!(find("server.also").line, Some(4));
        assert_eq!(find("server.port").line, Some(2));
        assert_eq!(find("items.a.url").line, Some(7));
        assert_eq!(find("items.b.list[1].w").line, Some(11));
        assert_eq!(diags.len(), 5, "{shown:?}");
    }

    #[test]
    fn list_sections_read_each_element() {
        let text = "[[items]]\nurl = \"a\"\n[[items]]\nurl = 1\n[[items]]\nurl = \"c\"\n";
        let doc = Document::parse(text).unwrap();
        let mut diags = Vec::new();
        let items: Vec<Item> = doc.list_section("items", &mut diags);
        assert_eq!(items.len(), 2);
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].path, "items[1].url");
        assert_eq!(diags[0].line, Some(4));
    }

    #[test]
    fn syntax_errors_carry_lines() {
        let err = Document::parse("a = 1\nb = = 2\n").err().unwrap();
        assert!(!err.is_empty());
        assert_eq!(err.0[0].line, Some(2));
    }

    #[test]
    fn unknown_sections_are_rejected() {
        let doc = Document::parse("[server]\n[sever]\n").unwrap();
        let mut diags = Vec::new();
        doc.reject_unknown_top_level(&["server"], &mut diags);
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].path, "sever");
        assert_eq!(diags[0].line, Some(2));
    }
}
