//! Documents read for analysis: what a file says, page by page, and which clauses it is made
//! of. What this crate decides:
//!
//! - [`read`]: a file's format (by its name and its first bytes) and its text, page by page:
//!   plain text and Markdown as they are (a form feed starts a page), DOCX from its main part's
//!   paragraphs, PDF from its text layer. A file that cannot be read gets a [`ReadError`] that
//!   says which and why (encrypted, no text layer, not a DOCX, cut short...), never a panic;
//! - [`clauses`]: pages into clauses with stable ids, headers, footers and page numbers
//!   dropped, wrapped lines joined, English and Chinese numbering both.

pub mod clauses;
mod docx;
mod pdf;

pub use clauses::{Clause, ClauseKind, split};

/// The largest file read, in bytes.
pub const MAX_FILE_BYTES: usize = 64 << 20;

/// A file's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Plain text (UTF-8).
    Text,
    /// Markdown (read as text; `#` headings are headings).
    Markdown,
    /// Office Open XML word processing (`.docx`).
    Docx,
    /// PDF, read from its text layer.
    Pdf,
}

impl Format {
    /// The format of a file named `name` whose content starts with `head`: PDF and DOCX by
    /// their magic bytes whatever the name says, Markdown by its name, else text.
    pub fn of(name: &str, head: &[u8]) -> Self {
        let lower = name.to_ascii_lowercase();
        if head.starts_with(b"%PDF-") || lower.ends_with(".pdf") {
            Self::Pdf
        } else if head.starts_with(b"PK\x03\x04") || lower.ends_with(".docx") {
            Self::Docx
        } else if lower.ends_with(".md") || lower.ends_with(".markdown") {
            Self::Markdown
        } else {
            Self::Text
        }
    }
}

/// A document's text, page by page.
#[derive(Clone, Debug)]
pub struct Document {
    /// Its name (a file name, or the name it was uploaded with).
    pub name: String,
    /// Its format.
    pub format: Format,
    /// Its pages' text (one page for text without page breaks).
    pub pages: Vec<String>,
}

impl Document {
    /// The document's text in bytes.
    pub fn bytes(&self) -> usize {
        self.pages.iter().map(String::len).sum()
    }
}

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The file has no bytes.
    #[error("{0}: the file is empty")]
    Empty(String),
    /// The file is larger than [`MAX_FILE_BYTES`].
    #[error("{0}: the file is larger than {MAX_FILE_BYTES} bytes")]
    TooLarge(String),
    /// A text file that is not UTF-8.
    #[error("{name}: not UTF-8 text (byte {at} is not valid)")]
    NotUtf8 {
        /// The file.
        name: String,
        /// Where the first invalid byte is.
        at: usize,
    },
    /// A DOCX file that is not a DOCX: not a zip, no main document part, or XML that does
    /// not parse.
    #[error("{name}: not a readable DOCX file: {why}")]
    BadDocx {
        /// The file.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// A PDF that is not a PDF, or is damaged.
    #[error("{name}: not a readable PDF file: {why}")]
    BadPdf {
        /// The file.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// A PDF that is encrypted.
    #[error("{0}: the PDF is encrypted; decrypt it first")]
    Encrypted(String),
    /// A file with pages but no text: a scanned PDF, or an empty document.
    #[error("{0}: there is no text in it (a scanned or image-only file needs OCR first)")]
    NoText(String),
}

/// Reads file `name` whose content is `bytes`.
pub fn read(name: &str, bytes: &[u8]) -> Result<Document, ReadError> {
    if bytes.is_empty() {
        return Err(ReadError::Empty(name.to_string()));
    }
    if bytes.len() > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge(name.to_string()));
    }
    let format = Format::of(name, &bytes[..bytes.len().min(8)]);
    let pages = match format {
        Format::Text | Format::Markdown => text_pages(name, bytes)?,
        Format::Docx => vec![docx::text(name, bytes)?],
        Format::Pdf => pdf::pages(name, bytes)?,
    };
    if pages.iter().all(|p| p.trim().is_empty()) {
        return Err(ReadError::NoText(name.to_string()));
    }
    Ok(Document {
        name: name.to_string(),
        format,
        pages,
    })
}

/// A text file's pages: split at form feeds, line ends made `\n`.
fn text_pages(name: &str, bytes: &[u8]) -> Result<Vec<String>, ReadError> {
    let text = std::str::from_utf8(bytes).map_err(|e| ReadError::NotUtf8 {
        name: name.to_string(),
        at: e.valid_up_to(),
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    Ok(text
        .split('\x0c')
        .map(|p| p.replace("\r\n", "\n").replace('\r', "\n"))
        .collect())
}

#[cfg(test)]
mod tests;
