//! A PDF's text layer, page by page. The parser is guarded: a file that makes it fail or
//! panic is refused as damaged, naming the page, and the process goes on.

use std::panic::{AssertUnwindSafe, catch_unwind};

use pdf_extract::{Document, OutputError, PlainTextOutput};

use crate::ReadError;

/// The most pages read.
const MAX_PAGES: usize = 5_000;

/// File `name`'s pages' text.
pub(crate) fn pages(name: &str, bytes: &[u8]) -> Result<Vec<String>, ReadError> {
    let bad = |why: String| ReadError::BadPdf {
        name: name.to_string(),
        why,
    };
    if !bytes.starts_with(b"%PDF-") {
        return Err(bad("it does not start with %PDF-".into()));
    }
    let mut doc = guarded(|| Document::load_mem(bytes).map_err(OutputError::PdfError))
        .map_err(|why| bad(why.to_string()))?;
    if doc.is_encrypted() {
        // An owner password alone (no user password) still lets the text be read.
        if doc.decrypt("").is_err() {
            return Err(ReadError::Encrypted(name.to_string()));
        }
    }
    let numbers: Vec<u32> = doc.get_pages().keys().copied().collect();
    if numbers.is_empty() {
        return Err(bad("it has no pages".into()));
    }
    if numbers.len() > MAX_PAGES {
        return Err(bad(format!("it has more than {MAX_PAGES} pages")));
    }
    let mut out = Vec::with_capacity(numbers.len());
    for n in numbers {
        let text = guarded(|| {
            let mut s = String::new();
            pdf_extract::output_doc_page(&doc, &mut PlainTextOutput::new(&mut s), n)?;
            Ok(s)
        })
        .map_err(|why| bad(format!("page {n}: {why}")))?;
        out.push(text);
    }
    Ok(out)
}

/// Why the parser gave up.
#[derive(Debug, thiserror::Error)]
enum Failed {
    #[error("{0}")]
    Said(String),
    #[error("the parser failed on it")]
    Panicked,
}

/// `f`'s result, its error or panic made a [`Failed`].
fn guarded<T>(f: impl FnOnce() -> Result<T, OutputError>) -> Result<T, Failed> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Failed::Said(describe(&e))),
        Err(_) => Err(Failed::Panicked),
    }
}

/// An extraction error in words.
fn describe(e: &OutputError) -> String {
    match e {
        OutputError::PdfError(e) => e.to_string(),
        OutputError::IoError(e) => e.to_string(),
        OutputError::FormatError(e) => e.to_string(),
    }
}
