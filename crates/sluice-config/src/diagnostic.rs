//! A configuration error located by key path and line.

use std::fmt;

/// One configuration error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Dotted key path, e.g. `providers.openai.base_url`.
    pub path: String,
    /// 1-based line, when the error points into the text.
    pub line: Option<usize>,
    /// 1-based column, when the error points into the text.
    pub column: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "line {l}, column {c}: ")?,
            (Some(l), None) => write!(f, "line {l}: ")?,
            _ => {}
        }
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Every error found in one document.
#[derive(Clone, Debug, Default, PartialEq, Eq, thiserror::Error)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// Whether no error was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many errors were found.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The errors, in document order.
    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }

    /// Keeps only the first error at each key path: a value read past its error (with a
    /// stand-in in its place) must not be blamed a second time by the checks that follow.
    pub fn first_per_path(&mut self) {
        let mut seen = std::collections::HashSet::new();
        self.0
            .retain(|d| d.path.is_empty() || seen.insert(d.path.clone()));
    }

    /// Sorts by line so the report reads top to bottom.
    pub fn sort(&mut self) {
        self.0
            .sort_by_key(|d| (d.line.unwrap_or(usize::MAX), d.column.unwrap_or(0)));
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        writeln!(
            f,
            "{n} configuration error{}:",
            if n == 1 { "" } else { "s" }
        )?;
        for d in &self.0 {
            writeln!(f, "  {d}")?;
        }
        Ok(())
    }
}

/// Turns a byte offset into a 1-based (line, column), counting columns in characters.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_become_lines_and_columns() {
        let t = "a = 1\nbb = 2\n";
        assert_eq!(line_col(t, 0), (1, 1));
        assert_eq!(line_col(t, 6), (2, 1));
        assert_eq!(line_col(t, 9), (2, 4));
        assert_eq!(line_col(t, 999), (3, 1));
    }

    #[test]
    fn display_names_path_and_line() {
        let d = Diagnostic {
            path: "server.listen".into(),
            line: Some(3),
            column: Some(10),
            message: "bad".into(),
        };
        assert_eq!(d.to_string(), "line 3, column 10: server.listen: bad");
    }
}
