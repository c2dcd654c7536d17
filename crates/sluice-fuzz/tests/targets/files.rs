//! Files: batch JSONL, DOCX and PDF documents, rule files, gateway configurations.

use std::collections::BTreeMap;

use sluice_fuzz::{Bound, Target};

use crate::fuzz;

const JSONL: &[&[u8]] = &[
    b"\n",
    b"\r\n",
    b"{\"custom_id\":\"",
    b"\"method\":\"POST\"",
    b"\"url\":\"/v1/chat/completions\"",
    b"\"url\":\"/v1/messages\"",
    b"\"url\":\"/v1/responses\"",
    b"\"url\":\"/v1/embeddings\"",
    b"\"body\":{",
    b"\"model\":\"chat\"",
    b"\"messages\":[]",
    b"\"stream\":true",
    b"}",
    b"\"",
];

/// Batch input files: every line a request or an error naming its line.
#[test]
fn batch_jsonl() {
    let target = Target {
        name: "batch-jsonl",
        words: JSONL,
        json: false,
        memory: Bound::PARSER,
    };
    fuzz(target, |input| {
        let text = String::from_utf8_lossy(input);
        let lines = text.lines().count() as u64;
        match sluice_batch::input::check(&text, sluice_batch::Limits::default()) {
            Ok(_) => Ok(()),
            Err(errors) if errors.is_empty() => Err("refused with no error".into()),
            Err(errors) => match errors
                .iter()
                .find(|e| e.line > lines || e.message.trim().is_empty())
            {
                Some(e) => Err(format!(
                    "an error past the file's {lines} lines or empty: {e:?}"
                )),
                None => Ok(()),
            },
        }
    })
}

/// What a document reader may hold: its 64 MiB limit on an inflated part, a copy of it as
/// text, and the parser's own room.
const DOCUMENT: Bound = Bound {
    fixed: 3 * (64 << 20),
    per_byte: 64,
};

fn document(name: &'static str, file: &'static str) {
    let target = Target {
        name,
        words: &[
            b"PK\x03\x04",
            b"word/document.xml",
            b"<w:t>",
            b"</w:p>",
            b"%PDF-1.7",
            b"obj",
            b"endobj",
            b"stream",
            b"endstream",
            b"/FlateDecode",
            b"/Length 99999999",
            b"xref",
            b"trailer",
            b"BT",
            b"Tj",
            b"ET",
        ],
        json: false,
        memory: DOCUMENT,
    };
    fuzz(target, |input| match sluice_documents::read(file, input) {
        Ok(doc) if doc.pages.iter().all(|p| p.trim().is_empty()) => {
            Err("read as a document with no text".into())
        }
        Ok(_) => Ok(()),
        Err(e) if e.to_string().trim().is_empty() => Err("refused with no message".into()),
        Err(_) => Ok(()),
    });
}

#[test]
fn docx() {
    document("docx", "upload.docx");
}

#[test]
fn pdf() {
    document("pdf", "upload.pdf");
}

/// Rule files: compiled, or refused with the rule at fault.
#[test]
fn rule_files() {
    let target = Target {
        name: "rules",
        words: &[
            b"[[rule]]\n",
            b"id = ",
            b"severity = \"high\"",
            b"regex = [\"",
            b"(a|b){0,999}",
            b"\\p{Han}",
            b"near = { terms = [\"a\", \"b\"], within = 99999999 }",
            b"keywords = [",
            b"phrases = [",
            b"unless = [",
            b"kinds = [\"clause\"]",
            b"\"]",
            b"\n",
        ],
        json: false,
        memory: Bound {
            fixed: 256 << 20,
            per_byte: 1024,
        },
    };
    fuzz(target, |input| {
        let text = String::from_utf8_lossy(input);
        match sluice_rules::Engine::load(&text) {
            Ok(_) => Ok(()),
            Err(e) if e.to_string().trim().is_empty() => Err("refused with no message".into()),
            Err(_) => Ok(()),
        }
    })
}

/// Gateway configurations: a configuration, or errors that say what is wrong.
#[test]
fn config() {
    use sluice_config::gateway::{Secrets, check};
    let target = Target {
        name: "config",
        words: &[
            b"\n[server]\n",
            b"\n[providers.p]\n",
            b"kind = \"openai\"\n",
            b"base_url = \"http://[::1]:0\"\n",
            b"\n[[models]]\n",
            b"name = \"m\"\n",
            b"deployments = [{ provider = \"p\" }]\n",
            b"\n[lanes.batch]\n",
            b"max_queue = 18446744073709551615\n",
            b"\"0s\"",
            b"\"1ms\"",
            b"= -1",
            b"= nan",
            b"= inf",
            b"[[",
            b"]]",
            b"= { }",
            b"api_key_env = \"\"\n",
        ],
        json: false,
        memory: Bound {
            fixed: 64 << 20,
            per_byte: 512,
        },
    };
    let env: BTreeMap<String, String> = BTreeMap::new();
    fuzz(target, |input| {
        let text = String::from_utf8_lossy(input);
        let checked = check(&text, &env, &[], Secrets::Warn);
        match (&checked.config, checked.errors.is_empty()) {
            (Some(_), true) => Ok(()),
            (None, false)
                if checked
                    .errors
                    .iter()
                    .all(|d| !d.to_string().trim().is_empty()) =>
            {
                Ok(())
            }
            (None, false) => Err("an error with no message".into()),
            (Some(_), false) => Err("a configuration given with errors".into()),
            (None, true) => Err("no configuration and no error".into()),
        }
    })
}
