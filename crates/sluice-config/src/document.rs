//! A parsed TOML document that deserialises section by section and reports every error.

use std::ops::Range;

use serde::de::{DeserializeOwned, IntoDeserializer};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::diagnostic::{Diagnostic, Diagnostics, line_col};

mod parts;
pub(crate) mod words;

pub use parts::Parts;

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

    /// Deserialises the top-level table `key` into `T`; `T::default()` when absent. Every
    /// error is reported; a table read past its errors still comes back (with stand-ins where
    /// its values were wrong) so later checks can run, and the caller refuses the document
    /// because the diagnostics are not empty.
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
    /// An entry with errors is reported (and kept when it could be read past them, as
    /// [`Document::section`] does); the others are still read.
    pub fn map_section<T>(&self, key: &str, diags: &mut Vec<Diagnostic>) -> Vec<(String, T)>
    where
        T: DeserializeOwned,
    {
        self.entries(key, diags)
            .into_iter()
            .filter_map(|(name, path, v)| self.item(&path, v, diags).map(|t| (name, t)))
            .collect()
    }

    /// Reads each entry of the top-level table `key` with `read`, which takes it in parts
    /// ([`Parts`]), in document order.
    pub fn map_tables<T>(
        &self,
        key: &str,
        diags: &mut Vec<Diagnostic>,
        mut read: impl FnMut(&mut Parts<'_, 'a>) -> Option<T>,
    ) -> Vec<(String, T)> {
        self.entries(key, diags)
            .into_iter()
            .filter_map(|(name, path, v)| {
                let mut parts = Parts::new(self, path, v.clone(), diags);
                read(&mut parts).map(|t| (name, t))
            })
            .collect()
    }

    /// The entries of the top-level table `key` in document order: name, path and value.
    fn entries(
        &self,
        key: &str,
        diags: &mut Vec<Diagnostic>,
    ) -> Vec<(String, Vec<Seg>, &Spanned<DeValue<'a>>)> {
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
            .map(|(name, v)| {
                let name = name.get_ref().to_string();
                let path = vec![Seg::Key(key.to_string()), Seg::Key(name.clone())];
                (name, path, v)
            })
            .collect()
    }

    /// Deserialises each element of the top-level array `key` (`[[key]]` tables) into a `T`.
    /// An element with errors is reported, and kept when it could be read past them.
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

    /// Deserialises `value` into a `T`, reporting every error in it, not only the first: after
    /// each error the offending value is set aside (removed, or replaced by a stand-in of the
    /// right shape when the field is required) and the table is read again, so one bad key
    /// never hides the next. A value read past its errors is still returned, so the checks
    /// that follow report theirs too; its diagnostics make the whole document fail. `None`
    /// when reading could not get past an error.
    fn item<T: DeserializeOwned>(
        &self,
        path: &[Seg],
        value: &Spanned<DeValue<'a>>,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<T> {
        let (t, unknown) = self.item_collect(path, value, diags);
        self.report_unknown(path, unknown, diags);
        t
    }

    /// As [`Document::item`], the keys no field took handed back rather than reported.
    fn item_collect<T: DeserializeOwned>(
        &self,
        path: &[Seg],
        value: &Spanned<DeValue<'a>>,
        diags: &mut Vec<Diagnostic>,
    ) -> (Option<T>, Vec<Vec<Seg>>) {
        let mut value = value.clone();
        let mut reported: Vec<Vec<Seg>> = Vec::new();
        for _ in 0..MAX_REPAIRS {
            let (result, unknown) = attempt::<T>(&value);
            let err = match result {
                Ok(t) => return (Some(t), unknown),
                Err(err) => err,
            };
            let rel = raised_at(&err);
            let inner = err.inner();
            let problem = words::Problem::read(&first_line(inner.message()));
            let at = problem.at(&rel);
            if reported.contains(&at) {
                // The stand-in did not take; what is left cannot be read past.
                break;
            }
            let mut full = path.to_vec();
            full.extend(at.iter().cloned());
            let span = inner
                .span()
                .filter(|_| !problem.is_missing())
                .or_else(|| self.lookup(&full).map(|(k, _)| k))
                .or_else(|| {
                    self.lookup(&full[..full.len().saturating_sub(1)])
                        .map(|(k, _)| k)
                })
                .unwrap_or_else(|| value.span());
            diags.push(self.diag_span(render_path(&full), span, problem.explain()));
            reported.push(at.clone());
            if !repair::<T>(&mut value, &at, &problem) {
                return (None, unknown);
            }
        }
        (None, Vec::new())
    }

    fn report_unknown(&self, path: &[Seg], unknown: Vec<Vec<Seg>>, diags: &mut Vec<Diagnostic>) {
        for rel in unknown {
            let mut full = path.to_vec();
            full.extend(rel);
            let name = match full.last() {
                Some(Seg::Key(k)) => k.clone(),
                _ => render_path(&full),
            };
            diags.push(self.diag(&full, format!("unknown key `{name}`")));
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

/// How many errors one table may report before reading it stops.
const MAX_REPAIRS: usize = 64;

type Attempt<T> = (
    Result<T, serde_path_to_error::Error<toml::de::Error>>,
    Vec<Vec<Seg>>,
);

/// The key path an error was raised at.
fn raised_at(err: &serde_path_to_error::Error<toml::de::Error>) -> Vec<Seg> {
    err.path()
        .iter()
        .filter_map(|s| match s {
            serde_path_to_error::Segment::Map { key } => Some(Seg::Key(key.clone())),
            serde_path_to_error::Segment::Seq { index } => Some(Seg::Index(*index)),
            _ => None,
        })
        .collect()
}

/// One try at reading `value`: the result, and the keys no field took.
fn attempt<T: DeserializeOwned>(value: &Spanned<DeValue<'_>>) -> Attempt<T> {
    let mut unknown: Vec<Vec<Seg>> = Vec::new();
    let de = value.clone().into_deserializer();
    let mut on_unknown = |p: serde_ignored::Path<'_>| unknown.push(segments_of(&p));
    let ignored = serde_ignored::Deserializer::new(de, &mut on_unknown);
    let result = serde_path_to_error::deserialize(ignored);
    (result, unknown)
}

/// Sets the value at `at` aside so the rest of the table can be read: an unknown key is
/// dropped; a bad or missing value takes the first stand-in after which reading gets past
/// it (the closest allowed word, then a value of each shape); failing all, it is dropped.
/// Whether reading can go on.
fn repair<T: DeserializeOwned>(
    value: &mut Spanned<DeValue<'_>>,
    at: &[Seg],
    problem: &words::Problem,
) -> bool {
    if problem.is_unknown_key() {
        return remove(value, at);
    }
    for stand_in in problem.stand_ins() {
        let mut tried = value.clone();
        if !put(&mut tried, at, stand_in) {
            continue;
        }
        let past = match attempt::<T>(&tried).0 {
            Ok(_) => true,
            Err(e) => {
                words::Problem::read(&first_line(e.inner().message())).at(&raised_at(&e)) != at
            }
        };
        if past {
            *value = tried;
            return true;
        }
    }
    !problem.is_missing() && remove(value, at)
}

/// The table holding `at`'s last key, and that key.
fn parent_of<'v, 'a>(
    value: &'v mut Spanned<DeValue<'a>>,
    at: &[Seg],
) -> Option<(&'v mut Spanned<DeValue<'a>>, Seg)> {
    let (last, init) = at.split_last()?;
    let mut cur = value;
    for seg in init {
        cur = match (seg, cur.get_mut()) {
            (Seg::Key(k), DeValue::Table(t)) => t.get_mut(k.as_str())?,
            (Seg::Index(i), DeValue::Array(a)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some((cur, last.clone()))
}

fn remove(value: &mut Spanned<DeValue<'_>>, at: &[Seg]) -> bool {
    match parent_of(value, at) {
        Some((parent, Seg::Key(k))) => match parent.get_mut() {
            DeValue::Table(t) => t.remove(k.as_str()).is_some(),
            _ => false,
        },
        _ => false,
    }
}

fn put<'a>(value: &mut Spanned<DeValue<'a>>, at: &[Seg], stand_in: DeValue<'a>) -> bool {
    let Some((parent, last)) = parent_of(value, at) else {
        return false;
    };
    let span = parent.span();
    match (last, parent.get_mut()) {
        (Seg::Key(k), DeValue::Table(t)) => {
            let span = t.get(k.as_str()).map_or(span, Spanned::span);
            t.insert(
                Spanned::new(span.clone(), std::borrow::Cow::Owned(k)),
                Spanned::new(span, stand_in),
            );
            true
        }
        (Seg::Index(i), DeValue::Array(a)) => match a.get_mut(i) {
            Some(slot) => {
                *slot = Spanned::new(slot.span(), stand_in);
                true
            }
            None => false,
        },
        _ => false,
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
