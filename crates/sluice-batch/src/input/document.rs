//! A document line's body (`/v1/analyses`): `{"filename": "...", "file_data": "..."}`, the
//! file's bytes in base64 (bare, or as a `data:` URL), as OpenAI's file content parts carry
//! a file. Read into the file's name and bytes, or the field at fault and why.

use std::collections::HashSet;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;

use super::{Endpoint, Line, prefix_hash};

/// A document to analyse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    /// Its file name (its extension says how it is read).
    pub filename: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// What is wrong with a document line's body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The field at fault (`body`, `body.filename`, `body.file_data`).
    pub param: &'static str,
    /// What is wrong.
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    filename: Option<String>,
    file_data: Option<String>,
}

fn fault(param: &'static str, message: impl Into<String>) -> Fault {
    Fault {
        param,
        message: message.into(),
    }
}

/// Reads a document line's `body`.
pub fn read(body: &str) -> Result<Upload, Fault> {
    let raw: Raw = serde_json::from_str(body).map_err(|e| {
        fault(
            "body",
            format!("a document's body is `{{\"filename\", \"file_data\"}}`: {e}"),
        )
    })?;
    let filename = match raw.filename {
        Some(f) if !f.trim().is_empty() => f,
        _ => return Err(fault("body.filename", "filename is required")),
    };
    let Some(data) = raw.file_data else {
        return Err(fault(
            "body.file_data",
            "file_data is required: the file's bytes in base64",
        ));
    };
    // A data URL's payload, or the whole text.
    let encoded = match data.strip_prefix("data:") {
        Some(url) => match url.split_once(";base64,") {
            Some((_, payload)) => payload,
            None => {
                return Err(fault(
                    "body.file_data",
                    "a data URL in file_data must be base64 (`data:...;base64,...`)",
                ));
            }
        },
        None => data.as_str(),
    };
    let bytes = STANDARD
        .decode(encoded.trim())
        .map_err(|e| fault("body.file_data", format!("file_data is not base64: {e}")))?;
    Ok(Upload { filename, bytes })
}

/// The body of a document line for `filename` holding `bytes`.
pub fn write(filename: &str, bytes: &[u8]) -> String {
    serde_json::json!({"filename": filename, "file_data": STANDARD.encode(bytes)}).to_string()
}

/// A batch file of `docs` (each a file name and its bytes) and its lines, as [`super::check`]
/// reads that file: one line a document, calling `/v1/analyses`, its `custom_id` its name
/// (`document-N` when it has none), made unique with ` (2)`, ` (3)`...
pub fn file(docs: &[(String, Vec<u8>)]) -> (String, Vec<Line>) {
    let endpoint = Endpoint::Analyses;
    let prefix = prefix_hash(endpoint, &serde_json::Value::Null);
    let mut used = HashSet::new();
    let mut content = String::new();
    let mut lines = Vec::with_capacity(docs.len());
    for (i, (name, bytes)) in docs.iter().enumerate() {
        let name = if name.trim().is_empty() {
            format!("document-{}", i + 1)
        } else {
            name.clone()
        };
        let mut custom_id = name.clone();
        let mut n = 1;
        while !used.insert(custom_id.clone()) {
            n += 1;
            custom_id = format!("{name} ({n})");
        }
        let body = write(&name, bytes);
        content.push_str(&format!(
            "{{\"custom_id\":{},\"method\":\"POST\",\"url\":\"{}\",\"body\":{body}}}\n",
            serde_json::Value::String(custom_id.clone()),
            endpoint.path()
        ));
        lines.push(Line {
            number: i as u64 + 1,
            custom_id,
            endpoint,
            body,
            prefix,
        });
    }
    (content, lines)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_written_document_reads_back() {
        let bytes = b"%PDF-1.4 \x00\xff binary".to_vec();
        let up = read(&write("a.pdf", &bytes)).unwrap();
        assert_eq!(up.filename, "a.pdf");
        assert_eq!(up.bytes, bytes);
        let url = format!(
            "{{\"filename\": \"b.txt\", \"file_data\": \"data:text/plain;base64,{}\"}}",
            STANDARD.encode("hello")
        );
        assert_eq!(read(&url).unwrap().bytes, b"hello");
    }

    #[test]
    fn a_file_of_documents_reads_back_as_its_lines() {
        let docs = vec![
            ("a.txt".to_string(), b"1. Term.".to_vec()),
            ("a.txt".to_string(), b"2. Fees.".to_vec()),
            (String::new(), b"3. Law.".to_vec()),
        ];
        let (content, lines) = file(&docs);
        let ids: Vec<&str> = lines.iter().map(|l| l.custom_id.as_str()).collect();
        assert_eq!(ids, ["a.txt", "a.txt (2)", "document-3"]);
        assert_eq!(
            super::super::check(&content, super::super::Limits::default()).unwrap(),
            lines
        );
        assert_eq!(read(&lines[2].body).unwrap().filename, "document-3");
    }

    #[test]
    fn each_fault_names_its_field() {
        for (body, param) in [
            ("[]", "body"),
            (
                r#"{"filename": "a.pdf", "file_data": "x", "extra": 1}"#,
                "body",
            ),
            (r#"{"file_data": "aGk="}"#, "body.filename"),
            (r#"{"filename": " ", "file_data": "aGk="}"#, "body.filename"),
            (r#"{"filename": "a.pdf"}"#, "body.file_data"),
            (
                r#"{"filename": "a.pdf", "file_data": "not base64!"}"#,
                "body.file_data",
            ),
            (
                r#"{"filename": "a.pdf", "file_data": "data:text/plain,hi"}"#,
                "body.file_data",
            ),
        ] {
            assert_eq!(read(body).unwrap_err().param, param, "{body}");
        }
    }
}
