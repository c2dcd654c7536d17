//! A DOCX file's text: the paragraphs of its main part (`word/document.xml`), a blank line
//! between paragraphs, tabs and breaks kept, a heading style written as a Markdown heading so
//! that the clause splitter knows it. The archive is read with limits (entries, and bytes
//! once inflated), so that a zip bomb is refused rather than inflated.

use std::io::{Cursor, Read};

use quick_xml::Reader;
use quick_xml::events::Event;

use crate::ReadError;

/// The most entries an archive may have.
const MAX_ENTRIES: usize = 10_000;
/// The most bytes the main part may inflate to.
const MAX_PART_BYTES: u64 = 64 << 20;
/// The main part of a word-processing document.
const MAIN: &str = "word/document.xml";

/// File `name`'s text.
pub(crate) fn text(name: &str, bytes: &[u8]) -> Result<String, ReadError> {
    let bad = |why: String| ReadError::BadDocx {
        name: name.to_string(),
        why,
    };
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| bad(format!("not a zip archive ({e})")))?;
    if zip.len() > MAX_ENTRIES {
        return Err(bad(format!("more than {MAX_ENTRIES} entries")));
    }
    if zip.by_name("EncryptionInfo").is_ok() || zip.by_name("EncryptedPackage").is_ok() {
        return Err(ReadError::Encrypted(name.to_string()));
    }
    let mut part = zip
        .by_name(MAIN)
        .map_err(|_| bad(format!("it has no {MAIN}")))?;
    if part.size() > MAX_PART_BYTES {
        return Err(bad(format!("{MAIN} inflates past {MAX_PART_BYTES} bytes")));
    }
    let mut xml = Vec::new();
    (&mut part)
        .take(MAX_PART_BYTES + 1)
        .read_to_end(&mut xml)
        .map_err(|e| bad(format!("{MAIN} does not inflate ({e})")))?;
    if xml.len() as u64 > MAX_PART_BYTES {
        return Err(bad(format!("{MAIN} inflates past {MAX_PART_BYTES} bytes")));
    }
    paragraphs(&xml).map_err(|why| bad(format!("{MAIN}: {why}")))
}

/// The text of a main part's paragraphs.
fn paragraphs(xml: &[u8]) -> Result<String, String> {
    let mut reader = Reader::from_reader(xml);
    let mut out = String::new();
    let mut para = String::new();
    let mut heading = None;
    let mut in_text = false;
    let mut buf = Vec::new();
    loop {
        let event = reader
            .read_event_into(&mut buf)
            .map_err(|e| format!("XML error at byte {}: {e}", reader.error_position()))?;
        match event {
            Event::Start(e) if e.local_name().as_ref() == b"t" => in_text = true,
            Event::End(e) if e.local_name().as_ref() == b"t" => in_text = false,
            Event::Empty(e) | Event::Start(e) => match e.local_name().as_ref() {
                b"tab" => para.push('\t'),
                b"br" | b"cr" => para.push('\n'),
                b"pStyle" => {
                    heading = e
                        .attributes()
                        .flatten()
                        .find(|a| a.key.local_name().as_ref() == b"val")
                        .and_then(|a| heading_level(&a.value));
                }
                _ => {}
            },
            Event::Text(t) if in_text => {
                let s = t.decode().map_err(|e| e.to_string())?;
                para.push_str(&s);
            }
            Event::GeneralRef(r) if in_text => {
                if let Some(c) = r.resolve_char_ref().map_err(|e| e.to_string())? {
                    para.push(c);
                } else {
                    let name = r.decode().map_err(|e| e.to_string())?;
                    para.push_str(match name.as_ref() {
                        "amp" => "&",
                        "lt" => "<",
                        "gt" => ">",
                        "quot" => "\"",
                        "apos" => "'",
                        other => return Err(format!("an undefined entity `&{other};`")),
                    });
                }
            }
            Event::End(e) if e.local_name().as_ref() == b"p" => {
                let text = para.trim_end();
                if !text.is_empty() {
                    if let Some(level) = heading {
                        out.push_str(&"#".repeat(level));
                        out.push(' ');
                    }
                    out.push_str(text);
                    out.push_str("\n\n");
                }
                para.clear();
                heading = None;
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    Ok(out)
}

/// The level of a heading style (`Heading1`, `heading 2`, `Title`), if it is one.
fn heading_level(style: &[u8]) -> Option<usize> {
    let s = String::from_utf8_lossy(style).to_ascii_lowercase();
    if s == "title" {
        return Some(1);
    }
    let rest = s.strip_prefix("heading")?.trim();
    rest.parse::<usize>().ok().map(|l| l.clamp(1, 6))
}
