//! Reading the fixtures a converter made (DOCX, PDF, Chinese) and the broken ones, each with
//! its own error; mutated bytes never panic.

use super::*;

fn fixture(name: &str) -> Document {
    let path = format!("{}/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    read(name, &std::fs::read(path).unwrap()).unwrap_or_else(|e| panic!("{e}"))
}

fn refused(name: &str) -> ReadError {
    let path = format!("{}/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    read(name, &std::fs::read(path).unwrap()).unwrap_err()
}

/// `text` with spaces folded, for comparing what two converters kept.
fn words(text: &str) -> Vec<&str> {
    text.split_whitespace().collect()
}

#[test]
fn docx_and_pdf_made_by_a_converter_read_as_their_text() {
    let original = std::fs::read_to_string("/usr/share/common-licenses/Apache-2.0").unwrap();
    let docx = fixture("apache-2.0.docx");
    assert_eq!(docx.format, Format::Docx);
    assert_eq!(
        words(&docx.pages.concat()),
        words(&original),
        "the DOCX holds every word"
    );
    let pdf = fixture("apache-2.0.pdf");
    assert_eq!(pdf.format, Format::Pdf);
    assert!(pdf.pages.len() >= 3, "{} pages", pdf.pages.len());
    let got = words(&pdf.pages.concat()).len();
    let want = words(&original).len();
    assert!(got.abs_diff(want) * 100 <= want, "{got} words of {want}");
    for d in [&docx, &pdf] {
        let clauses = split(d);
        let top: std::collections::BTreeSet<_> = clauses
            .iter()
            .filter_map(|c| c.number.as_deref()?.split(['.', '(']).next())
            .filter(|n| !n.is_empty())
            .collect();
        assert_eq!(top.len(), 9, "{:?}: sections 1 to 9: {top:?}", d.format);
        assert_eq!(
            clauses
                .iter()
                .filter(|c| c.kind == ClauseKind::Definition)
                .count(),
            10
        );
    }
}

#[test]
fn chinese_docx_and_pdf_split_by_their_articles() {
    for name in ["contract-zh.txt", "contract-zh.docx", "contract-zh.pdf"] {
        let d = fixture(name);
        let clauses = split(&d);
        let articles: std::collections::BTreeSet<_> = clauses
            .iter()
            .filter_map(|c| c.number.as_deref())
            .filter(|n| n.ends_with('条'))
            .collect();
        assert_eq!(articles.len(), 12, "{name}: {articles:?}");
        assert!(
            clauses.iter().any(|c| c.text.contains("自动续期一年")),
            "{name}"
        );
    }
}

#[test]
fn each_broken_file_gets_its_own_error() {
    assert!(matches!(refused("encrypted.pdf"), ReadError::Encrypted(n) if n == "encrypted.pdf"));
    assert!(matches!(
        refused("truncated.pdf"),
        ReadError::BadPdf { .. } | ReadError::NoText(_)
    ));
    assert!(matches!(refused("empty.pdf"), ReadError::Empty(_)));
    assert!(matches!(refused("blank.pdf"), ReadError::NoText(_)));
    assert!(matches!(refused("image-only.pdf"), ReadError::NoText(_)));
    let e = refused("no-document.docx");
    assert!(e.to_string().contains("no word/document.xml"), "{e}");
    assert!(matches!(
        refused("truncated.docx"),
        ReadError::BadDocx { .. }
    ));
    let e = refused("not-a-zip.docx");
    assert!(
        e.to_string()
            .starts_with("not-a-zip.docx: not a readable DOCX file: not a zip"),
        "{e}"
    );
    let e = read("latin1.txt", b"caf\xe9").unwrap_err();
    assert_eq!(
        e.to_string(),
        "latin1.txt: not UTF-8 text (byte 3 is not valid)"
    );
    let e = read("x.pdf", b"%PDF-1.7\n garbage").unwrap_err();
    assert!(matches!(e, ReadError::BadPdf { .. }), "{e}");
}

#[test]
fn arbitrary_bytes_never_panic() {
    let seeds: [&[u8]; 3] = [
        include_bytes!("../fixtures/apache-2.0.pdf"),
        include_bytes!("../fixtures/apache-2.0.docx"),
        b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj",
    ];
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for (k, seed) in seeds.iter().enumerate() {
        for _ in 0..40 {
            let mut bytes = seed.to_vec();
            for _ in 0..8 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let i = (state as usize) % bytes.len();
                bytes[i] = (state >> 32) as u8;
            }
            let name = if k == 1 { "f.docx" } else { "f.pdf" };
            let _ = read(name, &bytes);
        }
    }
}

#[test]
fn a_pdf_of_many_pages_keeps_its_numbering_across_pages() {
    let d = fixture("mpl-2.0.pdf");
    assert!(d.pages.len() >= 4, "{} pages", d.pages.len());
    let clauses = split(&d);
    let subsections: std::collections::BTreeSet<_> = clauses
        .iter()
        .filter_map(|c| c.number.as_deref())
        .filter(|n| n.contains('.') && !n.contains('('))
        .collect();
    assert_eq!(
        subsections.len(),
        33,
        "1.1-1.14, 2.1-2.7, 3.1-3.5, 5.1-5.3, 10.1-10.4: {subsections:?}"
    );
    assert!(
        clauses
            .iter()
            .any(|c| c.page > 1 && c.number.as_deref() == Some("10.4"))
    );
}
